"""The faults in effect over time, as far as the history's nemesis ops say: a sequence of *pieces*.

Vocabulary:

* **fault state** -- what the modelled faults did to the cluster: nodes killed, nodes paused, links cut (an
  unordered pair of nodes one of which drops the other's packets: TCP then fails both ways), and the
  *unmodelled* faults in effect (clock, packet, disk, failpoints, and any fault op still running) -- faults whose
  effect on availability this checker does not claim to know.
* **piece** -- a stretch of time with one fault state: from the completion of a nemesis op (when its effect is
  certain) to the invocation of the next one.  Between two pieces lies a *transition* (nemesis ops running);
  ``ops`` are the op indices of that transition and ``added`` says whether it added a fault (a node down, a
  link cut, an unmodelled fault, an instant fault such as ``crash-at``) or only healed.

How each nemesis ``f`` changes the state is one table, :data:`NEMESIS_EFFECTS`.  A completion with
``effective: false`` (:mod:`nemesis.accounting`) changed nothing.  The nodes an op hit are read from its
completion: a kill's or start's value lists them (else the ``targets`` it resolved); a partition's value
holds the grudge (node -> nodes it drops).  A new partition adds its cuts to any still in place (the checker
never assumes more links than the nemesis could have left).  A ``start`` without a node list revives every
killed node, as the nemesis does.  An ``f`` not in the table counts as an unmodelled fault while it runs.

Pure: a list of ops in, pieces out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

__all__ = ["NEMESIS_EFFECTS", "Effect", "FaultState", "Piece", "describe_op", "fault_pieces"]

NS_PER_S = 1_000_000_000


class Effect(Enum):
    DOWN = "down"  # the nodes it names stop (SIGKILL, SIGTERM, SIGSTOP)
    UP = "up"  # they run again
    CUT = "cut"  # a partition: links cut per its grudge
    UNCUT = "uncut"  # every cut healed
    START = "start"  # an unmodelled fault family begins (its kind says which)
    STOP = "stop"  # it ends
    INSTANT = "instant"  # a fault that undoes itself within the op (crash and restart, disk surgery)
    NONE = "none"  # no fault (a measurement)


# nemesis f -> (effect, kind): for DOWN/UP the set of nodes it acts on, for START/STOP the unmodelled family
NEMESIS_EFFECTS: Mapping[str, tuple[Effect, str]] = {
    "kill": (Effect.DOWN, "killed"), "terminate": (Effect.DOWN, "killed"), "pause": (Effect.DOWN, "paused"),
    "start": (Effect.UP, "killed"), "resume": (Effect.UP, "paused"),
    "start-partition": (Effect.CUT, "partition"), "stop-partition": (Effect.UNCUT, "partition"),
    "bump-clock": (Effect.START, "clock"), "strobe-clock": (Effect.START, "clock"),
    "skew-clock": (Effect.START, "clock"), "reset-clock": (Effect.STOP, "clock"),
    "start-packet": (Effect.START, "packet"), "stop-packet": (Effect.STOP, "packet"),
    "start-disk": (Effect.START, "disk"), "stop-disk": (Effect.STOP, "disk"),
    "arm-failpoint": (Effect.START, "failpoint"), "disarm-failpoint": (Effect.STOP, "failpoint"),
    "restart": (Effect.INSTANT, "rolling restart"), "crash-at": (Effect.INSTANT, "crash-at"),
    "lose-unfsynced": (Effect.INSTANT, "lose-unfsynced"), "corrupt-file": (Effect.INSTANT, "corrupt-file"),
    "registration-crash": (Effect.INSTANT, "registration-crash"),
    "check-clock-offsets": (Effect.NONE, ""),
}


@dataclass(frozen=True, slots=True)
class FaultState:
    """The modelled faults in effect (see the module docstring)."""

    killed: frozenset[str] = frozenset()
    paused: frozenset[str] = frozenset()
    cuts: frozenset[frozenset[str]] = frozenset()
    unmodelled: frozenset[str] = frozenset()

    @property
    def down(self) -> frozenset[str]:
        return self.killed | self.paused

    @property
    def clean(self) -> bool:
        return not (self.killed or self.paused or self.cuts or self.unmodelled)

    def linked(self, a: str, b: str) -> bool:
        return a == b or frozenset((a, b)) not in self.cuts

    def adds_to(self, before: FaultState) -> bool:
        """Whether this state has a fault ``before`` did not (a node down, a cut, an unmodelled fault)."""
        return bool(self.down - before.down or self.cuts - before.cuts or self.unmodelled - before.unmodelled)

    def describe(self) -> str:
        parts = []
        if self.killed:
            parts.append(f"killed {','.join(sorted(self.killed))}")
        if self.paused:
            parts.append(f"paused {','.join(sorted(self.paused))}")
        if self.cuts:
            parts.append("cut " + " ".join("-".join(sorted(c)) for c in sorted(self.cuts, key=sorted)))
        if self.unmodelled:
            parts.append(f"unmodelled {','.join(sorted(self.unmodelled))}")
        return "; ".join(parts) or "no fault"


@dataclass(frozen=True, slots=True)
class Piece:
    """``state`` held from ``start_s`` to ``end_s``; ``ops``/``faults`` are the transition before it (op indices
    and their descriptions), ``added`` whether that transition added a fault."""

    start_s: float
    end_s: float
    state: FaultState
    ops: tuple[int, ...] = ()
    faults: tuple[str, ...] = ()
    added: bool = False
    instant: bool = False  # the transition before it ran an instant or unknown fault

    def __post_init__(self) -> None:
        if self.end_s < self.start_s:
            raise ValueError(f"Piece: end_s {self.end_s} is before start_s {self.start_s}")


@dataclass
class _Builder:
    state: FaultState = field(default_factory=FaultState)
    running: dict[int, tuple[str, str]] = field(default_factory=dict)  # invoke index -> (f, description)


def _d(op: Any) -> Mapping[str, Any]:
    return op if isinstance(op, Mapping) else op.to_dict()


def _nodes(op: Mapping[str, Any]) -> frozenset[str] | None:
    """The nodes a completion says it acted on: its value if a list of names, else its resolved targets."""
    value = op.get("value")
    if isinstance(value, list) and all(isinstance(n, str) for n in value):
        return frozenset(value)
    targets = op.get("targets")
    if isinstance(targets, list):
        names = [n for t in targets if isinstance(t, Mapping) for n in (t.get("nodes") or ()) if isinstance(n, str)]
        if names:
            return frozenset(names)
    return None


def _cuts(op: Mapping[str, Any]) -> frozenset[frozenset[str]] | None:
    value = op.get("value")
    grudge = value.get("grudge") if isinstance(value, Mapping) else None
    if not isinstance(grudge, Mapping):
        return None
    return frozenset(frozenset((str(a), str(b))) for a, drops in grudge.items() if isinstance(drops, list)
                     for b in drops if str(b) != str(a))


def describe_op(op: Mapping[str, Any]) -> str:
    """A nemesis op in a few words (``kill b1-1``, ``start-partition isolate-master``)."""
    value = op.get("value")
    if isinstance(value, Mapping):
        detail = " ".join(str(value[k]) for k in ("kind", "fault", "name", "targets") if value.get(k) not in (None, ""))
    elif isinstance(value, list):
        detail = ",".join(map(str, value))
    else:
        detail = "" if value is None else str(value)
    return f"{op.get('f')} {detail}".strip()


def _apply(state: FaultState, op: Mapping[str, Any]) -> tuple[FaultState, bool]:
    """The state after completion ``op`` and whether it was an instant or unknown fault."""
    effect, kind = NEMESIS_EFFECTS.get(str(op.get("f")), (Effect.INSTANT, "unknown nemesis f"))
    if op.get("effective") is False or effect in (Effect.NONE, Effect.INSTANT):
        return state, effect is Effect.INSTANT and op.get("effective") is not False
    if effect in (Effect.DOWN, Effect.UP):
        nodes = _nodes(op)
        current = state.killed if kind == "killed" else state.paused
        if effect is Effect.DOWN:
            if nodes is None:  # it hit someone, but the history does not say whom
                return _unmodelled(state, f"{op.get('f')} of unrecorded nodes"), False
            current = current | nodes
        else:
            current = frozenset() if nodes is None else current - nodes
        return (FaultState(current, state.paused, state.cuts, state.unmodelled) if kind == "killed" else
                FaultState(state.killed, current, state.cuts, state.unmodelled)), False
    if effect is Effect.CUT:
        cuts = _cuts(op)
        if cuts is None:
            return _unmodelled(state, "partition without a recorded grudge"), False
        return FaultState(state.killed, state.paused, state.cuts | cuts, state.unmodelled), False
    if effect is Effect.UNCUT:
        return FaultState(state.killed, state.paused, frozenset(), state.unmodelled), False
    families = state.unmodelled | {kind} if effect is Effect.START else state.unmodelled - {kind}
    return FaultState(state.killed, state.paused, state.cuts, frozenset(families)), False


def _unmodelled(state: FaultState, why: str) -> FaultState:
    return FaultState(state.killed, state.paused, state.cuts, state.unmodelled | {why})


def fault_pieces(history: Iterable[Any], *, end_s: float | None = None) -> list[Piece]:
    """The pieces of a history (see the module docstring), in time order.

    The first piece starts at 0 (the history's start) with no fault; the last ends at ``end_s`` (default: the
    time of the history's last op).  A fault op that never completed leaves an unmodelled fault from its
    invocation to the end.

    Args:
        history: ``Op`` objects or history dicts, in history order.
    """
    b = _Builder()
    pieces: list[Piece] = []
    start_s, last_s = 0.0, 0.0
    ops: list[int] = []
    faults: list[str] = []
    before = b.state
    instant = False
    for raw in history:
        d = _d(raw)
        t = int(d.get("time", 0)) / NS_PER_S
        last_s = max(last_s, t)
        if d.get("process") != "nemesis":
            continue
        index = int(d.get("index", 0))
        if d.get("type") == "invoke":
            if not b.running:
                pieces.append(Piece(start_s, max(start_s, t), b.state, tuple(ops), tuple(faults),
                                    b.state.adds_to(before), instant))
                before, ops, faults, instant = b.state, [], [], False
            b.running[index] = (str(d.get("f")), describe_op(d))
            ops.append(index)
            continue
        match = next((i for i, (f, _) in b.running.items() if f == d.get("f")), None)
        if match is not None:
            del b.running[match]
        b.state, was_instant = _apply(b.state, d)
        instant = instant or was_instant
        ops.append(index)
        if d.get("effective") is not False and NEMESIS_EFFECTS.get(str(d.get("f")), (Effect.INSTANT, ""))[0] \
                is not Effect.NONE:
            faults.append(describe_op(d))
        if not b.running:
            start_s = t
    end = last_s if end_s is None else max(end_s, start_s)
    state = b.state
    if b.running:  # a fault op never completed: whatever it did lasts to the end
        state = _unmodelled(state, "a nemesis op that never completed: " + ", ".join(
            desc for _, desc in b.running.values()))
        faults += [desc for _, desc in b.running.values()]
    pieces.append(Piece(start_s, max(start_s, end), state, tuple(ops), tuple(faults), state.adds_to(before),
                        instant or bool(b.running)))
    return pieces
