"""False alarms, power and runs used of the sequential release gate (:mod:`spark_analysis.sequential`), over
simulated runs with known anomaly rates and known recovery-time distributions.

Each trial drives the real state machine the way ``splitbrain gate`` does -- ``next_pairs`` (one pair in flight
per cell), then ``observe`` each build's outcome -- until the gate is finished, and reads ``report(final=True)``.
Nothing is mocked but the runs themselves: a run is bad with its build's anomaly rate (a bad run of a safety cell
is a ``lost-write``), and carries figures for two fault kinds (``partition``, ``kill``) and the three metrics
(recovery, unavailability, p99 latency under the fault).  The gate runs with its defaults (alpha 0.05, power
0.95, min_rate 0.10, min_effect 0.25, 30-pair performance sample, half the alpha for the performance comparisons
when there are rate cells).

The performance figures are lognormal per run: ``log x = mu + sigma (sqrt(rho) z_seed + sqrt(1 - rho) z_run)``,
where ``z_seed`` is shared by the two builds' runs of a seed (they share the fault schedule) and ``z_run`` is the
run's own.  ``sigma`` 0.5 and ``rho`` 0.6 (a paired log-ratio spread of 0.45) are read from five real 60-s smoke
runs on this machine (seeds 11, 12, 13, and 11, 12 again): per-run log spread of the median recovery 0.22 (kill)
to 0.62 (partition), of p99 latency under faults 0.26-0.39; the log ratios of the repeated seeds' figures had an
RMS of 0.45 (recovery) and 0.14 (p99).  That is a small sample, so ``recovery_sweep_*`` rows show the detection at
other spreads.

Rows (figures beside targets; each a share of ``--trials`` trials, with its Wilson 95% interval):

* ``false_alarm_*``: no regression anywhere (both builds the same), any cell failed -- target <= 0.05; one cell at
  base rates 0 (a safety cell), 0.05, 0.30, 0.50 (rate cells), and ``family_8``: eight cells (two safety at 0, six
  rate at 0.05-0.5) under one family-wise alpha;
* ``detect_2x_base_0.30``: one rate cell, 0.30 -> 0.60 -- detected >= 0.95 with on average <= 60 runs per build;
  beside it the fixed-size test (the old gate's Boschloo test at the same alpha), computed exactly: the runs per
  build it needs for 95% power, and its power at 50 runs; ``_in_family_8``: the same regression in one of the
  family's cells;
* ``detect_safety_0.10``: a safety cell, baseline never anomalous, candidate at 0.10 -- detected >= 0.95 with <= 50
  candidate runs on average (over 4x the trials, and beside the exact figure ``1 - 0.9^30``: the cell runs its
  30-pair performance sample);
* ``detect_recovery_1.5x``: a safety cell whose candidate recovers from partitions 1.5x slower -- detected >= 0.90
  with <= 30 runs per build; ``recovery_sweep_<spread>``: the same at other paired log-ratio spreads.

Usage::

    python bench/gate_power.py [--trials 1000] [--seed 1] [--json]

Prints ``name  measured  target`` lines, or one JSON object with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from spark_analysis.regression import boschloo_p  # noqa: E402
from spark_analysis.sequential import (  # noqa: E402
    Cell,
    FaultFigures,
    GateSettings,
    RunOutcome,
    SequentialGate,
    alpha_split,
)
from spark_analysis.wilson import wilson_interval  # noqa: E402

SIGMA = 0.5  # per-run log spread of a figure (see the module docstring)
RHO = 0.6  # share of that variance shared by the two builds' runs of one seed
KINDS = ("partition", "kill")
MU = {"recovery_s": {"partition": math.log(0.4), "kill": math.log(1.8)},
      "unavailable_s": {"partition": math.log(4.0), "kill": math.log(6.0)},
      "p99_latency_ms": {"partition": math.log(2000.0), "kill": math.log(1800.0)}}
METRICS = tuple(MU)
BUDGET_PER_CELL = 600  # runs (both builds): 300 pairs for a cell on its own
FAMILY_BUDGET_PER_CELL = 300  # the eight-cell family: 2,400 runs in all
FAMILY = (("safety-a", "safety", 0.0), ("safety-b", "safety", 0.0), ("rate-0.05", "rate", 0.05),
          ("rate-0.10", "rate", 0.10), ("rate-0.20", "rate", 0.20), ("rate-0.30", "rate", 0.30),
          ("rate-0.40", "rate", 0.40), ("rate-0.50", "rate", 0.50))


@dataclass(frozen=True)
class SimCell:
    """A simulated cell: both builds' anomaly rates, and the candidate's factor on partition recovery."""

    key: str
    kind: str
    rate_b: float
    rate_c: float
    recovery_factor: float = 1.0


@dataclass
class Tally:
    trials: int = 0
    failed: int = 0  # trials in which the watched cell (or, for false alarms, any cell) failed
    undecided: int = 0
    runs_b: int = 0  # usable baseline runs of the watched cell, summed
    runs_c: int = 0

    def figures(self) -> dict[str, Any]:
        lo, hi = wilson_interval(self.failed, self.trials)
        return {"share": round(self.failed / self.trials, 4), "ci95": [round(lo, 4), round(hi, 4)],
                "undecided": round(self.undecided / self.trials, 4),
                "runs_per_build": round((self.runs_b + self.runs_c) / 2 / self.trials, 1),
                "candidate_runs": round(self.runs_c / self.trials, 1)}


class Simulator:
    """Draws runs of :class:`SimCell`\\ s from one seeded generator (Python's: scalar draws are what a run needs)."""

    def __init__(self, rng: random.Random, sigma: float, rho: float) -> None:
        self.rng = rng
        self.shared = sigma * math.sqrt(rho)
        self.own = sigma * math.sqrt(1 - rho)
        self._seed_effect: dict[tuple[str, int], list[float]] = {}
        self.first_seed, self.perf_runs = GateSettings().first_seed, GateSettings().perf_runs

    def outcome(self, cell: SimCell, build: str, seed: int) -> RunOutcome:
        rate = cell.rate_b if build == "baseline" else cell.rate_c
        bad = self.rng.random() < rate
        verdict, kinds = ("invalid", ("lost-write",) if cell.kind == "safety" else ()) if bad else ("valid", ())
        if seed >= self.first_seed + self.perf_runs:  # past the performance sample: the gate never reads them
            return RunOutcome(cell.key, build, seed, verdict, kinds)
        gauss = self.rng.gauss
        z_seed = self._seed_effect.pop((cell.key, seed), None)
        if z_seed is None:  # the first build of this seed draws the shared part; the second takes it
            z_seed = [gauss(0.0, 1.0) for _ in range(len(KINDS) * len(METRICS))]
            self._seed_effect[(cell.key, seed)] = z_seed
        faults = {}
        for i, kind in enumerate(KINDS):
            values = [math.exp(MU[m][kind] + self.shared * z_seed[i * len(METRICS) + j] + self.own * gauss(0.0, 1.0))
                      for j, m in enumerate(METRICS)]
            if build == "candidate" and kind == "partition":
                values[0] *= cell.recovery_factor
            faults[kind] = FaultFigures(*values)
        return RunOutcome(cell.key, build, seed, verdict, kinds, faults)


def run_trial(sim: Simulator, cells: Sequence[SimCell], settings: GateSettings) -> Any:
    """One gate over ``cells``: one pair in flight per cell, both builds observed, until finished."""
    gate = SequentialGate([Cell(c.key, c.kind) for c in cells], settings)
    by_key = {c.key: c for c in cells}
    while not gate.finished:
        requests = gate.next_pairs(len(cells))
        if not requests:
            break
        for req in requests:
            for build in ("baseline", "candidate"):
                gate.observe(sim.outcome(by_key[req.cell], build, req.seed))
    return gate.report(final=True)


def measure_row(sim: Simulator, cells: Sequence[SimCell], trials: int, *, watch: str | None,
                budget_per_cell: int = 600) -> dict[str, Any]:
    """``watch`` None: share of trials in which any cell failed (false alarms); else the watched cell's failures.
    The gate's budget is ``budget_per_cell`` runs per cell, spent wherever the allocator moves it."""
    settings = GateSettings(budget_runs=budget_per_cell * len(cells))
    tally = Tally()
    for _ in range(trials):
        report = run_trial(sim, cells, settings)
        tally.trials += 1
        if watch is None:
            tally.failed += report.exit_code == 1
            tally.undecided += report.exit_code == 2
            tally.runs_b += sum(c.baseline_runs for c in report.cells) / len(cells)
            tally.runs_c += sum(c.candidate_runs for c in report.cells) / len(cells)
        else:
            c = report.of(watch)
            tally.failed += c.decision == "fail"
            tally.undecided += c.decision == "undecided"
            tally.runs_b += c.baseline_runs
            tally.runs_c += c.candidate_runs
    return tally.figures()


# -- the fixed-size baseline, computed exactly ----------------------------------------------------------------


def _binom_pmf(n: int, p: float) -> np.ndarray:
    k = np.arange(n + 1)
    logc = np.array([math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) for i in k])
    return np.exp(logc + k * math.log(p) + (n - k) * math.log1p(-p))


