"""harness/gate_outcome.py: a cell's kind, a run as the gate observes it, and the per-fault figures."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from checker.perf import WRITE_FS, write_gap_s
from harness.gate_outcome import cell_kind, fault_figures, recorded_figures, run_outcome
from systems.options import PlainOptions
from systems.splitbrain.options import ClusterOptions


@pytest.mark.parametrize(("options", "kind"), [
    (ClusterOptions(), "safety"),
    (ClusterOptions(flush="async", lease_timeout_ms=5000), "safety"),
    (ClusterOptions(bugs=("stale-read",)), "rate"),
    (ClusterOptions(enable_elect_unclean_master=True), "rate"),
    (ClusterOptions(all_ack_in_sync_state_set=False), "rate"),
    (PlainOptions(system_options={"wait_replicas": 0}), "safety"),
], ids=["defaults", "other-safe-options", "planted-bug", "unclean-election", "no-all-ack", "no-such-settings"])
def test_only_the_safe_settings_make_a_safety_cell(options: object, kind: str) -> None:
    assert cell_kind(options) == kind


@pytest.mark.parametrize(("writes", "start", "end", "expected"), [
    ([0.5, 1.0, 4.0, 4.5, 5.0, 5.5, 6.5], 1.2, 6.0, 2.8),  # a kill at 1.2: no write until 4.0
    ([0.5, 1.0, 2.0, 5.5], 1.2, 3.0, 3.5),      # the longest stretch overlapping the window ends after it
    ([0.5, 1.0], 1.2, 3.0, 8.8),                # writes never resumed: open until the history's end (10)
    ([], 1.0, 2.0, 9.0),
    ([1.0, 1.1, 1.2, 1.3], 1.05, 1.25, 0.1),
])
def test_the_write_gap_is_the_longest_stretch_without_a_write(writes: list[float], start: float, end: float,
                                                               expected: float) -> None:
    assert write_gap_s(writes, start, end, 10.0) == pytest.approx(expected)


@given(st.lists(st.floats(0, 100, allow_nan=False), max_size=30).map(sorted), st.floats(0, 100), st.floats(0, 50))
def test_the_write_gap_is_bounded_and_grows_when_a_write_is_lost(writes: list[float], start: float,
                                                                 length: float) -> None:
    end, horizon = start + length, 200.0
    gap = write_gap_s(writes, start, end, horizon)
    assert 0 <= gap <= horizon - start
    for i in range(len(writes)):
        fewer = writes[:i] + writes[i + 1:]
        assert write_gap_s(fewer, start, end, horizon) >= gap - 1e-9


def _op(i: int, t: float, typ: str, f: str, process: Any = 0, value: Any = None) -> dict[str, Any]:
    return {"index": i, "time": int(t * 1e9), "type": typ, "process": process, "f": f, "value": value}


def _history() -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = []
    t, i = 0.0, 0
    while t < 10:  # one send every 0.1 s, taking 10 ms; none succeeds between the kill (2 s) and 5 s
        ok = not 2.0 <= t < 5.0
        ops += [_op(i, t, "invoke", "send"), _op(i + 1, t + 0.01, "ok" if ok else "fail", "send")]
        i, t = i + 2, round(t + 0.1, 3)
    ops += [_op(i, 2.0, "invoke", "kill", "nemesis", "masters"), _op(i + 1, 2.0, "info", "kill", "nemesis"),
            _op(i + 2, 8.0, "invoke", "start", "nemesis"), _op(i + 3, 8.0, "info", "start", "nemesis")]
    return sorted(ops, key=lambda o: (o["time"], o["index"]))


def test_figures_per_fault_kind_come_from_the_history() -> None:
    assert "send" in WRITE_FS and "poll" not in WRITE_FS
    figures = fault_figures(_history())
    assert set(figures) == {"kill"}
    kill = figures["kill"]
    assert kill.unavailable_s == pytest.approx(3.01, abs=1e-6)  # 2.0 -> the first ok send at 5.01
    assert kill.recovery_s == pytest.approx(0.01, abs=1e-6)  # healed at 8.0, next ok completion at 8.01
    assert kill.p99_latency_ms == pytest.approx(10.0, abs=1e-3)


def test_recorded_figures_are_preferred_and_equal_to_the_history_s() -> None:
    from checker.perf import analyze_perf

    perf = analyze_perf(_history(), ".", plots=False)
    recorded = recorded_figures({"perf": perf})
    assert recorded == fault_figures(_history())
    assert recorded_figures({"perf": {"availability": []}}) is None  # a run from before by_fault_kind
    out = run_outcome(cell="c", build="baseline", seed=1, results={"valid": True, "perf": perf}, history=None,
                      ref="r")
    assert out.faults["kill"].unavailable_s == pytest.approx(3.01, abs=1e-6)


@pytest.mark.parametrize(("results", "verdict", "kinds"), [
    (None, "crashed", ()),
    ({"crashed": True, "valid": "unknown"}, "crashed", ()),
    ({"valid": True, "checkers": {}}, "valid", ()),
    ({"valid": "unknown", "checkers": {}}, "unknown", ()),
    ({"valid": False, "checkers": {"queue/queue": {"valid": False, "anomaly_counts": {"lost": 2, "duplicate": 1}},
                                   "queue/perf": {"valid": True, "anomaly_counts": {"unseen": 3}}}},
     "invalid", ("duplicate", "lost")),
    ({"valid": False, "checkers": {"queue/stats": {"valid": False, "anomaly_counts": {}}}}, "invalid",
     ("queue/stats",)),
], ids=["no-results", "crashed", "valid", "unknown", "anomalies-of-failing-checkers-only", "nameless-failure"])
def test_a_run_as_the_gate_sees_it(results: Any, verdict: str, kinds: tuple[str, ...]) -> None:
    out = run_outcome(cell="c", build="candidate", seed=3, results=results, history=_history(), ref="r")
    assert (out.verdict, out.anomalies, out.seed, out.ref) == (verdict, kinds, 3, "r")
    assert (not out.faults) == (verdict == "crashed")
