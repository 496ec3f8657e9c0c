"""Fault search: does the guided nemesis find planted bugs faster than random faults?  Real runs, side by side.

For every case -- each planted bug (``--bug`` switches, docs/bugs.md) and the two unsafe settings alone
(unclean election with all-ack on; all-ack off with clean election) -- and for each mode (``random``,
``guided``) and seed, the bench runs real ``splitbrain test`` commands (local backend) one after another:
attempt i uses seed ``seed*1000 + i`` and a main phase of ``--run-s`` seconds, until a run reports the
case's anomaly or the attempts' main phases add up to ``--budget-s``.  Both modes get the same spec (the
same packages, selectors, interval, load), the same budget and the same seeds; only ``--nemesis-mode``
differs -- and a guided search keeps its memory (what it learned) from one attempt to the next.

Figures, per case and mode: ``found_fraction`` (seeds whose search found the case within the budget) and
``median_detect_s`` (median over the seeds that found it of the main-phase seconds spent until the
detecting run ended: attempts x run length; wall seconds are printed beside).  Overall: ``coverage_at_s``
(mean coverage points -- :mod:`nemesis.coverage` -- reached in the first ``--coverage-s`` seconds of each
first attempt, per mode) and ``speedup_median`` (random's median over guided's, on the median across cases;
a case random never found counts as the budget for random).

Targets (issue 20): guided finds every case in >= 80% of runs of <= 3 minutes (budget 180 s), and is >= 2x
faster than random on the median across cases.  The full run (7 cases x 2 modes x 5 seeds, 180 s) takes
hours; ``--cases``, ``--seeds``, ``--budget-s`` and ``--run-s`` cut it down, and the printed header says
exactly what ran.  Needs root (network namespaces).

Usage::

    python bench/fault_search.py [--json] [--cases unclean-election,ack-before-replication] [--seeds 2]
        [--budget-s 180] [--run-s 30] [--coverage-s 30] [--modes random,guided] [--results DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {"found_fraction": ">= 0.8 (guided, every case, budget <= 180 s)",
           "speedup_median": ">= 2.0 (random median / guided median, median across cases)"}
PACKAGES = ("partition", "kill")
SELECTORS = ["one", "minority", "primaries", "masters", "slaves", "slaves:one", "controller-leader"]


@dataclass(frozen=True)
class Case:
    """One thing to find: the workload and cluster settings that expose it and the anomaly kinds that count."""

    workload: dict[str, Any]
    cluster: dict[str, Any]
    expect: frozenset[str]
    """Anomaly kinds (``results.json`` ``anomaly_counts``) that mean found; empty: any invalid verdict."""
    broker_sets: dict[str, int] = field(default_factory=lambda: {"count": 1, "replicas": 3})
    rate: float = 40.0
    min_run_s: float = 0.0
    """The workload needs at least this long a main phase (the broker-ids failpoint lanes take about a minute)."""


QUEUE = {"name": "queue", "options": {"queues_per_set": 4}}
CASES: dict[str, Case] = {
    "unclean-election": Case(QUEUE, {"enable_elect_unclean_master": True, "all_ack_in_sync_state_set": True},
                             frozenset({"lost-write"})),
    "no-all-ack": Case(QUEUE, {"enable_elect_unclean_master": False, "all_ack_in_sync_state_set": False},
                       frozenset({"lost-write"})),
    "ack-before-replication": Case(QUEUE, {"bugs": ["ack-before-replication"]}, frozenset({"lost-write"})),
    "no-epoch-fencing": Case({"name": "membership", "options": {"brokers": 3}}, {"bugs": ["no-epoch-fencing"]},
                             frozenset({"stale-epoch-accepted"}), {"count": 1, "replicas": 1}, 5.0),
    "stale-read": Case({"name": "controller-register"}, {"bugs": ["stale-read"]}, frozenset()),
    "reuse-broker-id": Case({"name": "broker-ids", "options": {"failpoints": 0, "virtual_sets": 2,
                                                               "apply_fraction": 0.5, "read_fraction": 0.2}},
                            {"bugs": ["reuse-broker-id"]}, frozenset(), {"count": 0, "replicas": 1}),
    "non-atomic-meta": Case({"name": "broker-ids", "options": {"failpoints": 7, "lanes": 3, "virtual_sets": 1,
                                                               "real_sets": 1, "spawn_timeout_s": 12.0}},
                            {"bugs": ["non-atomic-meta"]}, frozenset({"restart-refused"}),
                            {"count": 1, "replicas": 1}, min_run_s=90.0),
}


def _selectors(case: Case) -> list[str]:
    """The spec's selectors: every role the topology has (no slaves with one replica, no masters without sets)."""
    if not case.broker_sets.get("count"):
        return ["one", "minority", "controller-leader"]
    if case.broker_sets.get("replicas", 1) < 2:
        return [s for s in SELECTORS if "slaves" not in s]
    return list(SELECTORS)


