"""Fault schedules: a timed list of nemesis steps, written by hand or planned from a seed.

In a nutshell.  A *schedule* is a list of *steps* ``{at_s, f, value}``: at ``at_s`` seconds after the
main phase starts, the nemesis performs ``f`` with ``value`` -- the same vocabulary the nemeses
already speak (``start-partition`` ``{kind, targets}``, ``kill`` SELECTOR, ``crash-at`` ``{name,
targets}``, ...).  A spec either writes one (``nemesis.schedule``) or names packages, whose random
choices :func:`nemesis.packages.plan` turns into one before the run starts; either way the run
directory keeps it as ``schedule.yaml``, in the format ``nemesis.schedule`` reads.

A step runs at its time or, when the nemesis is still busy with an earlier step, as soon as it is
free (the history records the real time).  Selectors are resolved when the step runs, by role.

*Fault* steps inject something; *undo* steps take it back (:data:`UNDO`: ``start-partition`` is
undone by ``stop-partition``, ``kill`` by ``start``...).  Which ``f`` is which, and the shape each ``f``'s
value is checked as, come from the one fault table (:mod:`nemesis.faults`).  Shrinking works on
:func:`units`: each fault with the undo step that follows it, so a candidate never keeps a heal without its
fault or leaves a fault without its heal.

Everything here is pure: :func:`parse` validates raw YAML data (:class:`ScheduleError` names the step
and the field), :func:`to_data` writes it back, :func:`units` / :func:`join_units` pair steps, and
:func:`timed` is the generator that performs a schedule on the nemesis thread.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness import generator as g
from nemesis.disk_kinds import CORRUPT_MODES, FAULTS
from nemesis.faults import FAULTS as ROW_OF
from nemesis.faults import ROWS, VALUE_SHAPES
from nemesis.packet_behavior import DEFAULTS as PACKET_DEFAULTS
from nemesis.packet_behavior import complete as complete_behavior
from nemesis.targets import SelectorError, Topology
from nemesis.targets import validate as validate_selector

__all__ = [
    "FAULT_FS", "KNOWN_FS", "PARTITION_AIMS", "PARTITION_KINDS", "UNDO", "UNDO_FS", "ScheduleError", "Step",
    "fault_label", "join_units", "parse", "partition_aims", "selectors_of", "timed", "to_data", "units",
]

PARTITION_AIMS: Mapping[str, str | None] = {
    "random-halves": None,
    "isolate": None,  # its value's targets
    "majorities-ring": None,
    "bridge": None,
    "one-way": None,  # its value's from and to
    "grudge": None,  # node names
}
"""The generic partition kinds -> the selector the kind aims at by itself (None: none; the selectors in its value,
if any, are read where :data:`nemesis.faults.VALUE_SHAPES` says).  An adapter adds kinds aimed at its own pools
(:class:`nemesis.targets.Cut`, our cluster's ``isolate-master``...): :func:`partition_aims` is both.  Validation
refuses a kind whose pools the system cannot serve, and guided mode aims by it; a unit test holds it to what
:class:`nemesis.partition.PartitionNemesis` resolves for each kind."""
PARTITION_KINDS = tuple(PARTITION_AIMS)


def partition_aims(topo: Topology) -> Mapping[str, str | None]:
    """The partition kinds of a system with the topology ``topo`` -> what each aims at: the generic kinds
    (:data:`PARTITION_AIMS`), then the adapter's (:attr:`nemesis.targets.Selectors.cuts`).  Pure."""
    return {**PARTITION_AIMS, **{c.name: c.aim for c in topo.selectors.cuts}}


UNDO: Mapping[str, str] = {r.f: r.undo for r in ROWS if r.undo is not None}
"""Fault f -> the f that undoes it (from the one fault table, :mod:`nemesis.faults`).  Faults not listed here
undo themselves (``crash-at``, ``restart``, ``lose-unfsynced``, ``corrupt-file`` and ``registration-crash``
restart what they crashed)."""
SELF_HEALING_FS = frozenset(r.f for r in ROWS if r.self_healing)
FAULT_FS = frozenset(r.f for r in ROWS if r.fault)
UNDO_FS = frozenset(r.f for r in ROWS if not r.fault)
"""Undo steps, and the one read (``check-clock-offsets``): not faults, never counted or shrunk alone."""
KNOWN_FS = frozenset(r.f for r in ROWS)
_FAILPOINT_RE = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")
_STEP_KEYS = ("at_s", "f", "value")


class ScheduleError(ValueError):
    """A malformed schedule: ``index`` is the step (None for the list itself), ``field`` its key."""

    def __init__(self, index: int | None, field: str, message: str) -> None:
        where = "schedule" if index is None else f"schedule[{index}]" + (f".{field}" if field else "")
        super().__init__(f"{where}: {message}")
        self.index = index
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Step:
    """One scheduled nemesis op: ``f`` with ``value`` at ``at_s`` seconds into the main phase."""

    at_s: float
    f: str
    value: Any = None

    def op(self) -> dict[str, Any]:
        return {"f": self.f, "value": self.value}


def fault_label(f: str, value: Any) -> str:
    """The fault kind a step counts under in accounting and coverage (``start-partition:isolate``,
    ``crash-at:controller.before_propose``, ``kill``)."""
    v = value if isinstance(value, Mapping) else {}
    if f == "start-partition":
        return f"{f}:{v.get('kind', 'random-halves')}"
    if f in ("crash-at", "arm-failpoint"):
        return f"{f}:{v.get('name', '?')}"
    if f == "start-disk":
        return f"{f}:{v.get('fault', 'slow-fsync')}"
    if f == "start-packet":
        behavior = v.get("behavior")
        return f"{f}:{'+'.join(sorted(behavior))}" if isinstance(behavior, Mapping) and behavior else f
    if f == "registration-crash" and v.get("failpoint"):
        return f"{f}:{v['failpoint']}"
    return f


def selectors_of(f: str, value: Any, aims: Mapping[str, str | None] = PARTITION_AIMS) -> tuple[str, ...]:
    """The target selectors a step ``f`` with ``value`` hits nodes by, each once, in order: those its value names
    where its row's shape says (:data:`nemesis.faults.VALUE_SHAPES`), then the one its partition kind aims at
    (``aims``: the system's :func:`partition_aims`; the generic kinds' by default).  Pure; an ``f`` without a row,
    or a value of another shape, names none.  Validation checks them against the system's roles and capabilities;
    guided mode reads what a move aims at from them."""
    r = ROW_OF.get(f)
    if r is None:
        return ()
    v = value if isinstance(value, Mapping) else {}
    found = [value if key == "" else v.get(key) for key in r.target_keys]
    if r.value == "partition":
        found.append(aims.get(str(v.get("kind", "random-halves"))))
    out: list[str] = []
    for sel in found:
        if isinstance(sel, str) and sel.strip() and sel not in out:
            out.append(sel)
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# Parsing and validation


def _selector(i: int, key: str, raw: Any, topo: Topology, *, extra: Sequence[str] = ()) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise ScheduleError(i, key, f"expected a target selector string, got {raw!r}")
    if raw in extra:
        return raw
    try:
        validate_selector(raw, topo)
    except SelectorError as exc:
        raise ScheduleError(i, key, str(exc)) from None
    return raw


def _number(i: int, key: str, raw: Any, *, lo: float, hi: float = math.inf) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw) or not lo <= raw <= hi:
        raise ScheduleError(i, key, f"expected a number in [{lo:g}, {hi:g}], got {raw!r}")
    return float(raw)


