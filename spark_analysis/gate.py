"""``splitbrain spark gate``: is the candidate version worse than the baseline, cell by cell?

The shell around :mod:`spark_analysis.regression`.  Spark does the aggregation: the runs come from a
warehouse's ``runs`` table (``--warehouse``), from results directories read directly (``--results``; each run's
test.yaml and results.json are parsed on the executors, histories are never read), or both (a run id seen
twice counts once).  :func:`spark_analysis.metrics.anomaly_rates` counts checked and anomalous runs per
(workload, nemesis, cluster_version); the driver collects those few rows, builds one
:class:`~spark_analysis.regression.CellCounts` per cell that either version ran, and
:func:`~spark_analysis.regression.gate` decides.  :func:`render_table` and :func:`render_junit` are pure text.

A run's version is its ``cluster_version`` column: the spec's ``cluster.version`` label when set, else the
version the run recorded in results.json (``provenance``; docs/spark.md).  Runs of other versions are ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from spark_analysis.regression import CellCounts, CellVerdict, GateResult

__all__ = ["VersionCounts", "cell_counts", "gate_runs", "render_junit", "render_table", "summary_line",
           "write_junit"]

VersionCounts = dict[str, int]  # checked runs per version seen, for "no runs of version X" messages


def gate_runs(spark: Any, *, warehouse: str | None, results: Sequence[str]) -> Any:
    """The runs to gate on as a DataFrame in :data:`spark_analysis.tables.RUNS` shape.

    Raises:
        FileNotFoundError: a results directory that does not exist (names it).
    """
    from spark_analysis.ingest import discover_runs, read_table
    from spark_analysis.tables import RUNS

    frames = []
    if warehouse is not None:
        frames.append(read_table(spark, warehouse, "runs"))
    if results:
        refs = discover_runs(results)
        if refs:
            sc = spark.sparkContext
            rows = sc.parallelize(refs, min(len(refs), max(2, sc.defaultParallelism * 2))).map(_run_row)
            frames.append(spark.createDataFrame(rows, RUNS))
    if not frames:
        return spark.createDataFrame([], RUNS)
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out.dropDuplicates(["run_id"])


def _run_row(ref: Any) -> tuple[Any, ...]:
    """Executor side: one run's ``runs`` row from its test.yaml and results.json (the history is not read)."""
    import os

    from spark_analysis.runfiles import RunTexts, parse_run
    from spark_analysis.tables import RUNS

    texts: dict[str, str | None] = {}
    for name in ("test.yaml", "results.json"):
        try:
            with open(os.path.join(ref.path, name), encoding="utf-8", errors="replace") as fh:
                texts[name] = fh.read()
        except OSError:
            texts[name] = None
    history = "" if os.path.exists(os.path.join(ref.path, "history.jsonl")) else None
    parsed = parse_run(ref.run_id, ref.root, ref.path, RunTexts(texts["test.yaml"], texts["results.json"], history))
    return tuple(parsed.run[c] for c in RUNS.fieldNames())


def cell_counts(runs: Any, baseline: str, candidate: str) -> tuple[list[CellCounts], VersionCounts]:
    """Per cell, the checked/anomalous runs of both versions; and checked runs per version seen (Spark)."""
    from pyspark.sql import functions as F

    from spark_analysis.metrics import anomaly_rates

    rates = anomaly_rates(runs.where(F.col("cluster_version").isin(baseline, candidate)),
                          ("workload", "nemesis", "cluster_version")).collect()
    per: dict[tuple[str, str], dict[str, tuple[int, int]]] = {}
    for r in rates:
        per.setdefault((r["workload"], r["nemesis"]), {})[r["cluster_version"]] = (int(r["anomalous"]), int(r["runs"]))
    cells = []
    for (workload, nemesis), v in sorted(per.items()):
        kb, nb = v.get(baseline, (0, 0))
        kc, nc = v.get(candidate, (0, 0))
        cells.append(CellCounts(workload, nemesis, kb, nb, kc, nc))
    versions = anomaly_rates(runs, ("cluster_version",)).collect()
    return cells, {str(r["cluster_version"]): int(r["runs"]) for r in versions}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.2f}"


def _p(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}" if x >= 1e-4 else f"{x:.1e}"


def _rate(k: int, n: int) -> str:
    return f"{k}/{n} " + (f"{k / n:.2f}" if n else "-")


