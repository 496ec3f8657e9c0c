"""The fault vocabulary the simulated nemesis speaks: schedule steps -> simulator actions, one table.

A *step* is a ``nemesis.schedule`` step as YAML data, ``{at_s, f, value}``.  :func:`action_of` turns one into an
:class:`Action` the simulated nemesis performs, or raises :class:`PlayError` naming the step and the field when
the simulator cannot perform it.  :data:`PLAYABLE` is the only table: ``f`` -> the reader of its ``value``.  The
nemesis uses the same function for the steps it draws from the seed and for the steps of a given schedule
(``splitbrain sim --schedule``), so a drawn schedule replays by construction; the unit tests check that every
fault kind it can draw is in the table.

What the simulator plays (a subset of ``nemesis.schedule``; anything else is refused, not approximated):

* ``kill`` / ``pause`` NODES; ``start`` NODES, ``dead`` or nothing (every node that is down); ``resume`` NODES,
  ``paused`` or nothing.  NODES is a node name or a comma list of them -- role selectors (``masters``,
  ``slaves:one``) are not resolved by the simulator;
* ``start-partition`` ``{kind: grudge, grudge: {node: [nodes it drops]}}`` (cuts both directions, as the real
  grudge does) and ``stop-partition``;
* ``start-packet`` ``{targets: all, behavior}`` with ``loss {percent}``, ``duplicate {percent}``, ``delay
  {time_ms, jitter_ms}`` (each parameter given; the message is delayed by up to ``time_ms + jitter_ms``), and
  ``stop-packet``;
* ``skew-clock`` ``{targets: NODE, rate}`` and ``reset-clock`` (every node's rate back to 1, as the real nemesis
  resets every node);
* ``registration-crash`` ``{failpoint}``: the extra broker ``x1`` crashes at that registration failpoint and is
  started again :data:`REGCRASH_RESTART_MS` later (the fault heals itself, as in ``nemesis.schedule``);
* ``corrupt-file`` ``{targets: NODES, mode}`` with mode ``truncate-tail`` or ``bitflip-tail`` (:data:`TAIL_MODES`):
  each broker named is killed, the last whole record of its commit log is damaged in the middle (cut there, or
  one bit flipped there) and it is started again -- a broker that was down is damaged and left down, as the real
  disk nemesis does.  The real nemesis draws the damaged byte inside the last record from its own RNG; the
  simulator takes the record's middle byte, so a step plays the same wherever it comes from.  Nodes that are not
  brokers of the simulated cluster are skipped.
* ``start-disk`` ``{targets: NODES, fault, delay_ms}`` with fault ``slow-fsync`` or ``eio-fsync``
  (:data:`FSYNC_FAULTS`; ``delay_ms`` defaults to 100, as the real nemesis's) and ``stop-disk`` (every disk
  healed): each broker named gets a disk whose commit-log fsync under SYNC takes ``delay_ms`` of simulated time --
  and then, with ``eio-fsync``, fails (EIO), so the append is rolled back and its send answered STORE_ERROR.  The
  real ``eio-fsync`` failpoint fails at once; the simulator's failing fsync takes ``delay_ms`` first, as a
  failing device does (docs/simulation.md).  Nodes that are not brokers of the simulated cluster are skipped.

Pure: no clock, no randomness, no cluster -- the node names arrive as an argument.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from system_under_test.broker.registration.driver import FAILPOINTS
from system_under_test.sim.network import PacketFault

__all__ = ["FSYNC_FAULTS", "PLAYABLE", "REGCRASH_RESTART_MS", "TAIL_MODES", "Action", "PlayError", "Timed", "action_of",
           "plan"]

REGCRASH_RESTART_MS = 3000
"""How long after a ``registration-crash`` its broker is started again (drawn or played alike)."""


class PlayError(ValueError):
    """A step the simulator cannot perform: ``index`` the step, ``field`` its key (``value.behavior``)."""

    def __init__(self, index: int | None, field: str, message: str) -> None:
        where = "schedule" if index is None else f"schedule[{index}]" + (f".{field}" if field else "")
        super().__init__(f"{where}: {message}")
        self.index, self.field, self.message = index, field, message


@dataclass(frozen=True)
class Action:
    """What the simulated nemesis does for one step.  ``nodes`` empty on ``start``/``resume`` means every node
    that is down / paused; ``cuts`` are the links a partition cuts (pairs, sorted)."""

    f: str
    nodes: tuple[str, ...] = ()
    cuts: tuple[tuple[str, str], ...] = ()
    packet: PacketFault | None = None
    rate: float = 1.0
    failpoint: str = ""
    mode: str = ""
    delay_ms: int = 0


@dataclass(frozen=True)
class Timed:
    """A step of a given schedule with its action: ``at_ms`` after the main phase starts."""

    at_ms: int
    step: Mapping[str, Any]
    action: Action


def _fail(i: int, field: str, message: str) -> PlayError:
    return PlayError(i, field, message)


def _mapping(i: int, f: str, raw: Any, allowed: Sequence[str]) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise _fail(i, "value", f"{f} takes a mapping with {', '.join(allowed)}; got {raw!r}")
    unknown = sorted(set(map(str, raw)) - set(allowed))
    if unknown:
        raise _fail(i, f"value.{unknown[0]}", f"{f}: the simulator does not play {unknown[0]!r}")
    return raw


def _nodes(i: int, field: str, raw: Any, names: Sequence[str]) -> tuple[str, ...]:
    parts = [p.strip() for p in raw.split(",")] if isinstance(raw, str) else []
    bad = [p for p in parts if p not in names]
    if not parts or bad:
        raise _fail(i, field, f"expected node names from {', '.join(names)} (a comma list); got {raw!r} -- role "
                              "selectors are not resolved in simulation")
    return tuple(dict.fromkeys(parts))


def _number(i: int, field: str, raw: Any, lo: float, hi: float) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw) or not lo <= raw <= hi:
        raise _fail(i, field, f"expected a number in [{lo:g}, {hi:g}]; got {raw!r}")
    return float(raw)


def _targeted(f: str) -> Callable[[int, Any, Sequence[str]], Action]:
    def read(i: int, raw: Any, names: Sequence[str]) -> Action:
        return Action(f, _nodes(i, "value", raw, names))
    return read


def _all_or_targeted(f: str, word: str) -> Callable[[int, Any, Sequence[str]], Action]:
    def read(i: int, raw: Any, names: Sequence[str]) -> Action:
        return Action(f) if raw in (None, word) else Action(f, _nodes(i, "value", raw, names))
    return read


def _no_value(f: str) -> Callable[[int, Any, Sequence[str]], Action]:
    def read(i: int, raw: Any, names: Sequence[str]) -> Action:
        if raw is not None:
            raise _fail(i, "value", f"{f} takes no value in simulation; got {raw!r}")
        return Action(f)
    return read


def _partition(i: int, raw: Any, names: Sequence[str]) -> Action:
    v = _mapping(i, "start-partition", raw, ("kind", "grudge"))
    if v.get("kind") != "grudge":
        raise _fail(i, "value.kind", f"the simulator plays partition kind grudge only; got {v.get('kind')!r}")
    grudge = v.get("grudge")
    if not isinstance(grudge, Mapping) or not grudge:
        raise _fail(i, "value.grudge", "a map node -> [nodes it drops]")
    cuts: set[tuple[str, str]] = set()
    for node, drops in grudge.items():
        if str(node) not in names or not isinstance(drops, list) or any(str(d) not in names for d in drops):
            raise _fail(i, "value.grudge", f"node {node!r}: expected a list of node names from {', '.join(names)}; "
                                           f"got {drops!r}")
        cuts |= {(min(str(node), str(d)), max(str(node), str(d))) for d in drops if str(d) != str(node)}
    return Action("start-partition", cuts=tuple(sorted(cuts)))


_BEHAVIORS: Mapping[str, tuple[str, ...]] = {"loss": ("percent",), "duplicate": ("percent",),
                                            "delay": ("time_ms", "jitter_ms")}


def _packet(i: int, raw: Any, names: Sequence[str]) -> Action:
    v = _mapping(i, "start-packet", raw, ("targets", "behavior"))
    if v.get("targets", "all") != "all":
        raise _fail(i, "value.targets", f"the simulator mangles every link only (targets: all); got {v['targets']!r}")
    behavior = v.get("behavior")
    if not isinstance(behavior, Mapping) or not behavior:
        raise _fail(i, "value.behavior", f"a map of behaviours from {', '.join(_BEHAVIORS)}; got {behavior!r}")
    got: dict[str, float] = {}
    for name, params in behavior.items():
        keys = _BEHAVIORS.get(str(name))
        if keys is None:
            raise _fail(i, f"value.behavior.{name}", f"the simulator plays {', '.join(_BEHAVIORS)} only")
        p = _mapping(i, f"behavior.{name}", params, keys)
        for k in keys:
            if k not in p:
                raise _fail(i, f"value.behavior.{name}.{k}", "missing (the simulator needs every parameter)")
            got[f"{name}.{k}"] = _number(i, f"value.behavior.{name}.{k}", p[k], 0, 100 if k == "percent" else 60_000)
    fault = PacketFault(drop_rate=got.get("loss.percent", 0.0) / 100, dup_rate=got.get("duplicate.percent", 0.0) / 100,
                        extra_delay_ms=int(got.get("delay.time_ms", 0) + got.get("delay.jitter_ms", 0)))
    return Action("start-packet", packet=fault)


def _skew(i: int, raw: Any, names: Sequence[str]) -> Action:
    v = _mapping(i, "skew-clock", raw, ("targets", "rate"))
    if "rate" not in v:
        raise _fail(i, "value.rate", "missing")
    return Action("skew-clock", _nodes(i, "value.targets", v.get("targets"), names),
                  rate=_number(i, "value.rate", v["rate"], 0.01, 100))


def _registration_crash(i: int, raw: Any, names: Sequence[str]) -> Action:
    v = _mapping(i, "registration-crash", raw, ("failpoint",))
    point = v.get("failpoint")
    if point not in FAILPOINTS:
        raise _fail(i, "value.failpoint", f"one of the registration driver's failpoints {', '.join(FAILPOINTS)}; "
                                          f"got {point!r}")
    return Action("registration-crash", failpoint=str(point))


TAIL_MODES = ("truncate-tail", "bitflip-tail")
"""The ``corrupt-file`` modes the simulator plays: the repairable ones, which damage only the last record."""


def _corrupt_file(i: int, raw: Any, names: Sequence[str]) -> Action:
    v = _mapping(i, "corrupt-file", raw, ("targets", "mode"))
    mode = v.get("mode")
    if mode not in TAIL_MODES:
        raise _fail(i, "value.mode", f"the simulator plays corrupt-file modes {', '.join(TAIL_MODES)} only (given "
                                     f"explicitly: the real default is bitflip-tail); got {mode!r}")
    return Action("corrupt-file", _nodes(i, "value.targets", v.get("targets"), names), mode=str(mode))


FSYNC_FAULTS = ("slow-fsync", "eio-fsync")
"""The ``start-disk`` faults the simulator plays: an fsync that takes time, and one that then fails."""


def _start_disk(i: int, raw: Any, names: Sequence[str]) -> Action:
    v = _mapping(i, "start-disk", raw, ("targets", "fault", "delay_ms"))
    fault = v.get("fault", "slow-fsync")
    if fault not in FSYNC_FAULTS:
        raise _fail(i, "value.fault", f"the simulator plays start-disk faults {', '.join(FSYNC_FAULTS)} only; "
                                      f"got {fault!r}")
    delay = _number(i, "value.delay_ms", v.get("delay_ms", 100), 0, 60_000)
    return Action("start-disk", _nodes(i, "value.targets", v.get("targets"), names), mode=str(fault),
                  delay_ms=int(delay))


PLAYABLE: Mapping[str, Callable[[int, Any, Sequence[str]], Action]] = {
    "kill": _targeted("kill"),
    "start": _all_or_targeted("start", "dead"),
    "pause": _targeted("pause"),
    "resume": _all_or_targeted("resume", "paused"),
    "start-partition": _partition,
    "stop-partition": _no_value("stop-partition"),
    "start-packet": _packet,
    "stop-packet": _no_value("stop-packet"),
    "skew-clock": _skew,
    "reset-clock": _no_value("reset-clock"),
    "registration-crash": _registration_crash,
    "corrupt-file": _corrupt_file,
    "start-disk": _start_disk,
    "stop-disk": _no_value("stop-disk"),
}
"""f -> the reader of its value: the whole vocabulary the simulated nemesis plays (module docstring)."""


def action_of(i: int, step: Mapping[str, Any], names: Sequence[str]) -> Action:
    """The action for step ``i`` (a mapping ``{at_s, f, value}``); :class:`PlayError` when it is not playable."""
    f = step.get("f")
    read = PLAYABLE.get(f) if isinstance(f, str) else None
    if read is None:
        raise _fail(i, "f", f"the simulator does not play {f!r}; it plays {', '.join(PLAYABLE)}")
    return read(i, step.get("value"), names)


def plan(raw: Any, names: Sequence[str], seconds: float) -> tuple[Timed, ...]:
    """Every step of ``raw`` (a list of steps in time order) with its action and time.

    Raises:
        PlayError: not a list, a step that is not a mapping, ``at_s`` missing, negative, out of order or after
            the main phase (``seconds``), or a step the simulator cannot play.
    """
    if not isinstance(raw, list):
        raise PlayError(None, "", f"expected a list of steps {{at_s, f, value}}; got {type(raw).__name__}")
    out: list[Timed] = []
    end_ms = int(seconds * 1000)
    for i, step in enumerate(raw):
        if not isinstance(step, Mapping):
            raise PlayError(i, "", f"expected a mapping {{at_s, f, value}}; got {step!r}")
        unknown = sorted(set(map(str, step)) - {"at_s", "f", "value"})
        if unknown:
            raise PlayError(i, unknown[0], "unknown key; a step has at_s, f, value")
        at_ms = round(_number(i, "at_s", step.get("at_s"), 0, 1e6) * 1000)
        if at_ms > end_ms:
            raise PlayError(i, "at_s", f"{at_ms / 1000:g} is after the main phase ({seconds:g} s; see --seconds)")
        if out and at_ms < out[-1].at_ms:
            raise PlayError(i, "at_s", f"{at_ms / 1000:g} is before the previous step: steps must be in time order")
        out.append(Timed(at_ms, dict(step), action_of(i, step, names)))
    return tuple(out)