def _mapping(i: int, raw: Any, f: str, allowed: Sequence[str]) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ScheduleError(i, "value", f"{f} takes a mapping with keys {', '.join(allowed)}; got {raw!r}")
    unknown = sorted(set(map(str, raw)) - set(allowed))
    if unknown:
        raise ScheduleError(i, "value", f"{f}: unknown key(s) {unknown}; allowed: {', '.join(allowed)}")
    return raw


def _selectors(i: int, v: Mapping[str, Any], keys: Sequence[str], topo: Topology) -> None:
    for key in keys:
        if key in v:
            _selector(i, f"value.{key}", v[key], topo)


def _process_value(i: int, f: str, raw: Any, topo: Topology) -> None:
    if raw is not None:
        extra = ("dead",) if f == "start" else ("paused",) if f == "resume" else ()
        _selector(i, "value", raw, topo, extra=extra)


def _partition_value(i: int, f: str, raw: Any, topo: Topology) -> None:
    v = _mapping(i, raw, f, ("kind", "targets", "from", "to", "grudge"))
    kind = v.get("kind", "random-halves")
    kinds = partition_aims(topo)
    if kind not in kinds:
        raise ScheduleError(i, "value.kind", f"unknown partition kind {kind!r}; kinds: {', '.join(kinds)}")
    _selectors(i, v, VALUE_SHAPES["partition"], topo)
    if kind == "grudge":
        grudge = v.get("grudge")
        if not isinstance(grudge, Mapping) or not grudge:
            raise ScheduleError(i, "value.grudge", "kind grudge needs a map node -> [nodes it drops]")
        for node, drops in grudge.items():
            names = [node, *(drops if isinstance(drops, list) else [drops])]
            unknown = [str(n) for n in names if str(n) not in topo.all]
            if unknown:
                raise ScheduleError(i, "value.grudge", f"unknown node(s) {unknown}")


