"""Synthetic corpus -> ingest -> metrics -> report -> re-check, on a real embedded Spark (local[2]).

One corpus and one warehouse serve the whole module (the tests run in file order: the incremental ingest
adds runs that the re-check then covers).
"""

from __future__ import annotations

import datetime as _dt
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from spark_analysis import metrics
from spark_analysis.ingest import ingest, ingested_ids, read_table
from spark_analysis.page import FILES
from spark_analysis.recheck import check_run_local, spark_check
from spark_analysis.report import write_report
from spark_analysis.synth import Cell, Corpus, generate

pytestmark = pytest.mark.integration

CELLS = (Cell("queue", "partition", 0.3), Cell("queue", "kill", 0.1), Cell("queue", "none", 0.0),
         Cell("broker-ids", "pause", 0.2))
NOW = _dt.datetime(2026, 11, 22, tzinfo=_dt.UTC)


@pytest.fixture(scope="module")
def world(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("spark-pipeline")
    corpus = generate(base / "results", runs=40, ops=150, seed=11, cells=CELLS, torn=1, no_results=1, bad_yaml=1)
    warehouse = base / "warehouse"
    summary = ingest(spark, [base / "results"], warehouse, now=NOW)
    return {"base": base, "corpus": corpus, "warehouse": warehouse, "summary": summary}


def test_ingest_gives_every_run_its_status_and_lists_the_damaged(spark: Any, world: dict[str, Any]) -> None:
    corpus: Corpus = world["corpus"]
    s = world["summary"]
    assert (s.found, s.ingested, s.skipped) == (40, 40, 0)
    runs = {r.run_id: r for r in read_table(spark, world["warehouse"], "runs").collect()}
    assert {rid: r.status for rid, r in runs.items()} == {r.run_id: corpus.expected_status(r) for r in corpus.runs}
    damaged = {r.run_id: corpus.expected_status(r) for r in corpus.runs if r.damage}
    assert {rid: st for rid, st, _ in s.problem_runs} == damaged
    ops = read_table(spark, world["warehouse"], "ops")
    assert ops.count() == s.ops == sum(r.op_count for r in runs.values())
    parts = {p.name for p in (world["warehouse"] / "ops").iterdir() if p.is_dir()}
    assert parts == {f"date={d}" for d in {r.date for r in corpus.runs}}
    assert read_table(spark, world["warehouse"], "faults").count() == sum(r.fault_count for r in runs.values()) > 0


def test_recovered_anomaly_rates_match_truth_and_their_intervals_hold_the_injected_rate(
        spark: Any, world: dict[str, Any]) -> None:
    corpus: Corpus = world["corpus"]
    runs = read_table(spark, world["warehouse"], "runs")
    got = {(r.workload, r.nemesis): r for r in metrics.anomaly_rates(runs, ("workload", "nemesis")).collect()}
    for cell in CELLS:
        clean = [r for r in corpus.runs if r.cell == cell and not r.damage]
        r = got[(cell.workload, cell.nemesis)]
        assert (r.runs, r.anomalous) == (len(clean), sum(x.anomalous for x in clean))
        assert r.ci_low <= cell.anomaly_rate <= r.ci_high, (cell, r)
    types = {r.type: r.total for r in metrics.anomaly_counts_by_type(read_table(spark, world["warehouse"],
                                                                                "anomalies")).collect()}
    assert types["lost-write"] == sum(r.lost for r in corpus.runs if r.damage != "no_results")


def test_report_is_a_dashboard_directory_linking_runs_where_serve_shows_them(
        spark: Any, world: dict[str, Any]) -> None:
    page = write_report(spark, world["warehouse"], world["base"] / "report", now=NOW, min_runs=5)
    assert sorted(p.name for p in page.parent.iterdir()) == sorted(FILES)
    data = json.loads((page.parent / "dashboard.json").read_text())
    corpus: Corpus = world["corpus"]
    assert data["total_runs"] == 40
    runs = {r[0]: r for r in data["runs"]["rows"]}
    assert set(runs) == {r.run_id for r in corpus.runs}
    href = data["runs"]["columns"].index("href")
    assert all(runs[r.run_id][href] == f"/run/{r.run_id}/" for r in corpus.runs)
    clean = [r for r in corpus.runs if not r.damage]
    counted = sum(row[5] for row in data["counts"]["rows"])
    assert counted == len(clean) and sum(row[6] for row in data["counts"]["rows"]) == sum(r.anomalous for r in clean)
    kinds = {r["kind"] for r in data["rto"] if r["workload"] is None and r["cluster_version"] is None}
    assert kinds == {"partition", "kill", "pause"}
    phases = {r["phase"] for r in data["latency"]}
    assert phases == {"calm", "fault"}
    fault_p50 = max(r["p50_ms"] for r in data["latency"] if r["phase"] == "fault")
    calm_p99 = max(r["p99_ms"] for r in data["latency"] if r["phase"] == "calm")
    assert fault_p50 > calm_p99  # the generator slows ops under fault
    assert {tuple(c) for c in [data["gate"]["default_pair"]]} == {("0.1.0", "0.2.0")}
    assert {(c["baseline"], c["candidate"]) for c in data["comparisons"]} == {("0.1.0", "0.2.0")}


def test_fault_recovery_in_the_warehouse_is_what_the_per_run_checker_reports(
        spark: Any, world: dict[str, Any]) -> None:
    """results.json's perf.availability (checker.perf.analyze_perf) and the faults table agree, window by window."""
    from checker.history import read_jsonl
    from checker.perf import analyze_perf

    corpus: Corpus = world["corpus"]
    stored: dict[str, list[tuple[Any, Any]]] = {}
    for r in read_table(spark, world["warehouse"], "faults").orderBy("run_id", "seq").collect():
        stored.setdefault(r.run_id, []).append((r.unavailable_s, r.recovery_s))
    checked = 0
    for run in corpus.runs:
        if run.damage or run.cell.nemesis == "none":
            continue
        perf = analyze_perf(read_jsonl(corpus.root / run.run_id / "history.jsonl"), ".", plots=False)
        want = [(a["last_failure_s"], a["rto_s"]) for a in perf["availability"]]
        assert stored[run.run_id] == want, run.run_id
        checked += 1
    assert checked >= 20


def test_incremental_ingest_adds_only_new_runs(spark: Any, world: dict[str, Any]) -> None:
    more = generate(world["base"] / "results2", runs=5, ops=100, seed=12, cells=CELLS, first=1000)
    roots = [world["base"] / "results", world["base"] / "results2"]
    s = ingest(spark, roots, world["warehouse"], now=NOW + _dt.timedelta(hours=1))
    assert (s.found, s.skipped, s.ingested) == (45, 40, 5)
    ids = [r.run_id for r in read_table(spark, world["warehouse"], "runs").select("run_id").collect()]
    assert len(ids) == len(set(ids)) == 45
    assert {r.run_id for r in more.runs} <= ingested_ids(spark, world["warehouse"])
    again = ingest(spark, roots, world["warehouse"], now=NOW + _dt.timedelta(hours=2))
    assert (again.ingested, again.skipped) == (0, 45)


@pytest.mark.parametrize("checker", ["queue", "counts"])
def test_spark_check_agrees_with_the_local_checker(spark: Any, world: dict[str, Any], checker: str) -> None:
    runs = {r.run_id: r.path for r in read_table(spark, world["warehouse"], "runs").collect()}
    where = "(workload = 'queue' AND date = '2026-11-01') OR status != 'ok'"
    verdicts = spark_check(spark, world["warehouse"], where=where, checker=checker, now=NOW)
    selected = {v[0] for v in verdicts}
    assert selected and len(selected) == len(verdicts) < len(runs)
    for v in verdicts:
        assert v == check_run_local(v[0], runs[v[0]], checker, now=NOW), v[0]
    corpus: Corpus = world["corpus"]
    truth = {r.run_id: r.lost for r in corpus.runs}
    assert all(v[6] == truth[v[0]] for v in verdicts if v[0] in truth)
    stored = Counter(r.checker for r in read_table(spark, world["warehouse"], "verdicts").collect())
    assert stored[checker] == len(verdicts)


def test_cli_ingest_lists_damaged_runs_and_check_exits_1_on_invalid(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    corpus = generate(tmp_path / "r", runs=4, ops=80, seed=5, cells=(Cell("queue", "kill", 0.5),), bad_yaml=1)
    assert main(["spark", "ingest", str(tmp_path / "r"), "--out", str(tmp_path / "w")]) == 0
    out = capsys.readouterr().out
    bad = next(r.run_id for r in corpus.runs if r.damage == "bad_yaml")
    assert "1 damaged or crashed runs" in out and f"malformed {bad}: test.yaml: not a YAML mapping" in out
    assert main(["spark", "check", "--warehouse", str(tmp_path / "w"), "--checker", "counts"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("false") for line in lines) == sum(r.anomalous for r in corpus.runs) >= 1
    assert main(["spark", "check", "--warehouse", str(tmp_path / "w"), "--where", "status = 'none'"]) == 2
