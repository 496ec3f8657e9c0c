"""``splitbrain selftest``: the harness on the counter system, a smoke test of a machine (local netns backend).

``splitbrain selftest --results DIR --time-limit 5`` (or ``python -m harness.testing.run_counter``) builds a
``system: counter`` spec from its flags -- ``nodes: {members: N}``, ``workloads: [counter]`` -- and runs it exactly
as ``splitbrain test examples/counter.yaml`` would (:func:`harness.testing.run_spec.run_spec`): the same validation,
backend, runner, results directory, timeline and repro hint.  It adds only the flags.  ``--nemesis clock``
(repeatable: ``kill``, ``pause``, ``clock``) adds nemesis packages aimed at ``one`` node; one the ``counter`` system
cannot serve exits 2 naming the package and the capability (``--nemesis partition``: ``network``).  Used by the
harness's integration tests (including the SIGINT test).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from harness.testing.run_spec import run_spec


def counter_spec(args: argparse.Namespace) -> dict[str, Any]:
    """The spec the flags describe (the mapping a spec file would hold)."""
    raw: dict[str, Any] = {
        "name": args.name, "system": "counter", "backend": "local", "nodes": {"members": args.nodes},
        "workloads": ["counter"], "concurrency": args.concurrency, "rate": args.rate, "time_limit_s": args.time_limit,
        "phases": {"recovery_s": 0.2, "final_drain_s": 5}, "seed": args.seed,
    }
    if args.nemesis:
        raw["nemesis"] = {"packages": list(args.nemesis), "interval_s": args.nemesis_interval, "targets": ["one"]}
    return raw


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results", default="results")
    p.add_argument("--name", default="counter")
    p.add_argument("--nodes", type=int, default=1,
                   help="one counter service per node; state is NOT replicated, so more than 1 is expected invalid")
    p.add_argument("--time-limit", type=float, default=5.0)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--rate", type=float, default=200.0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--nemesis", action="append", default=[], metavar="PACKAGE",
                   help="a nemesis package (repeatable): kill, pause or clock (libfaketime)")
    p.add_argument("--nemesis-interval", type=float, default=2.0, help="mean seconds between faults")
    p.add_argument("--quiet", action="store_true")


def run(args: argparse.Namespace) -> int:
    return run_spec(counter_spec(args), source="<selftest>", results=args.results, quiet=args.quiet,
                    prog="splitbrain selftest")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    configure(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
