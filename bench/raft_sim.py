"""Benchmark: simulated Raft schedules explored per minute (3 nodes, 200 steps, all safety checks on).

Usage: ``python bench/raft_sim.py [--seeds 3000] [--start 0] [--nodes 3] [--steps 200] [--json]``.
Prints ``figure  target`` lines, or one JSON object ``{"figures": {...}, "targets": {...}}`` with --json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from system_under_test.raft.sim import run_seed

TARGETS = {"schedules_per_min": 10_000}


def measure(seeds: int, start: int, nodes: int, steps: int) -> dict[str, float]:
    delivered = failures = 0
    t0 = time.perf_counter()
    for seed in range(start, start + seeds):
        res = run_seed(seed, nodes=nodes, steps=steps)
        delivered += res.stats["delivered"]
        failures += not res.ok
    dt = time.perf_counter() - t0
    return {
        "schedules_per_min": round(seeds / dt * 60),
        "steps_per_s": round(seeds * steps / dt),
        "messages_delivered_per_s": round(delivered / dt),
        "failures": failures,
        "seconds": round(dt, 2),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, default=3000)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    figures = measure(args.seeds, args.start, args.nodes, args.steps)
    if args.json:
        print(json.dumps({"figures": figures, "targets": TARGETS}))
    else:
        for name, value in figures.items():
            target = TARGETS.get(name)
            print(f"{name}  {value}  {'>= ' + str(target) if target is not None else '-'}")
    return 0 if figures["failures"] == 0 else 1  # a safety violation is a failure; speed is only reported


if __name__ == "__main__":
    sys.exit(main())
