"""Ingestion: results directories -> the Parquet warehouse (see :mod:`spark_analysis.tables`).

The job, in order:

1. the driver lists the run directories of every results root (``<root>/<test>/<ts>/``; ``latest`` links,
   dot-names and lost attempts' directories, :data:`~spark_analysis.runfiles.LOST_ATTEMPT_FILE`, are skipped;
   :func:`ingest_refs` takes a list of runs instead, from a caller that knows which are finished) and drops
   the run ids already in the warehouse's ``ingested`` manifest (incremental: a second ingest adds only new
   runs; the same run id under two roots is ingested once);
2. one pass, one task per slice of runs: the executors read and parse each new run
   (:func:`spark_analysis.runfiles.parse_run`), write its ``ops`` rows straight to Parquet partitioned by date
   and workload (:mod:`spark_analysis.opsfile`), and return the small tables' rows (runs, faults,
   anomalies, checks), which the driver collects and writes;
3. the manifest is appended last, so a run is marked ingested only after all its rows were written.

A bad run never crashes the job: it becomes a ``runs`` row whose ``status`` is malformed / partial /
crashed with its ``problems`` listed, and :class:`IngestSummary` lists those runs for the CLI to print.
An unreadable file (permissions, I/O error) counts as malformed.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from spark_analysis.opsfile import write_op_files
from spark_analysis.runfiles import LOST_ATTEMPT_FILE, RunTexts, op_columns, parse_run
from spark_analysis.tables import ANOMALIES, CHECKS, FAULTS, INGESTED, RUNS, TABLES, table_path

__all__ = [
    "IngestSummary", "RunRef", "discover_runs", "ingest", "ingest_refs", "ingested_ids", "read_table", "read_texts",
]

_RUN_FILES = ("test.yaml", "results.json", "history.jsonl")


@dataclass(frozen=True, slots=True)
class RunRef:
    """Where a run lives: ``run_id`` is ``<test>/<ts>``; ``path`` is the absolute run directory."""

    run_id: str
    root: str
    path: str


@dataclass
class IngestSummary:
    batch_id: str
    found: int = 0
    skipped: int = 0
    ingested: int = 0
    ops: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    problem_runs: list[tuple[str, str, list[str]]] = field(default_factory=list)

    def describe(self) -> str:
        st = ", ".join(f"{k}={v}" for k, v in sorted(self.statuses.items())) or "-"
        return (f"batch {self.batch_id}: {self.found} runs found, {self.skipped} already ingested, "
                f"{self.ingested} ingested ({st}), {self.ops} ops")


def discover_runs(roots: Iterable[str | Path]) -> list[RunRef]:
    """Every ``<root>/<test>/<ts>/`` directory, sorted by run id; the first root wins on a repeated id.

    Raises:
        FileNotFoundError: a root that is not a directory (names it).
    """
    seen: dict[str, RunRef] = {}
    for root in roots:
        r = Path(root).resolve()
        if not r.is_dir():
            raise FileNotFoundError(f"results directory {root!s} does not exist or is not a directory")
        for test in sorted(os.scandir(r), key=lambda e: e.name):
            if test.name.startswith(".") or test.name == "latest" or test.is_symlink() or not test.is_dir():
                continue
            for run in sorted(os.scandir(test.path), key=lambda e: e.name):
                if run.name.startswith(".") or run.name == "latest" or run.is_symlink() or not run.is_dir():
                    continue
                if os.path.exists(os.path.join(run.path, LOST_ATTEMPT_FILE)):
                    continue
                run_id = f"{test.name}/{run.name}"
                seen.setdefault(run_id, RunRef(run_id, str(r), run.path))
    return [seen[k] for k in sorted(seen)]


def read_texts(path: str) -> tuple[RunTexts, list[str]]:
    """The three files of a run directory (None when missing) and any read errors."""
    texts: dict[str, str | None] = {}
    errors: list[str] = []
    for name in _RUN_FILES:
        p = os.path.join(path, name)
        try:
            with open(p, encoding="utf-8", errors="replace") as fh:
                texts[name] = fh.read()
        except FileNotFoundError:
            texts[name] = None
        except OSError as exc:
            texts[name] = "\x00unreadable"
            errors.append(f"{name}: unreadable ({exc})")
    return RunTexts(texts["test.yaml"], texts["results.json"], texts["history.jsonl"]), errors


def _parse(ref: RunRef, batch_id: str) -> Any:
    texts, errors = read_texts(ref.path)
    parsed = parse_run(ref.run_id, ref.root, ref.path, texts, batch_id=batch_id)
    if errors:
        parsed.run["problems"] = errors + parsed.run["problems"]
        parsed.run["status"] = "malformed"
    return parsed


def _ingest_run(ref: RunRef, batch_id: str, ops_dir: str) -> tuple[Any, ...]:
    """Executor side: parse one run, write its ops files, return its small-table rows."""
    p = _parse(ref, batch_id)
    write_op_files(ops_dir, ref.run_id, batch_id, op_columns(p))
    run = tuple(p.run[c] for c in RUNS.fieldNames())
    faults = [(ref.run_id, w.seq, w.kind, list(w.targets), w.start_ns, w.end_ns, w.healed, r.unavailable_s,
               r.recovery_s) for w, r in zip(p.faults, p.recovery)]
    anomalies = [tuple(a[c] for c in ANOMALIES.fieldNames()) for a in p.anomalies]
    checks = [tuple(c[k] for k in CHECKS.fieldNames()) for c in p.checks]
    return run, faults, anomalies, checks


def read_table(spark: SparkSession, warehouse: str | Path, table: str) -> DataFrame:
    """A warehouse table, or an empty DataFrame with its schema if it was never written."""
    path = table_path(warehouse, table)
    if not Path(path).is_dir() or not any(Path(path).glob("**/*.parquet")):
        return spark.createDataFrame([], TABLES[table])
    return spark.read.schema(TABLES[table]).parquet(path)


def ingested_ids(spark: SparkSession, warehouse: str | Path) -> set[str]:
    """The run ids in the warehouse manifest."""
    return {r.run_id for r in read_table(spark, warehouse, "ingested").select("run_id").collect()}


def ingest(spark: SparkSession, roots: Sequence[str | Path], warehouse: str | Path, *,
           now: _dt.datetime | None = None) -> IngestSummary:
    """Ingest every run of ``roots`` not yet in ``warehouse`` (see the module docstring)."""
    Path(warehouse).mkdir(parents=True, exist_ok=True)
    return ingest_refs(spark, discover_runs(roots), warehouse, now=now)


def ingest_refs(spark: SparkSession, refs: Sequence[RunRef], warehouse: str | Path, *,
                now: _dt.datetime | None = None) -> IngestSummary:
    """Ingest the runs ``refs`` that are not yet in ``warehouse`` (steps 2 and 3 of the module docstring)."""
    now = now or _dt.datetime.now(_dt.UTC)
    batch_id = now.strftime("%Y%m%dT%H%M%S.%fZ")
    Path(warehouse).mkdir(parents=True, exist_ok=True)
    done = ingested_ids(spark, warehouse)
    new = [r for r in refs if r.run_id not in done]
    summary = IngestSummary(batch_id=batch_id, found=len(refs), skipped=len(refs) - len(new))
    if not new:
        return summary
    sc = spark.sparkContext
    slices = min(len(new), max(2, sc.defaultParallelism * 4))
    ops_dir = str(Path(table_path(warehouse, "ops")).resolve())
    rows = sc.parallelize(new, slices).map(lambda ref: _ingest_run(ref, batch_id, ops_dir)).collect()

    small = {
        "faults": (FAULTS, [f for r in rows for f in r[1]]),
        "anomalies": (ANOMALIES, [a for r in rows for a in r[2]]),
        "checks": (CHECKS, [c for r in rows for c in r[3]]),
        "runs": (RUNS, [r[0] for r in rows]),
    }
    for name, (schema, data) in small.items():
        if data:
            spark.createDataFrame(data, schema).coalesce(1).write.mode("append").parquet(table_path(warehouse, name))
    run_cols = RUNS.fieldNames()
    i_id, i_status, i_problems, i_ops = (run_cols.index(c) for c in ("run_id", "status", "problems", "op_count"))
    manifest = [(r[0][i_id], batch_id, r[0][i_status], now) for r in rows]
    spark.createDataFrame(manifest, INGESTED).coalesce(1).write.mode("append").parquet(
        table_path(warehouse, "ingested"))

    summary.ingested = len(rows)
    for r in rows:
        run = r[0]
        summary.ops += run[i_ops]
        summary.statuses[run[i_status]] = summary.statuses.get(run[i_status], 0) + 1
        if run[i_status] != "ok":
            summary.problem_runs.append((run[i_id], run[i_status], list(run[i_problems])))
    return summary
