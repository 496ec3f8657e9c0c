"""Each metric against hand-computed values on tiny tables (real Spark, the shared local[2] session)."""

from __future__ import annotations

from typing import Any

import pytest

from spark_analysis import metrics
from spark_analysis.tables import ANOMALIES, CHECKS, FAULTS, OPS, RUNS
from spark_analysis.wilson import wilson_interval


def run(run_id: str, workload: str = "queue", nemesis: str = "kill", version: str | None = "1", date: str = "d1",
        anomalies: int = 0, status: str = "ok", valid: str = "true", spec_key: str = "s1") -> tuple[Any, ...]:
    row = dict.fromkeys(RUNS.fieldNames())
    row.update(run_id=run_id, name=f"{workload}-{nemesis}", workload=workload, nemesis=nemesis,
               cluster_version=version, date=date, anomaly_count=anomalies, status=status, valid=valid,
               spec_key=spec_key, href=f"/run/{run_id}/")
    return tuple(row[c] for c in RUNS.fieldNames())


def op(run_id: str, idx: int, t: int, typ: str, *, seq: int = -1, kind: str | None = None,
       latency: int | None = None, nemesis: bool = False, f: str = "send") -> tuple[Any, ...]:
    row = dict.fromkeys(OPS.fieldNames())
    row.update(run_id=run_id, idx=idx, time_ns=t, type=typ, process="nemesis" if nemesis else "0", f=f,
               is_nemesis=nemesis, latency_ns=latency, fault_seq=seq, fault_kind=kind, date="d1", workload="queue")
    return tuple(row[c] for c in OPS.fieldNames())


RUNS_ROWS = [
    run("a/1", anomalies=2, valid="false"), run("a/2"), run("a/3"), run("a/4", anomalies=1, valid="false"),
    run("b/1", nemesis="partition", date="d2"), run("b/2", nemesis="partition", date="d2", anomalies=3),
    run("c/1", version=None, nemesis="partition", date="d2", spec_key="s2"),
    run("x/1", status="partial", anomalies=5, valid="unknown"),  # not checked: never counted
    run("x/2", status="malformed", valid="unknown"),
    run("y/1", status="crashed", anomalies=1, valid="false", nemesis="partition", date="d2", spec_key="s3"),
]


def test_anomaly_rates_with_wilson_intervals(spark: Any) -> None:
    runs = spark.createDataFrame(RUNS_ROWS, RUNS)
    got = {(r.workload, r.nemesis, r.cluster_version, r.date): r for r in metrics.anomaly_rates(runs).collect()}
    # kill/1/d1: a/1..a/4 -> 2 of 4; partition/1/d2: b/1, b/2, y/1 (crashed counts) -> 2 of 3;
    # partition/unknown/d2: c/1 -> 0 of 1
    expected = {("queue", "kill", "1", "d1"): (4, 2), ("queue", "partition", "1", "d2"): (3, 2),
                ("queue", "partition", "unknown", "d2"): (1, 0)}
    assert set(got) == set(expected)
    for key, (n, k) in expected.items():
        r = got[key]
        assert (r.runs, r.anomalous, r.rate) == (n, k, k / n)
        low, high = wilson_interval(k, n)
        assert r.ci_low == pytest.approx(low, abs=1e-12) and r.ci_high == pytest.approx(high, abs=1e-12)


def test_anomaly_rates_by_workload_and_nemesis_only(spark: Any) -> None:
    runs = spark.createDataFrame(RUNS_ROWS, RUNS)
    got = [(r.nemesis, r.runs, r.anomalous) for r in metrics.anomaly_rates(runs, ("workload", "nemesis")).collect()]
    assert got == [("kill", 4, 2), ("partition", 4, 2)]


def test_anomaly_counts_by_type(spark: Any) -> None:
    rows = [("r1", "lost-write", 2, None), ("r2", "lost-write", 3, None), ("r2", "duplicate", 1, None),
            ("r3", "G1a", 5, None)]
    got = [tuple(r) for r in metrics.anomaly_counts_by_type(spark.createDataFrame(rows, ANOMALIES)).collect()]
    assert got == [("G1a", 1, 5), ("lost-write", 2, 5), ("duplicate", 1, 1)]


