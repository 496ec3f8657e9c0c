"""``splitbrain spark gate``: the release gate over runs already made -- a warehouse, results directories, or both
-- decided by the same core as ``splitbrain gate`` (:mod:`spark_analysis.sequential`); and the gate's text.

The shell, in order:

1. :func:`gate_rows` -- Spark gathers one :data:`GateRow` per run of the two versions: the run's cell fields,
   seed, start time, status, verdict, definite anomaly kinds, whether its spec has safe settings, and its
   figures per fault kind.  From a ``--warehouse``: the ``runs``, ``anomalies``, ``faults`` and ``ops`` tables
   (the spec's settings are read from each run's ``test.yaml`` at its recorded path, on the executors).  From
   ``--results`` directories: each run is parsed on an executor with the ingest code
   (:func:`spark_analysis.runfiles.parse_run`).  Both give the same figures, the per-run checker's own
   (``runs.fault_figures``: :func:`spark_analysis.runfiles.fault_figures_field`, which is
   :func:`checker.perf.fault_kind_figures` -- the figures ``splitbrain gate`` compares too): per fault kind, the
   median over the run's windows of that kind of the recovery, of how long no write succeeded, and the p99
   latency of ok client ops invoked under that kind of fault.  Warehouses ingested before that column existed
   have no figures: rebuild them.  A run id seen in both sources counts once.
2. :func:`gate_inputs` (pure) -- the driver turns the rows into cells and :class:`RunOutcome`\\ s.  A cell is
   ``workload x nemesis x nemesis_mode``; with ``cell_kind="auto"`` runs whose spec has unsafe settings (or
   known bugs, or no readable spec) form a separate *rate* cell, ``"... [unsafe]"``, and safe runs a *safety*
   cell (``"rate"`` / ``"safety"`` force one kind for every cell).  Each build's runs of a cell are ordered by
   seed, then start time, and the i-th run of each build is paired with the other's i-th (so runs of the same
   seeds pair with each other when both versions ran the same seeds): the pairing key handed to the core is
   that rank.  ``partial`` and ``malformed`` runs are left out (counted); ``crashed`` ones are given as crashed.
3. :func:`spark_analysis.sequential.decide` decides; :func:`render_table`, :func:`summary_line` and
   :func:`render_junit` are pure text, shared with ``splitbrain gate``.

A run's version is its ``cluster_version`` column: the spec's ``cluster.version`` label when set, else the
version the run recorded in results.json (``provenance``; docs/spark.md).  Runs of other versions are ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from spark_analysis.sequential import DECISIONS, Cell, CellReport, FaultFigures, GateReport, RunOutcome

__all__ = ["CELL_KIND_CHOICES", "GateInputs", "GateRow", "fault_figures", "gate_inputs", "gate_rows",
           "render_junit", "render_table", "spec_is_safe", "summary_line", "write_junit"]

CELL_KIND_CHOICES = ("auto", "rate", "safety")

# One run as the shell hands it to the driver (see the module docstring):
# (run_id, workload, nemesis, nemesis_mode, version, seed, start_time, status, valid, anomaly kinds, safe,
#  [(fault kind, recovery_s, unavailable_s, p99_latency_ms), ...])
GateRow = tuple[str, str, str, str, str, Any, Any, str, str, list[str], Any, list[tuple[str, Any, Any, Any]]]


def spec_is_safe(spec: Any) -> bool | None:
    """Whether a test.yaml mapping has safe settings (None: not a mapping): ``all_ack_in_sync_state_set`` true,
    ``enable_elect_unclean_master`` false (the defaults) and no deliberate ``bugs`` (docs/workloads.md)."""
    if not isinstance(spec, Mapping):
        return None
    raw = spec.get("cluster")
    cluster: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    return (cluster.get("all_ack_in_sync_state_set", True) is True
            and cluster.get("enable_elect_unclean_master", False) is False and not cluster.get("bugs"))


def fault_figures(text: str | None) -> list[tuple[str, Any, Any, Any]]:
    """Per fault kind ``(kind, recovery_s, unavailable_s, p99_latency_ms)`` from a run's ``fault_figures`` JSON
    (module docstring, step 1); a missing or unreadable value gives none."""
    import json

    try:
        data = json.loads(text) if text else {}
    except ValueError:
        return []
    if not isinstance(data, Mapping):
        return []
    return [(str(k), v.get("recovery_s"), v.get("unavailable_s"), v.get("p99_latency_ms"))
            for k, v in sorted(data.items()) if isinstance(v, Mapping)]


def gate_rows(spark: Any, *, warehouse: str | None, results: Sequence[str], versions: Sequence[str]) -> list[GateRow]:
    """Every run of ``versions`` as a :data:`GateRow` (Spark; a run id seen twice counts once).

    Raises:
        FileNotFoundError: a results directory that does not exist (names it).
    """
    rows: dict[str, GateRow] = {}
    if results:
        from spark_analysis.ingest import discover_runs

        refs = discover_runs(results)
        if refs:
            sc = spark.sparkContext
            wanted = list(versions)
            got = sc.parallelize(refs, min(len(refs), max(2, sc.defaultParallelism * 2))).map(_results_row).filter(
                lambda r: r is not None and r[4] in wanted).collect()
            rows.update((r[0], r) for r in got)
    if warehouse is not None:
        for r in _warehouse_rows(spark, warehouse, versions):
            rows.setdefault(r[0], r)
    return [rows[k] for k in sorted(rows)]


def _results_row(ref: Any) -> GateRow | None:
    """Executor side: one run directory's :data:`GateRow`, parsed with the ingest code."""
    import yaml

    from spark_analysis.ingest import read_texts
    from spark_analysis.runfiles import parse_run

    texts, errors = read_texts(ref.path)
    p = parse_run(ref.run_id, ref.root, ref.path, texts)
    run = p.run
    status = "malformed" if errors else run["status"]
    try:
        safe = spec_is_safe(yaml.safe_load(texts.test_yaml)) if texts.test_yaml else None
    except yaml.YAMLError:
        safe = None
    return (run["run_id"], run["workload"], run["nemesis"], run["nemesis_mode"] or "random",
            run["cluster_version"] or "unknown", run["seed"], run["start_time"], status, run["valid"],
            sorted({a["type"] for a in p.anomalies}), safe, fault_figures(run["fault_figures"]))


