"""Power and false-alarm rate of the release gate (``splitbrain spark gate``), over seeded synthetic counts.

Each trial draws, for every cell and both versions, 50 runs (``--runs``) whose anomalies are Bernoulli at the
cell's rate, and runs the gate's pure core (:func:`spark_analysis.regression.gate`: Boschloo's one-sided exact
test per cell, Holm correction, alpha 0.05).  No Spark: the statistics are what is measured here; the Spark
side only counts runs (``tests/integration/spark/test_gate.py``).

The cells are the synthetic corpus's defaults (queue x partition 0.3, queue x kill 0.1, queue x none 0.0,
broker-ids x pause 0.2).  Figures:

* ``detect_2x`` -- trials in which the candidate's queue x partition rate doubled (0.3 -> 0.6) and the gate
  flagged that cell (target >= 0.95);
* ``false_alarm`` -- trials with no regression in which the gate flagged any cell (target <= 0.05);
* ``detect_2x_base_<r>`` / ``false_alarm_base_<r>`` -- the same with the regressed cell's base rate ``r``
  (0.10 .. 0.45), and ``min_base_rate_meeting_target`` -- the smallest such rate whose detection >= 0.95;
* ``ceiling_single_cell_uncorrected`` -- detection of a single-cell test at alpha 0.05 with no correction for
  the headline case: no gate over several cells can beat it, so it shows whether the target is reachable;
* ``detect_2x_fisher`` -- the headline detection with Fisher's test instead of Boschloo's;
* ``ms_per_gate`` -- mean time of one gate call over the 4 cells, filling the p-value cache as it goes.

Usage::

    python bench/gate_power.py [--trials 1000] [--runs 50] [--seed 1] [--json]

Prints ``name  measured  target`` lines, or one JSON object with ``--json``.  Takes seconds (p-values of
repeated tables are cached).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from spark_analysis.regression import CellCounts, gate  # noqa: E402

CELLS = (("queue", "partition", 0.3), ("queue", "kill", 0.1), ("queue", "none", 0.0), ("broker-ids", "pause", 0.2))
SWEEP = (0.10, 0.15, 0.20, 0.25, 0.30, 0.35, 0.40, 0.45)
TARGETS = {"detect_2x": ">= 0.95", "false_alarm": "<= 0.05", "min_base_rate_meeting_target": "(report)",
           **{f"detect_2x_base_{r:.2f}": ">= 0.95" for r in SWEEP},
           **{f"false_alarm_base_{r:.2f}": "<= 0.05" for r in SWEEP}}


def _draw(rng: random.Random, n: int, p: float) -> int:
    return sum(rng.random() < p for _ in range(n))


def trials(*, seed: int, count: int, runs: int, cells: Sequence[tuple[str, str, float]], regressed: int | None,
           test: str = "boschloo", only_regressed_cell: bool = False, alpha: float = 0.05) -> float:
    """Share of ``count`` seeded trials in which the gate flags: the regressed cell (``regressed`` set) or any
    cell (``regressed`` None: a false alarm).  The regressed cell's candidate rate is twice its base rate."""
    rng = random.Random(seed)
    hits = 0
    for _ in range(count):
        counts = []
        for i, (w, n, p) in enumerate(cells):
            if only_regressed_cell and i != regressed:
                continue
            counts.append(CellCounts(w, n, _draw(rng, runs, p), runs,
                                     _draw(rng, runs, min(1.0, 2 * p) if i == regressed else p), runs))
        r = gate(counts, alpha=alpha, min_runs=runs, test=test)
        if regressed is None:
            hits += bool(r.regressed)
        else:
            w, n, _ = cells[regressed]
            hits += any((c.counts.workload, c.counts.nemesis) == (w, n) for c in r.regressed)
    return hits / count


def measure(*, seed: int, count: int, runs: int) -> dict[str, float | None]:
    figures: dict[str, float | None] = {}
    t0 = time.perf_counter()
    figures["detect_2x"] = trials(seed=seed, count=count, runs=runs, cells=CELLS, regressed=0)
    figures["ms_per_gate"] = round((time.perf_counter() - t0) / count * 1000, 3)
    figures["false_alarm"] = trials(seed=seed + 1, count=count, runs=runs, cells=CELLS, regressed=None)
    figures["ceiling_single_cell_uncorrected"] = trials(seed=seed, count=count, runs=runs, cells=CELLS, regressed=0,
                                                        only_regressed_cell=True)
    figures["detect_2x_fisher"] = trials(seed=seed, count=count, runs=runs, cells=CELLS, regressed=0, test="fisher")
    meeting = None
    for r in SWEEP:
        cells = ((CELLS[0][0], CELLS[0][1], r), *CELLS[1:])
        figures[f"detect_2x_base_{r:.2f}"] = d = trials(seed=seed + 2, count=count, runs=runs, cells=cells,
                                                        regressed=0)
        figures[f"false_alarm_base_{r:.2f}"] = trials(seed=seed + 3, count=count, runs=runs, cells=cells,
                                                      regressed=None)
        if meeting is None and d >= 0.95:
            meeting = r
    figures["min_base_rate_meeting_target"] = meeting
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--trials", type=int, default=1000)
    p.add_argument("--runs", type=int, default=50, help="runs per version per cell")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.trials < 1 or args.runs < 1:
        print("gate_power: --trials and --runs must be >= 1", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    figures = measure(seed=args.seed, count=args.trials, runs=args.runs)
    setup = {"trials": args.trials, "runs_per_version_per_cell": args.runs, "seed": args.seed,
             "cells": [f"{w} x {n} {r}" for w, n, r in CELLS], "regressed_cell": "queue x partition (2x)",
             "test": "boschloo", "correction": "holm", "alpha": 0.05, "seconds": round(time.monotonic() - t0, 1)}
    if args.json:
        print(json.dumps({"figures": figures, "targets": TARGETS, "setup": setup}))
        return 0
    print(f"gate power: {args.trials} trials per row, {args.runs} runs per version per cell, seed {args.seed}, "
          f"cells {', '.join(setup['cells'])}")
    for k, v in figures.items():
        print(f"{k:34s} {json.dumps(v):10s} {TARGETS.get(k, '')}")
    print(f"({setup['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
