"""Fault windows recovered from nemesis ops (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from spark_analysis.faults import FaultWindow, fault_windows, nemesis_verb, targets_of, window_seq


def nem(t: int, typ: str, f: str, value: Any = None) -> dict[str, Any]:
    return {"time": t, "type": typ, "process": "nemesis", "f": f, "value": value}


@pytest.mark.parametrize(("f", "expected"), [
    ("start-partition", ("open", "partition")), ("stop-partition", ("close", "partition")),
    ("heal-partition", ("close", "partition")), ("pause-start", ("open", "pause")), ("pause-stop", ("close", "pause")),
    ("kill", ("open", "kill")), ("restart", ("close", "kill")), ("resume", ("close", "pause")),
    ("heal", ("close", "*")), ("check-offsets", None), ("start-", None),
    ("start", ("close", "kill")), ("bump-clock", ("open", "clock")), ("terminate", ("open", "kill")),
    ("start-disk", ("open", "disk")), ("arm-failpoint", ("open", "failpoint")),
    ("disarm-failpoint", ("close", "failpoint")), ("crash-at", ("instant", "crash")),
    ("corrupt-file", ("instant", "disk-crash")),
], ids=lambda x: str(x))
def test_nemesis_verb_table(f: str, expected: Any) -> None:
    assert nemesis_verb(f) == expected


@pytest.mark.parametrize(("value", "expected"), [
    (["b1", "b2"], ("b1", "b2")), ({"targets": ["c1"]}, ("c1",)), ({"nodes": "b3"}, ("b3",)), ("b1", ("b1",)),
    ({"grudge": {"b1": ["b2"]}}, ()), (None, ()),
], ids=["list", "targets-key", "nodes-key", "bare-string", "grudge-only", "none"])
def test_targets_of(value: Any, expected: tuple[str, ...]) -> None:
    assert targets_of(value) == expected


def test_invoke_and_completion_pairs_make_one_window_ending_at_the_heal_completion() -> None:
    ops = [nem(100, "invoke", "start-partition", {"targets": ["b1"]}), nem(110, "info", "start-partition", ["b1"]),
           nem(500, "invoke", "stop-partition"), nem(520, "info", "stop-partition")]
    assert fault_windows(ops, last_time_ns=1000) == [FaultWindow(0, "partition", ("b1",), 100, 520, True)]


def test_two_kinds_overlap_and_heal_closes_everything_open() -> None:
    ops = [nem(10, "info", "kill", ["b1"]), nem(20, "info", "start-partition", ["b2"]), nem(30, "info", "heal")]
    ws = fault_windows(ops, last_time_ns=99)
    assert [(w.seq, w.kind, w.start_ns, w.end_ns, w.healed) for w in ws] == [
        (0, "kill", 10, 30, True), (1, "partition", 20, 30, True)]


def test_unhealed_window_ends_at_last_op_and_same_kind_reopens() -> None:
    ops = [nem(10, "info", "start-pause"), nem(40, "info", "stop-pause"), nem(60, "info", "start-pause")]
    ws = fault_windows(ops, last_time_ns=90)
    assert [(w.start_ns, w.end_ns, w.healed) for w in ws] == [(10, 40, True), (60, 90, False)]
    assert "never healed" in ws[1].describe()


def test_window_end_before_start_is_rejected() -> None:
    with pytest.raises(ValueError, match="end_ns 5 < start_ns 10"):
        FaultWindow(0, "kill", (), 10, 5, True)


@pytest.mark.parametrize(("t", "expected"), [(0, -1), (9, -1), (10, 0), (25, 0), (30, 1), (1000, 2)])
def test_window_seq_is_latest_start_at_or_before(t: int, expected: int) -> None:
    assert window_seq([10, 30, 50], t) == expected


def test_instant_faults_span_their_own_invocation_to_completion() -> None:
    ops = [nem(100, "invoke", "crash-at", {"targets": "c1"}), nem(900, "info", "crash-at", {"nodes": {}}),
           nem(1000, "invoke", "kill", ["b1"]), nem(1010, "info", "kill", ["b1"]),
           nem(2000, "invoke", "start", None), nem(2300, "info", "start", ["b1"])]
    ws = fault_windows(ops, last_time_ns=5000)
    assert [(w.kind, w.start_ns, w.end_ns, w.healed) for w in ws] == [("crash", 100, 900, True),
                                                                      ("kill", 1000, 2300, True)]


def test_faults_that_did_not_take_effect_open_no_window() -> None:
    ops = [nem(100, "invoke", "crash-at", {"name": "raft.before_apply"}),
           {**nem(200, "info", "crash-at", {"name": "raft.before_apply"}), "effective": False, "why": "not reached"},
           nem(300, "invoke", "kill", "one"), {**nem(310, "info", "kill", ["c1"]), "effective": True},
           nem(400, "invoke", "start"), {**nem(420, "info", "start", []), "effective": False}]
    assert fault_windows(ops, last_time_ns=1000) == [FaultWindow(0, "kill", ("c1",), 300, 420, True)]
