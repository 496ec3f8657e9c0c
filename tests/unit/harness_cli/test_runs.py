"""Run-directory resolution (analyze/repro), run summaries, the summary table and JUnit for many runs."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.commands._runs import summary_table
from harness.junit import junit_for_runs
from harness.runs import (
    RunNotFound,
    RunSummary,
    read_run,
    read_summary,
    resolve_run_dir,
    summarize_results,
    verdict_word,
)
from harness.store import create_run_dir, read_results


def _run(root: Path, name: str, doc: dict[str, Any] | None = None) -> Path:
    run = create_run_dir(root, name)
    run.test_yaml.write_text("name: x\n")
    if doc is not None:
        run.results_json.write_text(json.dumps(doc))
    return run.path


def test_resolution_latest_test_dir_relative_and_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "results"
    a = _run(root, "alpha", {"valid": True})
    b = _run(root, "beta", {"valid": False})
    assert resolve_run_dir(None, root) == b.resolve()  # results/latest = newest run
    assert resolve_run_dir("latest", root) == b.resolve()
    assert resolve_run_dir("alpha", root) == a.resolve()  # a test name -> its latest
    assert resolve_run_dir(f"alpha/{a.name}", root) == a.resolve()
    assert resolve_run_dir(str(a), root) == a.resolve()
    assert resolve_run_dir(str(root / "alpha"), root) == a.resolve()
    monkeypatch.chdir(tmp_path)
    assert resolve_run_dir(f"results/beta/{b.name}", "elsewhere") == b.resolve()


def test_resolution_failure_names_what_was_tried(tmp_path: Path) -> None:
    with pytest.raises(RunNotFound, match=r"gamma.*tried"):
        resolve_run_dir("gamma", tmp_path)
    with pytest.raises(RunNotFound, match="latest"):
        resolve_run_dir(None, tmp_path)


@pytest.mark.parametrize("doc, word", [
    (None, "incomplete"), ({"valid": True}, "valid"), ({"valid": False}, "invalid"), ({"valid": "unknown"}, "unknown"),
    ({"valid": True, "crashed": "boom"}, "crashed"), ({}, "unknown"), ({"valid": "yes"}, "unknown"),
], ids=["missing", "valid", "invalid", "unknown", "crashed", "no-valid", "garbage-valid"])
def test_verdict_words(doc: dict[str, Any] | None, word: str) -> None:
    assert verdict_word(doc) == word


def test_summary_takes_counts_seed_duration_and_ignores_garbage() -> None:
    s = summarize_results({"valid": False, "name": "q", "seed": 7, "duration_s": 3.5,
                           "anomaly_counts": {"lost": 2, "bad": "x", "flag": True}}, name="dir", ts="T")
    assert (s.name, s.verdict, s.seed, s.duration_s, dict(s.anomaly_counts)) == ("q", "invalid", 7, 3.5, {"lost": 2})
    assert s.anomalies == 2
    with pytest.raises(ValueError, match="verdict"):
        RunSummary("n", "t", "great")


def test_read_summary_of_torn_results_is_incomplete(tmp_path: Path) -> None:
    run = _run(tmp_path, "t")
    (run / "results.json").write_text('{"valid": tr')
    s = read_summary(run)
    assert s.verdict == "incomplete" and s.rel_path == f"t/{run.name}"


def test_summary_table_lists_every_run() -> None:
    rows = [("a.yaml", RunSummary("a", "20260101T000000.000Z", "valid", {}, 1, 2.0, "a/x")),
            ("b.yaml", RunSummary("b", "20260101T000001.000Z", "invalid", {"lost": 3}, 2, None, "b/y"))]
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(summary_table(rows))
    text = out.getvalue()
    for needle in ("a.yaml", "b.yaml", "valid", "invalid", "lost=3", "2.0s", "b/y"):
        assert needle in text


def test_junit_for_runs_counts_failures_and_errors() -> None:
    ok = RunSummary("q", "T1", "valid", seed=1, duration_s=1.0)
    bad = RunSummary("q", "T2", "invalid", seed=2)
    crashed = RunSummary("q", "T3", "crashed", seed=3)
    xml = junit_for_runs([
        (ok, {"valid": True, "checkers": {"q/queue": {"valid": True}}}),
        (bad, {"valid": False, "checkers": {"q/queue": {"valid": False}, "q/perf": {"valid": "unknown"}}}),
        (crashed, {"valid": "unknown", "crashed": "boom <&>", "checkers": {}}),
    ])
    root = ET.fromstring(xml)
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("4", "1", "2")
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["q seed=1", "q seed=2", "q seed=3"]
    assert suites[2].find("testcase/error").get("message") == "boom <&>"  # type: ignore[union-attr]



@pytest.mark.parametrize("content", [None, "", '{"valid": tru', "[1, 2]", "\udcff"])
def test_a_run_without_usable_results_reads_as_incomplete_with_no_document(tmp_path: Path,
                                                                          content: str | None) -> None:
    run = create_run_dir(tmp_path, "q").path
    if content is not None:
        (run / "results.json").write_text(content, encoding="utf-8", errors="surrogateescape")
    assert read_results(run) is None
    summary, doc = read_run(run)
    assert (summary.verdict, doc, summary.rel_path) == ("incomplete", None, f"q/{run.name}")


def test_read_run_gives_the_summary_and_the_document(tmp_path: Path) -> None:
    run = create_run_dir(tmp_path, "q").path
    doc = {"valid": False, "seed": 4, "checkers": {"q/queue": {"valid": False}}}
    (run / "results.json").write_text(json.dumps(doc), encoding="utf-8")
    summary, read = read_run(run)
    assert (summary.verdict, summary.seed, summary.failing) == ("invalid", 4, ("q/queue",))
    assert read == doc