def _spec_safe_at(path: Any) -> bool | None:
    """Executor side: :func:`spec_is_safe` of the test.yaml in run directory ``path`` (None when unreadable)."""
    import os

    import yaml

    try:
        with open(os.path.join(str(path), "test.yaml"), encoding="utf-8", errors="replace") as fh:
            return spec_is_safe(yaml.safe_load(fh.read()))
    except (OSError, yaml.YAMLError, TypeError):
        return None


def _warehouse_rows(spark: Any, warehouse: str, versions: Sequence[str]) -> list[GateRow]:
    from pyspark.sql import functions as F

    from spark_analysis.ingest import read_table

    runs = (read_table(spark, warehouse, "runs").fillna({"cluster_version": "unknown", "nemesis_mode": "random"})
            .where(F.col("cluster_version").isin(*versions)))
    ids = runs.select("run_id")
    kinds = (read_table(spark, warehouse, "anomalies").join(ids, "run_id", "left_semi").where(F.col("count") > 0)
             .groupBy("run_id").agg(F.sort_array(F.collect_set("type")).alias("kinds")))
    table = (runs.join(kinds, "run_id", "left")
             .select("run_id", "workload", "nemesis", "nemesis_mode", "cluster_version", "seed", "start_time",
                     "status", "valid", "kinds", "path", "fault_figures"))
    rows = table.rdd.map(lambda r: (*r[:10], _spec_safe_at(r[10]), r[11])).collect()
    return [(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], list(r[9] or []), r[10], fault_figures(r[11]))
            for r in rows]


# -- the driver's part (pure) ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GateInputs:
    """What :func:`gate_inputs` hands the core, plus the counts the summary reports."""

    cells: tuple[Cell, ...]
    outcomes: tuple[RunOutcome, ...]
    runs_per_version: Mapping[str, int]  # usable or crashed runs of each version
    damaged: int  # partial or malformed runs left out


