"""Load benchmark: does a real run deliver the spec's client load, evenly over its workers?

Runs a spec (default: the README's smoke test, ``examples/smoke.yaml``, shortened with ``--time-limit``)
through ``splitbrain test`` on its backend (the smoke spec uses ``local``: network namespaces, needs root),
then reads the run's ``results.json`` ``load`` figures (:mod:`harness.load`):

* ``max_worker_share`` -- the busiest worker's client ops over its fair share (ops / concurrency) in the
  main phase; target <= 1.5.
* ``achieved_ops_per_s_outside_fault_windows`` -- client ops invoked outside fault windows (a nemesis
  fault from its start to its heal) per second outside them; target within 10% of the spec's ``rate``.

Also printed, without targets: the rate before the first fault, the rate outside each window's *reach* (the
window extended until the ops it caught completed), the overall achieved rate, ops per worker and per node,
the time outside fault windows, the verdict and the host's load average (a busy host delays every op; read
the figures with it).  The benchmark measures and prints; it never asserts.

Usage::

    python bench/load.py [--json] [--spec examples/smoke.yaml] [--time-limit 30] [--seed 1] [--keep]

Prints ``name  measured  target`` lines, or one JSON object ``{"figures": ..., "targets": ...}`` with ``--json``.
Exit status 2 with a message naming the flag on bad input or when the run produced no ``load`` figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

MAX_SHARE = 1.5
RATE_TOLERANCE = 0.10


def run_spec(spec: Path, results: Path, time_limit_s: float, seed: int | None) -> tuple[int, Path | None, str]:
    """Run ``splitbrain test`` on ``spec``; return its exit code, the run directory and its output tail."""
    cmd = [sys.executable, "-m", "harness.cli", "test", str(spec), "--results", str(results), "--quiet",
           "--time-limit", f"{time_limit_s:g}"]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=time_limit_s + 900, check=False)
    runs = sorted(p.parent.resolve() for p in results.glob("*/*/results.json") if p.parent.name != "latest")
    out = (proc.stdout + proc.stderr).strip().splitlines()
    return proc.returncode, (runs[-1] if runs else None), "\n".join(out[-15:])


def figures_of(doc: dict[str, Any]) -> dict[str, Any]:
    load = doc["load"]
    rate = load["configured_ops_per_s"]
    outside = load["achieved_ops_per_s_outside_fault_windows"]
    return {
        "max_worker_share": load["max_worker_share"],
        "achieved_ops_per_s_outside_fault_windows": outside,
        "outside_rate_error": None if outside is None else round(abs(outside - rate) / rate, 3),
        "achieved_ops_per_s_outside_fault_reach": load.get("achieved_ops_per_s_outside_fault_reach"),
        "outside_fault_reach_s": load.get("outside_fault_reach_s"),
        "achieved_ops_per_s_before_first_fault": load.get("achieved_ops_per_s_before_first_fault"),
        "before_first_fault_s": load.get("before_first_fault_s"),
        "configured_ops_per_s": rate,
        "achieved_ops_per_s": load["achieved_ops_per_s"],
        "outside_fault_windows_s": load["outside_fault_windows_s"],
        "main_phase_s": load["main_phase_s"],
        "client_ops": load["client_ops"],
        "ops_per_worker": load["ops_per_worker"],
        "ops_per_node": load["ops_per_node"],
        "valid": doc.get("valid"),
    }


def targets_for(rate: float) -> dict[str, str]:
    lo, hi = rate * (1 - RATE_TOLERANCE), rate * (1 + RATE_TOLERANCE)
    return {"max_worker_share": f"<= {MAX_SHARE}",
            "achieved_ops_per_s_outside_fault_windows": f"{lo:g}..{hi:g} (rate {rate:g} +- 10%)"}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--json", action="store_true", help="print one JSON object of figures and targets")
    p.add_argument("--spec", default=str(ROOT / "examples" / "smoke.yaml"), help="test spec (default: the smoke spec)")
    p.add_argument("--time-limit", type=float, default=30.0, help="main phase seconds (default 30)")
    p.add_argument("--seed", type=int, help="override the spec's seed")
    p.add_argument("--keep", help="keep the results under this directory instead of a temporary one")
    args = p.parse_args(argv)
    spec = Path(args.spec)
    if not spec.is_file():
        print(f"bench/load.py: --spec {args.spec}: no such file", file=sys.stderr)
        return 2
    if not args.time_limit > 0:
        print(f"bench/load.py: --time-limit must be > 0 seconds, got {args.time_limit}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="sb-bench-load-") as tmp:
        results = Path(args.keep) if args.keep else Path(tmp)
        results.mkdir(parents=True, exist_ok=True)
        code, run_dir, tail = run_spec(spec.resolve(), results.resolve(), args.time_limit, args.seed)
        doc = json.loads((run_dir / "results.json").read_text()) if run_dir is not None else {}
    if "load" not in doc:
        print(f"bench/load.py: the run of {spec} (exit {code}) wrote no load figures; its output:\n{tail}",
              file=sys.stderr)
        return 2
    figures = figures_of(doc)
    figures.update({"exit_code": code, "run_dir": str(run_dir) if args.keep else None,
                    "loadavg_1m": round(os.getloadavg()[0], 2), "time_limit_s": args.time_limit})
    targets = targets_for(figures["configured_ops_per_s"])
    if args.json:
        print(json.dumps({"figures": figures, "targets": targets}))
        return 0
    for name, value in figures.items():
        print(f"{name:44s} {json.dumps(value):>30s}   {targets.get(name, '')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
