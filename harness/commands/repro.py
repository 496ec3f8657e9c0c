"""``splitbrain repro RUN``: rerun a stored run with its spec, seed and *executed* fault schedule.

The run's history holds every nemesis op it performed, at the time it ran, with the kind and selector it
was asked for.  repro turns those into an explicit ``nemesis.schedule`` (selectors re-resolved by role: the
master of the rerun is hit even if it is another node; ``--same-nodes`` pins the recorded node names),
writes the spec as ``repro.yaml`` in the run directory, prints the command, and runs it with the same
seed -- so the clients issue the same ops per worker, and the faults come at the recorded offsets.

``--runs N`` reruns N times and prints, for each anomaly kind the original run reported, in how many
reruns it appeared.  ``--print-only`` writes repro.yaml and prints the command without running.
Exit code: as ``splitbrain test`` (the worst rerun's); 2 for bad input.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections import Counter

from harness.commands._backend import BackendUnavailable
from harness.commands._exit import refuse
from harness.commands._replay import ReplayError, load_run, rerun, write_schedule_spec
from harness.runner import worst_exit_code
from harness.spec import SpecError
from harness.store import EXIT_UNKNOWN
from nemesis.replay import anomaly_kinds, reproduces

__all__ = ["configure", "run"]


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="run dir, test dir or path under --results (e.g. results/latest)")
    p.add_argument("--results", default="results", help="results root for the lookup and for the new runs")
    p.add_argument("--print-only", action="store_true", help="write repro.yaml and print the command; do not run")
    p.add_argument("--same-nodes", action="store_true",
                   help="pin every fault to the node names it hit (default: re-resolve selectors by role)")
    p.add_argument("--runs", type=int, default=1, help="rerun N times and count how often each anomaly recurs")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--nodes-file", help="ssh backend: nodes file")


def run(args: argparse.Namespace) -> int:
    if args.runs < 1 or args.runs > 1000:
        print(f"splitbrain repro: --runs: got {args.runs}; expected 1..1000", file=sys.stderr)
        return EXIT_UNKNOWN
    try:
        stored = load_run(args.run, args.results, same_nodes=args.same_nodes)
        how = "recorded node names" if args.same_nodes else "selectors re-resolved by role"
        path = write_schedule_spec(
            stored.spec, stored.steps, stored.path / "repro.yaml",
            comment=f"Replay of {stored.path} (seed {stored.spec.seed}): its executed fault schedule, {how}.")
    except ReplayError as exc:
        return refuse("repro", exc)
    except OSError as exc:
        return refuse("repro", f"cannot write {exc.filename}: {exc.strerror}")
    cmd = shlex.join(["splitbrain", "test", str(path), "--seed", str(stored.spec.seed)])
    kinds = sorted(stored.kinds)
    print(f"# {stored.spec.name} seed={stored.spec.seed} from {stored.path}: {len(stored.steps)} nemesis steps "
          f"({how}); original: valid={stored.doc.get('valid')} anomalies={kinds or '-'}\n{cmd}", flush=True)
    if args.print_only:
        return 0
    codes: list[int] = []
    seen: Counter[str] = Counter()
    invalid = 0
    for i in range(args.runs):
        try:
            doc = rerun(path, seed=stored.spec.seed, results_root=args.results, quiet=args.quiet,
                        nodes_file=args.nodes_file)
        except (SpecError, BackendUnavailable) as exc:
            return refuse("repro", exc)
        codes.append(int(doc["exit_code"]))
        got = anomaly_kinds(doc)
        seen.update(k for k in got if k in kinds)
        invalid += doc.get("valid") is False
        mark = "reproduced" if reproduces(doc, kinds) else "not reproduced"
        print(f"[repro] run {i + 1}/{args.runs}: valid={doc.get('valid')} anomalies={sorted(got) or '-'} -> {mark} "
              f"({doc['run_dir']})", flush=True)
    if args.runs > 1 or kinds:
        print(f"[repro] {invalid}/{args.runs} reruns invalid (original: valid={stored.doc.get('valid')})")
        for k in kinds:
            print(f"[repro] {k}: reproduced in {seen[k]}/{args.runs} reruns")
    return worst_exit_code(codes)

