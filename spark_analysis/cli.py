"""``splitbrain spark``: ingest results into a Parquet warehouse, write the dashboard, re-check on Spark.

Verbs::

    splitbrain spark ingest RESULTS_DIR... --out WAREHOUSE [--master URL]
    splitbrain spark report --warehouse W --out DIR [--alpha A] [--min-runs N] [--master URL]
    splitbrain spark check  --warehouse W [--where SQL] [--checker queue|counts] [--master URL]
    splitbrain spark synth  OUT --runs N --ops M [--seed S] [--torn K] [--no-results K] [--bad-yaml K]
                            [--versions V1,V2] [--regression VERSION:WORKLOAD:NEMESIS:RATE] [--backends B1,B2]
    splitbrain spark gate   --baseline V --candidate V (--results DIR... | --warehouse W) [--alpha A] [--power P]
                            [--min-rate R] [--min-effect E] [--cell-kind auto|rate|safety] [--junit PATH]
                            [--master URL]

Spark runs embedded (``local[*]``) unless ``--master`` names a cluster.  Exit codes: 0 done (ingest: also
when damaged runs were found, they are listed); check: 0 all valid, 1 some invalid, 2 some unknown or no
runs selected; gate: 0 pass, 1 a cell failed (a safety anomaly, a rate or performance regression), 2 some cell
not decided on the runs there are; 2 bad input (one line naming the flag).
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
    p.add_argument("--alpha", type=float, default=0.05, help="family-wise false-alarm bound (default 0.05)")
    p.add_argument("--power", type=float, default=0.95,
                   help="chance of catching a min-rate safety bug or a designed rate regression (default 0.95)")
    p.add_argument("--min-rate", type=float, default=0.10,
                   help="smallest anomaly rate a safety cell must catch (default 0.10)")
    p.add_argument("--min-effect", type=float, default=0.25,
                   help="recovery/latency slowdowns up to 1 + E are not regressions (default 0.25)")
    p.add_argument("--cell-kind", default="auto", choices=["auto", "rate", "safety"],
                   help="auto: safety cells for specs with safe settings, rate cells otherwise")
    p.add_argument("--junit", default="gate-junit.xml", metavar="PATH", help="JUnit XML out (default gate-junit.xml)")
    for dropped in ("--min-runs", "--correction", "--test"):  # the fixed-size gate's; refused with one line
        p.add_argument(dropped, default=None, help=argparse.SUPPRESS)
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


_DROPPED_GATE_FLAGS = {
    "min_runs": ("--min-runs", "each cell is decided when its evidence is enough (sequential test)"),
    "correction": ("--correction", "false alarms are held at --alpha by a fixed Bonferroni split"),
    "test": ("--test", "rate cells use an SPRT on seed-paired runs"),
}


def _gate_flag_problem(args: Any) -> str | None:
    """What is wrong with the gate's flags, checked before Spark starts (None: nothing)."""
    from pathlib import Path

    for attr, (flag, why) in _DROPPED_GATE_FLAGS.items():
        if getattr(args, attr, None) is not None:
            return f"{flag}: dropped with the fixed-size gate ({why}; docs/spark.md)"
    for flag, v in (("--baseline", args.baseline), ("--candidate", args.candidate)):
        if not v.strip():
            return f"{flag}: an empty version"
    if args.baseline == args.candidate:
        return f"--candidate: {args.candidate!r} is also the baseline; compare two different versions"
    if not 0.0 < args.alpha <= 0.5:
        return f"--alpha: {args.alpha} is outside (0, 0.5]"
    if not 0.5 < args.power < 1.0:
        return f"--power: {args.power} is outside (0.5, 1)"
    if not 0.0 < args.min_rate < 1.0:
        return f"--min-rate: {args.min_rate} is outside (0, 1)"
    if not args.min_effect >= 0.0:
        return f"--min-effect: {args.min_effect} is below 0"
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
    from spark_analysis.gate import gate_inputs, gate_rows, render_junit, render_table, summary_line, write_junit
    from spark_analysis.sequential import GateSettings, decide
    from spark_analysis.session import get_session

    problem = _gate_flag_problem(args)
    if problem:
        print(f"spark gate: {problem}", file=sys.stderr)
        return 2
    settings = GateSettings(alpha=args.alpha, power=args.power, min_rate=args.min_rate, min_effect=args.min_effect)
    spark = get_session(args.master)
    rows = gate_rows(spark, warehouse=args.warehouse, results=args.results, versions=(args.baseline, args.candidate))
    inputs = gate_inputs(rows, args.baseline, args.candidate, cell_kind=args.cell_kind)
    missing = [v for v in (args.baseline, args.candidate) if not inputs.runs_per_version.get(v)]
    if missing:
        print(f"spark gate: no checked runs of version {' or '.join(missing)} "
              f"({args.baseline}: {inputs.runs_per_version.get(args.baseline, 0)}, "
              f"{args.candidate}: {inputs.runs_per_version.get(args.candidate, 0)} checked runs)", file=sys.stderr)
        return 2
    report = decide(inputs.cells, inputs.outcomes, settings)
    print(render_table(report, args.baseline, args.candidate))
    if inputs.damaged:
        print(f"({inputs.damaged} partial or malformed runs of these versions left out)")
    try:
        write_junit(args.junit, render_junit(report, args.baseline, args.candidate))
    except OSError as exc:
        print(f"spark gate: --junit {args.junit}: cannot write ({exc.strerror})", file=sys.stderr)
        return 2
    print(summary_line(report, args.baseline, args.candidate))
    print(f"wrote {args.junit}")
    return report.exit_code


def run(args: Any) -> int:
    verbs = {"ingest": _ingest, "report": _report, "check": _check, "synth": _synth, "gate": _gate}
    return verbs[args.spark_command](args)
