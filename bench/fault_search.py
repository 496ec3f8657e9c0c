"""Fault search: does the guided nemesis find planted bugs faster than random faults?  Real runs, side by side.

For every case -- each planted bug (``--bug`` switches, docs/bugs.md) and the two unsafe settings alone
(unclean election with all-ack on; all-ack off with clean election) -- and for each mode (``random``,
``guided``) and seed, the bench runs real ``splitbrain test`` commands (local backend) one after another:
attempt i uses seed ``seed*1000 + i`` and a main phase of ``--run-s`` seconds, until a run reports the
case's anomaly or the attempts' main phases add up to ``--budget-s``.  Both modes get the same spec (the
same packages, selectors, interval, load), the same budget and the same seeds; only ``--nemesis-mode``
differs -- and a guided search keeps its memory (what it learned) from one attempt to the next.

Figures, per case and mode: ``found_fraction`` (seeds whose search found the case within the budget) and
``median_detect_s``, the median time to first detection in main-phase seconds: the main phases of the attempts
before the detecting one plus, within it, the moment the anomaly could first be seen (:func:`detection_s`).  A
search that never found the case is censored at the budget, not counted as a time: the median is reported only
when more than half of the searches found the case, else it is ``> budget`` (``median_detect_s`` null,
``median_censored`` true); ``detect_s_each`` lists every search's time (null: not found).  Overall:
``coverage_at_s`` (mean coverage points -- :mod:`nemesis.coverage` -- reached in the first ``--coverage-s``
seconds of each first attempt, per mode) and ``speedup_median`` (random's median over guided's per case, the
median across cases).  A censored median is only known to exceed the budget, so a case's speedup is an interval
(``speedup_per_case``: ``at_least``/``at_most``, null when unbounded) and so is the median across cases
(``speedup_median_at_least``/``_at_most``; ``speedup_median`` is set only when both agree).  Beside it,
``speedup_median_needs_faults*`` is the same median over the cases that need faults (``needs_faults_cases``): a
case whose workload shows its bug with no fault (``Case.needs_faults`` false) is found alike in both modes.

Targets (issue 20): guided finds every case in >= 80% of runs of <= 3 minutes (budget 180 s), and is >= 2x
faster than random on the median across cases.  The full run (7 cases x 2 modes x 5 seeds, 180 s) takes
hours; ``--cases``, ``--seeds``, ``--budget-s`` and ``--run-s`` cut it down, and the printed header says
exactly what ran.  It can run in parts: each finished search is appended to ``DIR/progress.jsonl`` under
``--results DIR``, so a stopped bench run again on the same root resumes; ``--first-seed`` runs other seeds; and
``--merge`` reports several parts' ``--json`` outputs as one run (they must share budget, run length, interval and
coverage time; each part's commit is listed).  Needs root (network namespaces).

Usage::

    python bench/fault_search.py [--json] [--cases unclean-election,ack-before-replication] [--seeds 2]
        [--first-seed 1] [--budget-s 180] [--run-s 30] [--coverage-s 30] [--modes random,guided] [--results DIR]
    python bench/fault_search.py --merge part1.json part2.json [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.search_runs import (  # noqa: E402
    Progress,
    checkout_commit,
    coverage_at,  # noqa: F401 (the bench's tests read it through this module)
    detection_s,  # noqa: F401 (as coverage_at)
    main_phase_s,  # noqa: F401 (as coverage_at)
    shows,
    summarize,
)
from bench.search_runs import search as run_search  # noqa: E402

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
    """The case needs at least this long a main phase (``non-atomic-meta``: random mode's registration-crash walk
    reaches its 7th failpoint, ``broker.meta.before_rename``, about 35 s in)."""
    packages: tuple[str, ...] = PACKAGES
    """The nemesis packages both modes draw from (a workload may add its own, e.g. ``broker-ids`` adds
    ``registration-crash``; listing it here makes that explicit)."""
    needs_faults: bool = True
    """False: the workload shows the bug with no fault at all (the bug breaks the API itself), so no nemesis can
    find it faster; the bench reports the speedup median also over the cases that need faults."""


QUEUE = {"name": "queue", "options": {"queues_per_set": 4}}
CASES: dict[str, Case] = {
    "unclean-election": Case(QUEUE, {"enable_elect_unclean_master": True, "all_ack_in_sync_state_set": True},
                             frozenset({"lost-write"})),
    "no-all-ack": Case(QUEUE, {"enable_elect_unclean_master": False, "all_ack_in_sync_state_set": False},
                       frozenset({"lost-write"})),
    "ack-before-replication": Case(QUEUE, {"bugs": ["ack-before-replication"]}, frozenset({"lost-write"})),
    "no-epoch-fencing": Case({"name": "membership", "options": {"brokers": 3}}, {"bugs": ["no-epoch-fencing"]},
                             frozenset({"stale-epoch-accepted"}), {"count": 1, "replicas": 1}, 5.0,
                             needs_faults=False),
    "stale-read": Case({"name": "controller-register", "options": {"follower_read_fraction": 0.0}},
                       {"bugs": ["stale-read"]}, frozenset()),
    "reuse-broker-id": Case({"name": "broker-ids", "options": {"failpoints": 0, "virtual_sets": 2,
                                                               "apply_fraction": 0.5, "read_fraction": 0.2}},
                            {"bugs": ["reuse-broker-id"]}, frozenset(), {"count": 0, "replicas": 1},
                            needs_faults=False),
    "non-atomic-meta": Case({"name": "broker-ids", "options": {"failpoints": 0, "virtual_sets": 1}},
                            {"bugs": ["non-atomic-meta"]}, frozenset({"restart-refused"}),
                            {"count": 1, "replicas": 1}, min_run_s=60.0, packages=("registration-crash",)),
    # Only slower: a killed or cut-off master is re-elected after six leases; the availability verdict sees it.
    "slow-failover": Case(QUEUE, {"bugs": ["slow-failover"]}, frozenset({"unavailable"})),
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
        "nemesis": {"packages": list(case.packages), "interval_s": interval_s,
                    "targets": _selectors(case)},
        "concurrency": 4, "rate": case.rate, "time_limit_s": run_s,
        "phases": {"recovery_s": 3, "final_drain_s": 15},
    }


def found(doc: Mapping[str, Any], case: Case) -> bool:
    """Whether a run's ``results.json`` shows the case (pure)."""
    return shows(doc, case.expect)


