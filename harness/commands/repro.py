"""``splitbrain repro RUN``: rerun a stored run with its exact spec, seed and fault schedule.

The run's ``test.yaml`` holds the resolved spec including the seed that run used; the seed drives every
generator (client ops, nemesis choices and timing), so the rerun issues the same schedule of operations and
faults (the cluster's own timing still differs -- real processes, real network).  Prints the command an
engineer can paste, then runs it once (``--print-only`` just prints).  Exit code: as ``splitbrain test``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from harness.commands._backend import BackendUnavailable
from harness.commands._parts import prepare
from harness.commands._runs import RunNotFound, resolve_run_dir
from harness.commands.test import execute, repro_command
from harness.spec import SpecError, load_spec
from harness.store import EXIT_UNKNOWN

__all__ = ["configure", "run"]


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="run dir, test dir or path under --results (e.g. results/latest)")
    p.add_argument("--results", default="results", help="results root for the lookup and for the new run")
    p.add_argument("--print-only", action="store_true", help="print the command, do not run it")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--nodes-file", help="ssh backend: nodes file")


def run(args: argparse.Namespace) -> int:
    try:
        run_dir = resolve_run_dir(args.run, args.results)
        spec_path = Path(run_dir) / "test.yaml"
        stored = load_spec(spec_path)
        cmd = repro_command(run_dir, stored.seed)
        print(f"# {stored.name} seed={stored.seed} from {run_dir}\n{cmd}", flush=True)
        if args.print_only:
            return 0
        prepared = prepare(str(spec_path), {"seed": stored.seed, "test_count": 1})
    except RunNotFound as exc:
        print(f"splitbrain repro: {exc}", file=sys.stderr)
        return EXIT_UNKNOWN
    except SpecError as exc:
        print(f"splitbrain repro: the stored spec is not usable: {exc}", file=sys.stderr)
        return EXIT_UNKNOWN
    try:
        code, _ = asyncio.run(execute(prepared, results_root=args.results, quiet=args.quiet,
                                      nodes_file=args.nodes_file))
    except BackendUnavailable as exc:
        print(f"splitbrain repro: {exc}", file=sys.stderr)
        return EXIT_UNKNOWN
    return code