def _clock_value(i: int, f: str, raw: Any, topo: Topology) -> None:
    v = _mapping(i, raw, f, ("targets", "delta_ms", "rate", "period_ms", "duration_s"))
    _selectors(i, v, VALUE_SHAPES["clock"], topo)
    for key, lo in (("delta_ms", -1e9), ("rate", 1e-6), ("period_ms", 1.0), ("duration_s", 0.0)):
        if key in v:
            _number(i, f"value.{key}", v[key], lo=lo)


def _packet_value(i: int, f: str, raw: Any, topo: Topology) -> None:
    v = _mapping(i, raw, f, ("targets", "to", "behavior"))
    _selectors(i, v, VALUE_SHAPES["packet"], topo)
    behavior = v.get("behavior")
    if behavior is None:
        return
    if not isinstance(behavior, Mapping) or not behavior or set(map(str, behavior)) - set(PACKET_DEFAULTS):
        raise ScheduleError(i, "value.behavior", f"a map of behaviours from {', '.join(PACKET_DEFAULTS)}; "
                                                 f"got {behavior!r}")
    try:
        complete_behavior(behavior)
    except ValueError as exc:
        raise ScheduleError(i, "value.behavior", f"behaviours with their parameters ({exc})") from None


def _failpoint_value(i: int, f: str, raw: Any, topo: Topology) -> None:
    v = _mapping(i, raw, f, ("name", "targets", "timeout_s", "ready_timeout_s", "action", "trigger"))
    name = v.get("name")
    well_formed = isinstance(name, str) and bool(_FAILPOINT_RE.match(name) or (name == "*" and f != "crash-at"))
    if (f != "disarm-failpoint" or name is not None) and not well_formed:
        raise ScheduleError(i, "value.name", f"a failpoint name such as controller.before_propose "
                            f"(see `splitbrain admin failpoint list`); got {name!r}")
    _selectors(i, v, VALUE_SHAPES["failpoint"], topo)
    for key in ("timeout_s", "ready_timeout_s"):
        if key in v:
            _number(i, f"value.{key}", v[key], lo=0.1, hi=3600)
    if "trigger" in v and v["trigger"] not in ("auto", "none", "controller-write"):
        raise ScheduleError(i, "value.trigger", f"one of auto, none, controller-write; got {v['trigger']!r}")


def _disk_value(i: int, f: str, raw: Any, topo: Topology) -> None:
    v = _mapping(i, raw, f, ("fault", "targets", "delay_ms", "mode", "ready_timeout_s"))
    _selectors(i, v, VALUE_SHAPES["disk"], topo)
    if f == "start-disk" and v.get("fault", "slow-fsync") not in FAULTS:
        raise ScheduleError(i, "value.fault", f"unknown disk fault {v.get('fault')!r}; known: {', '.join(FAULTS)}")
    if f == "corrupt-file" and v.get("mode", "bitflip-tail") not in CORRUPT_MODES:
        raise ScheduleError(i, "value.mode", f"unknown mode {v.get('mode')!r}; known: {', '.join(CORRUPT_MODES)}")


def _registration_value(i: int, f: str, raw: Any, topo: Topology) -> None:
    _mapping(i, raw, f, ("failpoint",))


def _no_value(i: int, f: str, raw: Any, topo: Topology) -> None:
    return None  # undo steps take no arguments the nemeses read


_CHECK_OF_SHAPE: Mapping[str, Any] = {
    "process": _process_value, "partition": _partition_value, "clock": _clock_value, "packet": _packet_value,
    "failpoint": _failpoint_value, "disk": _disk_value, "registration": _registration_value,
}
"""Value shape (:data:`nemesis.faults.VALUE_SHAPES`) -> its check (the shapes the nemeses accept; see
docs/nemeses.md)."""
_VALUE_CHECKS: Mapping[str, Any] = {r.f: _CHECK_OF_SHAPE[r.value] if r.value else _no_value for r in ROWS}
"""f -> the check of its ``value``, by its row's value shape (a shape without a check fails at import)."""


def _check_value(i: int, f: str, raw: Any, topo: Topology) -> None:
    _VALUE_CHECKS[f](i, f, raw, topo)


