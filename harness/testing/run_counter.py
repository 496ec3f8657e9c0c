"""Run the counter workload through the real runner on the local netns backend.

``python -m harness.testing.run_counter --results DIR --time-limit 5`` (or ``splitbrain selftest``)
-- used by the harness's integration tests (including the SIGINT test) and handy as a smoke test
of a machine.
Prints the state-file prefix first so a test can check that cleanup removed everything.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from harness.control.local import LocalRemote
from harness.protocols import NoopNemesis
from harness.runner import TestParts, run_test
from harness.spec import spec_from_dict
from harness.testing.counter import CounterChecker, CounterClient, counter_generator, final_reads
from systems.counter import CounterSystem


async def _main(args: argparse.Namespace) -> int:
    spec = spec_from_dict({
        "name": args.name, "system": "counter", "backend": "local", "nodes": {"controllers": args.nodes},
        "workloads": ["counter"], "concurrency": args.concurrency, "rate": args.rate, "time_limit_s": args.time_limit,
        "phases": {"recovery_s": 0.2, "final_drain_s": 5}, "seed": args.seed,
    }, file="<run_counter>")
    remote = await LocalRemote.create(spec.nodes.all, prefix=args.prefix)
    print(f"[run_counter] prefix={remote.state['prefix']} state={remote.state_path}", flush=True)
    try:
        parts = TestParts(
            client=CounterClient(args.port), checkers={"counter": CounterChecker()},
            db=CounterSystem(port=args.port).make_db(spec, None),
            nemesis=NoopNemesis(), generator=counter_generator(args.rate), final_generator=final_reads(),
        )
        outcome = await run_test(spec, parts, results_root=args.results, remote=remote, quiet=args.quiet)
        return outcome.exit_code
    finally:
        await remote.close()


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results", default="results")
    p.add_argument("--name", default="counter")
    p.add_argument("--nodes", type=int, default=1, help="one counter service per node (state is NOT replicated)")
    p.add_argument("--time-limit", type=float, default=5.0)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--rate", type=float, default=200.0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--port", type=int, default=7400)
    p.add_argument("--prefix", default=None)
    p.add_argument("--quiet", action="store_true")


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_main(args))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    configure(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