def render_table(result: GateResult, baseline: str, candidate: str) -> str:
    """The gate's table, worst cell first, with a header line naming the method."""
    test = "Boschloo" if any(c.test == "boschloo" for c in result.cells) else "Fisher"
    head = (f"release gate: candidate {candidate} vs baseline {baseline} ({test} exact one-sided test per cell, "
            f"{'Holm' if result.correction == 'holm' else 'Benjamini-Hochberg'} correction, alpha {result.alpha}, "
            f"at least {result.min_runs} checked runs per version)")
    rows = [("verdict", "workload", "nemesis", f"baseline {baseline}", f"candidate {candidate}",
             "diff [95% CI]", "p", "adj p")]
    for c in result.cells:
        k = c.counts
        ci = "-" if c.diff is None else f"{_pct(c.diff)} [{_pct(c.diff_low)}, {_pct(c.diff_high)}]"
        rows.append((c.verdict.upper() if c.verdict == "regressed" else c.verdict, k.workload, k.nemesis,
                     _rate(k.k_b, k.n_b), _rate(k.k_c, k.n_c), ci, _p(c.p_value), _p(c.adjusted_p)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [head] + ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join(lines)


def _cell_name(c: CellVerdict) -> str:
    return f"{c.counts.workload} x {c.counts.nemesis}"


def summary_line(result: GateResult, baseline: str, candidate: str) -> str:
    """One line: PASS, FAIL (naming the regressed cells) or UNDECIDED (naming the cells short of runs)."""
    short = "; ".join(f"{_cell_name(c)} ({baseline}: {c.counts.n_b}, {candidate}: {c.counts.n_c})"
                      for c in result.undecided)
    if result.regressed:
        names = ", ".join(_cell_name(c) for c in result.regressed)
        also = f"; too few runs to decide in {len(result.undecided)} more: {short}" if short else ""
        return (f"gate: FAIL -- candidate {candidate} is significantly worse than {baseline} in "
                f"{len(result.regressed)} cell(s): {names}{also}")
    if not result.cells:
        return f"gate: UNDECIDED -- no checked runs of {baseline} or {candidate} in any cell"
    if result.undecided:
        return (f"gate: UNDECIDED -- too few checked runs (need {result.min_runs} per version) in "
                f"{len(result.undecided)} cell(s): {short}")
    return f"gate: PASS -- candidate {candidate} is not significantly worse than {baseline} in any of " \
           f"{len(result.cells)} cell(s)"


def render_junit(result: GateResult, baseline: str, candidate: str) -> str:
    """JUnit XML: one testcase per cell; regressed is a failure, too few runs an error (verdict unknown)."""
    cases = []
    for c in result.cells:
        k = c.counts
        detail = (f"baseline {baseline}: {k.k_b}/{k.n_b} anomalous; candidate {candidate}: {k.k_c}/{k.n_c}; "
                  f"p={_p(c.p_value)} adjusted={_p(c.adjusted_p)} ({c.test or 'not tested'})")
        body = ""
        if c.verdict == "regressed":
            body = f"<failure message={quoteattr('regressed')}>{escape(detail)}</failure>"
        elif c.verdict == "too-few-runs":
            body = f"<error message={quoteattr(f'too few runs (need {result.min_runs})')}>{escape(detail)}</error>"
        else:
            body = f"<system-out>{escape(detail)}</system-out>"
        cases.append(f"  <testcase classname={quoteattr(f'gate.{candidate}-vs-{baseline}')} "
                     f"name={quoteattr(_cell_name(c))}>{body}</testcase>")
    props = {"baseline": baseline, "candidate": candidate, "alpha": str(result.alpha),
             "correction": result.correction, "min_runs": str(result.min_runs)}
    prop_xml = "".join(f"    <property name={quoteattr(n)} value={quoteattr(v)}/>\n" for n, v in props.items())
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<testsuite name="release-gate" tests="{len(cases)}" failures="{len(result.regressed)}" '
            f'errors="{len(result.undecided)}">\n  <properties>\n{prop_xml}  </properties>\n'
            + "".join(c + "\n" for c in cases) + "</testsuite>\n")


def write_junit(path: str | Path, text: str) -> None:
    """Write the JUnit text, creating parent directories (raises OSError when it cannot)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
