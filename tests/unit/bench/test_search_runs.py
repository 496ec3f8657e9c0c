"""bench/search_runs.py, the parts the search benches share, beyond what the fault_search bench's tests cover:
anomaly kinds that do not count (``ignore``) and the anomaly kinds of a run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from bench import search_runs as sr

S = 1_000_000_000


def _doc(valid: Any, counts: dict[str, int], checkers: dict[str, Any] | None = None) -> dict[str, Any]:
    """A results.json; without ``checkers``, one checker per counted kind, failing when the run is invalid."""
    if checkers is None:
        checkers = {f"w/{k}": {"valid": valid, "anomaly_counts": {k: n}} for k, n in counts.items() if n}
    return {"valid": valid, "anomaly_counts": counts, "anomaly_examples": {}, "checkers": checkers,
            "main_phase_start_ns": 10 * S, "main_phase_end_ns": 40 * S}


IGNORE = frozenset({"unavailable"})


@pytest.mark.parametrize(("doc", "expected"), [
    (_doc(False, {"unavailable": 2}), False),
    (_doc(False, {"unavailable": 2, "lost-write": 1}), True),
    (_doc(False, {"lost-write": 1, "unavailable": 0}), True),
    (_doc(False, {}), True),  # invalid with no kind counted: it counts (nothing says it was only unavailability)
    (_doc(True, {"unavailable": 1}), False),
    (_doc("unknown", {}), False),
], ids=["only-ignored", "ignored-and-other", "zero-ignored", "no-kinds", "valid", "unknown"])
def test_a_run_invalid_only_through_ignored_kinds_does_not_count(doc: dict[str, Any], expected: bool) -> None:
    assert sr.shows(doc, frozenset(), ignore=IGNORE) is expected
    assert sr.shows(doc, frozenset()) is (doc["valid"] is False)  # without ignore: any invalid verdict


def test_kinds_a_valid_checker_counted_are_not_why_a_run_is_invalid() -> None:
    checkers = {"availability": {"valid": False, "anomaly_counts": {"unavailable": 1}},
                "queue/queue": {"valid": True, "anomaly_counts": {"unseen": 5}}}
    doc = _doc(False, {"unavailable": 1, "unseen": 5}, checkers)
    assert sr.failing_kinds(doc) == ["unavailable"] and sr.anomaly_kinds(doc) == ["unavailable"]
    assert sr.shows(doc, frozenset(), ignore=IGNORE) is False
    crashed = _doc(False, {}, {"queue/stats": {"valid": False, "anomaly_counts": {}}})
    assert sr.failing_kinds(crashed) == ["queue/stats"] and sr.shows(crashed, frozenset(), ignore=IGNORE)
    at_setup = {**crashed, "crashed": "TimeoutError: broker b1-2 exited during start"}
    assert sr.failing_kinds(at_setup) == ["crashed"] and sr.shows(at_setup, frozenset(), ignore=IGNORE)
    with_kind = {**at_setup, "checkers": {**crashed["checkers"], "q": {"valid": False, "anomaly_counts": {"lost": 2}}}}
    assert sr.failing_kinds(with_kind) == ["crashed", "lost"]


def test_detection_skips_the_records_of_ignored_kinds() -> None:
    ops = [{"index": 1, "time": 12 * S, "type": "ok"}, {"index": 2, "time": 30 * S, "type": "ok"}]
    checkers = {"availability": {"valid": False, "anomaly_counts": {"unavailable": 1},
                                 "anomaly_examples": {"unavailable": [{"ops": [1]}]}},
                "queue": {"valid": False, "anomaly_counts": {"lost-write": 1},
                          "anomaly_examples": {"lost-write": [{"ops": [2]}]}}}
    doc = _doc(False, {"unavailable": 1, "lost-write": 1}, checkers)
    assert sr.detection_s(doc, ops, run_s=30) == 2.0
    assert sr.detection_s(doc, ops, run_s=30, ignore=IGNORE) == 20.0
    only = _doc(False, {"unavailable": 1}, {"availability": checkers["availability"]})
    assert sr.detection_s(only, ops, run_s=30, ignore=IGNORE) is None


def test_anomaly_kinds_lists_the_counted_kinds_sorted() -> None:
    assert sr.anomaly_kinds(_doc(False, {"lost-write": 2, "duplicate": 1, "unseen": 0})) == ["duplicate", "lost-write"]
    assert sr.anomaly_kinds({}) == []


def test_cpu_seconds_from_proc_stat_with_spaces_and_parentheses_in_the_name() -> None:
    fields = ["S"] + ["0"] * 10 + ["250", "50"] + ["0"] * 30  # utime, stime: fields 14 and 15
    stat = "4242 (py (thon) x) " + " ".join(fields)
    assert sr.proc_cpu_s(stat, 100.0) == 3.0


def _seed(valid: Any, kinds: dict[str, int] | None = None) -> dict[str, Any]:
    return _doc(valid, kinds or {})

_OUTCOMES = st.sampled_from(["valid", "unknown", "ignored", "found"])


@given(st.lists(st.tuples(_OUTCOMES, st.floats(0.1, 20.0)), max_size=30), st.floats(1.0, 200.0))
def test_sim_tally_counts_only_seeds_within_the_budget_and_stops_at_the_first_find(
        seeds: list[tuple[str, float]], budget: float) -> None:
    tally = sr.SimTally(budget, IGNORE)
    docs = {"valid": _seed(True), "unknown": _seed("unknown"), "ignored": _seed(False, {"unavailable": 1}),
            "found": _seed(False, {"lost-write": 1})}
    cpu = 0.0
    counted: list[str] = []
    for i, (outcome, cost) in enumerate(seeds):
        cpu += cost
        over = tally.observe(sim_seed=i, cpu_s=cpu, simulated_s=60.0, doc=docs[outcome], detect_in_seed_s=5.0)
        if cpu <= budget:
            counted.append(outcome)
        if over:
            break
    assert tally.seeds_run == len(counted) and tally.simulated_s == 60.0 * len(counted)
    first_find = counted.index("found") if "found" in counted else None
    if first_find is not None:
        assert tally.stop == "found" and tally.found is not None
        assert tally.found["sim_seed"] == first_find and tally.found["anomalies"] == ["lost-write"]
        assert tally.found["simulated_s_to_detect"] == 60.0 * first_find + 5.0
        assert len(counted) == first_find + 1
    else:
        assert tally.found is None
        assert tally.stop in (None, "budget")
    assert tally.ignored_seeds == [i for i, o in enumerate(counted) if o == "ignored"]
    assert tally.unknown_seeds == [i for i, o in enumerate(counted) if o == "unknown"]
    record = tally.result(7, wall_s=1.0)
    assert record["found"] is (first_find is not None) and record["budget_unit"] == "cpu_s"


def test_sim_tally_reports_a_crash_of_the_simulated_cluster_as_found_and_named() -> None:
    tally = sr.SimTally(10.0)
    tally.observe(sim_seed=0, cpu_s=1.0, simulated_s=60.0, doc=_seed(True))
    tally.crashed(sim_seed=1, cpu_s=2.0, error="KeyError: 3")
    record = tally.result(1, wall_s=2.0)
    assert record["found"] and record["anomalies"] == ["crash"] and record["crash"] == "KeyError: 3"
    assert record["stop"] == "crash" and record["sim_seed"] == 1
    with pytest.raises(RuntimeError):
        tally.observe(sim_seed=2, cpu_s=3.0, simulated_s=60.0, doc=_seed(True))
    assert sr.SimTally(10.0).result(1, wall_s=0.0, error="boom")["status"] == "error"
    with pytest.raises(ValueError, match="budget_cpu_s"):
        sr.SimTally(0.0)
