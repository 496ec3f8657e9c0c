"""``splitbrain cluster up SPEC | down [NAME] [--all-orphans] | status [NAME] | logs NODE``: a cluster without a test.

* ``up`` validates the spec like ``splitbrain test``, creates its backend, starts every controller and then
  every broker, waits until each serves, records the cluster under ``<results>/.clusters/<name>.json``, hands
  the backend's resources over to that record (:mod:`harness.control.owner`) and exits, leaving the cluster
  running.  It prints the ``export`` lines for ``splitbrain admin`` (or use ``splitbrain admin --cluster NAME``).
* ``down [NAME]`` removes the named cluster, or without NAME every cluster recorded under *this* ``--results``
  (the caller's) -- processes, namespaces/containers, bridge, firewall rule -- and its record.  Nothing else:
  another results directory's clusters and live runs are never touched.  ``--all-orphans`` also removes, on the
  whole machine, runs nobody answers for any more (owner process gone, or a kept cluster whose record is gone);
  docker clean-up happens only then, and only to containers carrying splitbrain's labels.
* ``status`` shows each recorded cluster's nodes (alive or not) and the controller leader; a cluster whose
  resources are gone is reported as gone, without asking whatever now answers at its old addresses.
* ``logs NODE`` prints the tail of a node's log (``-n`` lines).

Exit codes: 0 done, 2 bad input (invalid spec, unknown cluster or node, backend unavailable), 255 the
cluster did not come up (everything created is removed again).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import systems
from harness.commands._backend import BackendUnavailable, backend_module, open_remote, ssh_targets, sut_node_command
from harness.commands._clusters import (
    cluster_alive,
    cluster_record,
    list_records,
    record_path,
    recordable,
    remove_record,
    write_record,
)
from harness.commands._exit import refuse
from harness.commands._parts import (
    Prepared,
    RunsNodeCommands,
    add_spec_arguments,
    make_db,
    overrides_from_args,
    prepare,
)
from harness.spec import SpecError
from harness.store import EXIT_CRASHED, EXIT_UNKNOWN

__all__ = ["configure", "run"]


def configure(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = sub.add_parser("up", help="start the spec's cluster and leave it running")
    up.add_argument("spec")
    add_spec_arguments(up)
    down = sub.add_parser("down", help="stop this results dir's clusters (or NAME); --all-orphans for leftovers")
    down.add_argument("name", nargs="?", help="only this cluster (default: every cluster recorded under --results)")
    down.add_argument("--all-orphans", action="store_true",
                      help="also remove runs on this machine nobody answers for (owner gone, or record gone)")
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
    spec = prepared.spec
    remote = await open_remote(spec, nodes_file=nodes_file, results_dir=results_root, sut=prepared.sut)
    db = make_db(spec, prepared.options)
    if prepared.sut is not None and isinstance(db, RunsNodeCommands):  # validate_spec refused the other DBs
        db.command = await sut_node_command(remote, spec, prepared.sut)
    ok = False
    with tempfile.TemporaryDirectory(prefix="splitbrain-up-") as tmp:
        test: dict[str, Any] = {"remote": remote, "run_dir": tmp, "name": spec.name, "spec": spec}
        try:
            await asyncio.gather(*(db.setup(test, n) for n in spec.nodes.controllers))
            brokers = [n for s in spec.nodes.broker_sets for n in s]
            await asyncio.gather(*(db.setup(test, n) for n in brokers))
            record = cluster_record(spec, remote, recordable(spec, db), results_root=results_root)
            path = write_record(results_root, record)
            if hasattr(remote, "keep_as_cluster"):  # the record owns it now: the launcher exits by design
                remote.keep_as_cluster(path, results_root)
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
        prepared = prepare(args.spec, overrides_from_args(args), allow_weak_quorum=args.allow_weak_quorum)
        if prepared.spec.backend == "ssh":
            ssh_targets(prepared.spec, args.nodes_file)
            raise SpecError(prepared.spec.source, "backend", "ssh",
                            "local or docker (`cluster up` cannot yet find ssh daemons again after it exits)")
    except SpecError as exc:
        return refuse("cluster up", f"invalid spec: {exc}")
    name = prepared.spec.name
    if record_path(args.results, name).exists():
        print(f"splitbrain cluster up: a cluster named {name!r} is already recorded "
              f"({record_path(args.results, name)}); run `splitbrain cluster down {name}` first", file=sys.stderr)
        return EXIT_UNKNOWN
    try:
        record = asyncio.run(_up(prepared, args.results, args.nodes_file))
    except BackendUnavailable as exc:
        return refuse("cluster up", exc)
    except Exception as exc:
        return refuse("cluster up", f"the cluster did not come up (everything was removed): {exc}", code=EXIT_CRASHED)
    print(f"cluster {name} is up ({record['backend']}); controllers: {', '.join(record['controllers'])}")
    for n, info in record["nodes"].items():
        print(f"  {n:<10} {info['role']:<10} {info['address']:<16} pid={info['pid']} log={info['log']}")
    for line in exports(record):
        print(line)
    print(f"or: splitbrain admin --cluster {name} --results {args.results} metadata")
    print(f"stop it with: splitbrain cluster down {name} --results {args.results}")
    return 0


def exports(record: Mapping[str, Any]) -> list[str]:
    """The shell ``export`` lines that point ``splitbrain admin`` (and clients) at a recorded cluster."""
    return [f"export SPLITBRAIN_CONTROLLERS={shlex.quote(','.join(record.get('controllers') or []))}",
            f"export SPLITBRAIN_TOKEN={shlex.quote(str(record.get('token') or ''))}"]


def _remove_cluster(rec: Mapping[str, Any]) -> list[str]:
    if rec.get("backend") == "local" and rec.get("local_state"):
        local = backend_module("local")
        return list(local.cleanup_state(Path(rec["local_state"])))
    if rec.get("backend") == "docker" and rec.get("docker_prefix"):
        from harness.control.owner import remove_claim

        docker = backend_module("docker")
        gone = list(docker.cleanup_run(str(rec["docker_prefix"])))
        remove_claim(str(rec["docker_prefix"]))
        return gone
    return []


def _cmd_down(args: argparse.Namespace) -> int:
    records = [r for r in list_records(args.results) if args.name in (None, r["name"])]
    if args.name and not records:
        print(f"splitbrain cluster down: no recorded cluster {args.name!r} under {args.results}/.clusters; "
              f"known: {[r['name'] for r in list_records(args.results)]}", file=sys.stderr)
        return EXIT_UNKNOWN
    removed: list[str] = []
    for rec in records:
        if rec.get("uid") not in (None, os.getuid()) and os.getuid() != 0:
            print(f"splitbrain cluster down: {rec['name']} belongs to uid {rec['uid']}, not you: left alone",
                  file=sys.stderr)
            continue
        try:
            gone = _remove_cluster(rec)
        except BackendUnavailable as exc:
            print(f"splitbrain cluster down: {rec['name']}: {exc}", file=sys.stderr)
            continue
        removed += gone
        remove_record(args.results, rec["name"])
        print(f"cluster {rec['name']} is down" + ("" if gone else " (its resources were already gone)"))
    if args.all_orphans:
        removed += _remove_orphans()
    for r in removed:
        print(f"  removed {r}")
    if not records and not args.all_orphans:
        print(f"no clusters recorded under {args.results}/.clusters (--all-orphans removes leftovers of dead runs)")
    return 0


def _remove_orphans() -> list[str]:
    """Local and docker runs nobody answers for (:func:`harness.control.owner.orphan_reason`), machine-wide."""
    removed: list[str] = []
    local = backend_module("local")
    for state_file, why in local.orphans():
        print(f"orphan {state_file.stem}: {why}")
        removed += local.cleanup_state(state_file)
    try:
        docker = backend_module("docker")
        removed += docker.cleanup_all(only_orphans=True)  # by our labels only
    except Exception as exc:  # no SDK or no engine: nothing of ours can be there
        print(f"docker: not checked ({exc.__class__.__name__})")
    return removed


def _pid_alive(pid: Any) -> bool:
    return isinstance(pid, int) and Path(f"/proc/{pid}").exists()


async def _status(rec: Mapping[str, Any]) -> str:
    """The recorded cluster's state in one line, as its system's adapter tells it from the record
    (:class:`systems.ReportsRecordStatus`); a record from before records named their system is our cluster's."""
    name = str(rec.get("system") or systems.DEFAULT)
    try:
        system = systems.get(name)
    except systems.RegistryError as exc:
        return f"status unknown ({exc})"
    if not isinstance(system, systems.ReportsRecordStatus):
        return f"status unknown (system {name!r} cannot tell it from a record)"
    return await system.record_status(rec)


def _cmd_status(args: argparse.Namespace) -> int:
    records = [r for r in list_records(args.results) if args.name in (None, r["name"])]
    if not records:
        print(f"no recorded clusters under {args.results}/.clusters" + (f" named {args.name!r}" if args.name else ""))
        return EXIT_UNKNOWN if args.name else 0
    for rec in records:
        if rec.get("backend") == "local" and not cluster_alive(rec):
            print(f"{rec['name']} ({rec['backend']}, up since {rec.get('created')}): gone (its namespaces or "
                  f"processes no longer exist); forget it with `splitbrain cluster down {rec['name']} "
                  f"--results {args.results}`")
            continue
        quorum = asyncio.run(_status(rec))
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
