"""Benchmark: ingest + report of a synthetic results corpus on embedded Spark, and local[1] -> local[2] scaling.

    python3 bench/spark_ingest.py                      # 1,000 runs x 10,000 ops (target: <= 180 s on local[2])
    python3 bench/spark_ingest.py --runs 100 --ops 2000 # a reduced size
    python3 bench/spark_ingest.py --json               # one JSON object on stdout

The corpus is written once by :func:`spark_analysis.synth.generate` (seeded); each master then runs in its
own Python process (a fresh JVM): start a session, ingest into an empty warehouse, write the dashboard.
Scaling is the local[1] time divided by the local[2] time (2.0 would be perfect on 2 cores).
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

TARGET_S = 180.0  # ingest + report of 1,000 runs x 10,000 ops on local[2]


def _child(master: str, results: str, work: str) -> None:
    t0 = time.monotonic()
    from spark_analysis.ingest import ingest
    from spark_analysis.report import write_report
    from spark_analysis.session import get_session

    spark = get_session(master, shuffle_partitions=4)
    t1 = time.monotonic()
    s = ingest(spark, [results], Path(work) / "warehouse")
    t2 = time.monotonic()
    write_report(spark, Path(work) / "warehouse", Path(work) / "report")
    t3 = time.monotonic()
    spark.stop()
    print(json.dumps({"master": master, "session_s": round(t1 - t0, 2), "ingest_s": round(t2 - t1, 2),
                      "report_s": round(t3 - t2, 2), "runs": s.ingested, "ops": s.ops}))


def run_master(master: str, results: Path, work: Path) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    out = subprocess.run([sys.executable, __file__, "--child", master, str(results), str(work)], check=True,
                         capture_output=True, text=True, cwd=str(ROOT))
    res: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    res["ingest_report_s"] = round(res["ingest_s"] + res["report_s"], 2)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--ops", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--no-scaling", action="store_true", help="skip the local[1] run")
    ap.add_argument("--workdir", default=None, help="where the corpus and warehouses go (default: a temp dir)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(*args.child)
        return 0
    from spark_analysis.synth import generate

    work = Path(args.workdir or tempfile.mkdtemp(prefix="spark-bench-"))
    try:
        t0 = time.monotonic()
        corpus = generate(work / "results", runs=args.runs, ops=args.ops, seed=args.seed)
        gen_s = time.monotonic() - t0
        two = run_master("local[2]", corpus.root, work / "local2")
        one = None if args.no_scaling else run_master("local[1]", corpus.root, work / "local1")
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    full = args.runs >= 1000 and args.ops >= 10_000
    report: dict[str, Any] = {
        "runs": args.runs, "ops_per_run": args.ops, "ops": two["ops"], "seed": args.seed, "generate_s": round(gen_s, 2),
        "local2": two, "local1": one, "target_s": TARGET_S, "full_size": full,
        "meets_target": (two["ingest_report_s"] <= TARGET_S) if full else None,  # judged at full size only
        "scaling_1_to_2": None if one is None else round(one["ingest_report_s"] / two["ingest_report_s"], 2),
        "ingest_ops_per_s_local2": round(two["ops"] / two["ingest_s"]) if two["ingest_s"] else None,
    }
    if args.json:
        print(json.dumps(report))
        return 0
    verdict = ("MEETS" if report["meets_target"] else "MISSES") if full else "not judged (reduced size)"
    print(f"spark ingest benchmark: {args.runs} runs x {args.ops} ops = {two['ops']:,} ops (seed {args.seed}); "
          f"corpus generated in {gen_s:.1f} s")
    print(f"  local[2]: session {two['session_s']} s, ingest {two['ingest_s']} s "
          f"({report['ingest_ops_per_s_local2']:,} ops/s), report {two['report_s']} s")
    print(f"  figure: ingest+report on local[2] = {two['ingest_report_s']} s; target <= {TARGET_S:.0f} s "
          f"at 1,000 x 10,000: {verdict}")
    if one is not None:
        print(f"  local[1]: ingest {one['ingest_s']} s, report {one['report_s']} s; "
              f"figure: scaling local[1] -> local[2] = {report['scaling_1_to_2']}x (ideal 2.0x on 2 idle cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