def gate_inputs(rows: Iterable[GateRow], baseline: str, candidate: str, *, cell_kind: str = "auto") -> GateInputs:
    """Cells and outcomes for :func:`spark_analysis.sequential.decide` (module docstring, step 2).

    Raises:
        ValueError: ``cell_kind`` not in :data:`CELL_KIND_CHOICES`, or ``baseline == candidate``.
    """
    if cell_kind not in CELL_KIND_CHOICES:
        raise ValueError(f"cell_kind: {cell_kind!r} is not one of {list(CELL_KIND_CHOICES)}")
    if baseline == candidate:
        raise ValueError(f"candidate: {candidate!r} is also the baseline")
    build_of = {baseline: "baseline", candidate: "candidate"}
    kinds: dict[str, str] = {}
    per: dict[tuple[str, str], list[GateRow]] = {}
    counts = {baseline: 0, candidate: 0}
    damaged = 0
    for r in rows:
        version = r[4]
        if version not in build_of:
            continue
        if r[7] not in ("ok", "crashed"):
            damaged += 1
            continue
        counts[version] += 1
        key = f"{r[1]} x {r[2]} x {r[3]}"
        safe = r[10]
        if cell_kind == "auto":
            kind = "safety" if safe is True else "rate"
            key += "" if safe is True else " [unsafe]" if safe is False else " [settings unknown]"
        else:
            kind = cell_kind
        kinds[key] = kind
        per.setdefault((key, build_of[version]), []).append(r)
    outcomes = []
    for (key, build), runs in sorted(per.items()):
        runs.sort(key=lambda r: (r[5] is None, r[5] if r[5] is not None else 0, str(r[6]), r[0]))
        for rank, r in enumerate(runs):
            outcomes.append(_outcome(key, build, rank, r))
    cells = tuple(Cell(k, kinds[k]) for k in sorted(kinds))
    return GateInputs(cells, tuple(outcomes), counts, damaged)


def _outcome(key: str, build: str, rank: int, r: GateRow) -> RunOutcome:
    if r[7] == "crashed":
        return RunOutcome(key, build, rank, "crashed", ref=r[0])
    anomalies = tuple(r[9])
    verdict = {"true": "valid", "false": "invalid"}.get(r[8], "unknown")
    if anomalies:
        verdict = "invalid"  # a definite anomaly is a violation whatever the composed verdict said
    faults = {k: FaultFigures(rec, unav, p99) for k, rec, unav, p99 in r[11]}
    return RunOutcome(key, build, rank, verdict, anomalies, faults, ref=r[0])


# -- text -----------------------------------------------------------------------------------------------------


def _p(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}" if x >= 1e-4 else f"{x:.1e}"


def _count(c: CellReport, build: str) -> str:
    runs = c.baseline_runs if build == "baseline" else c.candidate_runs
    bad = c.baseline_bad if build == "baseline" else c.candidate_bad
    crashed = c.baseline_crashed if build == "baseline" else c.candidate_crashed
    return f"{bad}/{runs} bad" + (f" +{crashed} crashed" if crashed else "")


def _effect(c: CellReport) -> str:
    if c.cell.kind == "safety":
        if c.candidate_kinds:
            return ", ".join(c.candidate_kinds)
        return f"rate < {c.rule_of_three:.3f} (95%)" if c.candidate_clean else "-"
    if c.rate_diff is None:
        return "-"
    return (f"{c.rate_diff:+.2f} [{c.rate_diff_low:+.2f}, {c.rate_diff_high:+.2f}] "
            f"disc {c.discordant_candidate}:{c.discordant_baseline}")


def _worst_first(report: GateReport) -> list[CellReport]:
    rank = {d: i for i, d in enumerate(DECISIONS)}
    return sorted(report.cells, key=lambda c: (rank[c.decision], c.cell.key))