def search(name: str, case: Case, mode: str, seed: int, *, spec: dict[str, Any], budget_s: float, run_s: float,
           results: Path, coverage_s: float) -> dict[str, Any]:
    """The case's search (:func:`bench.search_runs.search`): attempts until a run shows the case's anomaly kinds
    or the budget of main-phase seconds is spent."""
    return run_search(name, mode, seed, spec=spec, kinds=case.expect, budget_s=budget_s, run_s=run_s,
                      results=results, coverage_s=coverage_s)


def _median_bounds(summary: Mapping[str, Any]) -> tuple[float, float] | None:
    """The interval the median detection time lies in: exact, or (budget, inf) when censored; None: no searches."""
    if summary.get("median_detect_s") is not None:
        m = float(summary["median_detect_s"])
        return m, m
    if summary.get("median_censored"):
        return float(summary["budget_s"]), math.inf
    return None


def _ratio(a: float, b: float) -> float:
    if b == 0:
        return math.inf if a > 0 else 1.0
    return a / b


def _finite(x: float) -> float | None:
    return None if math.isinf(x) else round(x, 2)


def _median_speedup(bounds: Sequence[tuple[float, float]], key: str) -> dict[str, float | None]:
    """``key``, ``key_at_least`` and ``key_at_most``: the medians of the cases' speedup bounds (null: no cases or
    unbounded); ``key`` itself only when both medians agree (pure)."""
    lo_m = statistics.median(lo for lo, _ in bounds) if bounds else None
    hi_m = statistics.median(hi for _, hi in bounds) if bounds else None
    return {key: _finite(lo_m) if lo_m is not None and lo_m == hi_m else None,
            f"{key}_at_least": _finite(lo_m) if lo_m is not None else None,
            f"{key}_at_most": _finite(hi_m) if hi_m is not None else None}


