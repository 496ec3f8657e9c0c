"""Parallel matrix benchmark: the nightly matrix's wall time with ``splitbrain test-all --jobs 1/2/4``.

Runs ``splitbrain test-all SPEC --matrix --jobs N`` for each N and reports the wall time, its speed-up over
``--jobs 1`` and the verdict counts (parallel runs must not turn valid cells invalid: interference would
show there).  The full nightly matrix (``examples/nightly.yaml``: docker, 4 workloads x 8 packages, 5 min
each) takes hours per N; ``--short`` (the default) runs the same matrix shape on the local backend, cut down:
``--workloads`` x ``--packages`` cells (default queue, controller-register x kill, partition), 3 controllers
and one broker set of 3, a ``--time-limit`` main phase (default 5 s) and short recovery/drain phases.
``--full`` runs ``examples/nightly.yaml`` as it is.

Targets (a 2-core machine; more jobs cannot beat the cores): ``--jobs 2`` within 0.7x of ``--jobs 1``'s wall
time; ``--jobs 4`` no slower than ``--jobs 2`` x 1.1; and the same number of valid cells at every N.
The benchmark measures and prints; it never asserts.  Read the figures with the load average it prints:
other work on the machine stretches every run.

Usage::

    python bench/test_all_jobs.py [--json] [--jobs 1,2,4] [--full] [--time-limit 5] [--keep DIR]

Prints ``name  measured  target`` lines, or one JSON object ``{"figures": ..., "targets": ...}`` with ``--json``.
Needs root for the local backend (network namespaces).  Exit status 2 naming the flag on bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {"speedup_jobs_2": ">= 1.43 (wall <= 0.7x jobs 1)", "jobs_4_over_jobs_2": "<= 1.1",
           "valid_cells": "the same at every --jobs"}


def short_spec(path: Path, workloads: list[str], packages: list[str], time_limit_s: float) -> Path:
    """The nightly matrix's shape, cut down to run on this machine (see the module docstring)."""
    nightly = yaml.safe_load((ROOT / "examples" / "nightly.yaml").read_text())
    wl_opts = {w["name"]: w.get("options", {}) for w in nightly["workloads"]}
    doc = {
        "name": "nightly-short", "backend": "local",
        "nodes": {"controllers": 3, "broker_sets": {"count": 1, "replicas": 3}},
        "cluster": nightly.get("cluster", {}),
        "workloads": [{"name": w, "options": {**wl_opts.get(w, {}), **({"broker_sets": 1} if w ==
                                                                      "controller-register" else {})}}
                      for w in workloads],
        "nemesis": {"packages": packages, "interval_s": 3, "targets": ["one", "minority"]},
        "concurrency": 4, "rate": 50, "time_limit_s": time_limit_s,
        "phases": {"recovery_s": 3, "final_drain_s": 10}, "seed": 1,
    }
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def run_matrix(spec: Path, jobs: int, results: Path) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "harness.cli", "test-all", str(spec), "--matrix", "--jobs", str(jobs),
           "--results", str(results / f"jobs{jobs}"), "--quiet"]
    load = os.getloadavg()[0]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.monotonic() - start
    m = re.search(r"(\d+) runs: (\d+) valid, (\d+) invalid, (\d+) unknown, (\d+) crashed", proc.stdout)
    counts = dict(zip(("runs", "valid", "invalid", "unknown", "crashed"), map(int, m.groups()))) if m else {}
    return {"wall_s": round(wall, 1), "loadavg_1m_at_start": round(load, 2), "exit_code": proc.returncode, **counts,
            "tail": "" if m else (proc.stdout + proc.stderr)[-800:]}


def _jobs_list(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--jobs {text!r}: expected a comma list of whole numbers") from None
    if not out or any(not 1 <= n <= 64 for n in out):
        raise argparse.ArgumentTypeError(f"--jobs {text!r}: each value must be 1..64")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--json", action="store_true", help="print one JSON object of figures and targets")
    p.add_argument("--jobs", type=_jobs_list, default=[1, 2, 4], help="comma list (default 1,2,4)")
    p.add_argument("--full", action="store_true", help="examples/nightly.yaml as it is (docker; hours per N)")
    p.add_argument("--workloads", default="queue,controller-register", help="short form: comma list")
    p.add_argument("--packages", default="kill,partition", help="short form: comma list of nemesis packages")
    p.add_argument("--time-limit", type=float, default=5.0, help="short form: main phase seconds (default 5)")
    p.add_argument("--keep", help="keep the results under this directory")
    args = p.parse_args(argv)
    if not args.time_limit > 0:
        print(f"bench/test_all_jobs.py: --time-limit must be > 0, got {args.time_limit}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="sb-bench-jobs-") as tmp:
        results = Path(args.keep or tmp).resolve()
        results.mkdir(parents=True, exist_ok=True)
        if args.full:
            spec = ROOT / "examples" / "nightly.yaml"
        else:
            spec = short_spec(results / "nightly-short.yaml", args.workloads.split(","), args.packages.split(","),
                              args.time_limit)
        load_before = os.getloadavg()[0]
        per_jobs = {n: run_matrix(spec, n, results) for n in args.jobs}
    figures: dict[str, Any] = {"form": "full" if args.full else "short", "spec": str(spec.name),
                               "loadavg_1m_before": round(load_before, 2), "cpus": os.cpu_count()}
    for n, r in per_jobs.items():
        for k, v in r.items():
            if k != "tail" or v:
                figures[f"jobs_{n}_{k}"] = v
    walls = {n: r["wall_s"] for n, r in per_jobs.items()}
    if 1 in walls and 2 in walls and walls[2]:
        figures["speedup_jobs_2"] = round(walls[1] / walls[2], 2)
    if 2 in walls and 4 in walls and walls[2]:
        figures["jobs_4_over_jobs_2"] = round(walls[4] / walls[2], 2)
    figures["valid_cells"] = {n: r.get("valid") for n, r in per_jobs.items()}
    if args.json:
        print(json.dumps({"figures": figures, "targets": TARGETS}))
        return 0
    for name, value in figures.items():
        print(f"{name:28s} {json.dumps(value):>40s}   {TARGETS.get(name, '')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
