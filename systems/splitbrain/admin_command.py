"""``splitbrain admin [--cluster NAME] [--results DIR] VERB ...``: our cluster's admin verbs, aimed at a
cluster the harness recorded (a command of our cluster's adapter: :data:`systems.splitbrain.commands.COMMANDS`).

The verbs are the system under test's own (:mod:`system_under_test.client.admin_cli`), which knows only
controller addresses and a token.  Which cluster those come from is the harness's business: ``--cluster
NAME`` reads a ``splitbrain cluster up`` record under ``--results``; with neither ``--cluster`` nor
``--controllers``, the only running recorded cluster is used.
"""

from __future__ import annotations

import argparse
import sys

from harness.commands._clusters import ClusterNotFound, find_cluster
from system_under_test.client import admin_cli

__all__ = ["configure", "run"]


def configure(p: argparse.ArgumentParser) -> None:
    admin_cli.configure(p)
    p.add_argument("--cluster", help="a `splitbrain cluster up` cluster by name (its addresses and token; "
                                     "default: the only running one, when no controllers are given)")
    p.add_argument("--results", default="results", help="results root holding cluster records (default: results)")


def _wants_record(args: argparse.Namespace) -> bool:
    if args.verb == "store":  # reads store directories, talks to no cluster
        return False
    return bool(args.cluster) or not [a for a in args.controllers.split(",") if a.strip()]


def run(args: argparse.Namespace) -> int:
    if _wants_record(args):
        try:
            record = find_cluster(args.results, args.cluster)
        except ClusterNotFound as exc:
            print(f"splitbrain admin: {exc}", file=sys.stderr)
            return 2
        args.controllers = ",".join(str(a) for a in record.get("controllers") or [])
        args.token = str(record.get("token") or "") or None
    return admin_cli.run(args)
