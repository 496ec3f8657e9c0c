"""Fault schedules on the real cluster (local backend): replay determinism, repro rate, shrinking.

Three measurements, each a real ``splitbrain`` command run in a subprocess (nothing simulated):

* ``determinism`` -- the same spec and seed run twice (``--spec``, default the smoke spec with a 30 s main
  phase): both runs' nemesis ops are compared as (f, kind, selector, roles of the resolved nodes -- exact
  roles for role selectors, controller/broker for random subsets) and by offset from the main phase's start.
  Figures: ``same_sequence`` (target true) and ``max_offset_diff_s`` (target <= 0.5 s).
* ``repro`` -- an invalid run of ``examples/schedule-shrink-then-kill-master.yaml`` (unsafe settings;
  ``--repro-run`` to use another run) replayed ``--reruns`` times with ``splitbrain repro --runs``.
  Figure: ``repro_reproduced`` -- reruns that showed one of the original anomaly kinds (target >= 8 of 10).
* ``shrink`` -- an unsafe-settings spec with a *random* schedule (packages partition + kill, unclean
  election allowed) is run with seeds from ``--seed`` until a run is invalid (at most ``--max-seeds``),
  then ``splitbrain shrink`` cuts it down.  Figures: ``shrink_units_before`` (target >= 8),
  ``shrink_units_after`` (target <= 3), ``shrink_candidates``, ``shrink_minutes``.

Usage::

    python bench/fault_schedule.py [--json] [--only determinism,repro,shrink] [--reruns 10]

Prints ``name  measured  target`` lines, or one JSON object with ``--json``.  Needs root (namespaces).
Takes 15-60 minutes; every loop is bounded (runs, seeds, the shrink budget).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nemesis.replay import anomaly_kinds  # noqa: E402
from nemesis.schedule import fault_label, units  # noqa: E402
from nemesis.schedule import parse as parse_schedule  # noqa: E402
from nemesis.targets import Topology, needs_roles  # noqa: E402
from systems.splitbrain.selectors import SELECTORS  # noqa: E402

TOPOLOGY = Topology(("c1", "c2", "c3"), (("b1-1", "b1-2", "b1-3"),), selectors=SELECTORS)
"""The bench's cluster (its spec's nodes), with our cluster's pools."""
TARGETS = {"same_sequence": "== true", "max_offset_diff_s": "<= 0.5", "repro_reproduced": ">= 8 of 10",
           "shrink_units_before": ">= 8", "shrink_units_after": "<= 3"}

UNSAFE_RANDOM: dict[str, Any] = {
    "name": "bench-unsafe-random", "backend": "local",
    "nodes": {"controllers": 3, "broker_sets": {"count": 1, "replicas": 3}},
    "cluster": {"enable_elect_unclean_master": True, "all_ack_in_sync_state_set": True},
    "workloads": [{"name": "queue", "options": {"queues_per_set": 4}}],
    "nemesis": {"packages": ["partition", "kill"], "interval_s": 3,
                "options": {"partition": {"kinds": ["isolate-master-from-slaves", "isolate-master"]},
                            "kill": {"targets": ["masters"]}}},
    "concurrency": 4, "rate": 40, "time_limit_s": 40, "phases": {"recovery_s": 5, "final_drain_s": 20},
}


def splitbrain(*args: str, log: Path) -> tuple[int, str]:
    with log.open("a") as fh:
        fh.write(f"$ splitbrain {' '.join(args)}\n")
        fh.flush()
        proc = subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=fh, text=True, timeout=4 * 3600)
        fh.write(proc.stdout)
    return proc.returncode, proc.stdout


def run_dir_of(stdout: str) -> Path:
    found = re.findall(r"results=(\S+)", stdout)
    if not found:
        raise RuntimeError(f"no results dir in output: {stdout[-500:]}")
    return Path(found[-1])


def nemesis_sequence(run: Path) -> list[tuple[tuple[Any, ...], float]]:
    """(f, fault kind, selector, roles) and offset of every main-phase nemesis op of a run."""
    doc = json.loads((run / "results.json").read_text())
    spec = yaml.safe_load((run / "test.yaml").read_text())
    start = int(doc.get("main_phase_start_ns") or 0)
    end = doc.get("main_phase_end_ns")  # heal ops may start a few ms before time_limit_s; they are not steps
    ops = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines() if line.strip()]
    out, inv = [], None
    for op in ops:
        if op["process"] != "nemesis":
            continue
        if op["type"] == "invoke":
            inv = op
            continue
        if inv is None:
            continue
        offset = (inv["time"] - start) / 1e9
        if offset < float(spec["time_limit_s"]) and (not isinstance(end, int) or inv["time"] < end):
            roles = tuple(sorted(_role(t, r) for t in op.get("targets") or [] for r in (t.get("roles") or {}).values()))
            selector = inv["value"] if isinstance(inv["value"], str) else (inv["value"] or {}).get("targets")
            out.append(((inv["f"], fault_label(inv["f"], inv["value"]), selector, roles), offset))
        inv = None
    return out


def _role(record: dict[str, Any], role: str) -> str:
    """A role selector's nodes are compared by their exact role (that is what it selected); a random
    subset's nodes by controller/broker only -- which controller leads is the cluster's doing, not the
    harness's, and differs between runs."""
    if needs_roles(str(record.get("selector", "")), TOPOLOGY):
        return role
    return "controller" if role.startswith("controller") else "broker"