def test_recovery_by_fault_and_rto_summary(spark: Any) -> None:
    """The per-window figures are read as ingest stored them (the per-run checker's, spark_analysis.recovery)."""
    s = 1_000_000_000
    faults = spark.createDataFrame([
        ("r1", 1, "partition", ["b2"], 40 * s, 45 * s, True, 4.0, 0.0),
        ("r1", 0, "kill", ["b1"], 10 * s, 20 * s, True, 12.0, 3.0),
        ("r2", 0, "kill", [], 5 * s, 6 * s, True, 0.0, None),
    ], FAULTS)
    per = metrics.recovery_by_fault(faults)
    got = [(r.run_id, r.seq, r.kind, r.unavailable_s, r.recovery_s) for r in per.collect()]
    assert got == [("r1", 0, "kill", 12.0, 3.0), ("r1", 1, "partition", 4.0, 0.0), ("r2", 0, "kill", 0.0, None)]
    summary = {r.kind: r for r in metrics.rto_summary(per).collect()}
    assert (summary["kill"].windows, summary["kill"].recovered, summary["kill"].recovery_max_s) == (2, 1, 3.0)
    assert summary["kill"].unavailable_mean_s == 6.0
    assert (summary["partition"].recovery_p50_s, summary["partition"].unavailable_mean_s) == (0.0, 4.0)


def test_latency_percentiles_by_phase(spark: Any) -> None:
    ms = 1_000_000
    rows = [op("r", i, i, "ok", latency=(i + 1) * ms) for i in range(100)]  # calm: 1..100 ms
    rows += [op("r", 100 + i, i, "fail", kind="kill", latency=(i + 1) * 10 * ms) for i in range(10)]  # fault
    rows += [op("r", 200, 0, "invoke"), op("r", 201, 0, "info", nemesis=True)]
    got = {r.phase: r for r in metrics.latency_by_phase(spark.createDataFrame(rows, OPS)).collect()}
    assert (got["calm"].ops, got["calm"].p50_ms, got["calm"].p99_ms) == (100, 50.0, 99.0)
    assert (got["fault"].ops, got["fault"].p50_ms, got["fault"].p99_ms) == (10, 50.0, 100.0)


def test_flaky_configs_need_both_verdicts(spark: Any) -> None:
    runs = spark.createDataFrame(RUNS_ROWS, RUNS)
    got = [(r.spec_key, r.runs, r.valid_runs, r.invalid_runs, r.invalid_run_ids)
           for r in metrics.flaky_configs(runs).collect()]
    # s1: a/1, a/4 invalid, a/2, a/3, b/1, b/2 valid (b/2 has anomalies but valid=true); s2, s3: one verdict only
    assert got == [("s1", 6, 4, 2, ["a/1", "a/4"])]


def test_slowest_checks_skip_untimed(spark: Any) -> None:
    rows = [("r1", "queue", "true", 0.5, 0), ("r2", "queue", "false", 2.5, 1), ("r3", "queue", "true", None, 0),
            ("r1", "perf", "true", 1.0, 0)]
    got = [(r.run_id, r.checker, r.time_s) for r in metrics.slowest_checks(spark.createDataFrame(rows, CHECKS),
                                                                           limit=2).collect()]
    assert got == [("r2", "queue", 2.5), ("r1", "perf", 1.0)]


def test_status_counts(spark: Any) -> None:
    got = [tuple(r) for r in metrics.status_counts(spark.createDataFrame(RUNS_ROWS, RUNS)).collect()]
    assert got == [("crashed", "false", 1), ("malformed", "unknown", 1), ("ok", "false", 2), ("ok", "true", 5),
                   ("partial", "unknown", 1)]


def test_by_mode_sums_runs_detections_chaos_seconds_and_coverage(spark: Any) -> None:
    def moded(run_id: str, mode: str | None, anomalies: int, limit: float | None, points: int | None,
              status: str = "ok") -> tuple[Any, ...]:
        row = dict(zip(RUNS.fieldNames(), run(run_id, anomalies=anomalies, status=status), strict=True))
        row.update(nemesis_mode=mode, time_limit_s=limit, coverage_points=points, backend="local")
        return tuple(row[c] for c in RUNS.fieldNames())

    rows = [moded("g/1", "guided", 1, 60.0, 40), moded("g/2", "guided", 0, 60.0, 30),
            moded("g/3", "guided", 2, 30.0, None), moded("r/1", "random", 0, 60.0, 10),
            moded("r/2", None, 1, 60.0, None),  # a run from before modes: random
            moded("r/3", "random", 3, 60.0, 99, status="partial")]  # not checked: never counted
    got = {r.nemesis_mode: (r.runs, r.anomalous, r.chaos_s, r.coverage_sum, r.covered_runs)
           for r in metrics.by_mode(spark.createDataFrame(rows, RUNS), ("nemesis_mode",)).collect()}
    assert got == {"guided": (3, 2, 150.0, 70, 2), "random": (2, 1, 120.0, 10, 1)}
