"""Why a run failed, in words (harness.explain) and in JUnit (harness.junit.junit_cases / write_junit)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from checker.compose import Anomaly, Result, results_to_json
from harness.explain import anomaly_lines, checker_verdicts, clip, crash_where, failure_message, summary_lines
from harness.junit import junit_cases, write_junit
from harness.store import RunDir


def _lost(i: int) -> Anomaly:
    return Anomaly("lost-write", f"t/bs1/{i}", (12 + i, 40 + i), "present", "absent",
                   f"send m{i} was acknowledged at offset {i} but no poll returned it")


def failing_doc() -> dict[str, Any]:
    return results_to_json({
        "queue": Result(valid=False, anomalies={"lost-write": [_lost(i) for i in range(7)],
                                                "duplicate": [Anomaly("duplicate", "t/bs1/0", (3,), 1, 2,
                                                                      "m9 appears at offsets 4 and 5")]}),
        "linear": Result(valid=False, anomalies={"nonlinearizable": [Anomaly(
            "nonlinearizable", "bs1", (8, 9), 12, 8, "GetNextBrokerId returned 8 but the next id is 12")]}),
        "perf": Result(valid=True),
        "stats": Result(valid="unknown", error="checker stats crashed: ZeroDivisionError\ntraceback..."),
    })


def test_failing_checkers_come_first_with_kinds_counts_and_first_explanation() -> None:
    vs = checker_verdicts(failing_doc())
    assert [v.name for v in vs] == ["linear", "queue", "stats", "perf"]
    linear, queue, stats, _ = vs
    assert linear.explanation == "GetNextBrokerId returned 8 but the next id is 12" and linear.ops == (8, 9)
    assert queue.anomalies == (("lost-write", 7), ("duplicate", 1))  # most frequent first
    assert queue.explanation == "send m0 was acknowledged at offset 0 but no poll returned it"
    assert stats.explanation == "checker stats crashed: ZeroDivisionError"  # the error's first line
    assert failure_message(queue) == ("lost-write x7, duplicate x1: send m0 was acknowledged at offset 0 but no poll "
                                      "returned it")


def test_summary_names_every_checker_the_crash_and_the_file_to_open() -> None:
    lines = summary_lines(failing_doc(), width=100, faults="kill 3/3, crash-at:raft.before_apply 0/2 (not reached)",
                          crash="RuntimeError: boom", where="harness/runner.py:180 in run_test",
                          look_at="results/x/20261125T000000.000Z/timeline.html")
    text = "\n".join(lines)
    assert lines[0] == "CRASHED: RuntimeError: boom (at harness/runner.py:180 in run_test)"
    assert "  INVALID linear: nonlinearizable x1" in lines
    assert "          GetNextBrokerId returned 8 but the next id is 12 (ops 8, 9)" in lines
    assert "  INVALID queue: lost-write x7, duplicate x1" in lines
    assert "  unknown stats: no anomaly recorded" in lines and "  valid   perf" in lines
    assert "faults: kill 3/3, crash-at:raft.before_apply 0/2 (not reached)" in text
    assert lines[-1] == "look at: results/x/20261125T000000.000Z/timeline.html"


def test_anomaly_lines_list_examples_and_say_how_many_more() -> None:
    lines = anomaly_lines(failing_doc(), "queue")
    assert lines[0] == "lost-write [t/bs1/0] ops=[12, 40]: send m0 was acknowledged at offset 0 but no poll returned it"
    assert "lost-write: 4 more not listed (7 in all)" in lines  # 3 examples kept per checker
    assert lines[-1] == "duplicate [t/bs1/0] ops=[3]: m9 appears at offsets 4 and 5"


def test_old_results_without_per_checker_examples_use_the_run_wide_ones() -> None:
    doc = failing_doc()
    for entry in doc["checkers"].values():
        entry.pop("anomaly_examples")
    (linear,) = [v for v in checker_verdicts(doc) if v.name == "linear"]
    assert linear.explanation == "GetNextBrokerId returned 8 but the next id is 12"


def test_junit_message_is_the_anomalies_and_the_body_lists_them(tmp_path: Path) -> None:
    run = RunDir(tmp_path, "t", tmp_path)
    write_junit(run, "t", failing_doc(), time_s=1.0, properties={"seed": "7", "faults": "kill 1/1"})
    suite = ET.parse(run.junit_xml).getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("4", "2", "1")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    failure = cases["queue"].find("failure")
    assert failure is not None and failure.get("message", "").startswith("lost-write x7, duplicate x1: send m0")
    assert "lost-write: 4 more not listed (7 in all)" in (failure.text or "") and "{" not in (failure.text or "")
    error = cases["stats"].find("error")
    assert error is not None and "ZeroDivisionError" in error.get("message", "")
    assert len(cases["perf"]) == 0
    assert {p.get("name"): p.get("value") for p in suite.iter("property")} == {"seed": "7", "faults": "kill 1/1"}


def test_crash_where_prefers_the_projects_own_innermost_frame() -> None:
    frames = [("harness/runner.py", 180, "run_test"), ("nemesis/faults.py", 42, "invoke"),
              ("/usr/lib/python3.11/asyncio/tasks.py", 500, "wait_for")]
    assert crash_where(frames) == "nemesis/faults.py:42 in invoke"
    assert crash_where([("/usr/lib/python3.11/x.py", 1, "f")]) == "/usr/lib/python3.11/x.py:1 in f"
    assert crash_where([]) == ""


# -- properties: a broken results.json still gets a summary and well-formed JUnit -------------------

_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                     lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3),
                     max_leaves=12)
_entry = st.fixed_dictionaries({}, optional={
    "valid": st.sampled_from([True, False, "unknown", None, 3]),
    "anomaly_counts": st.dictionaries(st.text(max_size=12), st.integers(-2, 9) | st.text(max_size=3), max_size=3),
    "anomaly_examples": st.dictionaries(st.text(max_size=12), st.lists(
        st.fixed_dictionaries({}, optional={"explanation": st.text(max_size=300), "ops": _json, "key": _json}),
        max_size=3), max_size=3),
    "error": st.none() | st.text(max_size=50),
}) | _json
_docs = st.fixed_dictionaries({}, optional={"checkers": st.dictionaries(st.text(max_size=10), _entry, max_size=4),
                                            "anomaly_examples": _json, "valid": _json})


@given(doc=_docs, width=st.integers(20, 200), crash=st.text(max_size=300))
def test_summary_never_raises_and_fits_the_width(doc: dict[str, Any], width: int, crash: str) -> None:
    lines = summary_lines(doc, width=width, crash=crash, faults="kill 1/1", look_at="some/long/path/timeline.html")
    assert all(len(line) <= width and len(line.splitlines()) <= 1 for line in lines[:-1])
    assert lines[-1] == "look at: some/long/path/timeline.html"


@given(doc=_docs)
def test_junit_cases_are_well_formed_xml_for_any_document(doc: dict[str, Any]) -> None:
    for name, body in junit_cases(doc).items():
        ET.fromstring(f"<testcase name='x'>{body}</testcase>")  # raises on malformed XML
        assert body == "" or body.startswith(("<failure message=", "<error message="))
        assert name


@given(text=st.text(max_size=400), width=st.integers(1, 120))
def test_clip_is_one_line_within_the_width(text: str, width: int) -> None:
    out = clip(text, width)
    assert len(out) <= width and len(out.splitlines()) <= 1
    one = " ".join(p.strip() for p in text.splitlines() if p.strip()).replace("\t", " ")
    assert out == one if len(one) <= width else out == one[: width - 1] + "…"
