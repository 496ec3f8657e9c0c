"""Re-checking stored histories: the same checker on one machine or mapped over runs on Spark executors.

Checkers (:data:`CHECKERS`):

* ``queue``  -- :func:`checker.queue.check_queue` (imported lazily, wrapped in ``check_safe``: a crash is an
  ``unknown`` verdict with the error, never a failed job);
* ``counts`` -- a small built-in per-run checker: the number of ok / fail / info client completions and the
  ``lost`` acknowledged sends (a ``send`` that completed ok whose value no ok ``poll``/``drain`` returned;
  an ``info`` send is never lost).  Valid iff nothing is lost.

Both produce a :data:`spark_analysis.tables.VERDICTS` row.  :func:`check_run_local` reads a run's
history.jsonl directly; :func:`spark_check` rebuilds each run's history from the warehouse ``ops`` table,
one Spark task per run, and appends the verdicts to the ``verdicts`` table.  The two must agree (tested).
"""

from __future__ import annotations

import datetime as _dt
import importlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from spark_analysis.runfiles import verdict_text

__all__ = ["CHECKERS", "check_history", "check_run_local", "counts_check", "default_checker", "spark_check"]

CHECKERS = ("queue", "counts")


def default_checker() -> str:
    """``queue`` when :mod:`checker.queue` is importable, else ``counts``."""
    try:
        importlib.import_module("checker.queue")
        return "queue"
    except ImportError:
        return "counts"


def counts_check(ops: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """ok/fail/info completion counts and lost acknowledged sends of one history (ops in history order)."""
    counts = {"ok": 0, "fail": 0, "info": 0}
    acked: dict[Any, int] = {}
    seen: set[Any] = set()
    for op in ops:
        if op.get("process") == "nemesis":
            continue
        typ = op.get("type")
        if typ in counts:
            counts[typ] += 1
        if typ != "ok":
            continue
        f, v = op.get("f"), op.get("value")
        if f == "send" and isinstance(v, dict):
            acked[json.dumps(v.get("value"), sort_keys=True)] = int(op.get("index", 0))
        elif f in ("poll", "drain") and isinstance(v, dict):
            for rec in v.get("records") or ():
                if isinstance(rec, list | tuple) and len(rec) == 2:
                    seen.add(json.dumps(rec[1], sort_keys=True))
    lost = sum(1 for k in acked if k not in seen)
    return {**counts, "lost": lost, "valid": lost == 0}


def _queue_result(ops: list[dict[str, Any]]) -> tuple[str, int, str | None, int | None]:
    compose = importlib.import_module("checker.compose")
    queue = importlib.import_module("checker.queue")
    r = compose.check_safe(queue.check_queue, ops)
    lost = r.stats.get("lost") if isinstance(r.stats, dict) else None
    return verdict_text(r.valid), sum(r.counts.values()), r.error, lost


def check_history(run_id: str, ops: list[dict[str, Any]], checker: str, *, now: _dt.datetime) -> tuple[Any, ...]:
    """A VERDICTS row for one run's history (ops as history dicts, in index order).

    Raises:
        ValueError: an unknown checker name.
    """
    c = counts_check(ops)
    if checker == "counts":
        return (run_id, checker, verdict_text(c["valid"]), c["ok"], c["fail"], c["info"], c["lost"], c["lost"],
                None, now)
    if checker == "queue":
        valid, n, error, lost = _queue_result(ops)
        return (run_id, checker, valid, c["ok"], c["fail"], c["info"], c["lost"] if lost is None else int(lost), n,
                error, now)
    raise ValueError(f"unknown checker {checker!r}; expected one of {', '.join(CHECKERS)}")


def check_run_local(run_id: str, path: str | Path, checker: str, *, now: _dt.datetime) -> tuple[Any, ...]:
    """Check one run directory's history.jsonl on this machine (a torn last line is dropped, as on ingest)."""
    from spark_analysis.runfiles import parse_history_text

    p = Path(path) / "history.jsonl"
    text = p.read_text(encoding="utf-8", errors="replace") if p.exists() else ""
    ops, _, _, _ = parse_history_text(text, [])
    return check_history(run_id, ops, checker, now=now)


def _op_dict(r: Any) -> dict[str, Any]:
    d: dict[str, Any] = json.loads(r["op_json"])
    d["index"], d["time"] = r["idx"], r["time_ns"]
    return d


def _check_partition(items: Iterable[tuple[str, Any]], checker: str, now: _dt.datetime) -> Iterator[tuple[Any, ...]]:
    by_run: dict[str, list[Any]] = {}
    for run_id, row in items:
        by_run.setdefault(run_id, []).append(row)
    for run_id, rows in by_run.items():
        rows.sort(key=lambda r: r["idx"])
        yield check_history(run_id, [_op_dict(r) for r in rows], checker, now=now)


def spark_check(spark: Any, warehouse: str | Path, *, where: str | None = None, checker: str | None = None,
                now: _dt.datetime | None = None) -> list[tuple[Any, ...]]:
    """Re-check the runs selected by ``where`` (SQL over the ``runs`` table), one task per run.

    Appends the verdicts to the warehouse ``verdicts`` table and returns them.

    Raises:
        ValueError: an unknown checker name.
    """
    from spark_analysis.ingest import read_table
    from spark_analysis.tables import VERDICTS, table_path

    checker = checker or default_checker()
    if checker not in CHECKERS:
        raise ValueError(f"unknown checker {checker!r}; expected one of {', '.join(CHECKERS)}")
    now = now or _dt.datetime.now(_dt.UTC)
    runs = read_table(spark, warehouse, "runs")
    if where:
        runs = runs.where(where)
    run_ids = sorted(r.run_id for r in runs.select("run_id").distinct().collect())
    if not run_ids:
        return []
    slot = {rid: i for i, rid in enumerate(run_ids)}
    ops = read_table(spark, warehouse, "ops").join(
        spark.createDataFrame([(r,) for r in run_ids], "run_id string"), "run_id", "left_semi")
    cols = ["run_id", "idx", "time_ns", "op_json"]
    keyed = ops.select(*cols).rdd.map(lambda r: (r["run_id"], r.asDict()))
    per_run = keyed.partitionBy(len(run_ids), lambda k: slot[k])  # one partition (one task) per run
    chk = checker
    verdicts = per_run.mapPartitions(lambda it: _check_partition(it, chk, now)).collect()
    checked = {v[0] for v in verdicts}
    verdicts += [check_history(r, [], checker, now=now) for r in run_ids if r not in checked]  # runs with no ops
    verdicts.sort(key=lambda v: v[0])
    spark.createDataFrame(verdicts, VERDICTS).coalesce(1).write.mode("append").parquet(
        table_path(warehouse, "verdicts"))
    return verdicts