def fixed_power(n: int, p_b: float, p_c: float, alpha: float) -> float:
    """Exact power of Boschloo's one-sided test at ``n`` runs per build: sum over tables of P(table) [p <= alpha].
    For each baseline count the rejecting candidate counts are those at or above a cut, and the cut never falls
    as the baseline count rises, so one walk finds every cut."""
    pb, pc = _binom_pmf(n, p_b), _binom_pmf(n, p_c)
    tail_c = np.cumsum(pc[::-1])[::-1]  # P(K_c >= k)
    power, cut = 0.0, 0
    for kb in range(n + 1):
        while cut <= n and boschloo_p(kb, n, cut, n) > alpha:
            cut += 1
        if cut > n:
            break
        power += pb[kb] * tail_c[cut]
    return float(power)


def fixed_runs_needed(p_b: float, p_c: float, alpha: float, power: float) -> int:
    """The smallest ``n`` per build whose exact power reaches ``power`` (a bisection; power rises with ``n``)."""
    lo, hi = 10, 40
    while fixed_power(hi, p_b, p_c, alpha) < power:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fixed_power(mid, p_b, p_c, alpha) >= power:
            hi = mid
        else:
            lo = mid
    return hi


# -- the rows --------------------------------------------------------------------------------------------------

TARGETS = {
    "false_alarm_base_0.00": "<= 0.05", "false_alarm_base_0.05": "<= 0.05", "false_alarm_base_0.30": "<= 0.05",
    "false_alarm_base_0.50": "<= 0.05", "false_alarm_family_8": "<= 0.05",
    "detect_2x_base_0.30": ">= 0.95, <= 60 runs per build", "detect_2x_base_0.30_in_family_8": "(report)",
    "fixed_size_runs_for_95pct": "(about 75)", "detect_safety_0.10": ">= 0.95, <= 50 candidate runs",
    "detect_recovery_1.5x": ">= 0.90, <= 30 runs per build",
}
SWEEP = ((0.3, 0.5), (0.6, 0.5), (0.9, 0.7))  # (paired log-ratio spread, sigma): rho follows


