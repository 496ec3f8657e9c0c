"""``splitbrain sim``: the whole cluster in a seeded simulation, judged like a real run.

    splitbrain sim --seed 7 --seconds 60 [--bug slow-failover] [--faults kill,partition] [--workloads queue,membership]
                   [--out DIR]
    splitbrain sim --seed 0 --seeds 50 --seconds 30          # a sweep: one line per seed
    splitbrain sim --seed 7 --schedule FILE                  # play a given schedule instead of drawing one
    splitbrain sim --seed 7 --bug ack-before-replication --shrink [--shrink-budget N] [--out DIR]

One run plays three controllers, one broker set of three brokers, queue clients (and the broker-ids allocator,
membership and controller-register clients, ``--workloads``) and a nemesis on simulated time
(``docs/simulation.md``); the production cores decide everything the processes would.  The run is checked by
the queue, invariants, availability and restart checkers and each simulated workload's own; its history, node
events, executed fault schedule and ``results.json`` are written to ``--out`` (default ``results/sim/seed-<N>``),
and the verdict is printed as ``splitbrain test`` prints it.  The same seed replays the same history, byte for byte.

``--schedule FILE`` plays a given fault schedule (a run's ``schedule.yaml``, or a spec with ``nemesis.schedule``)
instead of drawing one; the seed still drives the clients and the network, so a drawn run's ``schedule.yaml``
played with its seed gives the same history.  ``--shrink`` replays a failing run's schedule and cuts it down
with ddmin in simulation (``systems/splitbrain/sim/shrink.py``), then writes ``shrunk-schedule.yaml`` and
``repro-spec.yaml`` (a spec for ``splitbrain test``) to ``--out``.

Exit code: 0 valid, 1 invalid (any seed of a sweep), 2 unknown or bad input.  ``--shrink``: 0 when a
shrunk schedule was written, 2 when the run does not fail (nothing to shrink) or on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from checker.compose import results_to_json
from harness.errors import SpecError
from harness.explain import summary_lines, verdict_label
from nemesis.replay import anomaly_kinds
from system_under_test.sim import DEFAULT_FAULTS, DEFAULT_WORKLOADS, FAULT_KINDS, SIM_BUGS, SIM_WORKLOADS, SimConfig
from system_under_test.sim import run as run_sim
from system_under_test.sim.playback import Timed
from systems.splitbrain.sim.check import check_run, replay_command, write_run
from systems.splitbrain.sim.shrink import ScheduleFileError, load_schedule, repro_spec, shrink

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
                   help=f"comma list of fault kinds ({', '.join(FAULT_KINDS)}) or none; default: "
                        f"{','.join(DEFAULT_FAULTS)}")
    p.add_argument("--workloads", type=_workloads, default=DEFAULT_WORKLOADS,
                   help=f"comma list of simulated workloads ({', '.join(SIM_WORKLOADS)}; queue always); default: "
                        f"{','.join(DEFAULT_WORKLOADS)}")
    p.add_argument("--threads", type=_count, default=4, help="queue client threads")
    p.add_argument("--unsafe", choices=("no-all-ack", "unclean-election"), action="append", default=[],
                   help="run with an unsafe setting (loss is then allowed by design)")
    p.add_argument("--out", help="where to write the run (default results/sim/seed-<N>); a sweep writes failing "
                                 "seeds only, under <out>/seed-<N>")
    p.add_argument("--json", action="store_true", help="print one JSON object per seed instead of the summary")
    p.add_argument("--swarm", action=argparse.BooleanOptionalAction, default=False,
                   help="swarm testing: each seed runs the subset of --faults (default with --swarm: every kind) and "
                        "--workloads, and the nemesis intensities, that the seed draws (docs/simulation.md, Swarm); "
                        "the draw is printed with the seed's result")
    p.add_argument("--schedule", help="play this fault schedule (a run's schedule.yaml or a spec with "
                                      "nemesis.schedule) instead of drawing faults; --faults is then ignored")
    p.add_argument("--shrink", action="store_true", help="shrink the failing run's schedule with ddmin in "
                                                         "simulation; write shrunk-schedule.yaml and repro-spec.yaml")
    p.add_argument("--shrink-budget", type=_count, default=100, help="most candidate runs a shrink makes "
                                                                     "(default 100)")


def _config(args: argparse.Namespace, seed: int) -> SimConfig:
    faults: tuple[str, ...] = args.faults if args.faults is not None else FAULT_KINDS if args.swarm \
        else DEFAULT_FAULTS
    return SimConfig(seed=seed, seconds=args.seconds, bugs=frozenset(args.bug), threads=args.threads,
                     workloads=args.workloads, swarm=args.swarm, faults=faults,
                     all_ack_in_sync_state_set="no-all-ack" not in args.unsafe,
                     enable_elect_unclean_master="unclean-election" in args.unsafe)


def _fail(message: str) -> int:
    print(f"splitbrain sim: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    """Play, check and store each seed (or shrink one); print its verdict.  Exit code as the module docstring
    says."""
    script: tuple[Timed, ...] | None = None
    if args.schedule is not None:
        try:
            _, script = load_schedule(args.schedule, args.seconds)
        except ScheduleFileError as exc:
            return _fail(str(exc))
    if args.shrink:
        if args.seeds > 1:
            return _fail("--shrink: shrinks one seed; drop --seeds")
        return _shrink(args, script)
    worst = 0
    root = Path(args.out) if args.out else Path("results") / "sim"
    sweep = args.seeds > 1
    for seed in range(args.seed, args.seed + args.seeds):
        t0 = time.perf_counter()
        sim = run_sim(_config(args, seed), script)
        results = check_run(sim)
        wall = time.perf_counter() - t0
        doc = results_to_json(results)
        valid = doc["valid"]
        code = 0 if valid is True else 1 if valid is False else 2
        worst = max(worst, code) if worst != 1 else 1
        out = root / f"seed-{seed}" if (args.out is None or sweep) else root
        if not sweep or code != 0:
            write_run(sim, results, out, args.schedule)
        if args.json:
            print(json.dumps({"seed": seed, "valid": valid, "anomaly_counts": doc["anomaly_counts"],
                              "simulated_s": sim.simulated_s, "wall_s": round(wall, 3), "dir": str(out),
                              "replay": replay_command(sim, args.schedule),
                              **({"swarm": sim.swarm.describe()} if sim.swarm is not None else {})}))
            continue
        if sweep:
            kinds = ", ".join(f"{k}={n}" for k, n in sorted(doc["anomaly_counts"].items())) or "-"
            print(f"seed {seed}: {verdict_label(valid)} ({kinds}) {sim.simulated_s:.0f} simulated s in {wall:.1f} s"
                  + ("" if code == 0 else f"; written to {out}")
                  + ("" if sim.swarm is None else f"; {sim.swarm.label()}"))
            continue
        faults = ", ".join(f"{k} x{n}" for k, n in sim.stats["faults"].items()) or "no faults"
        for line in summary_lines(doc, faults=faults):
            print(line)
        if sim.swarm is not None:
            print(sim.swarm.label())
        print(f"simulated {sim.simulated_s:.1f} s in {wall:.2f} s wall ({sim.simulated_s / max(wall, 1e-9):.0f}x); "
              f"{sim.stats['client_ops']} client ops; written to {out}")
        print(f"replay: {replay_command(sim, args.schedule)}")
    return 1 if worst == 1 else worst


def _shrink(args: argparse.Namespace, script: tuple[Timed, ...] | None) -> int:
    """Replay the seed (drawn, or ``--schedule``), shrink its schedule, write the shrunk schedule and a spec."""
    cfg = _config(args, args.seed)
    out = Path(args.out) if args.out else Path("results") / "sim" / f"seed-{args.seed}"
    t0 = time.process_time()
    original = run_sim(cfg, script)
    results = check_run(original)
    doc = results_to_json(results)
    if doc["valid"] is not False:
        return _fail(f"--shrink: {replay_command(original, args.schedule)} is {verdict_label(doc['valid'])}: "
                     "nothing to shrink")
    failing = {name for name, r in results.items() if r.valid is False}
    kinds = set().union(*(anomaly_kinds(results_to_json({n: results[n]})) for n in failing))
    write_run(original, results, out, args.schedule)
    first_cpu = time.process_time() - t0
    print(f"[shrink] {replay_command(original, args.schedule)}: invalid ({', '.join(sorted(failing))}: "
          f"{', '.join(sorted(kinds)) or 'no named anomalies'}); {len(original.schedule)} schedule steps; "
          f"budget {args.shrink_budget} candidate runs", flush=True)
    cfg = original.config  # a swarm seed's resolved config: its drawn workloads; the schedule replaces the draws
    found = shrink(cfg, original, kinds, budget=args.shrink_budget, progress=lambda line: print(line, flush=True))
    shrunk = found.schedule()
    sched_path = out / "shrunk-schedule.yaml"
    sched_path.write_text(f"# shrunk from {replay_command(original, args.schedule)}: {len(found.best)} of "
                          f"{len(found.units)} fault units\n" + yaml.safe_dump(shrunk, sort_keys=False),
                          encoding="utf-8")
    spec_path = out / "repro-spec.yaml"
    spec: dict[str, Any] = repro_spec(cfg, shrunk, name=f"sim-seed-{args.seed}-shrunk")
    spec_path.write_text(f"# splitbrain test {spec_path}: the shrunk schedule of simulated seed {args.seed} "
                         "against real processes\n" + yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    try:
        from harness.commands._parts import validate_spec
        from harness.spec import load_spec

        validate_spec(load_spec(spec_path))
    except SpecError as exc:  # a bug of repro_spec, not of the input: say so plainly
        return _fail(f"--shrink: the written {spec_path} does not validate: {exc}")
    stop = "" if found.complete else f" (stopped by --shrink-budget {args.shrink_budget}: may not be minimal)"
    print(f"[shrink] {len(found.units)} fault unit(s) -> {len(found.best)} in {len(found.tried)} candidate runs"
          f"{stop}; {first_cpu + found.cpu_s:.1f} CPU s")
    print(f"[shrink] shrunk schedule: {sched_path}; spec for a real run: {spec_path}")
    print(f"replay: {replay_command(original, str(sched_path))}")
    print(f"real run: splitbrain test {spec_path}")
    return 0
