"""Benchmark: simulated seconds per wall-clock second for the whole cluster under load, on one core.

The simulation (``system_under_test/sim``) plays three controllers, a broker set of three brokers, queue clients
and the default nemesis (kills, pauses, partitions, packet faults, clock skew) on simulated time; this bench runs
``--seeds`` seeds of ``--seconds`` simulated seconds each in this one process and reports how fast simulated
time goes, with the load it carried (client ops, messages and scheduler events per simulated second).  The
checkers' time is reported apart (``check_s``): they judge the history after the run.

Usage: ``python bench/cluster_sim.py [--seeds 5] [--seconds 120] [--threads 4] [--think-ms 100] [--workloads W,..]
[--json]`` (default workloads: all the simulator plays -- queue, broker-ids, membership, controller-register).
Prints ``figure  value  target`` lines, or one JSON object ``{"figures": {...}, "targets": {...}}`` with --json.
Run it under ``nice`` on a shared machine; it never asserts a time.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from checker.compose import compose
from system_under_test.sim import DEFAULT_WORKLOADS, SIM_WORKLOADS, SimConfig, run
from systems.splitbrain.sim.check import check_run

TARGETS = {"speedup_x": 50, "simulated_s_per_wall_min": 3000}


def measure(seeds: int, start: int, seconds: float, threads: int, think_ms: int,
            workloads: tuple[str, ...] = DEFAULT_WORKLOADS) -> dict[str, float]:
    sim_s = wall = check_s = 0.0
    ops = events = messages = faults = invalid = 0
    for seed in range(start, start + seeds):
        t0 = time.process_time()
        r = run(SimConfig(seed=seed, seconds=seconds, threads=threads, think_ms=think_ms, workloads=workloads))
        t1 = time.process_time()
        verdict = compose(check_run(r)).valid
        t2 = time.process_time()
        wall += t1 - t0
        check_s += t2 - t1
        sim_s += r.simulated_s
        ops += r.stats["client_ops"]
        events += r.stats["events"]
        messages += r.stats["messages_sent"]
        faults += sum(r.stats["faults"].values())
        invalid += verdict is not True
    return {
        "speedup_x": round(sim_s / wall, 1),
        "simulated_s_per_wall_min": round(sim_s / wall * 60),
        "simulated_s": round(sim_s, 1),
        "cpu_s": round(wall, 2),
        "client_ops_per_sim_s": round(ops / sim_s, 1),
        "messages_per_sim_s": round(messages / sim_s),
        "events_per_sim_s": round(events / sim_s),
        "events_per_cpu_s": round(events / wall),
        "faults_injected": faults,
        "check_s": round(check_s, 2),
        "runs_not_valid": invalid,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--seconds", type=float, default=120.0, help="simulated seconds of each run's main phase")
    p.add_argument("--threads", type=int, default=4, help="client threads")
    p.add_argument("--think-ms", type=int, default=100, help="mean pause between one thread's ops")
    p.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS),
                   help=f"comma list of simulated workloads ({', '.join(SIM_WORKLOADS)}; queue always)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    workloads = tuple(w.strip() for w in args.workloads.split(",") if w.strip())
    bad = [w for w in workloads if w not in SIM_WORKLOADS]
    if bad or "queue" not in workloads:
        p.error(f"--workloads: unknown workload(s) {bad} or no queue; known: {', '.join(SIM_WORKLOADS)}")
    figures = measure(args.seeds, args.start, args.seconds, args.threads, args.think_ms, workloads)
    if args.json:
        print(json.dumps({"figures": figures, "targets": TARGETS}))
    else:
        for name, value in figures.items():
            target = TARGETS.get(name)
            print(f"{name}  {value}  {'>= ' + str(target) if target is not None else '-'}")
    return 0 if figures["runs_not_valid"] == 0 else 1  # an invalid run on safe settings is a finding


if __name__ == "__main__":
    sys.exit(main())