def parse(raw: Any, topo: Topology) -> tuple[Step, ...]:
    """Validate a schedule written as YAML data (a list of ``{at_s, f, value}``).

    Raises:
        ScheduleError: naming the step index and field: not a list, a step that is not a mapping, an
            unknown key or ``f``, a negative or non-numeric ``at_s``, steps out of time order, a
            malformed value (unknown partition kind, bad selector, missing failpoint name...).
    """
    if not isinstance(raw, list):
        raise ScheduleError(None, "", f"expected a list of steps {{at_s, f, value}}, got {type(raw).__name__}")
    steps: list[Step] = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise ScheduleError(i, "", f"expected a mapping {{at_s, f, value}}, got {item!r}")
        unknown = sorted(set(map(str, item)) - set(_STEP_KEYS))
        if unknown:
            raise ScheduleError(i, unknown[0], f"unknown key; a step has {', '.join(_STEP_KEYS)}")
        if "at_s" not in item:
            raise ScheduleError(i, "at_s", "missing (seconds from the start of the main phase)")
        at_s = _number(i, "at_s", item["at_s"], lo=0.0)
        f = item.get("f")
        if not isinstance(f, str) or f not in KNOWN_FS:
            raise ScheduleError(i, "f", f"unknown nemesis op {f!r}; known: {', '.join(sorted(KNOWN_FS))}")
        if steps and at_s < steps[-1].at_s:
            raise ScheduleError(i, "at_s", f"{at_s:g} is before the previous step's {steps[-1].at_s:g}: "
                                "steps must be in time order")
        value = item.get("value")
        _check_value(i, f, value, topo)
        steps.append(Step(at_s, f, _plain(value)))
    return tuple(steps)


def _plain(value: Any) -> Any:
    """YAML data as plain dicts/lists (so steps compare and serialise alike wherever they came from)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def to_data(steps: Sequence[Step]) -> list[dict[str, Any]]:
    """The schedule as YAML-ready data; :func:`parse` reads it back to the same steps."""
    out = []
    for s in steps:
        d: dict[str, Any] = {"at_s": round(s.at_s, 3), "f": s.f}
        if s.value is not None:
            d["value"] = s.value
        out.append(d)
    return out


# ---------------------------------------------------------------------------------------------
# Units: faults with their undo steps


def units(steps: Sequence[Step]) -> list[tuple[Step, ...]]:
    """Group steps into shrinkable units: each fault step with the first later step of its undo
    kind (a fault that undoes itself is a unit alone).  Undo steps that undo nothing are dropped:
    they change nothing, and the heal phase undoes every fault anyway."""
    out: list[tuple[Step, ...]] = []
    used: set[int] = set()
    for i, s in enumerate(steps):
        if i in used or s.f not in FAULT_FS:
            continue
        undo = UNDO.get(s.f)
        j = next((j for j in range(i + 1, len(steps)) if j not in used and steps[j].f == undo), None) if undo else None
        if j is None:
            out.append((s,))
        else:
            used.add(j)
            out.append((s, steps[j]))
    return out


def join_units(chosen: Sequence[tuple[Step, ...]]) -> tuple[Step, ...]:
    """The schedule made of ``chosen`` units, in time order (stable for equal times)."""
    return tuple(sorted((s for u in chosen for s in u), key=lambda s: s.at_s))


# ---------------------------------------------------------------------------------------------
# Performing a schedule


@dataclass(frozen=True, slots=True)
class _Timed:
    """Emit each step at ``start + at_s`` (or as soon as the nemesis thread is free after that).
    The first call anchors ``start`` with a sleep op that is due at once, so the anchor is committed
    even though later steps are promised for the future."""

    steps: tuple[Step, ...]
    start_ns: int | None

    def op(self, ctx: g.Context) -> Any:
        if self.start_ns is None:
            return ({"type": "sleep", "time": ctx.time_ns}, _Timed(self.steps, ctx.time_ns))
        if not self.steps:
            return None
        thread = ctx.free_thread()
        if thread is None:
            return (g.PENDING, self)
        step = self.steps[0]
        at = max(self.start_ns + int(step.at_s * g.NS_PER_S), ctx.time_ns)
        op = {"type": "invoke", "process": ctx.workers[thread], "time": at, "f": step.f, "value": step.value}
        return (op, _Timed(self.steps[1:], self.start_ns))

    def update(self, ctx: g.Context, event: g.OpDict) -> Any:
        return self


def timed(steps: Sequence[Step]) -> g.Gen:
    """A generator performing ``steps`` at their offsets from the moment it is first asked."""
    return _Timed(tuple(steps), None)
