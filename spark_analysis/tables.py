"""The warehouse tables: one Spark schema per table, the only place their columns are declared.

A *warehouse* is a directory of Parquet tables, one sub-directory each:

* ``runs``      -- one row per run (spec fields, version and provenance, start, duration, verdict, status,
  problems, the nemesis mode -- ``random``, ``guided`` or ``schedule`` -- the coverage points the run
  reached, :mod:`nemesis.coverage`, and ``availability``: the availability checker's verdict, ``true`` /
  ``false`` / ``unknown``, null for a run judged without it, :mod:`checker.availability`).  ``valid`` is the
  run's merged verdict, so a run that broke its availability expectations is ``false`` there too;
* ``ops``       -- one row per history op, partitioned by ``date`` (the run's start day) and ``workload``;
* ``faults``    -- one row per nemesis fault window (kind, targets, start/end ns, and its unavailability and
  recovery in seconds as the per-run checker computes them: :mod:`spark_analysis.recovery`);
* ``anomalies`` -- one row per (run, anomaly type): count and one example as JSON (``unavailable``: the fault
  window, how long the clients waited and the last errors they saw);
* ``checks``    -- one row per (run, checker) from results.json: verdict, time_s (when recorded);
* ``ingested``  -- the manifest: one row per ingested run id, with the batch that ingested it;
* ``verdicts``  -- written by ``splitbrain spark check``: one row per re-checked run.

Times inside a run are nanoseconds since the run started (``*_ns``), as in history.jsonl.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

__all__ = ["ANOMALIES", "CHECKS", "FAULTS", "INGESTED", "OPS", "RUNS", "TABLES", "VERDICTS", "table_path"]


def _schema(*cols: tuple[str, object]) -> StructType:
    return StructType([StructField(name, typ, True) for name, typ in cols])  # type: ignore[arg-type]


_S, _L, _I, _D, _B = StringType(), LongType(), IntegerType(), DoubleType(), BooleanType()

RUNS = _schema(
    ("run_id", _S), ("test", _S), ("ts", _S), ("root", _S), ("path", _S), ("href", _S), ("name", _S),
    ("workloads", ArrayType(_S)), ("workload", _S), ("nemesis_packages", ArrayType(_S)), ("nemesis", _S),
    ("backend", _S), ("seed", _L), ("concurrency", _I), ("rate", _D), ("time_limit_s", _D),
    ("cluster_version", _S), ("git_revision", _S), ("spec_key", _S), ("start_time", TimestampType()),
    ("date", _S), ("duration_s", _D), ("valid", _S), ("status", _S), ("problems", ArrayType(_S)),
    ("op_count", _L), ("client_op_count", _L), ("fault_count", _I), ("anomaly_count", _L), ("batch_id", _S),
    ("sut_version", _S), ("revision_dirty", _B), ("harness_version", _S), ("harness_revision", _S), ("host", _S),
    ("faults_requested", _I), ("faults_not_effective", _I), ("nemesis_mode", _S), ("coverage_points", _L),
    ("availability", _S), ("fault_figures", _S),
)
OPS = _schema(
    ("run_id", _S), ("idx", _L), ("time_ns", _L), ("type", _S), ("process", _S), ("f", _S), ("node", _S),
    ("error", _S), ("op_json", _S), ("is_nemesis", _B), ("latency_ns", _L), ("invoke_ns", _L), ("fault_seq", _I),
    ("fault_kind", _S), ("date", _S), ("workload", _S),
)
FAULTS = _schema(
    ("run_id", _S), ("seq", _I), ("kind", _S), ("targets", ArrayType(_S)), ("start_ns", _L), ("end_ns", _L),
    ("healed", _B), ("unavailable_s", _D), ("recovery_s", _D),
)
ANOMALIES = _schema(("run_id", _S), ("type", _S), ("count", _L), ("example", _S))
CHECKS = _schema(("run_id", _S), ("checker", _S), ("valid", _S), ("time_s", _D), ("anomaly_count", _L))
INGESTED = _schema(("run_id", _S), ("batch_id", _S), ("status", _S), ("ingested_at", TimestampType()))
VERDICTS = _schema(
    ("run_id", _S), ("checker", _S), ("valid", _S), ("ok", _L), ("fail", _L), ("info", _L), ("lost", _L),
    ("anomaly_count", _L), ("error", _S), ("checked_at", TimestampType()),
)

TABLES: dict[str, StructType] = {
    "runs": RUNS, "ops": OPS, "faults": FAULTS, "anomalies": ANOMALIES, "checks": CHECKS, "ingested": INGESTED,
    "verdicts": VERDICTS,
}


def table_path(warehouse: str | Path, table: str) -> str:
    """The directory of ``table`` in ``warehouse`` (raises KeyError naming the known tables)."""
    if table not in TABLES:
        raise KeyError(f"unknown warehouse table {table!r}; known: {', '.join(TABLES)}")
    return str(Path(warehouse) / table)
