"""Feedback: what a run's faults made the cluster do, abstracted into countable *coverage points*.

Theory of operation.  The observed event stream (:mod:`harness.observe`) is cut into *windows*: a window
opens at each fault step (a nemesis op that injects something, :data:`nemesis.schedule.FAULT_FS`) and runs
until the next one.  Each event is reduced to a *label* -- its kind plus the one field that tells outcomes
apart (``apply:ElectMaster:elect``, ``sync-state-set:shrink``, ``sync-state-set:shrink:master-only`` -- the set
left with the master alone --, ``become-master``, ``client-outcome:send:info``,
``failpoint-fired:raft.before_apply``) -- and each window, per role (``controller``, ``broker``, ``client``),
to the *ordered set* of labels: distinct labels in the order they first appeared, at most
:data:`DEPTH` of them.  A coverage point is ``(fault label, role, ordered labels)``: "after this kind of
fault, this role did these things in this order".  Coverage is the set of distinct points; a run records
how many it had reached over time (``coverage`` in ``results.json``).

Rules of this file: pure (no clock, no I/O, no randomness); events and faults are plain dicts with a
``time`` in ns; :class:`Coverage` is an immutable value, :func:`next_coverage` returns a new one with the
points of new events added, so the guided policy and the run's summary compute the same numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nemesis.schedule import FAULT_FS, fault_label

__all__ = ["DEPTH", "MASTER_ONLY", "Coverage", "Point", "coverage_of", "label", "next_coverage", "points", "summary"]

DEPTH = 6
"""At most this many labels per window and role: keeps the space of points finite and the abstraction about
what happened first after a fault."""

Point = tuple[str, str, tuple[str, ...]]

_DETAIL: Mapping[str, str] = {
    "apply": "event", "sync-state-set": "change", "failpoint-fired": "name", "failpoint-armed": "name",
    "primary-change": "change", "primaries": "count",  # systems watched from outside (harness.observe)
}


def label(event: Mapping[str, Any]) -> str:
    """The abstraction of one observed event (see the module docstring)."""
    kind = str(event.get("kind", "?"))
    if kind == "client-outcome":
        return f"{kind}:{event.get('f')}:{event.get('outcome')}"
    if kind == "apply":
        change = event.get("change")
        base = f"apply:{event.get('event')}"
        return (f"{base}:{change}" if change else base) + _master_only(kind, event)
    detail = _DETAIL.get(kind)
    base = f"{kind}:{event.get(detail)}" if detail and event.get(detail) is not None else kind
    return base + _master_only(kind, event)


MASTER_ONLY = ":master-only"
"""Suffix of a SyncStateSet change that leaves the master alone in the set: the one state in which the master
holds the only copy of what it acknowledged (losing it then is what an unclean election can do), so it is a
behaviour of its own, not just another shrink."""


def _master_only(kind: str, event: Mapping[str, Any]) -> str:
    members = event.get("members") if kind == "sync-state-set" else (
        event.get("sync_state_set") if kind == "apply" and event.get("event") == "AlterSyncStateSet" else None)
    return MASTER_ONLY if isinstance(members, list) and len(members) == 1 else ""


def _is_fault(op: Mapping[str, Any]) -> bool:
    return op.get("process") == "nemesis" and op.get("type") == "invoke" and op.get("f") in FAULT_FS


def points(events: Sequence[Mapping[str, Any]], faults: Sequence[Mapping[str, Any]]) -> list[tuple[int, Point]]:
    """Every ``(time, point)`` of a run, in the order each point became complete (a window's point grows as
    labels arrive; every prefix counts, so a point is reached at the time of its last label)."""
    marks = sorted((int(f.get("time", 0)), fault_label(str(f.get("f")), f.get("value")))
                   for f in faults if _is_fault(f))
    out: list[tuple[int, Point]] = []
    seen: dict[tuple[int, str], list[str]] = {}
    for e in sorted(events, key=lambda e: int(e.get("time", 0))):
        t = int(e.get("time", 0))
        w = _window(marks, t)
        opened = marks[w][1] if w >= 0 else "start"
        role = str(e.get("role") or "?")
        labels = seen.setdefault((w, role), [])
        lab = label(e)
        if lab in labels or len(labels) >= DEPTH:
            continue
        labels.append(lab)
        out.append((t, (opened, role, tuple(labels))))
    return out


def _window(marks: Sequence[tuple[int, str]], t: int) -> int:
    lo, hi = 0, len(marks)
    while lo < hi:
        mid = (lo + hi) // 2
        if marks[mid][0] <= t:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


@dataclass(frozen=True)
class Coverage:
    """Distinct points reached and, for each increase, ``(time_ns, count)``."""

    reached: frozenset[Point] = frozenset()
    curve: tuple[tuple[int, int], ...] = field(default=())

    @property
    def count(self) -> int:
        return len(self.reached)


def next_coverage(cov: Coverage, timed_points: Iterable[tuple[int, Point]]) -> Coverage:
    """``cov`` with ``timed_points`` added (new ones extend the curve)."""
    reached, curve = set(cov.reached), list(cov.curve)
    for t, p in timed_points:
        if p not in reached:
            reached.add(p)
            curve.append((t, len(reached)))
    return Coverage(frozenset(reached), tuple(curve))


def coverage_of(events: Sequence[Mapping[str, Any]], faults: Sequence[Mapping[str, Any]]) -> Coverage:
    """The coverage a whole run reached."""
    return next_coverage(Coverage(), points(events, faults))


def summary(cov: Coverage, *, start_ns: int = 0, events: int = 0) -> dict[str, Any]:
    """``results.json`` ``coverage``: the count, the curve in seconds from ``start_ns`` (the main phase's
    start) and how many events it came from."""
    return {"points": cov.count, "events": events,
            "over_time": [[round((t - start_ns) / 1e9, 3), n] for t, n in cov.curve]}
