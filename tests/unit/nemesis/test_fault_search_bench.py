"""bench/fault_search.py's pure parts: what counts as found, when it was seen, coverage at a time, the censored
summaries and bounded speedups, the table, bad flags."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

BENCH = Path(__file__).resolve().parents[3] / "bench" / "fault_search.py"
_spec = importlib.util.spec_from_file_location("fault_search", BENCH)
assert _spec is not None and _spec.loader is not None
fs: Any = importlib.util.module_from_spec(_spec)
sys.modules["fault_search"] = fs
_spec.loader.exec_module(fs)


def test_every_planted_bug_and_both_unsafe_settings_are_cases() -> None:
    from systems.splitbrain.options import KNOWN_BUGS

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


S = 1_000_000_000  # ns per second; the main phase below starts at 10 s and lasts 30 s


def _op(i: int, t_s: float, type_: str = "ok", f: str = "send") -> dict[str, Any]:
    return {"index": i, "time": int(t_s * S), "type": type_, "process": 0, "f": f, "value": None}


OPS = [_op(0, 5, "invoke"), _op(1, 5.5), _op(2, 12, "invoke"), _op(3, 14), _op(4, 20, "invoke"), _op(5, 21.25),
       _op(6, 25, "invoke"), _op(7, 26), _op(8, 45, "invoke"), _op(9, 46, f="drain")]


def _doc(valid: Any = False, counts: dict[str, int] | None = None, examples: dict[str, Any] | None = None,
         checkers: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"valid": valid, "anomaly_counts": counts or {}, "anomaly_examples": examples or {},
            "checkers": checkers or {}, "main_phase_start_ns": 10 * S, "main_phase_end_ns": 40 * S}


def _rec(type_: str, ops: list[int]) -> dict[str, Any]:
    return {"type": type_, "key": "t/bs1/0", "ops": ops, "expected": None, "observed": None, "explanation": "x"}


LOST = frozenset({"lost-write"})


def test_detection_none_without_the_anomaly() -> None:
    assert fs.detection_s(_doc(valid=True), OPS, kinds=LOST, run_s=30) is None
    other = _doc(counts={"duplicate": 1}, examples={"duplicate": [_rec("duplicate", [2, 3])]})
    assert fs.detection_s(other, OPS, kinds=LOST, run_s=30) is None
    assert fs.detection_s(_doc(valid="unknown"), OPS, run_s=30) is None


def test_detection_is_the_earliest_cited_completion_from_the_main_phase_start() -> None:
    # lost-write cites (send invoke, send ack, max poll): the ack at 14 s is 4 s into the phase; the second
    # record's ack (21.25 s) is later, and the invoke at 12 s is not a completion
    doc = _doc(counts={"lost-write": 2}, examples={"lost-write": [_rec("lost-write", [4, 5, 9]),
                                                                  _rec("lost-write", [2, 3, 9])]})
    assert fs.detection_s(doc, OPS, kinds=LOST, run_s=30) == 4.0


def test_detection_uses_invokes_only_for_a_record_citing_nothing_else() -> None:
    doc = _doc(counts={"lost-write": 2}, examples={"lost-write": [_rec("lost-write", [6]),
                                                                  _rec("lost-write", [4, 7])]})
    assert fs.detection_s(doc, OPS, kinds=LOST, run_s=30) == 15.0  # the invoke at 25 s beats the ok at 26 s


def test_detection_without_op_indices_falls_back_to_the_attempts_end() -> None:
    no_ops = _doc(counts={"lost-write": 1}, examples={"lost-write": [_rec("lost-write", [])]})
    assert fs.detection_s(no_ops, OPS, kinds=LOST, run_s=30) == 30.0
    unknown_index = _doc(counts={"lost-write": 1}, examples={"lost-write": [_rec("lost-write", [-1, 99])]})
    assert fs.detection_s(unknown_index, OPS, kinds=LOST, run_s=30) == 30.0
    assert fs.detection_s(_doc(counts={"lost-write": 1}), OPS, kinds=LOST, run_s=30) == 30.0  # no records kept
    no_start = {**no_ops, "main_phase_start_ns": None, "main_phase_end_ns": None}
    assert fs.detection_s(no_start, OPS, kinds=LOST, run_s=25) == 25.0  # no phase recorded: the nominal length


def test_detection_is_clamped_to_the_main_phase() -> None:
    before = _doc(counts={"lost-write": 1}, examples={"lost-write": [_rec("lost-write", [0, 1])]})
    assert fs.detection_s(before, OPS, kinds=LOST, run_s=30) == 0.0
    in_drain = _doc(counts={"lost-write": 1}, examples={"lost-write": [_rec("lost-write", [9])]})
    assert fs.detection_s(in_drain, OPS, kinds=LOST, run_s=30) == 30.0


def test_detection_over_several_checkers() -> None:
    # no expected kinds: only the failing checkers' records count (the passing one cites an earlier op), and a
    # record kept only in a checker's own examples is read
    checkers = {"queue": {"valid": True, "anomaly_examples": {"unseen": [_rec("unseen", [3])]}},
                "lin": {"valid": False, "anomaly_examples": {"nonlinearizable": [_rec("nonlinearizable", [7, 5])]}},
                "inv": {"valid": False, "anomaly_examples": {"write-on-fenced-master": [_rec("x", [])]}}}
    doc = _doc(counts={"unseen": 1, "nonlinearizable": 1, "write-on-fenced-master": 1}, checkers=checkers)
    assert fs.detection_s(doc, OPS, run_s=30) == 11.25
    # with expected kinds, records of those kinds in any checker count, merged or not
    kinds = frozenset({"lost-write", "stale-epoch-accepted"})
    doc = _doc(counts={"lost-write": 1, "stale-epoch-accepted": 1},
               examples={"lost-write": [_rec("lost-write", [7])]},
               checkers={"a": {"valid": False, "anomaly_examples": {"lost-write": [_rec("lost-write", [7])]}},
                         "b": {"valid": False, "anomaly_examples": {"stale-epoch-accepted": [_rec("s", [3])]}}})
    assert fs.detection_s(doc, OPS, kinds=kinds, run_s=30) == 4.0


def test_main_phase_s() -> None:
    assert fs.main_phase_s(_doc(), 25.0) == 30.0 and fs.main_phase_s({}, 25.0) == 25.0


def test_coverage_at() -> None:
    doc = {"coverage": {"over_time": [[1.0, 3], [5.0, 9], [31.0, 12]]}}
    assert fs.coverage_at(doc, 30.0) == 9 and fs.coverage_at({}, 30.0) == 0


def _searches(*times: float | None) -> list[dict[str, Any]]:
    return [{"found": t is not None, "detect_s": t, "detect_wall_s": 1.0} for t in times]


def test_summary_reports_the_median_only_when_more_than_half_found() -> None:
    s = fs.summarize(_searches(30.5, 90.0, None), 180.0)
    assert (s["found"], s["found_fraction"], s["median_detect_s"], s["median_censored"]) == (2, 0.667, 90.0, False)
    assert s["detect_s_each"] == [30.5, 90.0, None]
    assert fs.summarize(_searches(12.0, 20.0, None, None), 180.0)["median_censored"] is True
    half = fs.summarize(_searches(12.0, None), 180.0)
    assert (half["median_detect_s"], half["median_censored"]) == (None, True)
    assert fs.summarize(_searches(12.0, 20.0, 40.0, None), 180.0)["median_detect_s"] == 30.0
    none = fs.summarize([], 180.0)
    assert (none["median_detect_s"], none["median_censored"], none["found_fraction"]) == (None, False, None)


def test_speedup_is_exact_or_bounded_by_the_budget() -> None:
    def case(r: list[float | None], g: list[float | None]) -> dict[str, Any]:
        return {"random": fs.summarize(_searches(*r), 180.0), "guided": fs.summarize(_searches(*g), 180.0)}

    per_case = {"exact": case([60.0], [20.0]), "random-censored": case([None], [30.0]),
                "guided-censored": case([90.0], [None]), "both": case([None], [None])}
    out = fs.figures(per_case, ["random", "guided"])
    sp = out["speedup_per_case"]
    assert sp["exact"] == {"value": 3.0, "at_least": 3.0, "at_most": 3.0}
    assert sp["random-censored"] == {"value": None, "at_least": 6.0, "at_most": None}
    assert sp["guided-censored"] == {"value": None, "at_least": 0.0, "at_most": 0.5}
    assert sp["both"] == {"value": None, "at_least": 0.0, "at_most": None}
    # medians of the bounds: lows (3, 6, 0, 0) -> 1.5, highs (3, inf, 0.5, inf) -> inf
    assert (out["speedup_median"], out["speedup_median_at_least"], out["speedup_median_at_most"]) == (None, 1.5, None)
    assert out["guided_min_found_fraction"] == 0.0
    exact = fs.figures({"a": case([60.0, 90.0, 30.0], [20.0, 10.0, None])}, ["random", "guided"])
    assert (exact["speedup_median"], exact["speedup_median_at_least"]) == (3.0, 3.0)


def _both(r: list[float | None], g: list[float | None]) -> dict[str, Any]:
    return {"random": fs.summarize(_searches(*r), 180.0), "guided": fs.summarize(_searches(*g), 180.0)}


def test_speedup_median_needs_faults_leaves_out_the_cases_found_without_faults_beside_the_whole() -> None:
    # speedups 4, 3, 1, 1: all four -> median 2; without the two no-fault cases -> median 3.5
    per_case = {"a": _both([80.0], [20.0]), "b": _both([60.0], [20.0]), "c": _both([5.0], [5.0]),
                "d": _both([2.0], [2.0])}
    out = fs.figures(per_case, ["random", "guided"], no_faults_needed={"c", "d"})
    assert (out["speedup_median"], out["speedup_median_needs_faults"]) == (2.0, 3.5)
    assert out["needs_faults_cases"] == ["a", "b"]
    assert (out["speedup_median_needs_faults_at_least"], out["speedup_median_needs_faults_at_most"]) == (3.5, 3.5)
    censored = fs.figures({**per_case, "a": _both([None], [20.0])}, ["random", "guided"], no_faults_needed={"c", "d"})
    assert (censored["speedup_median_needs_faults"], censored["speedup_median_needs_faults_at_least"],
            censored["speedup_median_needs_faults_at_most"]) == (None, 6.0, None)  # (9 + 3) / 2 .. unbounded
    none_need = fs.figures({"c": per_case["c"]}, ["random", "guided"], no_faults_needed={"c"})
    assert none_need["needs_faults_cases"] == [] and none_need["speedup_median_needs_faults_at_least"] is None
    assert none_need["speedup_median"] == 1.0


def test_by_default_the_cases_marked_as_needing_no_faults_are_left_out() -> None:
    no_faults = {n for n, c in fs.CASES.items() if not c.needs_faults}
    assert no_faults == {"reuse-broker-id", "no-epoch-fencing"}
    out = fs.figures({n: _both([60.0], [20.0]) for n in fs.CASES}, ["random", "guided"])
    assert out["needs_faults_cases"] == [n for n in fs.CASES if n not in no_faults]


def test_table_says_greater_than_budget_for_a_censored_median() -> None:
    cases = {"unclean-election": {"random": fs.summarize(_searches(None, None, 50.0), 180.0),
                                  "guided": fs.summarize(_searches(12.5, 30.0, None), 180.0)}}
    doc = {"config": {"cases": ["unclean-election"], "modes": ["random", "guided"], "seeds": 3, "budget_s": 180.0,
                      "run_s": 30.0, "coverage_s": 30.0}, "minutes": 1.0, "cases": cases,
           "coverage_at_s": {"random": 10.0, "guided": 12.0}, **fs.figures(cases, ["random", "guided"])}
    text = "\n".join(fs.table(doc))
    assert "> 180 s" in text and "30.0 s" in text and "- - 50.0" in text and "12.5 30.0 -" in text
    assert ">= 6.0" in text and "target >= 2.0: met" in text and "target found >= 0.8: missed" in text
    assert "median across the cases that need faults: unclean-election): >= 6.0" in text
    old_doc = {k: v for k, v in doc.items() if not k.startswith(("speedup_median_needs", "needs_faults"))}
    assert "need faults" not in "\n".join(fs.table(old_doc))  # a document from before the field still prints


@pytest.mark.parametrize("argv", [["--cases", "nope"], ["--modes", "smart"], ["--seeds", "0"],
                                  ["--budget-s", "10", "--run-s", "30"]])
def test_bad_flags_exit_2_before_running(argv: list[str]) -> None:
    out = subprocess.run([sys.executable, str(BENCH), *argv], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stdout == "" and "Traceback" not in out.stderr


TRIGGER_OPS_OFF = {"controller-register": {"follower_read_fraction": 0.0}, "broker-ids": {"failpoints": 0}}
"""Workload options that, left on, make the workload inject a planted bug's trigger itself: reads sent to a named
follower (stale-read) and lanes that crash brokers at each registration failpoint (non-atomic-meta)."""


@pytest.mark.parametrize("name", sorted(fs.CASES))
def test_every_case_spec_is_valid(name: str) -> None:
    from harness.commands._parts import validate_spec
    from harness.spec import spec_from_dict
    from nemesis.packages import KINDS

    case = fs.CASES[name]
    raw = fs.spec_for(name, case, run_s=30, interval_s=5)
    for mode in ("random", "guided"):
        validate_spec(spec_from_dict({**raw, "nemesis": {**raw["nemesis"], "mode": mode}, "seed": 1}, file=name))
    assert raw["nemesis"]["packages"] == list(case.packages) and set(case.packages) <= set(KINDS)
    if case.needs_faults:  # the nemesis must create the trigger, so the workload's own trigger ops are off
        for key, off in TRIGGER_OPS_OFF.get(case.workload["name"], {}).items():
            assert case.workload.get("options", {}).get(key) == off, f"{name}: workload option {key}"


@given(st.lists(st.tuples(st.sampled_from(["lost-write", "duplicate"]),
                          st.lists(st.integers(min_value=-2, max_value=12), max_size=4)), max_size=6),
       st.sampled_from([True, False, "unknown"]))
def test_detection_is_none_iff_not_found_else_within_the_main_phase(recs: list[Any], valid: Any) -> None:
    examples: dict[str, list[Any]] = {}
    for t, ops in recs:
        examples.setdefault(t, []).append(_rec(t, ops))
    doc = _doc(valid=valid, counts={t: len(r) for t, r in examples.items()}, examples=examples,
               checkers={"q": {"valid": valid, "anomaly_examples": examples}})
    for case in ("unclean-election", "stale-read"):
        at = fs.detection_s(doc, OPS, kinds=fs.CASES[case].expect, run_s=30)
        assert (at is None) is (not fs.found(doc, fs.CASES[case]))
        assert at is None or 0.0 <= at <= 30.0


def _part(cases: dict[str, dict[str, list[float | None]]], *, budget: float = 180.0, run: float = 30.0,
          first_seed: int = 1, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    raw = {name: {mode: [{**s, "seed": first_seed + i} for i, s in enumerate(_searches(*times))]
                  for mode, times in by_mode.items()} for name, by_mode in cases.items()}
    cfg = {"cases": list(cases), "modes": ["random", "guided"], "seeds": 1, "budget_s": budget, "run_s": run,
           "interval_s": 5.0, "coverage_s": 30.0, "commit": "abc", "case_specs": {n: spec for n in cases}}
    return fs.build_doc(raw, cfg, minutes=2.0)


def test_merged_parts_report_as_one_run() -> None:
    a = _part({"unclean-election": {"random": [None, 90.0], "guided": [20.0, 40.0]}})
    b = _part({"unclean-election": {"random": [None], "guided": [30.0]},
               "no-all-ack": {"random": [60.0], "guided": [20.0]}}, first_seed=3)
    doc = fs.merge([("a.json", a), ("b.json", b)])
    whole = _part({"unclean-election": {"random": [None, 90.0, None], "guided": [20.0, 40.0, 30.0]},
                   "no-all-ack": {"random": [60.0], "guided": [20.0]}})
    assert doc["cases"] == whole["cases"]
    assert doc["speedup_per_case"] == whole["speedup_per_case"]
    assert doc["minutes"] == 4.0 and [m["file"] for m in doc["config"]["merged_from"]] == ["a.json", "b.json"]
    assert "\n".join(fs.table(doc))  # a merged document prints like a run's


@pytest.mark.parametrize(("b", "message"), [
    (_part({"no-all-ack": {"random": [1.0]}}, budget=120.0), "config.budget_s is 120.0"),
    (_part({"unclean-election": {"guided": [5.0]}}), "seed 1 is already in an earlier part"),
    (_part({"unclean-election": {"guided": [5.0]}}, first_seed=2, spec={"rate": 1}), "case_specs.unclean-election"),
    ({"config": {}}, "not a fault_search --json document"),
], ids=["other-budget", "same-seed", "other-spec", "not-bench"])
def test_merge_refuses_parts_that_do_not_belong_together(b: dict[str, Any], message: str) -> None:
    a = _part({"unclean-election": {"guided": [20.0]}})
    with pytest.raises(fs.MergeError, match=message):
        fs.merge([("a.json", a), ("b.json", b)])


def test_merge_of_unreadable_files_exits_2_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "part.json"
    bad.write_text("not json\n")
    for path in (bad, tmp_path / "missing.json"):
        out = subprocess.run([sys.executable, str(BENCH), "--merge", str(path)], capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 2 and str(path) in out.stderr and "Traceback" not in out.stderr


def test_progress_resumes_finished_searches_under_the_same_settings_only(tmp_path: Path) -> None:
    path = tmp_path / "progress.jsonl"
    settings = {"budget_s": 180.0, "run_s": 30.0, "interval_s": 5.0, "coverage_s": 30.0}
    spec = fs.spec_for("no-all-ack", fs.CASES["no-all-ack"], run_s=30, interval_s=5)
    p = fs.Progress(path, settings)
    p.add("no-all-ack", "guided", spec, {"seed": 2, "found": True, "detect_s": 12.0})
    with path.open("a") as f:
        f.write('{"case": "no-all-ack", "mode": "random", "sett')  # cut by a crash mid-line
    again = fs.Progress(path, settings)
    assert again.get("no-all-ack", "guided", 2, spec) == {"seed": 2, "found": True, "detect_s": 12.0}
    assert again.get("no-all-ack", "random", 2, spec) is None and again.get("no-all-ack", "guided", 1, spec) is None
    assert fs.Progress(path, {**settings, "budget_s": 120.0}).get("no-all-ack", "guided", 2, spec) is None
    changed = {**spec, "rate": 80.0}
    assert again.get("no-all-ack", "guided", 2, changed) is None
