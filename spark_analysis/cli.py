"""``splitbrain spark``: ingest results into a Parquet warehouse, write the dashboard, re-check on Spark.

Verbs::

    splitbrain spark ingest RESULTS_DIR... --out WAREHOUSE [--master URL]
    splitbrain spark report --warehouse W --out DIR [--alpha A] [--min-runs N] [--master URL]
    splitbrain spark check  --warehouse W [--where SQL] [--checker queue|counts] [--master URL]
    splitbrain spark synth  OUT --runs N --ops M [--seed S] [--torn K] [--no-results K] [--bad-yaml K]
                            [--versions V1,V2] [--regression VERSION:WORKLOAD:NEMESIS:RATE] [--backends B1,B2]
    splitbrain spark gate   --baseline V --candidate V (--results DIR... | --warehouse W) [--alpha A]
                            [--min-runs N] [--correction holm|bh] [--test boschloo|fisher] [--junit PATH] [--master URL]

Spark runs embedded (``local[*]``) unless ``--master`` names a cluster.  Exit codes: 0 done (ingest: also
when damaged runs were found, they are listed); check: 0 all valid, 1 some invalid, 2 some unknown or no
runs selected; gate: 0 pass, 1 the candidate is significantly worse in some cell, 2 too few runs to decide;
2 bad input (one line naming the flag).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="spark_command", metavar="VERB")
    sub.required = True

    def master(p: argparse.ArgumentParser) -> None:
        p.add_argument("--master", default="local[*]", help="Spark master URL (default: embedded local[*])")

    p = sub.add_parser("ingest", help="read results directories into the Parquet warehouse (incremental)")
    p.add_argument("results", nargs="+", metavar="RESULTS_DIR")
    p.add_argument("--out", required=True, metavar="WAREHOUSE")
    master(p)
    p = sub.add_parser("report", help="write the interactive dashboard (a directory; open its index.html)")
    p.add_argument("--warehouse", required=True)
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--alpha", type=float, default=0.05, help="the version comparisons' significance level (0.05)")
    p.add_argument("--min-runs", type=int, default=20,
                   help="checked runs each version needs in a cell before it is compared (default 20)")
    master(p)
    p = sub.add_parser("check", help="re-run a checker over stored histories, one Spark task per run")
    p.add_argument("--warehouse", required=True)
    p.add_argument("--where", default=None, help="SQL condition over the runs table, e.g. \"workload = 'queue'\"")
    p.add_argument("--checker", default=None, choices=["queue", "counts"],
                   help="default: queue if checker.queue is installed, else counts")
    master(p)
    p = sub.add_parser("synth", help="write a seeded synthetic results corpus")
    p.add_argument("out", metavar="OUT")
    p.add_argument("--runs", type=int, default=40)
    p.add_argument("--ops", type=int, default=500)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--days", type=int, default=3)
    p.add_argument("--torn", type=int, default=0)
    p.add_argument("--no-results", type=int, default=0)
    p.add_argument("--bad-yaml", type=int, default=0)
    p.add_argument("--versions", default=None, metavar="V1,V2,...",
                   help="versions drawn independently of cells, uniformly per run (default: 0.1.0,0.2.0)")
    p.add_argument("--regression", default=None, metavar="VERSION:WORKLOAD:NEMESIS:RATE",
                   help="runs of VERSION in that cell are anomalous at RATE instead of the cell's rate")
    p.add_argument("--backends", default="local", metavar="B1,B2,...",
                   help="backends drawn independently of cells, uniformly per run (default: local)")
    p = sub.add_parser("gate", help="release gate: is the candidate version worse than the baseline, per cell?")
    p.add_argument("--baseline", required=True, metavar="VERSION")
    p.add_argument("--candidate", required=True, metavar="VERSION")
    p.add_argument("--results", nargs="+", default=[], metavar="DIR", help="results directories read directly")
    p.add_argument("--warehouse", default=None, help="a warehouse written by `spark ingest`")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level after correction (default 0.05)")
    p.add_argument("--min-runs", type=int, default=20,
                   help="checked runs each version needs in a cell before it is tested (default 20)")
    p.add_argument("--correction", default="holm", choices=["holm", "bh"],
                   help="multiple-comparison control: holm (family-wise) or bh (false discovery rate)")
    p.add_argument("--test", default="boschloo", choices=["boschloo", "fisher"], help="exact one-sided test")
    p.add_argument("--junit", default="gate-junit.xml", metavar="PATH", help="JUnit XML out (default gate-junit.xml)")
    master(p)


def _ingest(args: Any) -> int:
    from spark_analysis.ingest import ingest
    from spark_analysis.session import get_session

    t0 = time.monotonic()
    spark = get_session(args.master)
    try:
        s = ingest(spark, args.results, args.out)
    except FileNotFoundError as exc:
        print(f"spark ingest: {exc}", file=sys.stderr)
        return 2
    print(f"{s.describe()} in {time.monotonic() - t0:.1f} s")
    if s.problem_runs:
        print(f"{len(s.problem_runs)} damaged or crashed runs (ingested with their status):")
        for run_id, status, problems in s.problem_runs:
            print(f"  {status:9} {run_id}: {'; '.join(problems)}")
    return 0


def _report_flag_problem(args: Any) -> str | None:
    """What is wrong with the report's flags, checked before Spark starts (None: nothing)."""
    from pathlib import Path

    if not Path(args.warehouse, "runs").is_dir():
        return f"--warehouse {args.warehouse}: no runs table there (write one with `splitbrain spark ingest`)"
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        return f"--out {args.out}: exists and is not a directory"
    if not 0.0 < args.alpha < 1.0:
        return f"--alpha: {args.alpha} is outside (0, 1)"
    if args.min_runs < 1:
        return f"--min-runs: {args.min_runs} is below 1"
    return None