def spec_for(name: str, case: Case, *, run_s: float, interval_s: float) -> dict[str, Any]:
    """The spec both modes run for ``name`` (the mode is given on the command line)."""
    return {
        "name": f"search-{name}", "backend": "local",
        "nodes": {"controllers": 3, "broker_sets": case.broker_sets}, "cluster": case.cluster,
        "workloads": [case.workload],
        "nemesis": {"packages": list(PACKAGES), "interval_s": interval_s,
                    "targets": _selectors(case)},
        "concurrency": 4, "rate": case.rate, "time_limit_s": run_s,
        "phases": {"recovery_s": 3, "final_drain_s": 15},
    }


def found(doc: Mapping[str, Any], case: Case) -> bool:
    """Whether a run's ``results.json`` shows the case (pure)."""
    counts = doc.get("anomaly_counts") or {}
    if case.expect:
        return any(counts.get(k) for k in case.expect)
    return doc.get("valid") is False


def coverage_at(doc: Mapping[str, Any], at_s: float) -> int:
    """Coverage points a run had reached ``at_s`` seconds into its main phase (pure)."""
    curve = (doc.get("coverage") or {}).get("over_time") or []
    return max([int(n) for t, n in curve if float(t) <= at_s], default=0)


def summarize(searches: Sequence[Mapping[str, Any]], budget_s: float) -> dict[str, Any]:
    """Per (case, mode): found fraction, median detection seconds (main phase and wall) (pure)."""
    hits = [s for s in searches if s["found"]]
    return {"seeds": len(searches), "found": len(hits),
            "found_fraction": round(len(hits) / len(searches), 3) if searches else None,
            "median_detect_s": statistics.median([s["detect_s"] for s in hits]) if hits else None,
            "median_detect_wall_s": round(statistics.median([s["detect_wall_s"] for s in hits]), 1) if hits else None,
            "median_or_budget_s": statistics.median([s["detect_s"] if s["found"] else budget_s for s in searches])
            if searches else None}


