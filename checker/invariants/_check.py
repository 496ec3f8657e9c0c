"""The cluster invariant checks, each a pure function from observations to anomalies."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import Any

from checker.compose import Anomaly
from checker.invariants._observations import Observation

# The one table of invariant violation types: name -> definition.
INVARIANT_TYPES: dict[str, str] = {
    "broker-id-not-unique": "two different brokers of one broker set were seen holding the same broker id",
    "broker-id-changed": "one broker was seen holding two different broker ids (across restarts/address changes)",
    "multiple-masters-in-epoch": "two different brokers were master of one broker set in the same master epoch",
    "concurrent-writers-in-epoch": "two different brokers accepted writes for one broker set in one master epoch",
    "nonmonotonic-master-epoch": "an observer saw a broker set's master epoch go down",
    "nonmonotonic-sync-state-set-epoch": "an observer saw a broker set's sync-state set epoch go down",
    "nonmonotonic-broker-epoch": "an observer saw a broker's broker epoch go down",
    "write-on-fenced-master": "a write was acknowledged by a broker that was fenced before the send was invoked",
    "write-on-superseded-master": "a write was acknowledged by a master whose epoch was superseded before the "
                                  "send was invoked",
    "apply-consumed-multiple-ids": "one ApplyBrokerId (register code) was applied with more than one broker id",
    "broker-id-applied-twice": "one broker id was applied for two different register codes",
    "broker-id-leaked": "a broker whose claim of a broker id the controller had applied (ApplyBrokerId answered "
                        "ok) was later seen holding another id: the applied id is leaked",
    "role-reapplied": "a broker took the master role of a master epoch it already held in the same incarnation (a "
                      "role notification whose master epoch is not newer than the broker's must be ignored)",
    "lease-outlives-controller": "a broker counted its own lease from a moment later than the one at which the "
                                 "controller leader recorded the heartbeat that renewed it, so (at equal clock rates) "
                                 "its lease runs out after the controller's: it may still act as master after the "
                                 "controller let its lease lapse, fenced it and elected another",
}


def _ops(*obs: Observation) -> tuple[int, ...]:
    return tuple(o.op for o in obs if o.op is not None)


def _mk(type_: str, first: Observation, second: Observation, expected: Any, observed: Any, why: str) -> Anomaly:
    return Anomaly(type_, first.broker_name, _ops(first, second), expected, observed,
                   f"{why} (seen at {first.where} and {second.where})")


def _unique_map(obs: Sequence[Observation], kinds: set[str], key: Callable[[Observation], Any],
                val: Callable[[Observation], Any], type_: str, what: str) -> list[Anomaly]:
    """Report each observation whose ``val`` differs from the first one seen for its ``key``."""
    first: dict[Any, Observation] = {}
    reported: set[tuple[Any, Any]] = set()
    out = []
    for o in obs:
        if o.kind not in kinds or key(o) is None or val(o) is None:
            continue
        k = key(o)
        f = first.setdefault(k, o)
        if val(f) != val(o) and (k, val(o)) not in reported:
            reported.add((k, val(o)))
            out.append(_mk(type_, f, o, {what: val(f)}, {what: val(o)},
                           f"{type_}: {k} has {what} {val(f)!r} and also {val(o)!r}"))
    return out


def check_broker_ids(obs: Sequence[Observation]) -> list[Anomaly]:
    def by_id(o: Observation) -> Any:
        return None if o.broker_id is None or o.node is None else (o.broker_name, o.broker_id)

    def by_node(o: Observation) -> Any:
        return None if o.broker_id is None or o.node is None else (o.broker_name, o.node)

    kinds = {"broker-id", "became-master"}
    return (_unique_map(obs, kinds, by_id, lambda o: o.node, "broker-id-not-unique", "node")
            + _unique_map(obs, kinds, by_node, lambda o: o.broker_id, "broker-id-changed", "broker_id"))


def check_masters(obs: Sequence[Observation]) -> list[Anomaly]:
    def epoch_key(o: Observation) -> Any:
        return None if o.master_epoch is None else (o.broker_name, o.master_epoch)

    return (
        _unique_map(obs, {"metadata"}, epoch_key, lambda o: o.master_id, "multiple-masters-in-epoch", "master_id")
        + _unique_map(obs, {"became-master"}, epoch_key, lambda o: o.node, "multiple-masters-in-epoch", "node")
        + _unique_map(obs, {"accepted-write"}, epoch_key, lambda o: o.node, "concurrent-writers-in-epoch", "node")
    )


def check_monotonic(obs: Sequence[Observation]) -> list[Anomaly]:
    """Per observer, an epoch never goes below one the observer had seen *before* -- in real time.

    Observation A is before B when A had completed when B began: ``A.time < B.start`` (an op begins at its
    invoke, a log event at its time; at equal times the one given first is before).  Two ops of one observer
    that overlap are not ordered: the several client processes that read the controllers' table share the
    observer ``controller-table``, and a read invoked before an election may be answered before it and still
    complete after a read invoked after it (a slow link, a retransmission).  For a value that only grows,
    reads are linearizable exactly when none returns less than a read that had completed before it began
    (points in the ops' intervals with non-decreasing values exist iff no such pair does), so this is the
    whole rule for a linearizable table, and for one process, or one node's log, it is the plain sequence.
    """
    fields: list[tuple[str, str, Callable[[Observation], Any]]] = [
        ("master_epoch", "nonmonotonic-master-epoch", lambda o: o.broker_name),
        ("sync_state_set_epoch", "nonmonotonic-sync-state-set-epoch", lambda o: o.broker_name),
        ("broker_epoch", "nonmonotonic-broker-epoch", lambda o: (o.broker_name, o.broker_id)),
    ]
    relevant = [(pos, o) for pos, o in enumerate(obs) if o.kind in ("metadata", "broker-epoch", "became-master")]
    out = []
    for field_name, type_, subject in fields:
        groups: dict[Any, list[tuple[int, Observation]]] = {}
        for pos, o in relevant:
            if getattr(o, field_name) is not None:
                groups.setdefault((o.observer, subject(o)), []).append((pos, o))
        for members in groups.values():
            out.extend(_below_earlier(members, field_name, type_, subject))
    return out


def _below_earlier(members: list[tuple[int, Observation]], field_name: str, type_: str,
                   subject: Callable[[Observation], Any]) -> list[Anomaly]:
    """The observations of one (observer, subject) whose value is below the highest of those before them."""
    by_end = sorted(members, key=lambda m: (m[1].time, m[0]))
    ends = [(o.time, pos) for pos, o in by_end]
    highest: list[Observation] = []  # highest[i]: the latest-completing holder of the maximum among by_end[:i+1]
    for _, o in by_end:
        best = highest[-1] if highest else None
        highest.append(o if best is None or getattr(o, field_name) >= getattr(best, field_name) else best)
    out = []
    for pos, o in by_end:
        i = bisect_left(ends, (o.start, pos))  # by_end[:i] completed before o began
        if i == 0:
            continue
        prev = highest[i - 1]
        low, high = getattr(o, field_name), getattr(prev, field_name)
        if low < high:
            out.append(_mk(type_, prev, o, {field_name: f">= {high}"}, {field_name: low},
                           f"observer {o.observer} saw {field_name} of {subject(o)} go from {high} down to {low} "
                           f"(the {high} was seen before the {low} was asked for)"))
    return out


def check_stale_writes(obs: Sequence[Observation]) -> list[Anomaly]:
    """No acknowledged write on a broker fenced, or on a master superseded, before the send's invoke."""
    out = []
    fence_events: dict[str, list[Observation]] = {}
    established: dict[str, list[tuple[int, int, Observation]]] = {}  # broker set -> (time, epoch, obs)
    node_epochs: dict[str, list[tuple[int, int]]] = {}  # node -> (time, master epoch it became master in)
    for o in obs:
        if o.kind in ("fenced", "unfenced") and o.node is not None:
            fence_events.setdefault(o.node, []).append(o)
        if o.kind in ("became-master", "metadata") and o.master_epoch is not None:
            established.setdefault(o.broker_name, []).append((o.time, o.master_epoch, o))
        if o.kind == "became-master" and o.node is not None and o.master_epoch is not None:
            node_epochs.setdefault(o.node, []).append((o.time, o.master_epoch))
    for lst in fence_events.values():
        lst.sort(key=lambda o: o.time)
    prefix: dict[str, tuple[list[int], list[tuple[int, Observation]]]] = {}
    for bs, elst in established.items():
        elst.sort(key=lambda x: x[0])
        times: list[int] = []
        best: list[tuple[int, Observation]] = []
        cur: tuple[int, Observation] | None = None
        for t, e, o in elst:
            if cur is None or e > cur[0]:
                cur = (e, o)
            times.append(t)
            best.append(cur)
        prefix[bs] = (times, best)
    for w in obs:
        if w.kind != "accepted-write" or w.node is None or w.invoke_time is None:
            continue
        fenced = [f for f in fence_events.get(w.node, ()) if f.time < w.invoke_time]
        if fenced and fenced[-1].kind == "fenced":
            unfenced_later = any(f.kind == "unfenced" and fenced[-1].time < f.time <= w.time
                                 for f in fence_events[w.node])
            if not unfenced_later:
                out.append(_mk("write-on-fenced-master", fenced[-1], w, "no write acknowledged while fenced",
                               {"node": w.node}, f"{w.node} was fenced before the send was invoked and "
                                                 f"acknowledged it anyway"))
        epoch = w.master_epoch
        if epoch is None:
            mine = [e for t, e in sorted(node_epochs.get(w.node, ())) if t <= w.invoke_time]
            epoch = mine[-1] if mine else None
        if epoch is None or w.broker_name not in prefix:
            continue
        ptimes, pbest = prefix[w.broker_name]
        i = bisect_left(ptimes, w.invoke_time) - 1  # establishments strictly before the invoke
        if i >= 0 and pbest[i][0] > epoch:
            out.append(_mk("write-on-superseded-master", pbest[i][1], w, {"master_epoch": f">= {pbest[i][0]}"},
                           {"node": w.node, "master_epoch": epoch},
                           f"{w.node} acknowledged a write in master epoch {epoch} although epoch {pbest[i][0]} "
                           f"was established before the send was invoked"))
    return out


def check_apply_broker_id(obs: Sequence[Observation]) -> list[Anomaly]:
    def code_key(o: Observation) -> Any:
        return None if o.register_code is None else (o.broker_name, o.register_code)

    def id_key(o: Observation) -> Any:
        return None if o.broker_id is None or o.register_code is None else (o.broker_name, o.broker_id)

    kinds = {"applied-broker-id"}
    return (_unique_map(obs, kinds, code_key, lambda o: o.broker_id, "apply-consumed-multiple-ids", "broker_id")
            + _unique_map(obs, kinds, id_key, lambda o: o.register_code, "broker-id-applied-twice",
                          "register_code"))


def check_applied_id_kept(obs: Sequence[Observation]) -> list[Anomaly]:
    """A broker (node) told that the controller applied its claim of id I must hold I from then on.

    The design keeps the claim in ``.broker.meta.temp`` until ``.broker.meta`` is in place, so a broker that
    crashed after ApplyBrokerId succeeded resumes with the id applied for it (docs/broker.md, Registration).  An
    ``own-id-applied`` observation of node N (broker set, id I), then a ``broker-id`` or ``own-id-applied``
    observation of N, not earlier, with another id: ``broker-id-leaked`` (reported once per node and id).  A node
    is a store's identity: a broker given a new disk is another node."""
    applied: dict[tuple[str, str], Observation] = {}
    reported: set[tuple[str, str, int]] = set()
    out = []
    for o in sorted((o for o in obs if o.node is not None and o.broker_id is not None
                     and o.kind in ("own-id-applied", "broker-id")), key=lambda o: o.time):
        key = (o.broker_name, str(o.node))
        first = applied.get(key)
        if first is None:
            if o.kind == "own-id-applied":
                applied[key] = o
            continue
        assert o.broker_id is not None and first.broker_id is not None
        if o.broker_id != first.broker_id and (*key, o.broker_id) not in reported:
            reported.add((*key, o.broker_id))
            out.append(_mk("broker-id-leaked", first, o, {"broker_id": first.broker_id}, {"broker_id": o.broker_id},
                           f"broker-id-leaked: {o.node} of {o.broker_name} had its claim of id {first.broker_id} "
                           f"applied by the controller, then held id {o.broker_id}"))
    return out


def check_role_reapplied(obs: Sequence[Observation]) -> list[Anomaly]:
    """A broker becomes master of a master epoch at most once per incarnation.

    The design adopts a master only with a master epoch higher than the broker's own (seed: role change; the
    equal epoch of a repeated notification or poll is ignored, ``broker.ha.role.decide_role_change``), so a
    broker's own log names each master epoch in ``became-master`` at most once between two registrations (a
    ``broker-epoch`` event of the same node starts a new incarnation: a restarted broker re-learns its role).
    Acting on the equal epoch again is not harmless: the master drops its slaves' connections and fails the puts
    waiting for their acks each time.  Log events only (history ops carry no incarnation); reported once per
    node, broker set and epoch."""
    held: dict[tuple[str, str], dict[int, Observation]] = {}
    reported: set[tuple[str, str, int]] = set()
    out = []
    events = sorted(((pos, o) for pos, o in enumerate(obs) if o.op is None and o.node is not None
                     and o.kind in ("became-master", "broker-epoch")), key=lambda m: (m[1].time, m[0]))
    for _, o in events:
        key = (o.broker_name, str(o.node))
        if o.kind == "broker-epoch":
            held.pop(key, None)
            continue
        if o.master_epoch is None:
            continue
        mine = held.setdefault(key, {})
        first = mine.get(o.master_epoch)
        if first is None:
            mine[o.master_epoch] = o
        elif (*key, o.master_epoch) not in reported:
            reported.add((*key, o.master_epoch))
            out.append(_mk("role-reapplied", first, o, {"became_master_in_epoch": "once per incarnation"},
                           {"master_epoch": o.master_epoch},
                           f"role-reapplied: {o.node} of {o.broker_name} became master of epoch {o.master_epoch} "
                           f"again without restarting"))
    return out


def check_lease_outlived(obs: Sequence[Observation]) -> list[Anomaly]:
    """A broker's own lease never counts from later than the controller's lease of it.

    The design (``broker/lease.py``): the controller leader counts its lease of a broker from when it recorded the
    broker's heartbeat and may fence the broker and elect another master once that lease runs out; the broker must
    stop acting as master no later than that without hearing from the controller, so it counts its own lease from
    when the acknowledged heartbeat was *sent* -- before the controller's record, in real time.  Each
    ``lease-renewed`` log event (the broker's lease moved; ``lease_from``: the moment it now counts from, on the run's
    time axis) is paired by ``heartbeat`` with the leader's ``lease-granted`` event of the same heartbeat (its
    ``time``: the controller's record); a ``lease_from`` later than that is ``lease-outlives-controller``, the later
    by how much the broker's lease outlives the controller's when both clocks run at the same rate.

    The rule compares starts, not ends, so it holds whatever the clocks' rates: a broker whose clock runs slow
    outlives the controller's lease by drift, which the design does not bound (``lease_timing.py`` states no drift
    tolerance) and this check does not judge.  It needs both moments on one exact time axis -- the simulator's;
    a renewal without its grant (the controller's log lost it) is not judged.  Reported once per broker set and
    node: the first such renewal, with how many there were and the largest overlap."""
    granted = {o.heartbeat: o for o in obs if o.kind == "lease-granted" and o.heartbeat is not None}
    late: dict[tuple[str, str], list[tuple[int, Observation, Observation]]] = {}
    for r in sorted((o for o in obs if o.kind == "lease-renewed" and o.node is not None), key=lambda o: o.time):
        g = granted.get(r.heartbeat) if r.heartbeat is not None else None
        if g is not None and r.lease_from is not None and r.lease_from > g.time:
            late.setdefault((r.broker_name, str(r.node)), []).append((r.lease_from - g.time, g, r))
    out = []
    for (name, node), found in late.items():
        first, g, r = found[0]
        worst = max(m for m, _, _ in found)
        out.append(_mk("lease-outlives-controller", g, r,
                       {"lease_from": f"<= {g.time} (when {g.observer} recorded heartbeat {r.heartbeat})"},
                       {"node": node, "broker_id": r.broker_id, "lease_from": r.lease_from,
                        "overlap_ms": first / 1e6, "renewals": len(found), "max_overlap_ms": worst / 1e6},
                       f"lease-outlives-controller: {node} of {name} counted its lease from {first / 1e6:g} ms "
                       f"after {g.observer} recorded heartbeat {r.heartbeat} ({len(found)} such renewal(s), up to "
                       f"{worst / 1e6:g} ms): its lease outlives the controller's by that much"))
    return out


CHECKS: tuple[Callable[[Sequence[Observation]], list[Anomaly]], ...] = (
    check_broker_ids, check_masters, check_monotonic, check_stale_writes, check_apply_broker_id,
    check_applied_id_kept, check_role_reapplied, check_lease_outlived,
)

EVENT_CHECKS: tuple[Callable[[Sequence[Observation]], list[Anomaly]], ...] = (check_role_reapplied,)
"""The checks a real run applies to its observer's broker events (``checker.invariants.check_cluster_events``)."""
