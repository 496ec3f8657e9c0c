"""``splitbrain cluster up SPEC | down [NAME] | status [NAME] | logs NODE``: a cluster without a test.

* ``up`` validates the spec like ``splitbrain test``, creates its backend, starts every controller and then
  every broker, waits until each serves, records the cluster under ``<results>/.clusters/<name>.json`` and
  exits, leaving the cluster running (the record is how later processes find it).
* ``down`` removes recorded clusters (all, or NAME) -- processes, namespaces/containers, bridge, firewall
  rule -- and then every orphaned local/docker run whose owning process is gone (a crashed test's leftovers).
* ``status`` shows each recorded cluster's nodes (alive or not) and the controller leader.
* ``logs NODE`` prints the tail of a node's log (``-n`` lines).

Exit codes: 0 done, 2 bad input (invalid spec, unknown cluster or node, backend unavailable), 255 the
cluster did not come up (everything created is removed again).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.commands._backend import BackendUnavailable, backend_module, open_remote, ssh_targets
from harness.commands._clusters import cluster_record, list_records, record_path, remove_record, write_record
from harness.commands._parts import Prepared, add_spec_arguments, overrides_from_args, prepare
from harness.spec import SpecError
from harness.store import EXIT_CRASHED, EXIT_UNKNOWN

__all__ = ["configure", "run"]


def configure(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = sub.add_parser("up", help="start the spec's cluster and leave it running")
    up.add_argument("spec")
    add_spec_arguments(up)
    down = sub.add_parser("down", help="stop recorded clusters and clean up orphaned runs")
    down.add_argument("name", nargs="?", help="only this cluster (default: all recorded)")
    status = sub.add_parser("status", help="show recorded clusters")
    status.add_argument("name", nargs="?")
    logs = sub.add_parser("logs", help="print the tail of a node's log")
    logs.add_argument("node")
    logs.add_argument("--name", help="the cluster (needed when several hold NODE)")
    logs.add_argument("-n", "--lines", type=int, default=100)
    for q in (up, down, status, logs):
        q.add_argument("--results", default="results", help="results root (records live in <results>/.clusters)")


# ---------------------------------------------------------------------------------------------


async def _up(prepared: Prepared, results_root: str, nodes_file: str | None) -> dict[str, Any]:
    from harness.cluster import SplitbrainDB

    spec = prepared.spec
    remote = await open_remote(spec, nodes_file=nodes_file)
    db = SplitbrainDB(spec, prepared.options)
    ok = False
    with tempfile.TemporaryDirectory(prefix="splitbrain-up-") as tmp:
        test: dict[str, Any] = {"remote": remote, "run_dir": tmp, "name": spec.name, "spec": spec}
        try:
            await asyncio.gather(*(db.setup(test, n) for n in spec.nodes.controllers))
            brokers = [n for s in spec.nodes.broker_sets for n in s]
            await asyncio.gather(*(db.setup(test, n) for n in brokers))
            record = cluster_record(spec, remote, db)
            write_record(results_root, record)
            ok = True
            return record
        finally:
            if not ok:
                for n in spec.nodes.all:
                    with contextlib.suppress(Exception):
                        await db.teardown(test, n)
                await remote.close()


def _cmd_up(args: argparse.Namespace) -> int:
    try:
        prepared = prepare(args.spec, overrides_from_args(args))
        if prepared.spec.backend == "ssh":
            ssh_targets(prepared.spec, args.nodes_file)
            raise SpecError(prepared.spec.source, "backend", "ssh",
                            "local or docker (`cluster up` cannot yet find ssh daemons again after it exits)")
    except SpecError as exc:
        print(f"splitbrain cluster up: invalid spec: {exc}", file=sys.stderr)
        return EXIT_UNKNOWN
    name = prepared.spec.name
    if record_path(args.results, name).exists():
        print(f"splitbrain cluster up: a cluster named {name!r} is already recorded "
              f"({record_path(args.results, name)}); run `splitbrain cluster down {name}` first", file=sys.stderr)
        return EXIT_UNKNOWN
    try:
        record = asyncio.run(_up(prepared, args.results, args.nodes_file))
    except BackendUnavailable as exc:
        print(f"splitbrain cluster up: {exc}", file=sys.stderr)
        return EXIT_UNKNOWN
    except Exception as exc:
        print(f"splitbrain cluster up: the cluster did not come up (everything was removed): {exc}", file=sys.stderr)
        return EXIT_CRASHED
    print(f"cluster {name} is up ({record['backend']}); controllers: {', '.join(record['controllers'])}")
    for n, info in record["nodes"].items():
        print(f"  {n:<10} {info['role']:<10} {info['address']:<16} pid={info['pid']} log={info['log']}")
    print(f"stop it with: splitbrain cluster down {name} --results {args.results}")
    return 0


def _remove_cluster(rec: Mapping[str, Any]) -> list[str]:
    if rec.get("backend") == "local" and rec.get("local_state"):
        local = backend_module("local")
        return list(local.cleanup_state(Path(rec["local_state"])))
    if rec.get("backend") == "docker" and rec.get("docker_prefix"):
        docker = backend_module("docker")
        return list(docker.cleanup_run(str(rec["docker_prefix"])))
    return []


def _cmd_down(args: argparse.Namespace) -> int:
    records = [r for r in list_records(args.results) if args.name in (None, r["name"])]
    if args.name and not records:
        print(f"splitbrain cluster down: no recorded cluster {args.name!r} under {args.results}/.clusters; "
              f"known: {[r['name'] for r in list_records(args.results)]}", file=sys.stderr)
        return EXIT_UNKNOWN
    removed: list[str] = []
    for rec in records:
        try:
            removed += _remove_cluster(rec)
        except BackendUnavailable as exc:
            print(f"splitbrain cluster down: {rec['name']}: {exc}", file=sys.stderr)
            continue
        remove_record(args.results, rec["name"])
        print(f"cluster {rec['name']} is down")
    removed += backend_module("local").cleanup_all(only_orphans=True)
    with contextlib.suppress(Exception):  # docker absent or engine unreachable: nothing of ours to clean there
        removed += backend_module("docker").cleanup_all(only_orphans=True)
    for r in removed:
        print(f"  removed {r}")
    return 0


def _pid_alive(pid: Any) -> bool:
    return isinstance(pid, int) and Path(f"/proc/{pid}").exists()


async def _leader(rec: Mapping[str, Any]) -> str:
    from system_under_test.client.controller_client import ControllerClient

    client = ControllerClient(list(rec.get("controllers") or []), token=rec.get("token"), timeout_s=1.0)
    try:
        md = await asyncio.wait_for(client.get_metadata(), 3.0)
        return f"leader={md.get('leader_id')} active={md.get('active')}"
    except Exception as exc:
        return f"no answer ({exc.__class__.__name__})"
    finally:
        with contextlib.suppress(Exception):
            await client.close()


def _cmd_status(args: argparse.Namespace) -> int:
    records = [r for r in list_records(args.results) if args.name in (None, r["name"])]
    if not records:
        print(f"no recorded clusters under {args.results}/.clusters" + (f" named {args.name!r}" if args.name else ""))
        return EXIT_UNKNOWN if args.name else 0
    for rec in records:
        quorum = asyncio.run(_leader(rec))
        print(f"{rec['name']} ({rec['backend']}, up since {rec.get('created')}): {quorum}")
        for n, info in rec["nodes"].items():
            state = ("alive" if _pid_alive(info.get("pid")) else "dead") if rec["backend"] == "local" else "?"
            print(f"  {n:<10} {info['role']:<10} {info['address']:<16} {state:<6} log={info['log']}")
    return 0


def _cmd_logs(args: argparse.Namespace) -> int:
    holders = [r for r in list_records(args.results) if args.node in r.get("nodes", {})
               and args.name in (None, r["name"])]
    if len(holders) != 1:
        what = "no recorded cluster has" if not holders else f"several clusters ({[r['name'] for r in holders]}) have"
        print(f"splitbrain cluster logs: {what} node {args.node!r}" + ("; pass --name" if holders else ""),
              file=sys.stderr)
        return EXIT_UNKNOWN
    rec = holders[0]
    log_path = rec["nodes"][args.node]["log"]
    if rec["backend"] == "docker":
        res = subprocess.run(["docker", "exec", f"{rec['docker_prefix']}-{args.node}", "tail", "-n",
                              str(args.lines), log_path], capture_output=True, text=True, timeout=30)
        sys.stdout.write(res.stdout)
        return 0 if res.returncode == 0 else EXIT_UNKNOWN
    try:
        lines = Path(log_path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        print(f"splitbrain cluster logs: cannot read {log_path}: {exc}", file=sys.stderr)
        return EXIT_UNKNOWN
    sys.stdout.write("\n".join(lines[-args.lines:]) + "\n")
    return 0


def run(args: argparse.Namespace) -> int:
    actions = {"up": _cmd_up, "down": _cmd_down, "status": _cmd_status, "logs": _cmd_logs}
    return actions[args.action](args)