def figures(per_case: Mapping[str, Mapping[str, Any]], modes: Sequence[str], *,
            no_faults_needed: Collection[str] | None = None) -> dict[str, Any]:
    """Overall figures from the per-case summaries (pure).

    A case's speedup is random's median over guided's.  A censored median lies in (budget, inf), so the speedup
    is an interval: ``at_least`` is random's lower bound over guided's upper bound, ``at_most`` the reverse
    (null: unbounded; both medians censored: 0 to unbounded).  The median across cases is bounded by the medians
    of those bounds, and is a number only when they agree.  ``speedup_median_needs_faults*`` is the same median
    over the cases not in ``no_faults_needed`` (default: the :data:`CASES` with ``needs_faults`` false), whose
    workload shows the bug with no fault at all, so both modes find them alike; ``needs_faults_cases`` names them.
    """
    skip = {n for n, c in CASES.items() if not c.needs_faults} if no_faults_needed is None else set(no_faults_needed)
    out: dict[str, Any] = {}
    if "guided" in modes:
        fr = [c["guided"]["found_fraction"] for c in per_case.values()
              if c.get("guided") and c["guided"]["found_fraction"] is not None]
        out["guided_min_found_fraction"] = min(fr) if fr else None
    if {"guided", "random"} <= set(modes):
        bounds: dict[str, tuple[float, float]] = {}
        for name, c in per_case.items():
            r, g = _median_bounds(c.get("random") or {}), _median_bounds(c.get("guided") or {})
            if r is None or g is None:  # a case searched in one mode only (e.g. a merged part) has no speedup
                continue
            bounds[name] = (_ratio(r[0], g[1]), _ratio(r[1], g[0]))
        out.update(_median_speedup(list(bounds.values()), "speedup_median"))
        needing = [n for n in bounds if n not in skip]
        out.update(_median_speedup([bounds[n] for n in needing], "speedup_median_needs_faults"))
        out["needs_faults_cases"] = needing
        out["speedup_per_case"] = {name: {"value": _finite(lo) if lo == hi else None, "at_least": _finite(lo),
                                          "at_most": _finite(hi)} for name, (lo, hi) in bounds.items()}
    return out


def _show_median(s: Mapping[str, Any]) -> str:
    if s["median_detect_s"] is not None:
        return f"{s['median_detect_s']:.1f} s"
    return f"> {s['budget_s']:g} s" if s["median_censored"] else "-"


def _show_bounds(lo: float | None, hi: float | None) -> str:
    if lo is None and hi is None:
        return "-"
    if lo == hi:
        return f"{lo}"
    if hi is None:
        return f">= {lo}" if lo else "unknown (both censored)"
    return f"{lo} .. {hi}"


def _verdict(lo: float | None, hi: float | None, target: float) -> str:
    if lo is not None and lo >= target:
        return "met"
    if hi is not None and hi < target:
        return "missed"
    return "undecided"


def table(doc: Mapping[str, Any]) -> list[str]:
    """The printed report: per case and mode the finds, the median (or ``> budget``) and every search's time,
    then coverage and the speedup with its target (pure)."""
    cfg = doc["config"]
    lines = [f"fault search: cases={','.join(cfg['cases'])} modes={','.join(cfg['modes'])} seeds={cfg['seeds']} "
             f"budget={cfg['budget_s']:g}s run={cfg['run_s']:g}s ({doc['minutes']} min)",
             f"  {'case':24s} {'mode':7s} {'found':>5s} {'median detect':>14s}  each search (s; '-' not found)"]
    for name, by_mode in doc["cases"].items():
        for mode, s in by_mode.items():
            each = " ".join("-" if t is None else f"{t:.1f}" for t in s["detect_s_each"])
            target = f"   target found >= 0.8: {'met' if (s['found_fraction'] or 0) >= 0.8 else 'missed'}" \
                if mode == "guided" else ""
            lines.append(f"  {name:24s} {mode:7s} {s['found']:>2d}/{s['seeds']:<2d} {_show_median(s):>14s}  "
                         f"{each}{target}")
    lines.append(f"  coverage at {cfg['coverage_s']:g}s: {doc['coverage_at_s']}")
    if "speedup_per_case" in doc:
        for name, sp in doc["speedup_per_case"].items():
            lines.append(f"  speedup {name:24s} {_show_bounds(sp['at_least'], sp['at_most'])}")
        lo, hi = doc["speedup_median_at_least"], doc["speedup_median_at_most"]
        lines.append(f"  speedup (random/guided, median across cases): {_show_bounds(lo, hi)}   "
                     f"target >= 2.0: {_verdict(lo, hi, 2.0)}")
        if "speedup_median_needs_faults_at_least" in doc:  # documents written before the field lack it
            lo, hi = doc["speedup_median_needs_faults_at_least"], doc["speedup_median_needs_faults_at_most"]
            lines.append(f"  speedup (median across the cases that need faults: {', '.join(doc['needs_faults_cases'])})"
                         f": {_show_bounds(lo, hi)}   (beside the target's figure above: {_verdict(lo, hi, 2.0)} "
                         "at >= 2.0)")
    return lines


