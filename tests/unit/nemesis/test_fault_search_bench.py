"""bench/fault_search.py's pure parts: what counts as found, coverage at a time, the summaries, bad flags."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench" / "fault_search.py"
_spec = importlib.util.spec_from_file_location("fault_search", BENCH)
assert _spec is not None and _spec.loader is not None
fs: Any = importlib.util.module_from_spec(_spec)
sys.modules["fault_search"] = fs
_spec.loader.exec_module(fs)


def test_every_planted_bug_and_both_unsafe_settings_are_cases() -> None:
    from harness.cluster import KNOWN_BUGS

    bugs = {b for c in fs.CASES.values() for b in c.cluster.get("bugs", [])}
    assert bugs == set(KNOWN_BUGS)
    assert {"unclean-election", "no-all-ack"} <= set(fs.CASES)


@pytest.mark.parametrize(("doc", "case", "expected"), [
    ({"valid": False, "anomaly_counts": {"lost-write": 2}}, "unclean-election", True),
    ({"valid": False, "anomaly_counts": {"nonmonotonic-send": 2, "lost-write": 0}}, "unclean-election", False),
    ({"valid": False, "anomaly_counts": {}}, "stale-read", True),
    ({"valid": "unknown"}, "stale-read", False),
], ids=["lost", "other-anomaly", "invalid", "unknown"])
def test_found(doc: dict[str, Any], case: str, expected: bool) -> None:
    assert fs.found(doc, fs.CASES[case]) is expected


def test_coverage_at_and_summaries() -> None:
    doc = {"coverage": {"over_time": [[1.0, 3], [5.0, 9], [31.0, 12]]}}
    assert fs.coverage_at(doc, 30.0) == 9 and fs.coverage_at({}, 30.0) == 0
    searches = [{"found": True, "detect_s": 30.0, "detect_wall_s": 40.0},
                {"found": True, "detect_s": 90.0, "detect_wall_s": 120.0},
                {"found": False, "detect_s": None, "detect_wall_s": 200.0}]
    s = fs.summarize(searches, 180.0)
    assert (s["found"], s["found_fraction"], s["median_detect_s"], s["median_or_budget_s"]) == (2, 0.667, 60.0, 90.0)
    per_case = {"a": {"random": {"median_or_budget_s": 180.0, "found_fraction": 0.0},
                      "guided": {"median_or_budget_s": 60.0, "found_fraction": 1.0}}}
    assert fs.figures(per_case, ["random", "guided"], 180.0)["speedup_median"] == 3.0


@pytest.mark.parametrize("argv", [["--cases", "nope"], ["--modes", "smart"], ["--seeds", "0"],
                                  ["--budget-s", "10", "--run-s", "30"]])
def test_bad_flags_exit_2_before_running(argv: list[str]) -> None:
    out = subprocess.run([sys.executable, str(BENCH), *argv], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stdout == "" and "Traceback" not in out.stderr


@pytest.mark.parametrize("name", sorted(fs.CASES))
def test_every_case_spec_is_valid(name: str) -> None:
    from harness.commands._parts import validate_spec
    from harness.spec import spec_from_dict

    raw = fs.spec_for(name, fs.CASES[name], run_s=30, interval_s=5)
    for mode in ("random", "guided"):
        validate_spec(spec_from_dict({**raw, "nemesis": {**raw["nemesis"], "mode": mode}, "seed": 1}, file=name))
