"""The availability verdict: did writes resume in time under every fault that left them possible?

Theory of operation.

1. The history's nemesis ops become *pieces* of constant fault state (:mod:`._faults`).
2. Per broker set, the replicas *certainly in its SyncStateSet* at the start of each piece: all of them when the
   set had been whole (every replica up and linked to its peers and to every controller, every controller up
   and linked, no unmodelled fault) for ``settle_s`` when the fault came; the previous piece's when that piece
   did not touch the set (a fault on controllers alone cannot change the SyncStateSet: without a quorum nothing
   commits); otherwise unknown.  Under safe settings an election makes the new master the set's only member and
   a shrink drops a replica, so after a fault that touched the set nothing certain is left until it settles.
3. Per *write path* (a workload's writes to one broker set, or to the controllers: :mod:`._writes`), a *watch*
   opens at each piece in which the path is reachable (:mod:`._reach`) after a transition that added a fault,
   and stays open through later pieces that only heal (a heal never makes a correct cluster slower to serve,
   so the clock keeps running from the fault).  A piece in which the path is not reachable, or the checker
   cannot tell, closes it; a new fault restarts the clock.
4. In a watch, the *waits*: the stretches between consecutive ``ok`` write completions (and the watch's ends)
   during which writes were attempted.  A wait starts when the first write overlapping it was invoked (or at the
   stretch's start if one was already in flight) and ends at the next ``ok`` completion -- or, if none came
   before the watch ended, at the last failed completion (the watch's end if a write was still pending): the
   clients saw the writes fail that long, never longer than they looked.  A wait longer than
   ``write_resume_s`` is an ``unavailable`` anomaly.
5. After the final heal (the start of the clean tail of pieces: no fault of any kind to the end), every
   workload's ops (any ``f`` it handles) must resume within ``final_resume_s`` of when they were next tried.

Honesty.  Only claims backed by the history: a piece whose faults cannot be modelled, a partial partition among
controllers, a broker set whose SyncStateSet is not known, a stretch the clients did not try -- none of these
is judged, and the result's ``stats`` lists them (``undecided``) with the reason.  ``valid`` is False only
for an ``unavailable`` anomaly.

Pure: histories and expectations in, a :class:`checker.compose.Result` out.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from checker.availability._expect import Expectations
from checker.availability._faults import NS_PER_S, FaultState, Piece, fault_pieces
from checker.availability._reach import Reach, Topology, reach
from checker.availability._writes import BROKER_SET, WORKLOAD_OPS, broker_set_of, owner_of
from checker.compose import Anomaly, Result

__all__ = ["ANOMALY", "Call", "Wait", "check_availability", "longest_wait", "write_calls"]

ANOMALY = "unavailable"
INF = float("inf")
_KEEP = 50  # windows and undecided pieces listed in stats (their counts are always complete)
_ERRORS = 3


@dataclass(frozen=True, slots=True)
class Call:
    """One client op: invoked at ``invoke_s``, completed (``type``) at ``complete_s`` (inf: never)."""

    f: str
    workload: str
    broker_set: int | None
    invoke_s: float
    complete_s: float
    type: str
    invoke_index: int
    complete_index: int | None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Wait:
    """How long the clients waited for an ``ok``: from ``start_s`` to ``end_s``; ``resumed`` when an ok ended it
    (``resumed_index``); ``first_index`` the first attempt waited on; ``errors`` the last failures seen."""

    start_s: float
    end_s: float
    resumed: bool
    first_index: int
    resumed_index: int | None
    errors: tuple[str, ...]

    @property
    def waited_s(self) -> float:
        return self.end_s - self.start_s


def _d(op: Any) -> Mapping[str, Any]:
    return op if isinstance(op, Mapping) else op.to_dict()


def write_calls(history: Iterable[Any], workloads: Iterable[str]) -> list[Call]:
    """Every client op of the named workloads (by ``f``, :data:`WORKLOAD_OPS`), in invoke order."""
    names = {w for w in workloads if w in WORKLOAD_OPS}
    open_: dict[Any, Mapping[str, Any]] = {}
    out: list[Call] = []
    for raw in history:
        d = _d(raw)
        if d.get("process") == "nemesis":
            continue
        if d.get("type") == "invoke":
            open_[d.get("process")] = d
            continue
        inv = open_.pop(d.get("process"), None)
        if inv is not None:
            out.append(_call(inv, d, names))
    for inv in open_.values():
        out.append(_call(inv, None, names))
    calls = [c for c in out if c.workload]
    calls.sort(key=lambda c: (c.invoke_s, c.invoke_index))
    return calls


def _call(inv: Mapping[str, Any], done: Mapping[str, Any] | None, names: set[str]) -> Call:
    f = str(inv.get("f"))
    owner = owner_of(f, sorted(names))
    err = None if done is None else done.get("error")
    complete_s = INF if done is None else int(done["time"]) / NS_PER_S
    return Call(f, owner or "", broker_set_of(inv.get("value")), int(inv["time"]) / NS_PER_S,
                complete_s, "info" if done is None else str(done.get("type")),
                int(inv["index"]), None if done is None else int(done["index"]),
                None if err is None else " ".join(str(err).split())[:160])


def longest_wait(calls: Sequence[Call], start_s: float, end_s: float, *, at_least_s: float = 0.0) -> Wait | None:
    """The longest wait for an ``ok`` among ``calls`` within ``[start_s, end_s]`` (module docstring, step 4),
    considering only stretches longer than ``at_least_s``; None when the clients waited on nothing that long.

    Args:
        calls: one path's calls in invoke order.
    """
    oks = sorted((c.complete_s, c.complete_index or 0) for c in calls if c.type == "ok")
    times = [t for t, _ in oks]
    inside = oks[bisect_right(times, start_s):bisect_right(times, end_s)]
    bounds = [(start_s, None)] + [(t, i) for t, i in inside] + [(end_s, None)]
    invokes = [c.invoke_s for c in calls]
    best: Wait | None = None
    for (a, _), (b, ok_index) in pairwise(bounds):
        if b - a <= at_least_s or (best is not None and b - a <= best.waited_s):
            continue
        resumed = ok_index is not None
        attempts = [c for c in calls[:bisect_right(invokes, b)] if c.complete_s > a and c.invoke_s < b]
        if not attempts:
            continue
        first = min(attempts, key=lambda c: (c.invoke_s, c.invoke_index))
        wait_start = max(a, first.invoke_s)
        if resumed:
            wait_end = b
        elif any(c.complete_s > end_s for c in attempts):
            wait_end = end_s  # still waiting when the watch ended
        else:
            wait_end = max(c.complete_s for c in attempts)
        failed = sorted((c for c in attempts if c.type != "ok" and c.complete_s <= wait_end),
                        key=lambda c: -c.complete_s)
        errors = tuple(dict.fromkeys(f"{c.f}: {c.error or c.type}" for c in failed))[:_ERRORS]
        wait = Wait(wait_start, wait_end, resumed, first.invoke_index, ok_index, errors)
        if wait.waited_s > at_least_s and (best is None or wait.waited_s > best.waited_s):
            best = wait
    return best


@dataclass
class _Watch:
    path: str
    workload: str
    broker_set: int | None
    start_s: float
    end_s: float
    first: Piece
    reach: Reach
    in_sync: frozenset[str] | None
    fault_end_s: float  # the end of its last piece with a fault in effect (the heal's invocation)
    pieces: int = 1


@dataclass
class _Outcome:
    anomalies: list[Anomaly] = field(default_factory=list)
    windows: list[dict[str, Any]] = field(default_factory=list)
    undecided: list[dict[str, Any]] = field(default_factory=list)
    not_expected: int = 0
    judged: int = 0


def _whole(state: FaultState, nodes: frozenset[str]) -> bool:
    return not (state.unmodelled or state.down & nodes or any(c <= nodes for c in state.cuts))


def _touches(state: FaultState, replicas: frozenset[str], nodes: frozenset[str]) -> bool:
    return bool(state.unmodelled or state.down & replicas or any(c & replicas and c <= nodes for c in state.cuts))


def in_sync_by_piece(pieces: Sequence[Piece], topo: Topology, broker_set: int, *, settle_s: float,
                     start_s: float) -> list[frozenset[str] | None]:
    """Per piece, the replicas of ``broker_set`` certainly in its SyncStateSet when the piece began (module
    docstring, step 2); the set counts as whole from ``start_s`` (the clients' start) on."""
    replicas = frozenset(topo.broker_sets[broker_set])
    nodes = replicas | frozenset(topo.controllers)
    out: list[frozenset[str] | None] = []
    whole_since: float | None = None
    for i, p in enumerate(pieces):
        if i == 0:
            out.append(None)
            whole_since = start_s if _whole(p.state, nodes) else None
            continue
        prev = pieces[i - 1]
        settled = whole_since is not None and _whole(prev.state, nodes) and whole_since <= prev.end_s - settle_s
        if settled:
            out.append(replicas)
        elif out[-1] is not None and not p.instant and not _touches(prev.state, replicas, nodes):
            out.append(out[-1])
        else:
            out.append(None)
        if not _whole(p.state, nodes):
            whole_since = None
        elif whole_since is None or p.instant or not _whole(prev.state, nodes):
            whole_since = p.start_s
    return out


def _paths(calls: Sequence[Call]) -> dict[tuple[str, int | None], list[Call]]:
    out: dict[tuple[str, int | None], list[Call]] = {}
    for c in calls:
        ops = WORKLOAD_OPS[c.workload]
        if c.f not in ops.writes:
            continue
        key = c.broker_set if ops.path is BROKER_SET else None
        if ops.path is BROKER_SET and key is None:
            continue  # a write naming no broker set: cannot be attributed
        out.setdefault((c.workload, key), []).append(c)
    return out


def _path_name(workload: str, broker_set: int | None) -> str:
    return f"{workload} writes" + ("" if broker_set is None else f" to broker-{broker_set}")


def _judge_path(workload: str, broker_set: int | None, calls: Sequence[Call], pieces: Sequence[Piece],
                topo: Topology, in_sync: Sequence[frozenset[str] | None], exp: Expectations, out: _Outcome) -> None:
    name = _path_name(workload, broker_set)
    watch: _Watch | None = None
    for i, p in enumerate(pieces):
        if i == 0:
            continue  # before the first fault: nothing was done to the cluster yet
        new_clock = p.added or p.instant or watch is None
        known = in_sync[i] if (new_clock or watch is None) else watch.in_sync
        r = reach(p.state, topo, broker_set=broker_set, in_sync=known)
        if r.holds is True:
            if new_clock:
                _close(watch, calls, exp, out)
                watch = _Watch(name, workload, broker_set, p.start_s, p.end_s, p, r, known,
                               p.start_s if p.state.clean else p.end_s)
            else:
                assert watch is not None
                watch.end_s, watch.pieces = p.end_s, watch.pieces + 1
                if not p.state.clean:
                    watch.fault_end_s = p.end_s
            continue
        _close(watch, calls, exp, out)
        watch = None
        if r.holds is False:
            out.not_expected += 1
        elif not p.state.clean or p.added or p.instant:
            out.undecided.append({"path": name, "start_s": round(p.start_s, 3), "end_s": round(p.end_s, 3),
                                  "faults": p.state.describe(), "why": r.why})
    _close(watch, calls, exp, out)


def _window(w: _Watch) -> dict[str, Any]:
    """The watch in ``stats`` and in an anomaly: ``start_s``-``end_s`` is how long it was judged (through the
    heals that followed), ``fault_end_s`` when its faults were all healed."""
    return {"start_s": round(w.start_s, 3), "end_s": round(w.end_s, 3), "fault_end_s": round(w.fault_end_s, 3),
            "pieces": w.pieces, "faults": w.first.state.describe(), "began_with": list(w.first.faults),
            "nemesis_ops": list(w.first.ops)}


def _errors_text(errors: Sequence[str]) -> str:
    return "; ".join(e if len(e) <= 100 else e[:99] + "…" for e in errors) or "none recorded (ops still pending)"


def _close(w: _Watch | None, calls: Sequence[Call], exp: Expectations, out: _Outcome) -> None:
    if w is None:
        return
    out.judged += 1
    wait = longest_wait(calls, w.start_s, w.end_s)
    row = {"path": w.path, **_window(w), "why_expected": w.reach.why,
           "longest_wait_s": None if wait is None else round(wait.waited_s, 3),
           "resumed": None if wait is None else wait.resumed}
    out.windows.append(row)
    bound = exp.write_bound_s(to_controllers=w.broker_set is None)
    if wait is None or wait.waited_s <= bound:
        return
    row["unavailable"] = True
    window = _window(w)
    how = (f"resumed only after {wait.waited_s:.1f} s" if wait.resumed else
           f"were still failing after {wait.waited_s:.1f} s, when the clients stopped or the window ended")
    cause = ", ".join(w.first.faults) or window["faults"]
    explanation = (f"{w.path} {how} (expected within {bound:g} s) under {cause} (fault window "
                   f"{w.start_s:.1f}-{w.fault_end_s:.1f} s: {window['faults']}); last errors: "
                   f"{_errors_text(wait.errors)}; waited from {wait.start_s:.1f} s, where a correct cluster resumes: "
                   f"{w.reach.why}")
    ops = tuple(dict.fromkeys([*w.first.ops, wait.first_index,
                               *([wait.resumed_index] if wait.resumed_index is not None else [])]))
    out.anomalies.append(Anomaly(
        ANOMALY, w.path, ops, {"resume_within_s": bound},
        {"waited_s": round(wait.waited_s, 3), "resumed": wait.resumed, "from_s": round(wait.start_s, 3),
         "until_s": round(wait.end_s, 3), "window": window, "witness": w.reach.witness,
         "last_errors": list(wait.errors)},
        explanation))


def _final(calls: Sequence[Call], pieces: Sequence[Piece], workloads: Sequence[str], exp: Expectations,
           end_s: float, out: _Outcome) -> dict[str, Any]:
    """Step 5 of the module docstring; returns its stats."""
    if not any(p.instant or not p.state.clean for p in pieces):
        return {"judged": False, "why": "no fault took effect in this run"}
    if not pieces[-1].state.clean:
        return {"judged": False, "why": f"faults still in effect at the end: {pieces[-1].state.describe()}"}
    j = len(pieces) - 1
    while j > 1 and pieces[j - 1].state.clean and not (pieces[j].added or pieces[j].instant):
        j -= 1
    heal_s = pieces[j].start_s
    per: dict[str, Any] = {}
    for wl in workloads:
        mine = [c for c in calls if c.workload == wl]
        if not any(c.complete_s > heal_s for c in mine):
            per[wl] = {"judged": False, "why": "no ops after the final heal"}
            continue
        wait = _first_ok_wait(mine, heal_s, end_s)
        per[wl] = {"judged": True, "waited_s": round(wait.waited_s, 3), "resumed": wait.resumed}
        if wait.waited_s <= exp.final_resume_s:
            continue
        per[wl]["unavailable"] = True
        how = f"resumed only after {wait.waited_s:.1f} s" if wait.resumed else f"never resumed ({wait.waited_s:.1f} s)"
        key = f"{wl} after the final heal"
        out.anomalies.append(Anomaly(
            ANOMALY, key, tuple(dict.fromkeys([*pieces[j].ops, wait.first_index,
                                               *([wait.resumed_index] if wait.resumed_index is not None else [])])),
            {"resume_within_s": exp.final_resume_s},
            {"waited_s": round(wait.waited_s, 3), "resumed": wait.resumed, "from_s": round(wait.start_s, 3),
             "until_s": round(wait.end_s, 3), "final_heal_s": round(heal_s, 3), "last_errors": list(wait.errors)},
            f"{wl} ops {how} after the final heal at {heal_s:.1f} s (expected within {exp.final_resume_s:g} s, "
            f"counted from {wait.start_s:.1f} s when they were next tried); last errors: {_errors_text(wait.errors)}"))
    return {"judged": True, "heal_s": round(heal_s, 3), "workloads": per}


def _first_ok_wait(calls: Sequence[Call], heal_s: float, end_s: float) -> Wait:
    after = [c for c in calls if c.complete_s > heal_s]
    first = min(after, key=lambda c: (c.invoke_s, c.invoke_index))
    start = max(heal_s, first.invoke_s)
    ok = min((c for c in after if c.type == "ok"), key=lambda c: c.complete_s, default=None)
    if ok is not None:
        end, resumed, idx = ok.complete_s, True, ok.complete_index
    else:
        end = end_s if any(c.complete_s == INF for c in after) else max(c.complete_s for c in after)
        resumed, idx = False, None
    failed = sorted((c for c in after if c.type != "ok" and c.complete_s <= end), key=lambda c: -c.complete_s)
    errors = tuple(dict.fromkeys(f"{c.f}: {c.error or c.type}" for c in failed))[:_ERRORS]
    return Wait(start, max(start, end), resumed, first.invoke_index, idx, errors)


def check_availability(history: Sequence[Any], topo: Topology, workloads: Sequence[str], exp: Expectations, *,
                       start_s: float = 0.0) -> Result:
    """Judge a history's availability against ``exp`` (see the module docstring).

    Args:
        history: ``Op`` objects or history dicts, in history order.
        topo: the run's controllers and broker sets.
        workloads: the names of the run's workloads (those not in :data:`WORKLOAD_OPS` are not judged).
        start_s: when the clients started (the main phase), seconds since the history's start: the cluster
            counts as whole from then on.

    Returns:
        ``valid`` False with ``unavailable`` anomalies, else True; ``stats`` holds the expectations, every
        judged window with its longest wait, the undecided pieces with the reason and the final-heal check.
    """
    ops = list(history)
    pieces = fault_pieces(ops)
    end_s = pieces[-1].end_s
    names = [w for w in dict.fromkeys(workloads) if w in WORKLOAD_OPS]
    calls = write_calls(ops, names)
    out = _Outcome()
    known: dict[int, list[frozenset[str] | None]] = {}
    for (wl, bs), path_calls in sorted(_paths(calls).items(), key=lambda kv: (kv[0][0], -1 if kv[0][1] is None
                                                                               else kv[0][1])):
        if bs is not None and bs >= len(topo.broker_sets):
            continue
        if bs is not None and bs not in known:
            known[bs] = in_sync_by_piece(pieces, topo, bs, settle_s=exp.settle_s, start_s=start_s)
        sync = known[bs] if bs is not None else [None] * len(pieces)
        _judge_path(wl, bs, path_calls, pieces, topo, sync, exp, out)
    final = _final(calls, pieces, names, exp, end_s, out)
    stats: dict[str, Any] = {
        "expectations": {**exp.to_dict(), "text": exp.describe()},
        "workloads": {w: sorted(WORKLOAD_OPS[w].writes) for w in names},
        "judged_windows": out.judged, "unavailable_windows": len(out.anomalies),
        "undecided_pieces": len(out.undecided), "not_expected_pieces": out.not_expected,
        "windows": out.windows[:_KEEP], "undecided": out.undecided[:_KEEP], "final": final,
    }
    return Result(valid=not out.anomalies, anomalies={ANOMALY: out.anomalies} if out.anomalies else {}, stats=stats)