def build_doc(raw: Mapping[str, Mapping[str, Sequence[Mapping[str, Any]]]], config: Mapping[str, Any], *,
              minutes: float) -> dict[str, Any]:
    """The bench's JSON document from its searches (``raw[case][mode]``) (pure): per-case summaries, the overall
    figures, coverage per mode, the targets, and the searches themselves (so parts can be merged later)."""
    budgets = config.get("case_budget_s") or {}
    modes = list(config["modes"])
    per_case = {name: {mode: summarize(list(searches), float(budgets.get(name, config["budget_s"])))
                       for mode, searches in by_mode.items()} for name, by_mode in raw.items()}
    overall = figures(per_case, modes)
    cov = {m: [s["coverage_at_s"] for by_mode in raw.values() for s in by_mode.get(m, ())
               if s.get("coverage_at_s") is not None] for m in modes}
    overall["coverage_at_s"] = {m: round(statistics.mean(v), 1) if v else None for m, v in cov.items()}
    return {"config": dict(config), "minutes": minutes, "cases": per_case, **overall, "targets": TARGETS,
            "searches": {name: {mode: list(v) for mode, v in by_mode.items()} for name, by_mode in raw.items()}}


MERGE_KEYS = ("budget_s", "run_s", "interval_s", "coverage_s")
"""Settings every merged part must share: searches under other budgets or run lengths are not comparable."""


class MergeError(ValueError):
    """Parts that cannot be merged (the message names the file and the field)."""


