"""Trend metrics over the warehouse tables: plain PySpark DataFrame -> DataFrame functions (no pandas).

Vocabulary:

* a run is **checked** when its results.json was read (status ``ok`` or ``crashed``); partial and malformed
  runs are listed by the report but never counted in a rate;
* a run is **anomalous** when it has at least one anomaly (``anomaly_count > 0``) -- an ``unavailable``
  anomaly (:mod:`checker.availability`) included: a run that broke its availability expectations is not valid;
* a run is **unavailable** when its availability verdict is ``false``; runs judged without that verdict
  (``availability`` null: turned off, or from before it existed) are left out of :func:`availability_rates`;
* the **phase** of a completed client op is ``fault`` when it was invoked inside a fault window, else
  ``calm``;
* per fault window, **unavailability** is the time from the fault's start to the last failed (``fail`` or
  ``info``) client completion before the next fault starts, and **recovery** (RTO) is the time from the
  fault's end to the first ``ok`` completion at or after that end, even when another fault started in
  between.  None when there was no such op.  Both are the per-run checker's figures
  (:mod:`spark_analysis.recovery`), stored in the ``faults`` table at ingest.

Every function returns a DataFrame; callers ``collect()`` the small results.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_analysis.wilson import Z95

__all__ = [
    "CHECKED_STATUSES", "anomaly_counts_by_type", "anomaly_rates", "availability_rates", "flaky_configs",
    "latency_by_phase",
    "recovery_by_fault", "rto_summary", "slowest_checks", "status_counts",
]

CHECKED_STATUSES = ("ok", "crashed")
RATE_KEYS = ("workload", "nemesis", "cluster_version", "date")



def wilson_columns(k: Any, n: Any, z: float = Z95) -> tuple[Any, Any]:
    """Spark Column expressions ``(low, high)`` computing :func:`wilson_interval` row by row."""
    k, n = k.cast("double"), n.cast("double")
    z2 = z * z
    p = k / n
    denom = F.lit(1.0) + F.lit(z2) / n
    centre = (p + F.lit(z2) / (n * 2)) / denom
    half = F.lit(z) / denom * F.sqrt(p * (F.lit(1.0) - p) / n + F.lit(z2) / (n * n * 4))
    low = F.when((n > 0) & (k > 0), F.greatest(F.lit(0.0), centre - half)).otherwise(F.lit(0.0))
    high = F.when((n > 0) & (k < n), F.least(F.lit(1.0), centre + half)).otherwise(F.lit(1.0))
    return low, high

def anomaly_rates(runs: DataFrame, by: Sequence[str] = RATE_KEYS, *, z: float = Z95) -> DataFrame:
    """Anomalous runs / checked runs per group, with the Wilson interval.

    Columns: ``by``..., runs, anomalous, rate, ci_low, ci_high (sorted by ``by``).  A null
    ``cluster_version`` groups as ``"unknown"``.
    """
    checked = runs.where(F.col("status").isin(*CHECKED_STATUSES)).fillna({"cluster_version": "unknown"})
    g = checked.groupBy(*by).agg(
        F.count(F.lit(1)).alias("runs"),
        F.sum(F.when(F.col("anomaly_count") > 0, 1).otherwise(0)).alias("anomalous"),
    )
    low, high = wilson_columns(F.col("anomalous"), F.col("runs"), z)
    return (g.withColumn("rate", F.col("anomalous") / F.col("runs"))
            .withColumn("ci_low", low).withColumn("ci_high", high).orderBy(*by))


def availability_rates(runs: DataFrame, by: Sequence[str] = RATE_KEYS, *, z: float = Z95) -> DataFrame:
    """Unavailable runs / checked runs judged for availability, per group, with the Wilson interval.

    Columns: ``by``..., runs, unavailable, rate, ci_low, ci_high (sorted by ``by``).  A null
    ``cluster_version`` groups as ``"unknown"``.
    """
    judged = (runs.where(F.col("status").isin(*CHECKED_STATUSES) & F.col("availability").isNotNull())
              .fillna({"cluster_version": "unknown"}))
    g = judged.groupBy(*by).agg(
        F.count(F.lit(1)).alias("runs"),
        F.sum(F.when(F.col("availability") == "false", 1).otherwise(0)).alias("unavailable"),
    )
    low, high = wilson_columns(F.col("unavailable"), F.col("runs"), z)
    return (g.withColumn("rate", F.col("unavailable") / F.col("runs"))
            .withColumn("ci_low", low).withColumn("ci_high", high).orderBy(*by))


MODE_KEYS = ("date", "workload", "nemesis", "cluster_version", "backend", "nemesis_mode")


def by_mode(runs: DataFrame, by: Sequence[str] = MODE_KEYS) -> DataFrame:
    """Per group and nemesis mode: checked runs, anomalous runs, ``chaos_s`` (their main phases' seconds, from
    ``time_limit_s``), and the coverage points summed over the ``covered_runs`` that recorded any.

    These are sums, so any filter's subtotal is a sum too; the page derives **time to detection**
    (``chaos_s / anomalous``: main-phase seconds spent per run that found an anomaly, the mean time to the
    first detection if runs are independent) and the mean coverage per run.
    """
    checked = runs.where(F.col("status").isin(*CHECKED_STATUSES)).fillna(
        {"cluster_version": "unknown", "backend": "unknown", "nemesis_mode": "random"})
    return (checked.groupBy(*by).agg(
        F.count(F.lit(1)).alias("runs"),
        F.sum(F.when(F.col("anomaly_count") > 0, 1).otherwise(0)).alias("anomalous"),
        F.sum(F.coalesce(F.col("time_limit_s"), F.lit(0.0))).alias("chaos_s"),
        F.sum(F.coalesce(F.col("coverage_points"), F.lit(0))).alias("coverage_sum"),
        F.count("coverage_points").alias("covered_runs"),
    ).orderBy(*by))


def anomaly_counts_by_type(anomalies: DataFrame) -> DataFrame:
    """Per anomaly type: the number of runs showing it and the total count (most frequent first)."""
    return (anomalies.groupBy("type")
            .agg(F.countDistinct("run_id").alias("runs"), F.sum("count").alias("total"))
            .orderBy(F.desc("total"), "type"))


def recovery_by_fault(faults: DataFrame) -> DataFrame:
    """One row per fault window: run_id, seq, kind, unavailable_s, recovery_s (see the module docstring).

    The figures were computed at ingest, per run, by the per-run checker's own function
    (:mod:`spark_analysis.recovery`), so they equal each run's ``results.json`` ``perf.availability``.
    """
    return faults.select("run_id", "seq", "kind", "unavailable_s", "recovery_s").orderBy("run_id", "seq")


def rto_summary(per_window: DataFrame, by: Sequence[str] = ("kind",)) -> DataFrame:
    """Per ``by`` (default: fault kind): windows, recovered windows, recovery p50/p99/max and mean unavailability
    (seconds)."""
    return (per_window.groupBy(*by).agg(
        F.count(F.lit(1)).alias("windows"),
        F.count("recovery_s").alias("recovered"),
        F.percentile_approx("recovery_s", 0.5).alias("recovery_p50_s"),
        F.percentile_approx("recovery_s", 0.99).alias("recovery_p99_s"),
        F.max("recovery_s").alias("recovery_max_s"),
        F.avg("unavailable_s").alias("unavailable_mean_s"),
    ).orderBy(*by))


def latency_by_phase(ops: DataFrame, by: Sequence[str] = ("f",)) -> DataFrame:
    """Latency (ms) of completed client ops per phase (calm / fault) and ``by``: count, p50, p99."""
    done = ops.where((~F.col("is_nemesis")) & F.col("latency_ns").isNotNull())
    phased = done.withColumn("phase", F.when(F.col("fault_kind").isNotNull(), "fault").otherwise("calm"))
    ms = F.col("latency_ns") / 1e6
    return (phased.groupBy("phase", *by).agg(
        F.count(F.lit(1)).alias("ops"),
        F.percentile_approx(ms, 0.5, 10000).alias("p50_ms"),
        F.percentile_approx(ms, 0.99, 10000).alias("p99_ms"),
    ).orderBy("phase", *by))


def flaky_configs(runs: DataFrame) -> DataFrame:
    """Specs (same test.yaml apart from the seed) with both valid and invalid checked runs."""
    checked = runs.where(F.col("status").isin(*CHECKED_STATUSES))
    g = checked.groupBy("spec_key").agg(
        F.first("name").alias("name"), F.first("workload").alias("workload"), F.first("nemesis").alias("nemesis"),
        F.count(F.lit(1)).alias("runs"),
        F.sum(F.when(F.col("valid") == "true", 1).otherwise(0)).alias("valid_runs"),
        F.sum(F.when(F.col("valid") == "false", 1).otherwise(0)).alias("invalid_runs"),
        F.sort_array(F.collect_list(F.when(F.col("valid") == "false", F.col("run_id")))).alias("invalid_run_ids"),
    )
    return g.where((F.col("valid_runs") > 0) & (F.col("invalid_runs") > 0)).orderBy(F.desc("invalid_runs"), "name")


def slowest_checks(checks: DataFrame, limit: int = 10) -> DataFrame:
    """The ``limit`` slowest checker executions that recorded a time (run_id, checker, valid, time_s)."""
    return (checks.where(F.col("time_s").isNotNull()).select("run_id", "checker", "valid", "time_s")
            .orderBy(F.desc("time_s"), "run_id").limit(limit))


def status_counts(runs: DataFrame) -> DataFrame:
    """Runs per (status, valid)."""
    return runs.groupBy("status", "valid").agg(F.count(F.lit(1)).alias("runs")).orderBy("status", "valid")
