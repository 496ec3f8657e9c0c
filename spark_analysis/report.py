"""The dashboard's data, computed on Spark from the warehouse, and the job that writes the dashboard directory.

:func:`collect_dashboard` runs the aggregations on Spark and returns plain JSON-able data: small aggregates,
never raw ops.  Everything the page filters (time range, version, workload, nemesis, backend) is shipped at
the grain of those five keys, so the browser only sums counts and never needs Spark:

* ``counts`` -- checked and anomalous runs per (day, workload, nemesis, version, backend)
  (:func:`spark_analysis.metrics.anomaly_rates`): the trend lines, the heat map and the cell table;
* ``statuses`` and ``anomaly_types`` -- runs per status/verdict and per anomaly type at the same grain;
* ``runs`` -- the newest ``run_limit`` runs (one row each, with the link ``splitbrain serve`` answers);
* ``comparisons`` -- the release gate of every version pair, over every backend and per backend
  (:mod:`spark_analysis.comparisons`, :mod:`spark_analysis.regression`): per cell the verdict, the
  difference of rates and its 95% interval;
* ``rto`` -- recovery per fault kind for every combination of workload, nemesis, version and backend (a
  Spark ``cube``; ``null`` means "all"), from the per-run checker's figures (:mod:`spark_analysis.recovery`);
* ``modes`` -- per (day, workload, nemesis, version, backend, nemesis mode): runs, anomalous runs, main-phase
  seconds and coverage sums (:func:`spark_analysis.metrics.by_mode`), so the page shows coverage and time to
  detection of guided against random cells under any filter;
* ``latency``, ``flaky``, ``slowest_checks`` -- as before, over the whole warehouse.

:func:`write_report` writes the dashboard directory (:mod:`spark_analysis.page`): ``index.html`` (its entry),
``plotly.min.js`` and ``dashboard.json``.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from spark_analysis import metrics
from spark_analysis.comparisons import comparison_rows, default_pair, order_versions
from spark_analysis.ingest import read_table
from spark_analysis.page import render_html, write_page

__all__ = ["RUN_COLUMNS", "collect_dashboard", "render_html", "write_report"]

KEYS = ("date", "workload", "nemesis", "cluster_version", "backend")
RUN_COLUMNS = ("run_id", "href", "start_time", "date", "workload", "nemesis", "cluster_version", "backend",
               "status", "valid", "anomaly_count", "fault_count", "problems")


def _value(v: Any) -> Any:
    if isinstance(v, _dt.datetime):
        return v.isoformat().replace("+00:00", "Z")
    return v


def _rows(df: Any, limit: int | None = None) -> list[dict[str, Any]]:
    if limit is not None:
        df = df.limit(limit)
    return [{k: _value(v) for k, v in r.asDict(recursive=True).items()} for r in df.collect()]


def _table(df: Any, columns: tuple[str, ...]) -> dict[str, Any]:
    """Column names and row lists (a compact shape for big lists)."""
    return {"columns": list(columns), "rows": [[_value(v) for v in r] for r in df.select(*columns).collect()]}


def collect_dashboard(spark: Any, warehouse: str | Path, *, now: _dt.datetime | None = None, alpha: float = 0.05,
                      min_runs: int = 20, run_limit: int = 50_000) -> dict[str, Any]:
    """All the dashboard's data as plain Python values (see the module docstring).

    ``alpha`` and ``min_runs`` are the release gate's (:func:`spark_analysis.regression.gate`).
    """
    from pyspark.sql import functions as F

    runs = (read_table(spark, warehouse, "runs").fillna({"cluster_version": "unknown", "backend": "unknown"})
            .cache())
    faults = read_table(spark, warehouse, "faults")
    keyed = runs.select("run_id", *KEYS)
    counts = metrics.anomaly_rates(runs, KEYS)
    count_rows = [[r["date"], r["workload"], r["nemesis"], r["cluster_version"], r["backend"], int(r["runs"]),
                   int(r["anomalous"])] for r in counts.collect()]
    per_version: dict[tuple[str, str, str, str], list[int]] = {}
    for _, w, n, v, b, k_runs, k_bad in count_rows:
        acc = per_version.setdefault((w, n, v, b), [0, 0])
        acc[0] += k_runs
        acc[1] += k_bad
    comparisons = comparison_rows(((w, n, v, b, x[0], x[1]) for (w, n, v, b), x in per_version.items()),
                                  alpha=alpha, min_runs=min_runs)
    versions = order_versions(r["cluster_version"] for r in runs.select("cluster_version").distinct().collect())
    first_seen = {r["cluster_version"]: _value(r["first"]) for r in runs.where(F.col("start_time").isNotNull())
                  .groupBy("cluster_version").agg(F.min("start_time").alias("first")).collect()}
    statuses = runs.groupBy(*KEYS, "status", "valid").agg(F.count(F.lit(1)).alias("runs"))
    types = (read_table(spark, warehouse, "anomalies").join(keyed, "run_id")
             .groupBy(*KEYS, "type").agg(F.count(F.lit(1)).alias("runs"), F.sum("count").alias("total")))
    windows = metrics.recovery_by_fault(faults).join(keyed, "run_id")
    rto = (windows.cube("workload", "nemesis", "cluster_version", "backend", "kind")
           .agg(F.count(F.lit(1)).alias("windows"), F.count("recovery_s").alias("recovered"),
                F.percentile_approx("recovery_s", 0.5).alias("recovery_p50_s"),
                F.percentile_approx("recovery_s", 0.99).alias("recovery_p99_s"),
                F.max("recovery_s").alias("recovery_max_s"), F.avg("unavailable_s").alias("unavailable_mean_s"))
           .where(F.col("kind").isNotNull()))
    listed = (runs.withColumn("problems", F.concat_ws("; ", "problems"))
              .orderBy(F.desc_nulls_last("start_time"), "run_id").limit(run_limit))
    data = {
        "generated_at": _value((now or _dt.datetime.now(_dt.UTC)).replace(microsecond=0)),
        "warehouse": str(warehouse),
        "total_runs": runs.count(),
        "gate": {"alpha": alpha, "min_runs": min_runs, "correction": "holm", "default_pair": default_pair(versions)},
        "versions": versions,
        "version_first_seen": first_seen,
        "counts": {"columns": ["date", "workload", "nemesis", "version", "backend", "runs", "anomalous"],
                   "rows": count_rows},
        "statuses": _table(statuses, (*KEYS, "status", "valid", "runs")),
        "anomaly_types": _table(types, (*KEYS, "type", "runs", "total")),
        "runs": _table(listed, RUN_COLUMNS),
        "run_limit": run_limit,
        "comparisons": comparisons,
        "rto": _rows(rto.orderBy("kind")),
        "modes": _table(metrics.by_mode(runs), (*metrics.MODE_KEYS, "runs", "anomalous", "chaos_s", "coverage_sum",
                                                "covered_runs")),
        "latency": _rows(metrics.latency_by_phase(read_table(spark, warehouse, "ops"))),
        "flaky": _rows(metrics.flaky_configs(runs), 200),
        "slowest_checks": _rows(metrics.slowest_checks(read_table(spark, warehouse, "checks"), 50)
                                .join(runs.select("run_id", "href"), "run_id", "left").orderBy(F.desc("time_s"))),
    }
    runs.unpersist()
    return data


def write_report(spark: Any, warehouse: str | Path, out_dir: str | Path, *, now: _dt.datetime | None = None,
                 alpha: float = 0.05, min_runs: int = 20) -> Path:
    """Write the dashboard directory ``out_dir`` (see the module docstring); returns its ``index.html``."""
    data = collect_dashboard(spark, warehouse, now=now, alpha=alpha, min_runs=min_runs)
    return write_page(data, out_dir)