def run_once(spec_path: Path, mode: str, seed: int, results: Path) -> tuple[dict[str, Any], float]:
    """One real ``splitbrain test`` run; its ``results.json`` and wall seconds."""
    dirs = results / f".dirs-{spec_path.stem}-{mode}-{seed}"
    dirs.unlink(missing_ok=True)
    started = time.monotonic()
    cmd = [sys.executable, "-m", "harness.cli", "test", str(spec_path), "--nemesis-mode", mode, "--seed", str(seed),
           "--results", str(results), "--quiet", "--run-dirs-file", str(dirs)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    wall = time.monotonic() - started
    try:
        run_dir = Path(dirs.read_text().split()[-1])
        doc = json.loads((run_dir / "results.json").read_text())
        doc["run_dir"] = str(run_dir)
    except (OSError, IndexError, ValueError):
        doc = {"valid": "unknown", "error": f"exit {proc.returncode}: {proc.stderr[-400:]}"}
    return doc, wall


def search(name: str, case: Case, mode: str, seed: int, *, spec: dict[str, Any], budget_s: float, run_s: float,
           results: Path, coverage_s: float) -> dict[str, Any]:
    """Attempts until found or the budget of main-phase seconds is spent.  A guided search keeps what it learned
    from one attempt to the next (``nemesis.guided_memory``, fresh per search), as a campaign would."""
    spec = json.loads(json.dumps(spec))
    if mode == "guided":
        memory = results / f"memory-{name}-{seed}.json"
        memory.unlink(missing_ok=True)
        spec["nemesis"]["guided_memory"] = str(memory)
    spec_path = results / f"search-{name}-{mode}-{seed}.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    spent, wall, attempts = 0.0, 0.0, []
    first_cov = None
    i = 0
    while spent + run_s <= budget_s + 1e-9:
        doc, w = run_once(spec_path, mode, seed * 1000 + i, results)
        spent, wall = spent + run_s, wall + w
        if first_cov is None:
            first_cov = coverage_at(doc, coverage_s)
        hit = found(doc, case)
        attempts.append({"seed": seed * 1000 + i, "found": hit, "valid": doc.get("valid"),
                         "anomalies": sorted(k for k, v in (doc.get("anomaly_counts") or {}).items() if v),
                         "coverage": (doc.get("coverage") or {}).get("points"), "run_dir": doc.get("run_dir"),
                         "wall_s": round(w, 1), **({"error": doc["error"]} if "error" in doc else {})})
        print(f"#   {name} {mode} seed={seed} attempt={i} found={hit} valid={doc.get('valid')} "
              f"coverage={attempts[-1]['coverage']} wall={w:.0f}s", file=sys.stderr, flush=True)
        i += 1
        if hit:
            return {"seed": seed, "found": True, "detect_s": spent, "detect_wall_s": wall, "attempts": attempts,
                    "coverage_at_s": first_cov}
    return {"seed": seed, "found": False, "detect_s": None, "detect_wall_s": wall, "attempts": attempts,
            "coverage_at_s": first_cov}


def figures(per_case: Mapping[str, Mapping[str, Any]], modes: Sequence[str], budget_s: float) -> dict[str, Any]:
    """Overall figures from the per-case summaries (pure)."""
    out: dict[str, Any] = {}
    if "guided" in modes:
        fr = [c["guided"]["found_fraction"] for c in per_case.values() if c.get("guided")]
        out["guided_min_found_fraction"] = min(fr) if fr else None
    if {"guided", "random"} <= set(modes):
        ratios = []
        for c in per_case.values():
            r, gd = c["random"]["median_or_budget_s"], c["guided"]["median_or_budget_s"]
            if r is not None and gd:
                ratios.append(r / gd)
        out["speedup_median"] = round(statistics.median(ratios), 2) if ratios else None
        out["speedup_per_case"] = {n: round(c["random"]["median_or_budget_s"] / c["guided"]["median_or_budget_s"], 2)
                                   for n, c in per_case.items() if c["guided"]["median_or_budget_s"]}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print one JSON object of figures and targets")
    p.add_argument("--cases", default=",".join(CASES), help=f"comma list of {', '.join(CASES)}")
    p.add_argument("--modes", default="random,guided", help="comma list of random, guided")
    p.add_argument("--seeds", type=int, default=5, help="independent searches per case and mode (default 5)")
    p.add_argument("--budget-s", type=float, default=180.0, help="main-phase seconds per search (default 180)")
    p.add_argument("--run-s", type=float, default=30.0, help="main phase of each attempt (default 30)")
    p.add_argument("--interval-s", type=float, default=5.0, help="nemesis.interval_s of the spec (default 5)")
    p.add_argument("--coverage-s", type=float, default=30.0, help="coverage compared at this many seconds")
    p.add_argument("--results", help="results root (default: a temporary directory)")
    args = p.parse_args(argv)
    cases = [c for c in args.cases.split(",") if c]
    modes = [m for m in args.modes.split(",") if m]
    bad = [c for c in cases if c not in CASES]
    if bad or not cases:
        print(f"fault_search: --cases: unknown {bad or cases}; known: {', '.join(CASES)}", file=sys.stderr)
        return 2
    if not modes or set(modes) - {"random", "guided"}:
        print(f"fault_search: --modes: expected random and/or guided, got {args.modes!r}", file=sys.stderr)
        return 2
    if args.seeds < 1 or args.run_s <= 0 or args.budget_s < args.run_s:
        print("fault_search: --seeds >= 1, --run-s > 0 and --budget-s >= --run-s", file=sys.stderr)
        return 2
    results = Path(args.results or tempfile.mkdtemp(prefix="fault-search-"))
    results.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    per_case: dict[str, dict[str, Any]] = {}
    raw: dict[str, dict[str, list[dict[str, Any]]]] = {}
    cov: dict[str, list[int]] = {m: [] for m in modes}
    for name in cases:
        case = CASES[name]
        run_s = max(args.run_s, case.min_run_s)
        spec = spec_for(name, case, run_s=run_s, interval_s=args.interval_s)
        per_case[name], raw[name] = {}, {}
        for mode in modes:
            searches = [search(name, case, mode, s, spec=spec, budget_s=max(args.budget_s, run_s), run_s=run_s,
                               results=results, coverage_s=args.coverage_s) for s in range(1, args.seeds + 1)]
            raw[name][mode] = searches
            per_case[name][mode] = summarize(searches, args.budget_s)
            cov[mode] += [s["coverage_at_s"] for s in searches if s["coverage_at_s"] is not None]
    overall = figures(per_case, modes, args.budget_s)
    overall["coverage_at_s"] = {m: round(statistics.mean(v), 1) if v else None for m, v in cov.items()}
    doc = {"config": {"cases": cases, "modes": modes, "seeds": args.seeds, "budget_s": args.budget_s,
                      "run_s": args.run_s, "interval_s": args.interval_s, "coverage_s": args.coverage_s,
                      "results": str(results)},
           "minutes": round((time.monotonic() - started) / 60, 1), "cases": per_case, **overall,
           "targets": TARGETS, "searches": raw}
    if args.json:
        print(json.dumps(doc, default=str))
        return 0
    print(f"fault search: cases={','.join(cases)} modes={','.join(modes)} seeds={args.seeds} "
          f"budget={args.budget_s:g}s run={args.run_s:g}s ({doc['minutes']} min)")
    for name, by_mode in per_case.items():
        for mode, s in by_mode.items():
            print(f"  {name:24s} {mode:7s} found {s['found']}/{s['seeds']} ({s['found_fraction']})  "
                  f"median detect {s['median_detect_s']} s (wall {s['median_detect_wall_s']} s)   "
                  f"target: guided found >= 0.8")
    print(f"  coverage at {args.coverage_s:g}s: {overall['coverage_at_s']}")
    if "speedup_median" in overall:
        print(f"  speedup (random/guided, median across cases): {overall['speedup_median']}   target >= 2.0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
