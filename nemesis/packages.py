"""Nemesis packages: which faults a spec asks for, planned into one schedule before the run starts.

A spec's ``nemesis: {packages: [...], interval_s: S, targets: [...], options: {...}}`` picks packages by
name.  Each package knows its fault *kinds* (partition kinds, ``kill``/``terminate``, clock faults,
packet behaviours, disk faults, failpoints) and draws one per fault from the kinds and targets its
options allow (``options: {partition: {kinds: [isolate-master-from-slaves], targets: [masters]}}``; without
options, every kind and the spec's ``targets``).

:func:`plan` turns the packages into a :mod:`nemesis.schedule` -- a pure function of the packages, their
options, the interval, the main phase's length and the seed: each package alternates a fault and, an
interval later, its undo step (``stop-partition``, ``start``, ``resume``...), with gaps of ``interval_s``
on average (uniform in half to one and a half intervals); failpoint walks (``protocol-crash``,
``registration-crash``) crash something every interval or so.  Each package draws from its own RNG (seeded
by the seed and its name), so adding a package does not change another's faults.  A spec with
``nemesis.schedule`` skips planning and runs its steps as written.

:func:`build` makes the nemesis (one member per kind of fault, routed by ``f`` and wrapped by
:class:`nemesis.accounting.Accounted`), the generator that performs the schedule, and the heal ops
that undo everything after the main phase (heal partitions and packets, reset clocks, resume paused
processes, restart dead ones, disarm failpoints).  Which class performs an ``f`` and which heal ops it needs
come from its row in the fault table (:mod:`nemesis.faults`).  With ``nemesis.mode: guided`` the same packages' faults
are chosen during the run by :mod:`nemesis.guided_run` instead of planned.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.protocols import Nemesis, compose_nemeses
from nemesis.accounting import Accounted
from nemesis.clock import ClockNemesis
from nemesis.disk import CORRUPT_MODES, FAULTS, REPAIRABLE_MODES, DiskNemesis
from nemesis.failpoint import FailpointNemesis
from nemesis.faults import GUIDED_NEEDS, NEMESES, ROLE_SELECTOR_NEEDS, ROWS, Need, need_met, package_needs, row
from nemesis.packet import PacketNemesis
from nemesis.packet_behavior import PRESETS
from nemesis.partition import PartitionNemesis
from nemesis.process import ProcessNemesis
from nemesis.registration import REGISTRATION_POINTS, RegistrationCrashNemesis
from nemesis.schedule import PARTITION_KINDS, UNDO, Step, timed
from nemesis.targets import SelectorError, Topology, needs_roles
from nemesis.targets import validate as validate_target

__all__ = [
    "ALIASES", "KINDS", "NEMESIS_OF", "PROTOCOL_POINTS", "Composed", "Missing", "PackageDef", "build", "definitions",
    "expand", "missing_capabilities", "plan", "validate",
]

StartFn = Callable[[random.Random, int], dict[str, Any]]


@dataclass(frozen=True)
class PackageDef:
    """What a package plans: ``start(rng, k)`` is its k-th fault op; ``alternate`` puts each fault's
    undo step one interval after it; ``heal`` undoes everything the package can leave behind."""

    name: str
    start: StartFn
    alternate: bool
    heal: tuple[dict[str, Any], ...]
    nemesis: Callable[[Any, random.Random], Nemesis]


@dataclass(frozen=True)
class _Options:
    kinds: tuple[str, ...]
    targets: tuple[str, ...]


def _pick(rng: random.Random, options: Sequence[Any]) -> Any:
    return options[rng.randrange(len(options))]


# ---------------------------------------------------------------------------------------------
# One definition per package: its kinds (all, default) and how it draws a fault


PARTITION_DEFAULT = ("random-halves", "isolate", "isolate-controller-leader", "isolate-master", "majorities-ring",
                     "bridge", "one-way")
CLOCK_KINDS = ("bump-clock", "skew-clock", "strobe-clock")
DISK_KINDS = (*FAULTS, "lose-unfsynced", "corrupt-file")
PROTOCOL_POINTS = (
    ("controller.before_propose", "controller-leader"),
    ("controller.after_commit_before_reply", "controller-leader"),
    ("raft.after_persist", "controllers:one"),
    ("raft.before_apply", "controllers:one"),
    ("broker.master.after_append_before_replication", "masters"),
)
"""(failpoint, whom to arm it on): the controller and replication steps ``protocol-crash`` walks."""


def _partition(o: _Options, interval_s: float) -> StartFn:
    def start(rng: random.Random, k: int) -> dict[str, Any]:
        kind = _pick(rng, o.kinds)
        value: dict[str, Any] = {"kind": kind}
        if kind == "isolate":
            value["targets"] = _pick(rng, o.targets)
        if kind == "one-way":
            value.update({"from": "one", "to": "all"})
        return {"f": "start-partition", "value": value}
    return start


def _process(o: _Options, interval_s: float) -> StartFn:
    return lambda rng, k: {"f": _pick(rng, o.kinds), "value": _pick(rng, o.targets)}


def _clock(o: _Options, interval_s: float) -> StartFn:
    def start(rng: random.Random, k: int) -> dict[str, Any]:
        kind, target = _pick(rng, o.kinds), _pick(rng, o.targets)
        if kind == "bump-clock":
            return {"f": kind, "value": {"targets": target, "delta_ms": _pick(rng, [-60_000, 60_000, 5_000])}}
        if kind == "skew-clock":
            return {"f": kind, "value": {"targets": target, "rate": _pick(rng, [0.5, 2.0, 5.0])}}
        return {"f": kind, "value": {"targets": target, "delta_ms": 200, "period_ms": 50,
                                     "duration_s": min(interval_s, 5.0)}}
    return start


def _packet(o: _Options, interval_s: float) -> StartFn:
    return lambda rng, k: {"f": "start-packet", "value": {"targets": _pick(rng, o.targets),
                                                          "behavior": PRESETS[_pick(rng, o.kinds)]}}


def _disk(modes: Sequence[str]) -> Callable[[_Options, float], StartFn]:
    def make(o: _Options, interval_s: float) -> StartFn:
        def start(rng: random.Random, k: int) -> dict[str, Any]:
            kind, target = _pick(rng, o.kinds), _pick(rng, o.targets)
            if kind == "lose-unfsynced":
                return {"f": kind, "value": {"targets": target}}
            if kind == "corrupt-file":
                return {"f": kind, "value": {"targets": target, "mode": _pick(rng, list(modes))}}
            return {"f": "start-disk", "value": {"fault": kind, "targets": target,
                                                 "delay_ms": _pick(rng, [20, 100, 400])}}
        return start
    return make


class _Walk:
    """A failpoint walk: every kind in order, forever, from a start drawn once per run from the package's RNG.

    Starting every run at the first point meant a campaign of short runs never reached the later points
    (the registration walk's temp-file and rename steps, docs/bugs.md); a seeded start spreads a campaign over
    the whole walk and a run still replays from its seed."""

    def __init__(self, kinds: Sequence[str]) -> None:
        self.kinds = tuple(kinds)
        self.offset: int | None = None

    def at(self, rng: random.Random, k: int) -> str:
        if self.offset is None:
            self.offset = rng.randrange(len(self.kinds))
        return self.kinds[(self.offset + k) % len(self.kinds)]


def _protocol_crash(o: _Options, interval_s: float, custom_targets: bool) -> StartFn:
    default_targets = dict(PROTOCOL_POINTS)
    walk = _Walk(o.kinds)

    def start(rng: random.Random, k: int) -> dict[str, Any]:
        name = walk.at(rng, k)
        target = _pick(rng, o.targets) if custom_targets else default_targets.get(name, "one")
        return {"f": "crash-at", "value": {"name": name, "targets": target, "timeout_s": max(5.0, 2 * interval_s)}}
    return start


def _registration_crash(o: _Options, interval_s: float) -> StartFn:
    walk = _Walk(o.kinds)
    return lambda rng, k: {"f": "registration-crash", "value": {"failpoint": walk.at(rng, k)}}


@dataclass(frozen=True)
class _Kind:
    """A package's vocabulary: every kind it may pick, the default choice, its fixed targets."""

    all: Callable[[], tuple[str, ...]]
    default: Callable[[bool, bool], tuple[str, ...]]  # (has broker sets, has controllers) -> default kinds
    make: Callable[[_Options, float], StartFn]
    alternate: bool
    heal: tuple[dict[str, Any], ...]
    nemesis: Callable[[Any, random.Random], Nemesis]
    default_targets: tuple[str, ...] | None = None  # None: the spec's nemesis.targets
    any_kind: bool = False  # kinds are failpoint names: any well-formed name is allowed


def _aimable(kinds: tuple[str, ...], has_sets: bool, has_controllers: bool) -> tuple[str, ...]:
    """``kinds`` without those aimed at a role the topology lacks (``isolate-master*`` without broker sets,
    ``isolate-controller-leader`` without controllers: an etcd or Redis spec of ``members``), so a default never
    draws a fault that can only wait for its role and complete as not effective."""
    return tuple(k for k in kinds if (has_sets or "master" not in k) and (has_controllers or "controller" not in k))


def _heal(package: str) -> tuple[dict[str, Any], ...]:
    """What a package's faults may leave behind, undone: the heal ops of the rows that name the package (once
    each, in table order)."""
    out: list[dict[str, Any]] = []
    for r in ROWS:
        for op in r.heal if package in r.packages else ():
            if op not in out:
                out.append(dict(op))
    return tuple(out)


KINDS: dict[str, _Kind] = {  # by package name: the names a spec may use
    "partition": _Kind(lambda: tuple(k for k in PARTITION_KINDS if k != "grudge"),
                       lambda s, c: _aimable(PARTITION_DEFAULT, s, c), _partition, True, _heal("partition"),
                       PartitionNemesis),
    "kill": _Kind(lambda: ("kill", "terminate"), lambda s, c: ("kill",), _process, True, _heal("kill"), ProcessNemesis),
    "pause": _Kind(lambda: ("pause",), lambda s, c: ("pause",), _process, True, _heal("pause"), ProcessNemesis),
    "clock": _Kind(lambda: CLOCK_KINDS, lambda s, c: CLOCK_KINDS, _clock, True, _heal("clock"), ClockNemesis),
    "packet": _Kind(lambda: tuple(PRESETS), lambda s, c: tuple(PRESETS), _packet, True, _heal("packet"), PacketNemesis),
    "disk": _Kind(lambda: DISK_KINDS, lambda s, c: DISK_KINDS, _disk(REPAIRABLE_MODES), True, _heal("disk"),
                  DiskNemesis, ("brokers:one", "masters")),
    "disk-corrupt": _Kind(lambda: DISK_KINDS, lambda s, c: DISK_KINDS, _disk(CORRUPT_MODES), True,
                          _heal("disk-corrupt"), DiskNemesis, ("brokers:one", "masters")),
    "protocol-crash": _Kind(lambda: tuple(p for p, _ in PROTOCOL_POINTS),
                            lambda s, c: tuple(p for p, t in PROTOCOL_POINTS if t != "masters" or s),
                            lambda o, i: _protocol_crash(o, i, False), False, _heal("protocol-crash"),
                            FailpointNemesis, any_kind=True),
    "registration-crash": _Kind(lambda: REGISTRATION_POINTS, lambda s, c: REGISTRATION_POINTS, _registration_crash,
                                False, _heal("registration-crash"), RegistrationCrashNemesis),
}
ALIASES = {"all": ["partition", "kill", "pause", "clock", "packet", "disk"], "leader-chaos": ["partition", "kill"]}


def expand(names: Sequence[str]) -> list[str]:
    out: list[str] = []
    for n in names:
        for m in ALIASES.get(n, [n]):
            if m not in out:
                out.append(m)
    return out


def _options(name: str, raw: Mapping[str, Any] | None, targets: Sequence[str], has_sets: bool,
             has_controllers: bool = True) -> _Options:
    kind = KINDS[name]
    raw = raw or {}
    kinds = tuple(raw.get("kinds") or kind.default(has_sets, has_controllers))
    tg = tuple(raw.get("targets") or kind.default_targets or targets or ("one",))
    return _Options(kinds, tg)


def definitions(names: Sequence[str], *, targets: Sequence[str], options: Mapping[str, Mapping[str, Any]] | None,
                interval_s: float, has_broker_sets: bool, has_controllers: bool = True) -> list[PackageDef]:
    """The expanded packages with their options applied (validated names assumed); the default kinds leave out
    those aimed at a role the topology lacks (:func:`_aimable`)."""
    out = []
    for name in expand(names):
        kind = KINDS[name]
        raw = (options or {}).get(name)
        o = _options(name, raw, targets, has_broker_sets, has_controllers)
        if name == "protocol-crash" and raw and raw.get("targets"):
            start = _protocol_crash(o, interval_s, True)
        else:
            start = kind.make(o, interval_s)
        out.append(PackageDef(name, start, kind.alternate, kind.heal, kind.nemesis))
    return out


def _gap(rng: random.Random, interval_s: float) -> float:
    """A gap of ``interval_s`` on average, uniform in [0.5, 1.5) x interval (so packages drift apart
    instead of striking in lockstep)."""
    return interval_s * (0.5 + rng.random())


def plan(defs: Sequence[PackageDef], *, interval_s: float, time_limit_s: float, seed: int) -> tuple[Step, ...]:
    """The schedule the packages ask for (see the module docstring); pure."""
    timed_steps: list[tuple[float, int, int, Step]] = []
    for order, d in enumerate(defs):
        rng = random.Random(f"{seed}:{d.name}")
        timing = random.Random(f"{seed}:{d.name}:timing")  # apart, so options on kinds do not move the times
        t, k = _gap(timing, interval_s), 0
        while t < time_limit_s:
            op = d.start(rng, k)
            timed_steps.append((t, order, len(timed_steps), Step(round(t, 3), op["f"], op.get("value"))))
            if d.alternate:
                t += _gap(timing, interval_s)
                undo = UNDO.get(op["f"])
                if undo is not None and t < time_limit_s:
                    timed_steps.append((t, order, len(timed_steps), Step(round(t, 3), undo, None)))
            t += _gap(timing, interval_s)
            k += 1
    return tuple(s for *_, s in sorted(timed_steps, key=lambda x: x[:3]))


def validate(names: Sequence[str], targets: Sequence[str], topo: Topology, rng: random.Random | None = None, *,
             options: Mapping[str, Any] | None = None) -> None:
    """Reject unknown package names, malformed selectors and bad per-package options before the test
    starts (ValueError whose message starts with the offending key)."""
    for n in expand(names):
        if n not in KINDS:
            raise ValueError(f"unknown nemesis package {n!r}; known: {sorted(KINDS) + sorted(ALIASES)}")
    for t in targets:
        validate_target(t, topo, rng)
    for name, raw in (options or {}).items():
        key = f"nemesis.options.{name}"
        if name not in KINDS:
            raise ValueError(f"{key}: unknown package {name!r}; known: {sorted(KINDS)}")
        if not isinstance(raw, Mapping) or set(map(str, raw)) - {"kinds", "targets"}:
            raise ValueError(f"{key}: expected a mapping with keys kinds and/or targets, got {raw!r}")
        kind = KINDS[name]
        kinds = raw.get("kinds")
        if kinds is not None:
            allowed = kind.all()
            if not isinstance(kinds, list) or not kinds:
                raise ValueError(f"{key}.kinds: expected a non-empty list of {', '.join(allowed)}; got {kinds!r}")
            for i, k in enumerate(kinds):
                if k not in allowed and not (kind.any_kind and isinstance(k, str) and "." in k):
                    raise ValueError(f"{key}.kinds[{i}]: unknown kind {k!r}; kinds: {', '.join(allowed)}")
                if "master" in str(k) and not topo.broker_sets:
                    raise ValueError(f"{key}.kinds[{i}]: {k} needs broker sets and this topology has none")
        tg = raw.get("targets")
        if tg is not None:
            if not isinstance(tg, list) or not tg:
                raise ValueError(f"{key}.targets: expected a non-empty list of selectors, got {tg!r}")
            for i, t in enumerate(tg):
                try:
                    validate_target(str(t), topo, rng)
                except SelectorError as exc:
                    raise ValueError(f"{key}.targets[{i}]: {exc}") from None


@dataclass(frozen=True)
class Missing:
    """A capability the spec asks of its system and the system does not offer: ``key`` and ``value`` say where the
    spec asks (``nemesis.packages`` and the package, ``nemesis.targets[1]`` and the selector...).  ``capability``
    is a name, or alternatives none of which is offered, spelt ``clock-admin or clock-faketime``."""

    key: str
    value: Any
    capability: str


def missing_capabilities(names: Sequence[str], offered: frozenset[str], *, targets: Sequence[str] = (),
                         options: Mapping[str, Any] | None = None, guided: bool = False,
                         schedule: Sequence[Step] = ()) -> list[Missing]:
    """What the packages (aliases expanded; validated names assumed), the selectors of ``nemesis.targets`` and
    ``nemesis.options.*.targets``, guided mode and an explicit schedule's steps need of the system and ``offered``
    lacks, from the fault table's ``needs`` (:mod:`nemesis.faults`); pure.  Not checked yet: the selectors a
    package uses by default (``disk``'s ``masters``, ``protocol-crash``'s walk) and partition kinds aimed at a
    role (``isolate-master``)."""
    out: list[Missing] = []

    def need(key: str, value: Any, capabilities: Sequence[Need]) -> None:
        out.extend(Missing(key, value, str(c)) for c in capabilities if not need_met(c, offered))

    for name in expand(names):
        need("nemesis.packages", name, package_needs(name))
    for i, t in enumerate(targets):
        need(f"nemesis.targets[{i}]", t, ROLE_SELECTOR_NEEDS if needs_roles(str(t)) else ())
    for name, raw in (options or {}).items():
        for i, t in enumerate((raw or {}).get("targets") or () if isinstance(raw, Mapping) else ()):
            need(f"nemesis.options.{name}.targets[{i}]", t, ROLE_SELECTOR_NEEDS if needs_roles(str(t)) else ())
    if guided:
        need("nemesis.mode", "guided", GUIDED_NEEDS)
    for i, step in enumerate(schedule):
        need(f"nemesis.schedule[{i}].f", step.f, row(step.f, "nemesis.schedule").needs)
    return out


@dataclass
class Composed:
    """The nemesis for a test, the generator performing its schedule, the heal ops, and the schedule."""

    nemesis: Nemesis | None
    generator: Any
    heal: Any
    schedule: tuple[Step, ...] = ()


def build(db: Any, names: Sequence[str], *, interval_s: float, targets: Sequence[str], seed: int,
          time_limit_s: float | None = None, options: Mapping[str, Mapping[str, Any]] | None = None,
          schedule: Sequence[Step] | None = None) -> Composed:
    """Compose the named packages (see the module docstring).  With ``schedule`` the packages' random
    faults are off and the steps run as given; the nemeses of every f the schedule uses are added."""
    spec = db.spec
    has_sets = bool(spec.nodes.broker_sets)
    defs = definitions(names, targets=targets, options=options, interval_s=interval_s, has_broker_sets=has_sets,
                       has_controllers=bool(spec.nodes.controllers))
    mode = getattr(getattr(spec, "nemesis", None), "mode", "random")
    if mode == "guided" and schedule is None and defs:
        return _build_guided(db, defs, interval_s=interval_s, seed=seed,
                             memory=getattr(spec.nemesis, "guided_memory", None))
    if schedule is None:
        limit = float(time_limit_s if time_limit_s is not None else getattr(spec, "time_limit_s", 60.0))
        steps = plan(defs, interval_s=interval_s, time_limit_s=limit, seed=seed)
    else:
        steps = tuple(schedule)
    makers = {d.nemesis for d in defs}
    makers.update(_MAKER_BY_F[s.f] for s in steps)
    if not makers:
        return Composed(None, None, None, ())
    rng = random.Random(seed)
    members = [make(db, rng) for make in _ordered(makers)]
    heal_ops = [op for d in defs for op in d.heal] + [op for s in steps for op in _heal_for(s.f)]
    heal = [op for i, op in enumerate(heal_ops) if op not in heal_ops[:i]]
    nemesis = Accounted(compose_nemeses(members), seed=seed)
    return Composed(nemesis, timed(steps) if steps else None, heal, steps)


def _build_guided(db: Any, defs: Sequence[PackageDef], *, interval_s: float, seed: int,
                  memory: str | None) -> Composed:
    """Guided mode (:mod:`nemesis.guided_run`): the same packages' faults, chosen during the run from what
    the cluster is observed doing; nothing is planned up front (the executed schedule is recorded).

    Raises:
        SpecError: ``memory`` names a malformed file (key ``nemesis.guided_memory``).
    """
    from nemesis.guided_run import GuidedNemesis, guided, load_memory

    try:
        start = load_memory(memory)
    except ValueError as exc:
        from harness.errors import SpecError

        raise SpecError(str(getattr(db.spec, "source", "<spec>")), "nemesis.guided_memory", memory,
                        f"a guided memory file written by an earlier guided run ({exc})") from None
    gen, feed, moves = guided(defs, seed=seed, interval_s=interval_s, start=start)
    makers = {d.nemesis for d in defs} | {_MAKER_BY_F[m.f] for m in moves}
    rng = random.Random(seed)
    members = [make(db, rng) for make in _ordered(makers)]
    heal_ops = [op for d in defs for op in d.heal] + [op for m in moves for op in _heal_for(m.f)]
    heal = [op for i, op in enumerate(heal_ops) if op not in heal_ops[:i]]
    return Composed(GuidedNemesis(Accounted(compose_nemeses(members), seed=seed), feed, memory), gen, heal, ())


NEMESIS_OF: dict[str, Callable[[Any, random.Random], Nemesis]] = {
    "partition": PartitionNemesis, "process": ProcessNemesis, "clock": ClockNemesis, "packet": PacketNemesis,
    "failpoint": FailpointNemesis, "disk": DiskNemesis, "registration": RegistrationCrashNemesis,
}
"""Nemesis family (:data:`nemesis.faults.NEMESES`, in that order) -> the class that performs its fs."""
_MAKER_BY_F: dict[str, Callable[[Any, random.Random], Nemesis]] = {r.f: NEMESIS_OF[r.nemesis] for r in ROWS}
"""f -> the nemesis class that performs it, by its row (a family without a class fails at import)."""


def _heal_for(f: str) -> tuple[dict[str, Any], ...]:
    """The heal ops a run that used ``f`` ends with (its row's).

    Raises:
        UnknownFault: ``f`` has no row (a schedule's steps are parsed against the table first).
    """
    return tuple(dict(op) for op in row(f, "heal").heal)


def _ordered(makers: set[Callable[[Any, random.Random], Nemesis]]) -> list[Callable[[Any, random.Random], Nemesis]]:
    order = [NEMESIS_OF[n] for n in NEMESES]
    return sorted(makers, key=order.index)