def determinism(args: argparse.Namespace, work: Path, log: Path) -> dict[str, Any]:
    runs = []
    for _ in range(2):
        _, out = splitbrain("test", args.spec, "--seed", str(args.seed), "--time-limit", "30", "--results",
                               str(work / "det"), "--quiet", log=log)
        runs.append(run_dir_of(out))
    a, b = (nemesis_sequence(r) for r in runs)
    same = [x for x, _ in a] == [x for x, _ in b]
    diffs = [abs(x - y) for (_, x), (_, y) in zip(a, b, strict=False)]
    return {"same_sequence": same, "max_offset_diff_s": round(max(diffs, default=0.0), 3),
            "max_lateness_s": [round(lateness(r), 3) for r in runs],
            "determinism_steps": len(a), "determinism_runs": [str(r) for r in runs]}


def lateness(run: Path) -> float:
    """The most any main-phase step ran after its planned time (schedule.yaml), in seconds: where the
    two runs' offsets differ, this says whether the harness was late (a busy nemesis or event loop)."""
    planned = [float(s["at_s"]) for s in yaml.safe_load((run / "schedule.yaml").read_text())]
    ran = [t for _, t in nemesis_sequence(run)]
    return max((t - p for t, p in zip(ran, planned, strict=False)), default=0.0)


def repro(args: argparse.Namespace, work: Path, log: Path) -> dict[str, Any]:
    run = Path(args.repro_run) if args.repro_run else None
    if run is None:
        for seed in range(args.seed, args.seed + args.max_seeds):
            code, out = splitbrain("test", "examples/schedule-shrink-then-kill-master.yaml", "--seed", str(seed),
                                   "--results", str(work / "repro"), "--quiet", log=log)
            if code == 1:
                run = run_dir_of(out)
                break
    if run is None:
        return {"repro_reproduced": None, "repro_note": "no invalid original run within --max-seeds"}
    code, out = splitbrain("repro", str(run), "--runs", str(args.reruns), "--results", str(work / "reruns"),
                           "--quiet", log=log)
    per_kind = {m.group(1): int(m.group(2)) for m in re.finditer(r"\[repro\] (\S+): reproduced in (\d+)/", out)}
    any_kind = len(re.findall(r"-> reproduced \(", out))
    return {"repro_reproduced": any_kind, "repro_reruns": args.reruns, "repro_per_kind": per_kind,
            "repro_original": str(run), "repro_original_kinds": sorted(anomaly_kinds(
                json.loads((run / "results.json").read_text())))}


def shrink(args: argparse.Namespace, work: Path, log: Path) -> dict[str, Any]:
    spec_path = work / "unsafe-random.yaml"
    run = None
    for seed in range(args.seed, args.seed + args.max_seeds):
        spec_path.write_text(yaml.safe_dump({**UNSAFE_RANDOM, "seed": seed}))
        code, out = splitbrain("test", str(spec_path), "--results", str(work / "shrink"), "--quiet", log=log)
        if code == 1:
            run = run_dir_of(out)
            break
    if run is None:
        return {"shrink_units_before": None, "shrink_note": f"no invalid run in {args.max_seeds} seeds"}
    before = len(units(parse_schedule(yaml.safe_load((run / "schedule.yaml").read_text()), TOPOLOGY)))
    t0 = time.monotonic()
    code, out = splitbrain("shrink", str(run), "--runs-per-candidate", str(args.runs_per_candidate),
                           "--budget-min", str(args.budget_min), log=log)
    minutes = (time.monotonic() - t0) / 60
    shrunk = yaml.safe_load((run / "shrunk.yaml").read_text())
    after = len(units(parse_schedule(shrunk["nemesis"]["schedule"], TOPOLOGY)))
    return {"shrink_units_before": before, "shrink_units_after": after, "shrink_exit": code,
            "shrink_candidates": len(re.findall(r"^\[shrink\] candidate \d+:", out, re.M)),
            "shrink_minutes": round(minutes, 1), "shrink_run": str(run),
            "shrink_schedule": shrunk["nemesis"]["schedule"]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true")
    p.add_argument("--only", default="determinism,repro,shrink")
    p.add_argument("--spec", default="examples/smoke.yaml")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--reruns", type=int, default=10)
    p.add_argument("--repro-run", help="an existing invalid run to replay (default: make one)")
    p.add_argument("--max-seeds", type=int, default=6)
    p.add_argument("--runs-per-candidate", type=int, default=1)
    p.add_argument("--budget-min", type=float, default=45.0)
    p.add_argument("--work", help="where runs go (default: a new temporary directory)")
    args = p.parse_args()
    parts = [x.strip() for x in args.only.split(",") if x.strip()]
    unknown = sorted(set(parts) - {"determinism", "repro", "shrink"})
    if unknown:
        print(f"bench/fault_schedule.py: --only: unknown part(s) {unknown}", file=sys.stderr)
        return 2
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="sb-bench-faults-"))
    work.mkdir(parents=True, exist_ok=True)
    log = work / "bench.log"
    figures: dict[str, Any] = {}
    for part in parts:
        figures.update({"determinism": determinism, "repro": repro, "shrink": shrink}[part](args, work, log))
    if args.json:
        print(json.dumps({"figures": figures, "targets": TARGETS, "work": str(work)}))
    else:
        for k, v in figures.items():
            print(f"{k:28s} {json.dumps(v)[:200]:40s} {TARGETS.get(k, '')}")
        print(f"(runs and log under {work})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