def measure(*, seed: int, trials: int) -> dict[str, Any]:
    rng = random.Random(seed)
    sim = Simulator(rng, SIGMA, RHO)
    fig: dict[str, Any] = {}
    for base in (0.0, 0.05, 0.30, 0.50):
        kind = "safety" if base == 0 else "rate"
        fig[f"false_alarm_base_{base:.2f}"] = measure_row(sim, [SimCell("c", kind, base, base)], trials, watch=None)
    family = [SimCell(k, kind, r, r) for k, kind, r in FAMILY]
    fig["false_alarm_family_8"] = measure_row(sim, family, trials, watch=None, budget_per_cell=FAMILY_BUDGET_PER_CELL)
    fig["detect_2x_base_0.30"] = measure_row(sim, [SimCell("c", "rate", 0.3, 0.6)], trials, watch="c")
    regressed = [SimCell(k, kind, r, 2 * r if k == "rate-0.30" else r) for k, kind, r in FAMILY]
    fig["detect_2x_base_0.30_in_family_8"] = measure_row(sim, regressed, trials, watch="rate-0.30",
                                                         budget_per_cell=FAMILY_BUDGET_PER_CELL)
    rate_alpha, _ = alpha_split([Cell("c", "rate")], GateSettings())
    fig["fixed_size_runs_for_95pct"] = {
        f"alpha_{rate_alpha:g}": fixed_runs_needed(0.3, 0.6, rate_alpha, 0.95),
        "alpha_0.05": fixed_runs_needed(0.3, 0.6, 0.05, 0.95),
        f"power_at_50_alpha_{rate_alpha:g}": round(fixed_power(50, 0.3, 0.6, rate_alpha), 4),
        "power_at_50_alpha_0.05": round(fixed_power(50, 0.3, 0.6, 0.05), 4)}
    # 4x the trials: the exact detection (1 - 0.9^30 = 0.9576) sits 0.008 above the target, about one standard
    # error at 1,000 trials; the row is cheap
    fig["detect_safety_0.10"] = measure_row(sim, [SimCell("c", "safety", 0.0, 0.10)], 4 * trials, watch="c")
    fig["detect_safety_0.10"]["exact"] = round(1 - 0.9 ** max(GateSettings().safety_runs, GateSettings().perf_runs), 4)
    fig["detect_recovery_1.5x"] = measure_row(sim, [SimCell("c", "safety", 0.0, 0.0, 1.5)], trials, watch="c")
    for spread, sigma in SWEEP:
        rho = 1 - spread**2 / (2 * sigma**2)
        fig[f"recovery_sweep_{spread:.2f}"] = measure_row(Simulator(rng, sigma, rho),
                                                          [SimCell("c", "safety", 0.0, 0.0, 1.5)], trials, watch="c")
    return fig