def render_table(report: GateReport, baseline: str, candidate: str) -> str:
    """The gate's table: a header naming the method; per cell (worst first) its decision, kind, both builds' bad
    runs, the effect with its 95% interval (rate cells: difference of bad-run rates over the pairs and the
    discordant pairs candidate:baseline; safety cells: the anomaly kinds or the rule-of-three bound) and the runs
    used; each performance comparison as a row under its cell; then the reason of every cell not passed."""
    s = report.settings
    head = (f"release gate: candidate {candidate} vs baseline {baseline} (safety cells: fail on a definite anomaly, "
            f"pass after {s.safety_runs} clean runs; rate cells: SPRT on discordant pairs, alpha "
            f"{report.rate_alpha:.3g} each; performance: Wilcoxon signed-rank on the first {s.perf_runs} pairs, "
            f"alpha {report.perf_alpha:.3g} per cell, regression > {1 + s.min_effect:g}x; family-wise alpha "
            f"{s.alpha:g})")
    rows = [("decision", "cell", "kind", f"baseline {baseline}", f"candidate {candidate}", "effect [95% CI]", "runs")]
    ordered = _worst_first(report)
    for c in ordered:
        rows.append((c.decision.upper() if c.decision == "fail" else c.decision, c.cell.key, c.cell.kind,
                     _count(c, "baseline"), _count(c, "candidate"), _effect(c), str(c.runs_used)))
        for p in c.perf:
            rows.append(("  SLOWER" if p.regression else "  ok", f"  {p.fault_kind} {p.metric}", "perf",
                         f"median {p.baseline_median:.3g}", f"median {p.candidate_median:.3g}",
                         f"{p.ratio:.2f}x [{p.ratio_low:.2f}, {p.ratio_high:.2f}] p={_p(p.p_value)}", str(p.pairs)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [head] + ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    lines += [f"{c.decision}: {c.cell.key}: {c.reason}" for c in ordered if c.decision != "pass"]
    return "\n".join(lines)


def summary_line(report: GateReport, baseline: str, candidate: str) -> str:
    """One line: PASS, FAIL (naming each failed cell and why) or UNDECIDED (naming the open cells)."""
    used = f"{report.runs_used} runs"
    if report.failed:
        why = "; ".join(f"{c.cell.key}: {c.reason}" for c in report.failed)
        return (f"gate: FAIL -- candidate {candidate} vs baseline {baseline}: {len(report.failed)} cell(s) failed "
                f"({used}): {why}")
    if report.open:
        names = ", ".join(f"{c.cell.key} ({c.runs_used} runs)" for c in report.open)
        within = f"within the budget of {report.settings.budget_runs} runs" if not report.final else "on these runs"
        return f"gate: UNDECIDED -- {len(report.open)} cell(s) not decided {within} ({used}): {names}"
    return (f"gate: PASS -- candidate {candidate} is no worse than {baseline} in all {len(report.cells)} cell(s) "
            f"({used})")


def render_junit(report: GateReport, baseline: str, candidate: str) -> str:
    """JUnit XML: one testcase per cell; a failed cell is a failure, an open one an error (verdict unknown)."""
    cases = []
    for c in report.cells:
        detail = (f"baseline {baseline}: {_count(c, 'baseline')}; candidate {candidate}: {_count(c, 'candidate')}; "
                  f"{c.reason}")
        if c.decision == "fail":
            body = f"<failure message={quoteattr(c.reason[:300])}>{escape(detail)}</failure>"
        elif c.decision in ("undecided", "running"):
            body = f"<error message={quoteattr(c.decision)}>{escape(detail)}</error>"
        else:
            body = f"<system-out>{escape(detail)}</system-out>"
        cases.append(f"  <testcase classname={quoteattr(f'gate.{candidate}-vs-{baseline}')} "
                     f"name={quoteattr(c.cell.key)}>{body}</testcase>")
    s = report.settings
    props = {"baseline": baseline, "candidate": candidate, "alpha": str(s.alpha), "power": str(s.power),
             "min_rate": str(s.min_rate), "min_effect": str(s.min_effect), "budget_runs": str(s.budget_runs),
             "runs_used": str(report.runs_used)}
    prop_xml = "".join(f"    <property name={quoteattr(n)} value={quoteattr(v)}/>\n" for n, v in props.items())
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<testsuite name="release-gate" tests="{len(cases)}" failures="{len(report.failed)}" '
            f'errors="{len(report.open)}">\n  <properties>\n{prop_xml}  </properties>\n'
            + "".join(c + "\n" for c in cases) + "</testsuite>\n")


def write_junit(path: str | Path, text: str) -> None:
    """Write the JUnit text, creating parent directories (raises OSError when it cannot)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
