"""Run the counter workload through the real runner on the local netns backend.

``python -m harness.testing.run_counter --results DIR --time-limit 5`` (or ``splitbrain selftest``)
-- used by the harness's integration tests (including the SIGINT test) and handy as a smoke test
of a machine.  ``--nemesis clock`` (repeatable: ``kill``, ``pause``, ``clock``) adds nemesis packages; they are
checked against what the ``counter`` system offers first, and one it cannot serve exits 2 naming the package and
the capability (``--nemesis partition``: ``network``).
Prints the state-file prefix first so a test can check that cleanup removed everything.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from harness import generator as g
from harness.control.local import LocalRemote
from harness.errors import SpecError
from harness.protocols import NoopNemesis
from harness.runner import TestParts, run_test
from harness.spec import TestSpec, spec_from_dict
from harness.testing.counter import CounterChecker, CounterClient, counter_generator, final_reads
from systems.counter import CounterSystem


def counter_parts(spec: TestSpec, port: int = 7400) -> TestParts:
    """The counter test's parts for ``spec`` (a ``system: counter`` spec): its DB, client, checker, generators,
    and the nemesis of ``spec.nemesis`` (packages or schedule), or none.

    Raises:
        SpecError: a nemesis package or step the counter system cannot serve (naming the key and capability).
    """
    from harness.commands._parts import refuse_missing_capabilities
    from nemesis import packages

    system = CounterSystem(port=port)
    names = list(spec.nemesis.packages)
    refuse_missing_capabilities(spec, system.capabilities, names)
    db = system.make_db(spec, None)
    client_gen = counter_generator(spec.rate)
    if not names and not spec.nemesis.schedule:
        return TestParts(client=CounterClient(port), checkers={"counter": CounterChecker()}, db=db,
                         nemesis=NoopNemesis(), generator=client_gen, final_generator=final_reads())
    composed = packages.build(db, names, interval_s=spec.nemesis.interval_s, targets=spec.nemesis.targets,
                              seed=spec.seed, time_limit_s=spec.time_limit_s, options=spec.nemesis.options,
                              schedule=spec.nemesis.schedule)
    return TestParts(client=CounterClient(port), checkers={"counter": CounterChecker()}, db=db,
                     nemesis=composed.nemesis, generator=g.any_of(client_gen, g.nemesis(composed.generator))
                     if composed.generator is not None else client_gen,
                     heal_generator=composed.heal, schedule=composed.schedule, final_generator=final_reads())


async def _main(args: argparse.Namespace) -> int:
    raw = {
        "name": args.name, "system": "counter", "backend": "local", "nodes": {"controllers": args.nodes},
        "workloads": ["counter"], "concurrency": args.concurrency, "rate": args.rate, "time_limit_s": args.time_limit,
        "phases": {"recovery_s": 0.2, "final_drain_s": 5}, "seed": args.seed,
    }
    if args.nemesis:
        raw["nemesis"] = {"packages": list(args.nemesis), "interval_s": args.nemesis_interval, "targets": ["one"]}
    try:
        spec = spec_from_dict(raw, file="<run_counter>")
        parts = counter_parts(spec, args.port)
    except SpecError as exc:
        print(f"run_counter: invalid spec: {exc}", file=sys.stderr)
        return 2
    remote = await LocalRemote.create(spec.nodes.all, prefix=args.prefix)
    print(f"[run_counter] prefix={remote.state['prefix']} state={remote.state_path}", flush=True)
    try:
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
    p.add_argument("--nemesis", action="append", default=[], metavar="PACKAGE",
                   help="a nemesis package (repeatable): kill, pause or clock (libfaketime)")
    p.add_argument("--nemesis-interval", type=float, default=2.0, help="mean seconds between faults")
    p.add_argument("--quiet", action="store_true")


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_main(args))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    configure(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
