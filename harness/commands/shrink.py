"""``splitbrain shrink RUN``: cut a failing run's fault schedule down to the faults that matter.

Reads RUN's executed schedule (as ``repro`` does), groups it into units -- each fault with its undo step
(:func:`nemesis.schedule.units`) -- and runs delta debugging (:mod:`nemesis.shrink`) over them: each
candidate schedule is run up to ``--runs-per-candidate`` times with RUN's spec and seed and counts as
failing when a rerun reports one of RUN's anomaly kinds (``--kind`` narrows them).  The candidates run
under ``RUN/shrink/``; every candidate is printed with its verdict as it finishes, and the smallest
failing schedule is written as a runnable spec, ``RUN/shrunk.yaml``.

``--budget-min`` bounds the wall time: when it runs out, the smallest failing schedule found so far is
written (and the output says the result may not be minimal).  Exit code: 0 when the written schedule was seen
failing in a rerun, 1 when no rerun reproduced the failure (the original schedule is written, unverified), 2 for
bad input.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from harness.commands._backend import BackendUnavailable
from harness.commands._replay import ReplayError, StoredRun, load_run, rerun, write_schedule_spec
from harness.spec import SpecError
from harness.store import EXIT_INVALID, EXIT_UNKNOWN
from nemesis.replay import anomaly_kinds, reproduces
from nemesis.schedule import Step, join_units, units
from nemesis.shrink import Candidate, ddmin

__all__ = ["configure", "run"]


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="the failing run: run dir, test dir or path under --results")
    p.add_argument("--results", default="results", help="results root for the lookup")
    p.add_argument("--runs-per-candidate", type=int, default=2, help="reruns per candidate (it fails if any does)")
    p.add_argument("--budget-min", type=float, default=60.0, help="stop after this many minutes (default 60)")
    p.add_argument("--kind", action="append", default=[], help="anomaly kind that counts (default: RUN's kinds)")
    p.add_argument("--same-nodes", action="store_true", help="pin faults to the recorded node names")
    p.add_argument("--quiet", action="store_true", help="no live progress line inside each candidate run")
    p.add_argument("--nodes-file", help="ssh backend: nodes file")


class _Search:
    """Runs candidates and remembers the smallest failing one."""

    def __init__(self, stored: StoredRun, args: argparse.Namespace, kinds: set[str]) -> None:
        self.stored, self.args, self.kinds = stored, args, kinds
        self.units = units(stored.steps)
        self.dir = stored.path / "shrink"
        self.best: Candidate = tuple(range(len(self.units)))
        self.tried: list[tuple[Candidate, str]] = []
        self.started = time.monotonic()

    def schedule(self, c: Candidate) -> tuple[Step, ...]:
        return join_units([self.units[i] for i in c])

    def expired(self) -> bool:
        return time.monotonic() - self.started > self.args.budget_min * 60

    def test(self, c: Candidate) -> bool:
        n = len(self.tried) + 1
        self.dir.mkdir(exist_ok=True)
        spec_path = write_schedule_spec(self.stored.spec, self.schedule(c), self.dir / f"candidate-{n}.yaml",
                                        comment=f"shrink candidate {n} of {self.stored.path}: units {list(c)}")
        verdicts = []
        failed = False
        for _ in range(self.args.runs_per_candidate):
            doc = rerun(spec_path, seed=self.stored.spec.seed, results_root=str(self.dir), quiet=self.args.quiet,
                        nodes_file=self.args.nodes_file)
            got = sorted(anomaly_kinds(doc) & self.kinds) if self.kinds else []
            verdicts.append(f"valid={doc.get('valid')}" + (f" {','.join(got)}" if got else ""))
            if reproduces(doc, self.kinds):
                failed = True
                break
        word = "FAILS" if failed else "passes"
        self.tried.append((c, f"{word} ({'; '.join(verdicts)})"))
        if failed and len(c) < len(self.best):
            self.best = c
        mins = (time.monotonic() - self.started) / 60
        print(f"[shrink] candidate {n}: {len(c)} fault(s) {self._describe(c)} -> {word} ({'; '.join(verdicts)}); "
              f"best so far {len(self.best)} fault(s); {mins:.1f}/{self.args.budget_min:g} min", flush=True)
        return failed

    def _describe(self, c: Candidate) -> str:
        return "[" + ", ".join(f"{self.units[i][0].f}@{self.units[i][0].at_s:g}s" for i in c) + "]"


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.runs_per_candidate <= 100:
        print(f"splitbrain shrink: --runs-per-candidate: got {args.runs_per_candidate}; expected 1..100",
              file=sys.stderr)
        return EXIT_UNKNOWN
    if not 0 < args.budget_min <= 7 * 24 * 60:
        print(f"splitbrain shrink: --budget-min: got {args.budget_min}; expected a positive number of minutes",
              file=sys.stderr)
        return EXIT_UNKNOWN
    try:
        stored = load_run(args.run, args.results, same_nodes=args.same_nodes)
    except ReplayError as exc:
        print(f"splitbrain shrink: {exc}", file=sys.stderr)
        return EXIT_UNKNOWN
    if stored.doc.get("valid") is not False:
        print(f"splitbrain shrink: {stored.path} is not an invalid run (valid={stored.doc.get('valid')}); "
              "shrink needs a run whose checkers found an anomaly", file=sys.stderr)
        return EXIT_UNKNOWN
    kinds = set(args.kind) if args.kind else stored.kinds
    missing = sorted(set(args.kind) - stored.kinds)
    if missing:
        print(f"splitbrain shrink: --kind {', '.join(missing)}: {stored.path} reported only "
              f"{sorted(stored.kinds) or 'no named anomalies'}", file=sys.stderr)
        return EXIT_UNKNOWN
    search = _Search(stored, args, kinds)
    print(f"[shrink] {stored.path}: {len(search.units)} fault unit(s) from {len(stored.steps)} nemesis steps; "
          f"looking for {sorted(kinds) or 'an invalid verdict'}; {args.runs_per_candidate} run(s) per candidate, "
          f"budget {args.budget_min:g} min", flush=True)
    complete = True
    try:
        gen = ddmin(len(search.units))
        c = next(gen)
        while True:
            if search.expired():
                complete = False
                break
            c = gen.send(search.test(c))
    except StopIteration as stop:
        result: Candidate = stop.value
        if len(result) < len(search.best) and _seen_failing(search, result):
            search.best = result
    except (SpecError, BackendUnavailable) as exc:
        print(f"splitbrain shrink: {exc}", file=sys.stderr)
        return EXIT_UNKNOWN
    except KeyboardInterrupt:
        complete = False
        print("[shrink] interrupted: writing the smallest failing schedule found so far", flush=True)
    full_failed = any(word.startswith("FAILS") for _, word in search.tried) or not search.tried
    out = write_schedule_spec(
        stored.spec, search.schedule(search.best), stored.path / "shrunk.yaml",
        comment=(f"Shrunk from {stored.path} (seed {stored.spec.seed}): {len(search.best)} of {len(search.units)} "
                 f"fault units{'' if complete else ' (budget ran out: may not be minimal)'}."))
    print(f"[shrink] {len(search.tried)} candidate(s) tried:")
    for i, (cand, word) in enumerate(search.tried, 1):
        print(f"  {i:3d}. {len(cand)} fault(s) {search._describe(cand)}: {word}")
    print(f"[shrink] smallest failing schedule: {len(search.best)} fault unit(s) of {len(search.units)}"
          f"{'' if complete else ' (not proven minimal: budget or interrupt)'} -> {out}\n"
          f"[splitbrain] run it with: splitbrain test {Path(out)} --seed {stored.spec.seed}", flush=True)
    return 0 if full_failed else EXIT_INVALID


def _seen_failing(search: _Search, c: Candidate) -> bool:
    return any(t == c and w.startswith("FAILS") for t, w in search.tried)