def _line(name: str, v: Any) -> str:
    if isinstance(v, dict) and "share" in v:
        text = (f"{v['share']:.3f} [{v['ci95'][0]:.3f}, {v['ci95'][1]:.3f}]  runs/build {v['runs_per_build']:.1f}  "
                f"candidate runs {v['candidate_runs']:.1f}  undecided {v['undecided']:.3f}")
        if "exact" in v:
            text += f"  exact {v['exact']:.4f}"
    else:
        text = json.dumps(v)
    return f"{name:34s} {text:92s} {TARGETS.get(name, '')}"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--trials", type=int, default=1000, help="trials per row (default 1000)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    if args.trials < 1:
        print("gate_power: --trials must be >= 1", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    figures = measure(seed=args.seed, trials=args.trials)
    s = GateSettings()
    rate_alpha, perf_alpha = alpha_split([Cell("c", "rate")], s)
    setup = {"trials_per_row": args.trials, "seed": args.seed, "alpha": s.alpha, "power": s.power,
             "min_rate": s.min_rate, "min_effect": s.min_effect, "rate_odds_ratio": s.rate_odds_ratio,
             "safety_runs": s.safety_runs, "perf_runs": s.perf_runs,
             "single_rate_cell_alpha": rate_alpha, "single_rate_cell_perf_alpha": perf_alpha,
             "budget_runs_per_cell": BUDGET_PER_CELL,
             "family_budget_runs_per_cell": FAMILY_BUDGET_PER_CELL, "sigma": SIGMA, "rho": RHO,
             "paired_log_ratio_spread": round(SIGMA * math.sqrt(2 * (1 - RHO)), 3),
             "seconds": round(time.monotonic() - t0, 1)}
    if args.json:
        print(json.dumps({"figures": figures, "targets": TARGETS, "setup": setup}))
        return 0
    print(f"sequential gate: {args.trials} trials per row, seed {args.seed}; alpha {s.alpha}, power {s.power}, "
          f"min_rate {s.min_rate}, min_effect {s.min_effect}; safety n = {s.safety_runs}; one rate cell's SPRT at "
          f"alpha {rate_alpha:g}; figures lognormal, sigma {SIGMA}, rho {RHO} (paired log-ratio spread "
          f"{setup['paired_log_ratio_spread']})")
    print(f"{'row':34s} {'share [95% CI], mean usable runs':92s} target")
    for k, v in figures.items():
        print(_line(k, v))
    print(f"({setup['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
