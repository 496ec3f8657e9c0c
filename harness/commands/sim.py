"""``splitbrain sim``: the whole cluster in a seeded simulation, judged like a real run.

    splitbrain sim --seed 7 --seconds 60 [--bug slow-failover] [--faults kill,partition] [--workloads queue,membership]
                   [--out DIR]
    splitbrain sim --seed 0 --seeds 50 --seconds 30          # a sweep: one line per seed

One run plays three controllers, one broker set of three brokers, queue clients (and the broker-ids allocator
and membership clients, ``--workloads``) and a nemesis on simulated time (``docs/simulation.md``); the
production cores decide everything the processes would.  The run is checked by the queue, invariants,
availability and restart checkers and each simulated workload's own; its history, node events, executed fault
schedule and ``results.json`` are written to ``--out`` (default ``results/sim/seed-<N>``), and the verdict is
printed as ``splitbrain test`` prints it.  The same seed replays the same history, byte for byte.

Exit code: 0 valid, 1 invalid (any seed of a sweep), 2 unknown or bad input.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from checker.compose import results_to_json
from harness.explain import summary_lines, verdict_label
from harness.sim_check import check_run, replay_command, write_run
from system_under_test.sim import DEFAULT_WORKLOADS, FAULT_KINDS, SIM_BUGS, SIM_WORKLOADS, SimConfig
from system_under_test.sim import run as run_sim

__all__ = ["configure", "run"]


def _faults(text: str) -> tuple[str, ...]:
    if text in ("none", ""):
        return ()
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    bad = [k for k in kinds if k not in FAULT_KINDS]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown fault kind(s) {bad}; known: {', '.join(FAULT_KINDS)} or none")
    return kinds


def _workloads(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(w.strip() for w in text.split(",") if w.strip()))
    bad = [w for w in names if w not in SIM_WORKLOADS]
    if bad or "queue" not in names:
        raise argparse.ArgumentTypeError(f"unknown workload(s) {bad} or no queue; known: {', '.join(SIM_WORKLOADS)} "
                                         f"(queue always)")
    return names


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value <= 1e6:
        raise argparse.ArgumentTypeError(f"{value:g} is outside (0, 1e6] seconds")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 1 <= value <= 1_000_000:
        raise argparse.ArgumentTypeError(f"{value} is outside 1..1000000")
    return value


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=int, default=0, help="the run's seed (first seed of a sweep)")
    p.add_argument("--seeds", type=_count, default=1, help="run this many consecutive seeds (a sweep)")
    p.add_argument("--seconds", type=_seconds, default=30.0, help="simulated seconds of the main phase")
    p.add_argument("--bug", action="append", default=[], choices=sorted(SIM_BUGS),
                   help="a deliberate bug (docs/bugs.md); repeatable")
    p.add_argument("--faults", type=_faults, default=None,
                   help=f"comma list of fault kinds ({', '.join(FAULT_KINDS)}) or none; default: all but "
                        f"registration-crash")
    p.add_argument("--workloads", type=_workloads, default=DEFAULT_WORKLOADS,
                   help=f"comma list of simulated workloads ({', '.join(SIM_WORKLOADS)}; queue always); default: "
                        f"{','.join(DEFAULT_WORKLOADS)}")
    p.add_argument("--threads", type=_count, default=4, help="queue client threads")
    p.add_argument("--unsafe", choices=("no-all-ack", "unclean-election"), action="append", default=[],
                   help="run with an unsafe setting (loss is then allowed by design)")
    p.add_argument("--out", help="where to write the run (default results/sim/seed-<N>); a sweep writes failing "
                                 "seeds only, under <out>/seed-<N>")
    p.add_argument("--json", action="store_true", help="print one JSON object per seed instead of the summary")


def _config(args: argparse.Namespace, seed: int) -> SimConfig:
    extra = {} if args.faults is None else {"faults": args.faults}
    return SimConfig(seed=seed, seconds=args.seconds, bugs=frozenset(args.bug), threads=args.threads,
                     workloads=args.workloads,
                     all_ack_in_sync_state_set="no-all-ack" not in args.unsafe,
                     enable_elect_unclean_master="unclean-election" in args.unsafe, **extra)


def run(args: argparse.Namespace) -> int:
    """Play, check and store each seed; print its verdict.  Exit code as the module docstring says."""
    worst = 0
    root = Path(args.out) if args.out else Path("results") / "sim"
    sweep = args.seeds > 1
    for seed in range(args.seed, args.seed + args.seeds):
        t0 = time.perf_counter()
        sim = run_sim(_config(args, seed))
        results = check_run(sim)
        wall = time.perf_counter() - t0
        doc = results_to_json(results)
        valid = doc["valid"]
        code = 0 if valid is True else 1 if valid is False else 2
        worst = max(worst, code) if worst != 1 else 1
        out = root / f"seed-{seed}" if (args.out is None or sweep) else root
        if not sweep or code != 0:
            write_run(sim, results, out)
        if args.json:
            print(json.dumps({"seed": seed, "valid": valid, "anomaly_counts": doc["anomaly_counts"],
                              "simulated_s": sim.simulated_s, "wall_s": round(wall, 3), "dir": str(out),
                              "replay": replay_command(sim)}))
            continue
        if sweep:
            kinds = ", ".join(f"{k}={n}" for k, n in sorted(doc["anomaly_counts"].items())) or "-"
            print(f"seed {seed}: {verdict_label(valid)} ({kinds}) {sim.simulated_s:.0f} simulated s in {wall:.1f} s"
                  + ("" if code == 0 else f"; written to {out}"))
            continue
        faults = ", ".join(f"{k} x{n}" for k, n in sim.stats["faults"].items()) or "no faults"
        for line in summary_lines(doc, faults=faults):
            print(line)
        print(f"simulated {sim.simulated_s:.1f} s in {wall:.2f} s wall ({sim.simulated_s / max(wall, 1e-9):.0f}x); "
              f"{sim.stats['client_ops']} client ops; written to {out}")
        print(f"replay: {replay_command(sim)}")
    return 1 if worst == 1 else worst
