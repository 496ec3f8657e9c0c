"""Epoch monotonicity (``checker.invariants``) in real time: an observer's epoch may not go below one it had seen
*before* -- a read that completed before the lower one was invoked -- while overlapping reads of several
processes sharing one observer (the membership workload's ``controller-table``) may complete in either order.

The rule is checked three ways: a table of small histories, the two reads of the nightly run that reported
``nonmonotonic-master-epoch`` (membership x packet x guided, seed 869867971), and a property test against a
brute-force linearizability oracle (a total order of the reads that respects real time with non-decreasing
values exists iff the checker reports nothing)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checker.invariants import check_invariants
from workloads.common import InvariantOps, invoke_times
from workloads.membership import MembershipInvariants


def read(process: Any, invoke: int, ok: int, master_epoch: int | None = None, set_epoch: int | None = None, *,
         observer: str | None = "table") -> list[dict[str, Any]]:
    value: dict[str, Any] = {"broker_name": "bs", "master_epoch": master_epoch, "sync_state_set_epoch": set_epoch}
    if observer is not None:
        value["observer"] = observer
    return [{"index": -1, "time": invoke, "type": "invoke", "process": process, "f": "replica-info", "value": None},
            {"index": -1, "time": ok, "type": "ok", "process": process, "f": "replica-info", "value": value}]


def numbered(*ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The invoke/ok pairs as one history in time order (ties: invokes first), indexed."""
    flat = sorted((op for pair in ops for op in pair), key=lambda d: (d["time"], d["type"] != "invoke"))
    return [{**d, "index": i} for i, d in enumerate(flat)]


@pytest.mark.parametrize(("history", "counts"), [
    # a slow read invoked before the election completes after a fast one invoked after it: linearizable
    (numbered(read(0, 0, 50, 2, 6), read(1, 20, 30, 3, 7)), {}),
    # the same values, but the low read was invoked after the high one had completed: the table went back
    (numbered(read(0, 40, 50, 2, 6), read(1, 20, 30, 3, 7)),
     {"nonmonotonic-master-epoch": 1, "nonmonotonic-sync-state-set-epoch": 1}),
    # one process reads sequentially: a decrease is always a real-time one
    (numbered(read(0, 0, 10, 3), read(0, 20, 30, 2)), {"nonmonotonic-master-epoch": 1}),
    # observers are separate: the observer named in the value, else the process
    (numbered(read(0, 0, 10, 3, observer="a"), read(1, 20, 30, 2, observer="b")), {}),
    (numbered(read(0, 0, 10, 3, observer=None), read(1, 20, 30, 2, observer=None)), {}),
    # compared against the highest value seen before, not only the latest
    (numbered(read(0, 0, 10, 5), read(1, 20, 30, 4), read(2, 40, 50, 4)), {"nonmonotonic-master-epoch": 2}),
    # the high value completing at the very instant the low read is invoked counts as before it (given first)
    (numbered(read(0, 0, 10, 3), read(1, 10, 20, 2)), {"nonmonotonic-master-epoch": 1}),
], ids=["overlap-out-of-order", "after-completion", "one-process", "named-observers", "process-observers",
        "highest-so-far", "touching"])
def test_monotonic_in_real_time(history: list[dict[str, Any]], counts: dict[str, int]) -> None:
    res = check_invariants(history)
    assert dict(res.counts) == counts, res.anomalies


def test_log_events_at_one_instant_keep_their_order() -> None:
    ev = [{"node": "c1", "event": "metadata", "broker_name": "bs", "master_epoch": e, "time": 10} for e in (3, 2)]
    assert dict(check_invariants((), ev).counts) == {"nonmonotonic-master-epoch": 1}
    assert check_invariants((), ev[::-1]).valid is True