def merge(parts: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """One document from the ``--json`` outputs of several runs of this bench (``(file name, document)``), as if
    their searches had run in one: run the full bench in parts (across sessions or machines) and report it
    whole.  Every part must share :data:`MERGE_KEYS`; a (case, mode, seed) may appear in only one part (pure).

    Raises:
        MergeError: a part is not this bench's output, disagrees on a setting, or repeats a search.
    """
    if not parts:
        raise MergeError("--merge: no files")
    first_name, first = parts[0]
    raw: dict[str, dict[str, list[dict[str, Any]]]] = {}
    budgets: dict[str, float] = {}
    specs: dict[str, Any] = {}
    modes: list[str] = []
    commits, minutes = [], 0.0
    for name, doc in parts:
        cfg = doc.get("config") if isinstance(doc, Mapping) else None
        if not isinstance(cfg, Mapping) or not isinstance(doc.get("searches"), Mapping):
            raise MergeError(f"{name}: not a fault_search --json document (no config/searches)")
        for key in MERGE_KEYS:
            if cfg.get(key) != first["config"].get(key):
                raise MergeError(f"{name}: config.{key} is {cfg.get(key)!r}, but {first_name} has "
                                 f"{first['config'].get(key)!r}; only runs with the same {key} can be merged")
        for case, by_mode in doc["searches"].items():
            if case not in CASES:
                raise MergeError(f"{name}: searches: unknown case {case!r}")
            case_budgets: Mapping[str, Any] = cfg.get("case_budget_s") or {}
            budgets[case] = float(case_budgets.get(case, cfg["budget_s"]))
            spec = (cfg.get("case_specs") or {}).get(case)
            if specs.setdefault(case, spec) != spec:
                raise MergeError(f"{name}: config.case_specs.{case} differs from an earlier part's: the case was "
                                 "changed between the parts, so their searches are not comparable")
            for mode, searches in by_mode.items():
                if mode not in ("random", "guided"):
                    raise MergeError(f"{name}: searches.{case}: unknown mode {mode!r}")
                have = raw.setdefault(case, {}).setdefault(mode, [])
                seeds = {s.get("seed") for s in have}
                for s in searches:
                    if s.get("seed") in seeds:
                        raise MergeError(f"{name}: searches.{case}.{mode}: seed {s.get('seed')} is already in an "
                                         "earlier part")
                    have.append(dict(s))
                if mode not in modes:
                    modes.append(mode)
        commits.append({"file": name, "commit": cfg.get("commit"), "cases": list(doc["searches"])})
        minutes += float(doc.get("minutes") or 0.0)
    config = {**{k: first["config"][k] for k in MERGE_KEYS}, "cases": list(raw), "modes": modes,
              "seeds": max(len(v) for by_mode in raw.values() for v in by_mode.values()),
              "case_budget_s": budgets, "case_specs": specs, "merged_from": commits}
    return build_doc(raw, config, minutes=round(minutes, 1))


def _load_parts(paths: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise MergeError(f"{path}: cannot read ({exc.strerror})") from None
        try:
            doc = json.loads(text.strip().splitlines()[-1] if text.strip() else "")
        except ValueError:
            raise MergeError(f"{path}: not JSON (expected the last line to be fault_search --json output)") from None
        if not isinstance(doc, dict):
            raise MergeError(f"{path}: not a fault_search --json document")
        out.append((path, doc))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print one JSON object of figures and targets")
    p.add_argument("--cases", default=",".join(CASES), help=f"comma list of {', '.join(CASES)}")
    p.add_argument("--modes", default="random,guided", help="comma list of random, guided")
    p.add_argument("--seeds", type=int, default=5, help="independent searches per case and mode (default 5)")
    p.add_argument("--first-seed", type=int, default=1, help="seeds are first-seed .. first-seed+seeds-1 (default 1)")
    p.add_argument("--budget-s", type=float, default=180.0, help="main-phase seconds per search (default 180)")
    p.add_argument("--run-s", type=float, default=30.0, help="main phase of each attempt (default 30)")
    p.add_argument("--interval-s", type=float, default=5.0, help="nemesis.interval_s of the spec (default 5)")
    p.add_argument("--coverage-s", type=float, default=30.0, help="coverage compared at this many seconds")
    p.add_argument("--results", help="results root (default: a temporary directory); a search already finished "
                   "under the same root and settings (its progress.jsonl) is not run again")
    p.add_argument("--merge", nargs="+", metavar="JSON",
                   help="report the searches of earlier --json outputs as one run (no new runs)")
    args = p.parse_args(argv)
    if args.merge:
        try:
            doc = merge(_load_parts(args.merge))
        except MergeError as exc:
            print(f"fault_search: {exc}", file=sys.stderr)
            return 2
        print(json.dumps(doc, default=str) if args.json else "\n".join(table(doc)))
        return 0
    cases = [c for c in args.cases.split(",") if c]
    modes = [m for m in args.modes.split(",") if m]
    bad = [c for c in cases if c not in CASES]
    if bad or not cases:
        print(f"fault_search: --cases: unknown {bad or cases}; known: {', '.join(CASES)}", file=sys.stderr)
        return 2
    if not modes or set(modes) - {"random", "guided"}:
        print(f"fault_search: --modes: expected random and/or guided, got {args.modes!r}", file=sys.stderr)
        return 2
    if args.seeds < 1 or args.first_seed < 1 or args.run_s <= 0 or args.budget_s < args.run_s:
        print("fault_search: --seeds >= 1, --first-seed >= 1, --run-s > 0 and --budget-s >= --run-s",
              file=sys.stderr)
        return 2
    results = Path(args.results or tempfile.mkdtemp(prefix="fault-search-"))
    results.mkdir(parents=True, exist_ok=True)
    settings = {"budget_s": args.budget_s, "run_s": args.run_s, "interval_s": args.interval_s,
                "coverage_s": args.coverage_s}
    progress = Progress(results / "progress.jsonl", settings)
    started = time.monotonic()
    raw: dict[str, dict[str, list[dict[str, Any]]]] = {}
    budgets: dict[str, float] = {}
    specs: dict[str, dict[str, Any]] = {}
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    for name in cases:
        case = CASES[name]
        run_s = max(args.run_s, case.min_run_s)
        spec = spec_for(name, case, run_s=run_s, interval_s=args.interval_s)
        budgets[name] = max(args.budget_s, run_s)
        raw[name] = {mode: [] for mode in modes}
        specs[name] = spec
        for seed in seeds:  # the modes alternate, so a change in the machine's load falls on both alike
            for mode in modes:
                done = progress.get(name, mode, seed, spec)
                if done is None:
                    done = search(name, case, mode, seed, spec=spec, budget_s=budgets[name], run_s=run_s,
                                  results=results, coverage_s=args.coverage_s)
                    progress.add(name, mode, spec, done)
                else:
                    print(f"#   {name} {mode} seed={seed}: finished earlier ({progress.path})", file=sys.stderr)
                raw[name][mode].append(done)
    config = {"cases": cases, "modes": modes, "seeds": args.seeds, "first_seed": args.first_seed,
              "budget_s": args.budget_s,
              "run_s": args.run_s, "interval_s": args.interval_s, "coverage_s": args.coverage_s,
              "results": str(results), "commit": checkout_commit(), "case_budget_s": budgets,
              "case_specs": specs}
    doc = build_doc(raw, config, minutes=round((time.monotonic() - started) / 60, 1))
    if args.json:
        print(json.dumps(doc, default=str))
        return 0
    print("\n".join(table(doc)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
