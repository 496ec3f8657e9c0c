"""bench/search_runs.py, the parts the search benches share, beyond what the fault_search bench's tests cover:
anomaly kinds that do not count (``ignore``) and the anomaly kinds of a run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

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
