"""Run etcd registers through the real runner on the local netns backend: a smoke test of EtcdDB and the client.

``python -m systems.etcd.run --results DIR --time-limit 5 [--read-mode serializable]`` starts a 3-member etcd
cluster (one member per node, in network namespaces), drives random reads, writes and cas ops on a few keys,
with no faults, and judges each key's history with the existing linearizability checker (``cas-register``,
:mod:`checker.per_key`).  The spec is ``system: etcd`` with ``members`` and the ``register`` workload, run the way
``splitbrain test`` runs a file (:func:`harness.testing.run_spec.run_spec`, shared with ``splitbrain selftest``);
``splitbrain test examples/etcd.yaml`` is the way to run etcd with faults, and this script stays as the smallest
smoke test of the DB.  Needs root.
"""

from __future__ import annotations

import argparse
import sys

from harness.testing.run_spec import run_spec

__all__ = ["main"]


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
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    raw = {
        "name": args.name, "system": "etcd", "backend": "local", "nodes": {"members": args.nodes},
        "workloads": [{"name": "register", "options": {"read_mode": args.read_mode, "keys": args.keys}}],
        "concurrency": args.concurrency, "rate": args.rate, "time_limit_s": args.time_limit,
        "phases": {"recovery_s": 0.2, "final_drain_s": 5}, "seed": args.seed,
    }
    return run_spec(raw, source="<systems.etcd.run>", results=args.results, quiet=args.quiet,
                    prog="systems.etcd.run")


if __name__ == "__main__":
    sys.exit(main())
