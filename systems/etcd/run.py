"""Run etcd registers through the real runner on the local netns backend: a smoke test of EtcdDB and the client.

``python -m systems.etcd.run --results DIR --time-limit 5 [--read-mode serializable]`` starts a 3-member etcd
cluster (one member per node, in network namespaces), drives random reads, writes and cas ops on a few keys,
with no faults, and judges each key's history with the existing linearizability checker (``cas-register``).
Like ``harness.testing.run_counter``, it names its nodes as controllers with no broker sets, because the spec
has no other way to ask for plain nodes yet (issue 29's ``system:`` key is not wired).  Needs root.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from checker.history import Op
from checker.linearizable import check as check_linearizable
from checker.models import make_model
from harness import generator as g
from harness.control.local import LocalRemote
from harness.protocols import NoopNemesis
from harness.runner import TestParts, run_test
from harness.spec import spec_from_dict
from systems.etcd.client import EtcdRegisterClient
from systems.etcd.db import EtcdDB
from systems.etcd.wire import split_by_key

__all__ = ["PerKeyLinearizable", "register_generator"]

_VALUES = 5  # small value space, as in Jepsen's etcd test, so cas ops often match


@dataclass(frozen=True)
class PerKeyLinearizable:
    """Each key's ops checked alone (they are independent registers) against ``cas-register``, initial nil.

    The verdict is False if any key is not linearizable, else "unknown" if any search gave up, else True.
    """

    time_limit_s: float = 30.0
    clock: Callable[[], float] = time.monotonic

    def check(self, test: dict[str, Any], history: Sequence[Any], opts: Mapping[str, Any]) -> dict[str, Any]:
        ops = [op if isinstance(op, Op) else Op.from_dict(op) for op in history]
        keys: dict[str, Any] = {}
        for key, sub in sorted(split_by_key(ops).items(), key=lambda kv: str(kv[0])):
            res = check_linearizable(sub, make_model("cas-register"), time_limit_s=self.time_limit_s,
                                     clock=self.clock)
            keys[str(key)] = {"valid": res.valid, "ops": len(sub), **({"explanation": res.describe()}
                                                                       if res.valid is False else {})}
        verdicts = [k["valid"] for k in keys.values()]
        valid: bool | str = False if False in verdicts else ("unknown" if "unknown" in verdicts else True)
        return {"valid": valid, "keys": keys}


def register_generator(rate: float, keys: int) -> g.Gen:
    """Reads, writes and cas ops (a third each) on ``keys`` registers, values 0..4, ``rate`` ops/s in total."""
    names = [f"r{i}" for i in range(keys)]

    def read(ctx: g.Context) -> dict[str, Any]:
        return {"f": "read", "key": ctx.rng.choice(names), "value": None}

    def write(ctx: g.Context) -> dict[str, Any]:
        return {"f": "write", "key": ctx.rng.choice(names), "value": ctx.rng.randrange(_VALUES)}

    def cas(ctx: g.Context) -> dict[str, Any]:
        return {"f": "cas", "key": ctx.rng.choice(names),
                "value": [ctx.rng.randrange(_VALUES), ctx.rng.randrange(_VALUES)]}

    return g.clients(g.stagger(1.0 / rate, g.mix([read, write, cas])))


async def _main(args: argparse.Namespace) -> int:
    spec = spec_from_dict({
        "name": args.name, "backend": "local", "nodes": {"controllers": args.nodes, "broker_sets": {"count": 0}},
        "workloads": ["counter"], "concurrency": args.concurrency, "rate": args.rate, "time_limit_s": args.time_limit,
        "phases": {"recovery_s": 0.2, "final_drain_s": 5}, "seed": args.seed,
    }, file="<systems.etcd.run>")
    remote = await LocalRemote.create(spec.nodes.all, prefix=args.prefix)
    print(f"[etcd] prefix={remote.state['prefix']} state={remote.state_path}", flush=True)
    try:
        parts = TestParts(
            client=EtcdRegisterClient(read_mode=args.read_mode, timeout_s=2.0),
            checkers={"linearizable": PerKeyLinearizable()}, db=EtcdDB(), nemesis=NoopNemesis(),
            generator=register_generator(args.rate, args.keys),
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
