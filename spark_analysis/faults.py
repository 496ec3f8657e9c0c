"""Fault windows: the intervals during which a nemesis fault was in effect, recovered from a history.

Vocabulary:

* **fault window** -- one nemesis interval: its ``kind`` (partition, kill, pause, clock, ...), the
  ``targets`` it hit, its ``start_ns`` (the first nemesis op that began it) and ``end_ns`` (the last op of
  the nemesis op that healed it; the last op time of the history if it was never healed, ``healed`` False).
* **fault seq** -- the 0-based number of a window in start order.  Every op is tagged with the seq of the
  latest window that started at or before it (``-1`` before the first fault): the *epoch* of that window
  runs until the next window starts.  RTO and unavailability are measured within an epoch.

How nemesis ``f`` names map to windows (:data:`OPEN_VERBS`, :data:`CLOSE_VERBS`; one table each):

* ``start-<kind>`` / ``<kind>-start`` opens ``<kind>``; ``stop-<kind>`` / ``heal-<kind>`` / ``<kind>-stop``
  closes it;
* the bare verbs in :data:`OPEN_VERBS` (``kill``, ``pause``, ``bump-clock`` ...) open their kind and the bare
  verbs in :data:`CLOSE_VERBS` (``start``/``restart`` -> kill, ``resume`` -> pause, ``heal``/``stop`` -> every
  open window) close it;
* the verbs in :data:`INSTANT_VERBS` are faults that undo themselves within one nemesis op (``crash-at``,
  ``lose-unfsynced``, ``corrupt-file``, ``registration-crash``: kill, damage, restart): the window runs from
  the op's invocation to its completion.

A start op seen again while its window is open (the completion of the invoke) does not reopen it; a close
op seen as invoke and then as completion moves ``end_ns`` to the completion.  A fault whose completion says
``effective: false`` (:mod:`nemesis.accounting`) opens no window: it never happened, so no metric counts it.
Pure: no I/O, no clocks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CLOSE_VERBS", "INSTANT_VERBS", "OPEN_VERBS", "FaultWindow", "fault_windows", "nemesis_verb", "targets_of",
           "window_seq"]

OPEN_VERBS: Mapping[str, str] = {
    "kill": "kill", "terminate": "kill", "pause": "pause", "partition": "partition", "clock-skew": "clock",
    "skew": "clock", "bump-clock": "clock", "strobe-clock": "clock", "skew-clock": "clock", "corrupt": "disk",
    "packet-loss": "packet", "failpoint": "failpoint", "arm-failpoint": "failpoint",
}
CLOSE_VERBS: Mapping[str, str] = {
    "start": "kill", "restart": "kill", "resume": "pause", "unpause": "pause", "reset-clock": "clock",
    "disarm-failpoint": "failpoint", "heal": "*", "stop": "*",
}
INSTANT_VERBS: Mapping[str, str] = {
    "crash-at": "crash", "registration-crash": "crash", "lose-unfsynced": "disk-crash", "corrupt-file": "disk-crash",
}
_OPEN_PREFIXES = ("start-",)
_CLOSE_PREFIXES = ("stop-", "heal-")
_OPEN_SUFFIXES = ("-start",)
_CLOSE_SUFFIXES = ("-stop",)


@dataclass(frozen=True, slots=True)
class FaultWindow:
    seq: int
    kind: str
    targets: tuple[str, ...]
    start_ns: int
    end_ns: int
    healed: bool

    def __post_init__(self) -> None:
        if self.end_ns < self.start_ns:
            raise ValueError(f"FaultWindow {self.kind}#{self.seq}: end_ns {self.end_ns} < start_ns {self.start_ns}")

    def describe(self) -> str:
        tail = "" if self.healed else " (never healed)"
        return f"{self.kind}#{self.seq} on {','.join(self.targets) or '-'} [{self.start_ns}, {self.end_ns}] ns{tail}"


def nemesis_verb(f: str) -> tuple[str, str] | None:
    """``("open" | "close" | "instant", kind)`` for a nemesis ``f``, or None if it neither opens nor closes a
    fault."""
    if f in INSTANT_VERBS:
        return ("instant", INSTANT_VERBS[f])
    for p in _CLOSE_PREFIXES:
        if f.startswith(p) and len(f) > len(p):
            return ("close", f[len(p):])
    for s in _CLOSE_SUFFIXES:
        if f.endswith(s) and len(f) > len(s):
            return ("close", f[: -len(s)])
    for p in _OPEN_PREFIXES:
        if f.startswith(p) and len(f) > len(p):
            return ("open", f[len(p):])
    for s in _OPEN_SUFFIXES:
        if f.endswith(s) and len(f) > len(s):
            return ("open", f[: -len(s)])
    if f in OPEN_VERBS:
        return ("open", OPEN_VERBS[f])
    if f in CLOSE_VERBS:
        return ("close", CLOSE_VERBS[f])
    return None


def targets_of(value: Any) -> tuple[str, ...]:
    """The node names a nemesis op's value names: a list, or a dict's ``targets``/``nodes`` entry."""
    if isinstance(value, Mapping):
        for key in ("targets", "nodes", "node"):
            if key in value:
                return targets_of(value[key])
        return ()
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value if isinstance(v, str | int))
    if isinstance(value, str):
        return (value,)
    return ()


def fault_windows(nemesis_ops: Iterable[Mapping[str, Any]], *, last_time_ns: int) -> list[FaultWindow]:
    """The fault windows of a history, in start order.

    Args:
        nemesis_ops: the ``process == "nemesis"`` ops (dicts with ``time``, ``type``, ``f``, ``value``), in
            history order.
        last_time_ns: the time of the last op of the history (the end of a never-healed window).
    """
    open_: dict[str, list[Any]] = {}  # kind -> [start, targets, end or None, closing_f or None]
    done: list[tuple[int, str, tuple[str, ...], int, bool]] = []
    for op in nemesis_ops:
        f = str(op.get("f", ""))
        verb = nemesis_verb(f)
        if verb is None:
            continue
        t = int(op.get("time", 0))
        action, kind = verb
        if action != "close" and op.get("type") != "invoke" and op.get("effective") is False:
            # the fault did not take effect (nemesis.accounting): the window its invocation opened never was
            w = open_.get(kind)
            if w is not None and w[2] is None:
                del open_[kind]
            continue
        if action == "instant":  # opened by its invocation, closed by its own completion
            action = "open" if op.get("type") == "invoke" else "close"
        if action == "open":
            w = open_.get(kind)
            if w is None or w[2] is not None:
                if w is not None:  # a close was pending and a new start arrives: finish the old window
                    done.append((w[0], kind, w[1], w[2], True))
                open_[kind] = [t, targets_of(op.get("value")), None, None]
            elif not w[1] or op.get("type") != "invoke":  # a completion names the nodes the selector hit
                w[1] = targets_of(op.get("value")) or w[1]
            continue
        kinds = list(open_) if kind == "*" else [kind]
        for k in kinds:
            w = open_.get(k)
            if w is not None and (w[2] is None or w[3] == f):
                w[2], w[3] = t, f
    for kind, w in open_.items():
        if w[2] is None:
            done.append((w[0], kind, w[1], max(last_time_ns, w[0]), False))
        else:
            done.append((w[0], kind, w[1], w[2], True))
    done.sort(key=lambda x: (x[0], x[1]))
    return [FaultWindow(seq=i, kind=k, targets=tg, start_ns=s, end_ns=e, healed=h)
            for i, (s, k, tg, e, h) in enumerate(done)]


def window_seq(starts_ns: list[int], time_ns: int) -> int:
    """The seq of the latest window starting at or before ``time_ns`` (``starts_ns`` sorted), else -1."""
    lo, hi = 0, len(starts_ns)
    while lo < hi:
        mid = (lo + hi) // 2
        if starts_ns[mid] <= time_ns:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1
