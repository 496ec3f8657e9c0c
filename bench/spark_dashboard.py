"""Benchmark: building the interactive dashboard from results directories on embedded Spark (local[2]).

    python3 bench/spark_dashboard.py            # 1,000 runs x 10,000 ops and 10,000 runs x 100 ops
    python3 bench/spark_dashboard.py --quick    # 100 x 10,000 and 1,000 x 100: a reduced form, not judged
    python3 bench/spark_dashboard.py --json     # one JSON object on stdout

Targets (issue 21): the build -- ``splitbrain spark ingest`` of the results into an empty warehouse, then
``splitbrain spark report`` -- takes at most 180 s for 1,000 runs x 10,000 ops and at most 120 s for 10,000
small runs, on local[2].  Each corpus is written once by :func:`spark_analysis.synth.generate` (seeded, two
versions, one injected regression, two backends; not timed against the target); each build then runs in its own
Python process (a fresh JVM), bounded by ``--timeout-s``: a build that runs out of time is reported as missing
its target, with the time it was given.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# (name, runs, ops per run, target seconds for ingest + report on local[2])
FULL = (("1,000 runs x 10,000 ops", 1000, 10_000, 180.0), ("10,000 runs x 100 ops", 10_000, 100, 120.0))
QUICK = (("100 runs x 10,000 ops", 100, 10_000, 180.0), ("1,000 runs x 100 ops", 1000, 100, 120.0))
MASTER = "local[2]"


def _child(results: str, work: str) -> None:
    t0 = time.monotonic()
    from spark_analysis.ingest import ingest
    from spark_analysis.report import write_report
    from spark_analysis.session import get_session

    spark = get_session(MASTER, shuffle_partitions=4)
    t1 = time.monotonic()
    s = ingest(spark, [results], Path(work) / "warehouse")
    t2 = time.monotonic()
    page = write_report(spark, Path(work) / "warehouse", Path(work) / "dashboard")
    t3 = time.monotonic()
    spark.stop()
    print(json.dumps({"session_s": round(t1 - t0, 2), "ingest_s": round(t2 - t1, 2), "report_s": round(t3 - t2, 2),
                      "runs": s.ingested, "ops": s.ops, "index_html_bytes": page.stat().st_size,
                      "dashboard_json_bytes": (page.parent / "dashboard.json").stat().st_size}))


def build(results: Path, work: Path, timeout_s: float) -> dict[str, Any]:
    """Ingest + report in a fresh process; ``{"timed_out": True, ...}`` when it ran past ``timeout_s``."""
    work.mkdir(parents=True, exist_ok=True)
    try:
        out = subprocess.run([sys.executable, __file__, "--child", str(results), str(work)], check=True,
                             capture_output=True, text=True, cwd=str(ROOT), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"timed_out": True, "build_s": None}
    res: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    res["timed_out"] = False
    res["build_s"] = round(res["ingest_s"] + res["report_s"], 2)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="a reduced form (a tenth of each size); not judged")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--timeout-s", type=float, default=600.0, help="limit on each build (default 600 s)")
    ap.add_argument("--workdir", default=None, help="where the corpora and warehouses go (default: a temp dir)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(*args.child)
        return 0
    if args.timeout_s <= 0:
        print(f"spark_dashboard: --timeout-s {args.timeout_s} must be > 0", file=sys.stderr)
        return 2
    from spark_analysis.synth import generate, parse_regression

    work = Path(args.workdir or tempfile.mkdtemp(prefix="spark-dashboard-bench-"))
    sizes = QUICK if args.quick else FULL
    figures = []
    try:
        for name, runs, ops, target in sizes:
            t0 = time.monotonic()
            corpus = generate(work / f"results-{runs}x{ops}", runs=runs, ops=ops, seed=args.seed, days=30,
                              versions=("0.2.0", "0.3.0"), regressions=(parse_regression("0.3.0:queue:kill:0.3"),),
                              backends=("local", "docker"))
            gen_s = round(time.monotonic() - t0, 2)
            res = build(corpus.root, work / f"build-{runs}x{ops}", args.timeout_s)
            meets = None if args.quick else (not res["timed_out"] and res["build_s"] <= target)
            figures.append({"size": name, "runs": runs, "ops_per_run": ops, "generate_s": gen_s, **res,
                            "target_s": target, "meets_target": meets,
                            "timeout_s": args.timeout_s})
            if not args.workdir:
                shutil.rmtree(work / f"build-{runs}x{ops}", ignore_errors=True)
                shutil.rmtree(corpus.root, ignore_errors=True)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    report = {"master": MASTER, "seed": args.seed, "quick": args.quick, "sizes": figures}
    if args.json:
        print(json.dumps(report))
        return 0
    form = "quick form: reduced sizes, targets not judged" if args.quick else "full size"
    print(f"dashboard build benchmark on {MASTER} (seed {args.seed}; {form})")
    for f in figures:
        if f["timed_out"]:
            print(f"  {f['size']}: did not finish within {f['timeout_s']:.0f} s; target <= {f['target_s']:.0f} s: "
                  f"{'not judged' if args.quick else 'MISSES'}")
            continue
        verdict = "not judged (reduced size)" if f["meets_target"] is None else (
            "MEETS" if f["meets_target"] else "MISSES")
        print(f"  {f['size']} ({f['ops']:,} ops; corpus written in {f['generate_s']} s): session {f['session_s']} s, "
              f"ingest {f['ingest_s']} s, dashboard {f['report_s']} s "
              f"(index.html {f['index_html_bytes'] / 1e6:.2f} MB, "
              f"dashboard.json {f['dashboard_json_bytes'] / 1e6:.2f} MB)")
        print(f"    figure: build (ingest + dashboard) = {f['build_s']} s; target <= {f['target_s']:.0f} s: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
