"""spark_analysis: nightly chaos results on Spark -- a Parquet warehouse, trend metrics, a dashboard, re-checks.

Vocabulary: a *results root* holds run directories ``<test>/<ts>/`` (test.yaml, history.jsonl,
results.json); the *warehouse* is a directory of Parquet tables built from them (runs, ops, faults,
anomalies, checks, the ``ingested`` manifest, verdicts; :mod:`spark_analysis.tables`).  Pure pieces
(:mod:`~spark_analysis.runfiles`, :mod:`~spark_analysis.faults`, :mod:`~spark_analysis.wilson`) parse and
compute without Spark; :mod:`~spark_analysis.ingest`, :mod:`~spark_analysis.metrics`,
:mod:`~spark_analysis.report` and :mod:`~spark_analysis.recheck` run on a SparkSession from
:func:`~spark_analysis.session.get_session`.  The release gate decides with the pure
:mod:`~spark_analysis.sequential`; :mod:`~spark_analysis.gate` gathers a warehouse's runs on Spark for it.
The dashboard: :mod:`~spark_analysis.report` collects its data on Spark, :mod:`~spark_analysis.comparisons` runs
the gate for every version pair, :mod:`~spark_analysis.page` writes the offline HTML directory; fault recovery is
the per-run checker's (:mod:`~spark_analysis.recovery`).
The command line is ``splitbrain spark`` (docs/spark.md).

Names that need pyspark are imported lazily, so ``import spark_analysis`` works without it.
"""

from __future__ import annotations

import importlib
from typing import Any

from spark_analysis.faults import FaultWindow, fault_windows
from spark_analysis.runfiles import STATUSES, ParsedRun, RunTexts, op_rows, parse_run
from spark_analysis.synth import Cell, Corpus, SynthRun, generate
from spark_analysis.wilson import wilson_interval

__all__ = [
    "STATUSES", "Cell", "Corpus", "FaultWindow", "IngestSummary", "ParsedRun", "RunTexts", "SynthRun",
    "check_run_local", "collect_dashboard", "comparison_rows", "counts_check", "fault_windows", "generate",
    "get_session", "ingest", "op_rows", "parse_run", "render_html", "spark_check", "wilson_interval", "window_recovery",
    "write_page", "write_report",
]

_LAZY = {
    "IngestSummary": "spark_analysis.ingest", "ingest": "spark_analysis.ingest",
    "get_session": "spark_analysis.session", "collect_dashboard": "spark_analysis.report",
    "render_html": "spark_analysis.report", "write_report": "spark_analysis.report",
    "spark_check": "spark_analysis.recheck", "check_run_local": "spark_analysis.recheck",
    "counts_check": "spark_analysis.recheck", "comparison_rows": "spark_analysis.comparisons",
    "window_recovery": "spark_analysis.recovery", "write_page": "spark_analysis.page",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'spark_analysis' has no attribute {name!r}")
