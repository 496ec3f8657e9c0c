"""``splitbrain spark``: ingest results into a Parquet warehouse, write the dashboard, re-check on Spark.

Verbs::

    splitbrain spark ingest RESULTS_DIR... --out WAREHOUSE [--master URL]
    splitbrain spark report --warehouse W --out DIR [--master URL]
    splitbrain spark check  --warehouse W [--where SQL] [--checker queue|counts] [--master URL]
    splitbrain spark synth  OUT --runs N --ops M [--seed S] [--torn K] [--no-results K] [--bad-yaml K]

Spark runs embedded (``local[*]``) unless ``--master`` names a cluster.  Exit codes: 0 done (ingest: also
when damaged runs were found, they are listed); check: 0 all valid, 1 some invalid, 2 some unknown or no
runs selected; 2 bad input.
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
    p = sub.add_parser("report", help="write the static HTML dashboard")
    p.add_argument("--warehouse", required=True)
    p.add_argument("--out", required=True, metavar="DIR")
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


def _report(args: Any) -> int:
    from spark_analysis.report import write_report
    from spark_analysis.session import get_session

    page = write_report(get_session(args.master), args.warehouse, args.out)
    print(f"wrote {page}")
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
    from spark_analysis.synth import generate

    try:
        c = generate(args.out, runs=args.runs, ops=args.ops, seed=args.seed, days=args.days, torn=args.torn,
                     no_results=args.no_results, bad_yaml=args.bad_yaml)
    except ValueError as exc:
        print(f"spark synth: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {len(c.runs)} runs ({sum(r.anomalous for r in c.runs)} anomalous) under {c.root} "
          f"(seed {args.seed})")
    return 0


def run(args: Any) -> int:
    verbs = {"ingest": _ingest, "report": _report, "check": _check, "synth": _synth}
    return verbs[args.spark_command](args)