# The two reads of anomaly example 1 of nightly run 20261127T221000.307Z (seed 869867971), as history.jsonl has
# them: process 1 asked at 19.037 s and got master epoch 2 at 19.250 s; process 0 asked at 19.240 s and got 3 at
# 19.243 s.  The controller leader applied the election of epoch 3 at 19.2375 s, 200 ms after process 1 asked.
NIGHTLY = [
    {"index": 1601, "time": 19037126660, "type": "invoke", "process": 1, "f": "read-members", "value": {}},
    {"index": 1644, "time": 19239839401, "type": "invoke", "process": 0, "f": "read-members", "value": {}},
    {"index": 1650, "time": 19243270065, "type": "ok", "process": 0, "f": "read-members",
     "value": {"master_id": 1, "master_addr": "10.77.2.4:10980", "master_epoch": 3, "sync_state_set_epoch": 7}},
    {"index": 1652, "time": 19249991166, "type": "ok", "process": 1, "f": "read-members",
     "value": {"master_id": 2, "master_addr": "10.77.2.5:10981", "master_epoch": 2, "sync_state_set_epoch": 6}},
]


def test_nightly_overlapping_reads_are_not_a_regression() -> None:
    assert MembershipInvariants().check({}, NIGHTLY, {}).valid is True


def test_nightly_reads_in_sequence_are_and_name_the_history_ops() -> None:
    late = [dict(NIGHTLY[0], time=19245000000, index=1651), NIGHTLY[3]]  # process 1 asks after process 0's ok
    res = MembershipInvariants().check({}, [NIGHTLY[1], NIGHTLY[2], *late], {})
    assert dict(res.counts) == {"nonmonotonic-master-epoch": 1, "nonmonotonic-sync-state-set-epoch": 1}
    assert {a.ops for kind in res.anomalies.values() for a in kind} == {(1650, 1652)}


def test_invoke_times_pair_by_process() -> None:
    h = numbered(read(0, 0, 50, 2), read(1, 20, 30, 3), read(0, 60, 70, 3))
    assert invoke_times(h) == {d["index"]: t for d, t in zip(
        [d for d in h if d["type"] == "ok"], (20, 0, 60), strict=True)}
    ops = InvariantOps("x", invoke_times(h))
    ops.table_read(h[-1], "bs", {"master_epoch": 3})
    assert [(d["type"], d["time"], d["index"]) for d in ops.ops] == [("invoke", 60, 5), ("ok", 70, 5)]


# -- property: the checker agrees with a brute-force linearizability oracle --------------------------------------


def _linearizable(reads: list[tuple[int, int, int]]) -> bool:
    """Some total order of the reads respects real time (a read that completed before another was invoked comes
    first) and has non-decreasing values: a register whose value only grows could have answered them."""
    for order in itertools.permutations(range(len(reads))):
        pos = {r: i for i, r in enumerate(order)}
        values = [reads[r][2] for r in order]
        if values != sorted(values):
            continue
        if all(pos[a] < pos[b] for a in range(len(reads)) for b in range(len(reads))
               if reads[a][1] < reads[b][0]):
            return True
    return False


@st.composite
def read_sets(draw: st.DrawFn) -> list[tuple[int, int, int]]:
    n = draw(st.integers(1, 6))
    times = draw(st.lists(st.integers(0, 10_000), min_size=2 * n, max_size=2 * n, unique=True))
    values = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    return [(min(times[2 * i], times[2 * i + 1]), max(times[2 * i], times[2 * i + 1]), values[i]) for i in range(n)]


@settings(max_examples=400, deadline=None)
@given(read_sets())
def test_checker_flags_exactly_the_non_linearizable_read_sets(reads: list[tuple[int, int, int]]) -> None:
    history = numbered(*(read(p, inv, ok, v) for p, (inv, ok, v) in enumerate(reads)))
    assert check_invariants(history).valid is _linearizable(reads), reads


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 500), min_size=1, max_size=8), st.data())
def test_reads_of_a_growing_table_are_never_flagged(gaps: list[int], data: st.DataObject) -> None:
    """Epochs grow at the given gaps; each read, whatever its interval, returns the epoch at a point inside it."""
    changes = list(itertools.accumulate(gaps))  # epoch k+1 from changes[k] on
    end = changes[-1] + 500
    reads = []
    for p in range(data.draw(st.integers(1, 12))):
        inv = data.draw(st.integers(0, end))
        ok = data.draw(st.integers(inv, end))
        at = data.draw(st.integers(inv, ok))
        reads.append(read(p, inv, ok, sum(1 for c in changes if c <= at)))
    assert check_invariants(numbered(*reads)).valid is True
