"""Run etcd registers through the real runner on the local netns backend: a smoke test of EtcdDB and the client.

``python -m systems.etcd.run --results DIR --time-limit 5 [--read-mode serializable]`` starts a 3-member etcd
cluster (one member per node, in network namespaces), drives random reads, writes and cas ops on a few keys,
with no faults, and judges each key's history with the existing linearizability checker (``cas-register``,
:mod:`checker.per_key`).  The spec is ``system: etcd`` with ``members``; ``splitbrain test examples/etcd.yaml``
is the way to run etcd with faults, and this script stays as the smallest smoke test of the DB.  Needs root.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from harness import generator as g
from harness.control.local import LocalRemote
from harness.protocols import NoopNemesis
from harness.runner import TestParts, run_test
from harness.spec import spec_from_dict
from systems.etcd.client import EtcdRegisterClient
from systems.etcd.db import EtcdDB
from workloads.register import PerKeyLinearizable, RegisterWorkloadOptions, register_generator

__all__ = ["main"]

async def _main(args: argparse.Namespace) -> int:
    spec = spec_from_dict({
        "name": args.name, "system": "etcd", "backend": "local", "nodes": {"members": args.nodes},
        "workloads": ["register"], "concurrency": args.concurrency, "rate": args.rate, "time_limit_s": args.time_limit,
        "phases": {"recovery_s": 0.2, "final_drain_s": 5}, "seed": args.seed,
    }, file="<systems.etcd.run>")
    remote = await LocalRemote.create(spec.nodes.all, prefix=args.prefix)
    print(f"[etcd] prefix={remote.state['prefix']} state={remote.state_path}", flush=True)
    try:
        parts = TestParts(
            client=EtcdRegisterClient(read_mode=args.read_mode, timeout_s=2.0),
            checkers={"linearizable": PerKeyLinearizable()}, db=EtcdDB(spec=spec), nemesis=NoopNemesis(),
            generator=g.clients(g.stagger(1.0 / args.rate,
                                          register_generator(RegisterWorkloadOptions(keys=args.keys)))),
        )
        outcome = await run_test(spec, parts, results_root=args.results, remote=remote, quiet=args.quiet,
                                 op_timeout_s=4.0)
        return outcome.exit_code
    finally:
        await remote.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--results", default="results")
    p.add_argument("--name", default="etcd-registers")
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--keys", type=int, default=3)
    p.add_argument("--read-mode", default="linearizable", choices=["linearizable", "serializable"])
    p.add_argument("--time-limit", type=float, default=5.0)
    p.add_argument("--concurrency", type=int, default=5)
    p.add_argument("--rate", type=float, default=50.0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--prefix", default=None)
    p.add_argument("--quiet", action="store_true")
    return asyncio.run(_main(p.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