def _report(args: Any) -> int:
    from spark_analysis.report import write_report
    from spark_analysis.session import get_session

    problem = _report_flag_problem(args)
    if problem:
        print(f"spark report: {problem}", file=sys.stderr)
        return 2
    page = write_report(get_session(args.master), args.warehouse, args.out, alpha=args.alpha,
                        min_runs=args.min_runs)
    print(f"wrote {page} (open it in a browser, or `splitbrain serve --dashboard {args.out}`)")
    return 0


def _check(args: Any) -> int:
    from spark_analysis.recheck import spark_check
    from spark_analysis.session import get_session

    try:
        verdicts = spark_check(get_session(args.master), args.warehouse, where=args.where, checker=args.checker)
    except ValueError as exc:
        print(f"spark check: {exc}", file=sys.stderr)
        return 2
    if not verdicts:
        print("spark check: no runs selected", file=sys.stderr)
        return 2
    for v in verdicts:
        err = f" error={v[8]}" if v[8] else ""
        print(f"{v[2]:8} {v[0]} ({v[1]}: ok={v[3]} fail={v[4]} info={v[5]} lost={v[6]} anomalies={v[7]}){err}")
    valids = {v[2] for v in verdicts}
    return 1 if "false" in valids else 2 if "unknown" in valids else 0


def _synth(args: Any) -> int:
    from spark_analysis.synth import DEFAULT_VERSIONS, generate, parse_regression

    try:
        versions = DEFAULT_VERSIONS if args.versions is None else tuple(
            v.strip() for v in args.versions.split(",") if v.strip())
        regressions = () if args.regression is None else (parse_regression(args.regression),)
        backends = tuple(b.strip() for b in args.backends.split(",") if b.strip())
        c = generate(args.out, runs=args.runs, ops=args.ops, seed=args.seed, days=args.days, torn=args.torn,
                     no_results=args.no_results, bad_yaml=args.bad_yaml, versions=versions,
                     regressions=regressions, backends=backends)
    except ValueError as exc:
        print(f"spark synth: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {len(c.runs)} runs ({sum(r.anomalous for r in c.runs)} anomalous) under {c.root} "
          f"(seed {args.seed})")
    return 0


def _gate_flag_problem(args: Any) -> str | None:
    """What is wrong with the gate's flags, checked before Spark starts (None: nothing)."""
    from pathlib import Path

    for flag, v in (("--baseline", args.baseline), ("--candidate", args.candidate)):
        if not v.strip():
            return f"{flag}: an empty version"
    if args.baseline == args.candidate:
        return f"--candidate: {args.candidate!r} is also the baseline; compare two different versions"
    if not 0.0 < args.alpha < 1.0:
        return f"--alpha: {args.alpha} is outside (0, 1)"
    if args.min_runs < 1:
        return f"--min-runs: {args.min_runs} is below 1"
    if not args.results and args.warehouse is None:
        return "--results DIR... or --warehouse W: no runs to gate on"
    for d in args.results:
        if not Path(d).is_dir():
            return f"--results {d}: does not exist or is not a directory"
    if args.warehouse is not None and not Path(args.warehouse, "runs").is_dir():
        return f"--warehouse {args.warehouse}: no runs table there (write one with `splitbrain spark ingest`)"
    junit = Path(args.junit)
    if junit.is_dir() or (junit.parent.exists() and not junit.parent.is_dir()):
        return f"--junit {args.junit}: not a file path"
    return None


def _gate(args: Any) -> int:
    from spark_analysis.gate import cell_counts, gate_runs, render_junit, render_table, summary_line, write_junit
    from spark_analysis.regression import gate
    from spark_analysis.session import get_session

    problem = _gate_flag_problem(args)
    if problem:
        print(f"spark gate: {problem}", file=sys.stderr)
        return 2
    spark = get_session(args.master)
    runs = gate_runs(spark, warehouse=args.warehouse, results=args.results)
    cells, versions = cell_counts(runs, args.baseline, args.candidate)
    missing = [v for v in (args.baseline, args.candidate) if not versions.get(v)]
    if missing:
        seen = ", ".join(f"{v} ({n})" for v, n in sorted(versions.items())) or "none"
        print(f"spark gate: no checked runs of version {' or '.join(missing)}; versions seen (checked runs): {seen}",
              file=sys.stderr)
        return 2
    result = gate(cells, alpha=args.alpha, min_runs=args.min_runs, correction=args.correction, test=args.test)
    print(render_table(result, args.baseline, args.candidate))
    try:
        write_junit(args.junit, render_junit(result, args.baseline, args.candidate))
    except OSError as exc:
        print(f"spark gate: --junit {args.junit}: cannot write ({exc.strerror})", file=sys.stderr)
        return 2
    print(summary_line(result, args.baseline, args.candidate))
    print(f"wrote {args.junit}")
    return result.exit_code


def run(args: Any) -> int:
    verbs = {"ingest": _ingest, "report": _report, "check": _check, "synth": _synth, "gate": _gate}
    return verbs[args.spark_command](args)
