"""``splitbrain admin``: administer a running cluster (the seed's mqadmin verbs).

Verbs::

    metadata                         who leads the controller quorum (asks every controller)
    sync-state-set [-b NAME ...]     master, epochs and SyncStateSet of broker sets
    broker-epoch [-b NAME]           broker epochs, fenced flags, leases
    replica-info -b NAME             GetReplicaInfo of one broker set
    elect-master -b NAME [--broker-id ID]
    clean-broker-data -b NAME [--broker-ids 1,2] [--clean-living-broker]
    failpoint list|arm NAME ACTION|disarm NAME   (on --node ADDR, default: every controller)
    clock get|set [--offset-ms X] [--rate R]      (on --node ADDR)
    shutdown --all | --node ADDR     orderly shutdown (--all writes one shared clean marker)
    store inspect DIR...             compare controller stores' signatures, tell which is latest
    store mark-clean DIR             manual recovery: mark the latest store clean

Where the cluster is: ``--controllers`` and ``--token-file`` (or ``SPLITBRAIN_CONTROLLERS``,
``SPLITBRAIN_TOKEN`` / ``SPLITBRAIN_TOKEN_FILE``).  ``splitbrain admin`` adds ``--cluster NAME`` (a
``splitbrain cluster up`` cluster's addresses and token from its record): that is the harness's business
(:mod:`systems.splitbrain.admin_command`), which fills ``controllers`` and ``token`` in before calling :func:`run`.

Human-readable tables by default, fitted to the terminal's width (cells wrap, nothing is cut; piped output
is never wrapped), ``--json`` for scripts (always complete).  An unreachable controller, a wrong token or an
unknown broker set prints one clear line and exits 1; bad flags, or no cluster to talk to, exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

from system_under_test.client.controller_client import ControllerClient, NoControllerAvailable
from system_under_test.protocol import ConnectionLost, RequestCode, RequestTimeout, ResponseCode, RpcError


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--controllers", default=os.environ.get("SPLITBRAIN_CONTROLLERS", ""),
                   help="controller addresses host:port,host:port (env SPLITBRAIN_CONTROLLERS)")
    p.add_argument("--token-file", default=os.environ.get("SPLITBRAIN_TOKEN_FILE") or None,
                   help="cluster token file (env SPLITBRAIN_TOKEN_FILE; else env SPLITBRAIN_TOKEN)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--timeout-s", type=float, default=5.0)
    sub = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    sub.add_parser("metadata", help="controller leader and peers")
    s = sub.add_parser("sync-state-set", help="SyncStateSet of broker sets")
    s.add_argument("-b", "--broker-name", action="append", default=[])
    s = sub.add_parser("broker-epoch", help="broker epochs and fencing")
    s.add_argument("-b", "--broker-name")
    s = sub.add_parser("replica-info", help="GetReplicaInfo")
    s.add_argument("-b", "--broker-name", required=True)
    s = sub.add_parser("elect-master", help="elect a master (admin-triggered)")
    s.add_argument("-b", "--broker-name", required=True)
    s.add_argument("--broker-id", type=int, help="designate this broker")
    s = sub.add_parser("clean-broker-data", help="remove broker ids or a whole broker set")
    s.add_argument("-b", "--broker-name", required=True)
    s.add_argument("--broker-ids", default="", help="comma list; empty = whole broker set")
    s.add_argument("--clean-living-broker", action="store_true")
    s = sub.add_parser("failpoint", help="list/arm/disarm failpoints")
    s.add_argument("action", choices=["list", "arm", "disarm"])
    s.add_argument("name", nargs="?")
    s.add_argument("spec", nargs="?", help="crash | error | delay(MS) | pause, optional COUNT* prefix")
    s.add_argument("--node", help="one node address (default: every controller)")
    s = sub.add_parser("clock", help="read or skew a node's clock")
    s.add_argument("action", choices=["get", "set", "reset"])
    s.add_argument("--node", required=True)
    s.add_argument("--offset-ms", type=float)
    s.add_argument("--rate", type=float)
    s = sub.add_parser("shutdown", help="orderly shutdown")
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--all", action="store_true", help="every controller, one shared clean marker")
    g.add_argument("--node")
    s = sub.add_parser("store", help="inspect or recover controller stores")
    s.add_argument("action", choices=["inspect", "mark-clean"])
    s.add_argument("dirs", nargs="+", type=Path)


class AdminError(Exception):
    """One clear line for the user; exit 1."""


class AdminInputError(AdminError):
    """Bad input (no cluster to talk to): one line, exit 2."""


def _token(args: argparse.Namespace) -> str | None:
    if getattr(args, "token", None) and not args.token_file:
        return str(args.token)
    if args.token_file:
        try:
            return Path(args.token_file).read_text().strip()
        except OSError as exc:
            raise AdminError(f"--token-file {args.token_file}: {exc.strerror}") from None
    return os.environ.get("SPLITBRAIN_TOKEN") or None


def _controllers(args: argparse.Namespace) -> list[str]:
    addrs = [a.strip() for a in args.controllers.split(",") if a.strip()]
    if not addrs:
        raise AdminInputError("no controllers given: pass --controllers host:port,... or set SPLITBRAIN_CONTROLLERS")
    return addrs


def _print(args: argparse.Namespace, data: Any, title: str = "") -> None:
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=True, default=_jsonable))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:  # piped or captured: no width to fit, so never wrap or cut a cell
        console = Console(width=100_000)
    rows = data if isinstance(data, list) else [data]
    if rows and all(isinstance(r, dict) for r in rows):
        cols: list[str] = []
        for r in rows:
            cols += [k for k in r if k not in cols and k != "message"]
        table = Table(title=title or None)
        for c in cols:
            table.add_column(c, overflow="fold")  # too wide for the terminal: wrap inside the cell, cut nothing
        for r in rows:
            table.add_row(*[_cell(r.get(c)) for c in cols])
        console.print(table)
    else:
        console.print(data)


def _cell(v: Any) -> str:
    if isinstance(v, (list, tuple, set)):
        return ",".join(str(x) for x in v)
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True, default=_jsonable)
    return "" if v is None else str(v)


def _jsonable(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.hex()
    return str(v)


async def _run(args: argparse.Namespace) -> int:
    if args.verb == "store":
        return _store(args)
    client = ControllerClient(_controllers(args), token=_token(args), timeout_s=args.timeout_s)
    try:
        return await _dispatch(args, client)
    finally:
        await client.close()


async def _dispatch(args: argparse.Namespace, client: ControllerClient) -> int:
    verb = args.verb
    if verb == "metadata":
        rows = []
        for addr in client.addrs:
            try:
                md = await client.get_metadata(addr)
                rows.append({k: md.get(k) for k in ("node_id", "addr", "active", "is_leader", "term", "leader_id",
                                                       "cluster_name", "cluster_id")})
            except (ConnectionLost, RequestTimeout, RpcError) as exc:
                rows.append({"addr": addr, "error": str(exc)})
        if all("error" in r for r in rows):
            raise AdminError("no controller reachable: " + "; ".join(f"{r['addr']}: {r['error']}" for r in rows))
        _print(args, rows, "controllers")
        return 0
    if verb == "sync-state-set":
        resp = await client.call(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, {"broker_names": args.broker_name})
        _print(args, resp.body if args.json else _flatten_sets(resp.body or []), "SyncStateSet")
        return 0
    if verb == "broker-epoch":
        resp = await client.call(RequestCode.CONTROLLER_GET_BROKER_EPOCHS, {"broker_name": args.broker_name})
        _print(args, resp.body or [], "broker epochs")
        return 0
    if verb == "replica-info":
        resp = await client.call(RequestCode.CONTROLLER_GET_REPLICA_INFO, {"broker_name": args.broker_name})
        _print(args, {**resp.header, **({"body": resp.body} if resp.body is not None else {})}, "replica info")
        return 0
    if verb == "elect-master":
        header = {"broker_name": args.broker_name, "broker_id": args.broker_id,
                  "designate": args.broker_id is not None}
        resp = await client.call(RequestCode.CONTROLLER_ELECT_MASTER, header)
        _print(args, resp.header, "elect master")
        return 0
    if verb == "clean-broker-data":
        try:
            ids = [int(x) for x in args.broker_ids.split(",") if x.strip()]
        except ValueError:
            raise AdminError(f"--broker-ids must be a comma list of integers, got {args.broker_ids!r}") from None
        resp = await client.call(RequestCode.CLEAN_BROKER_DATA, {
            "broker_name": args.broker_name, "broker_ids": ids, "clean_living_broker": args.clean_living_broker})
        _print(args, resp.header or {"result": "ok"}, "clean broker data")
        return 0
    if verb == "failpoint":
        return await _failpoint(args, client)
    if verb == "clock":
        if args.action == "get":
            resp = await client.call_one(args.node, RequestCode.ADMIN_CLOCK_GET)
        else:
            change: dict[str, Any] = {"offset_ms": 0.0, "rate": 1.0} if args.action == "reset" else {}
            if args.offset_ms is not None:
                change["offset_ms"] = args.offset_ms
            if args.rate is not None:
                change["rate"] = args.rate
            resp = await client.call_one(args.node, RequestCode.ADMIN_CLOCK_SET, change)
        _print(args, resp.header, f"clock of {args.node}")
        return 0
    if verb == "shutdown":
        targets = client.addrs if args.all else [args.node]
        sid = uuid.uuid4().hex if args.all else None
        rows = []
        for addr in targets:
            try:
                await client.call_one(addr, RequestCode.ADMIN_SHUTDOWN, {"shutdown_id": sid} if sid else {})
                rows.append({"addr": addr, "result": "shutting down", "shutdown_id": sid})
            except (ConnectionLost, RequestTimeout, RpcError) as exc:
                rows.append({"addr": addr, "result": f"error: {exc}"})
        _print(args, rows, "shutdown")
        return 0 if all(r["result"] == "shutting down" for r in rows) else 1
    raise AdminError(f"unknown verb {verb}")


def _flatten_sets(sets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per broker set; members summarised as id:addr(flags)."""
    rows = []
    for s in sets:
        members = s.get("members") or []
        summary = [f"{m.get('broker_id')}{'*' if m.get('in_sync') else ''}{'' if m.get('alive') else '(dead)'}"
                   for m in members]
        rows.append({k: v for k, v in s.items() if k != "members"} | {"members (*=in set)": summary})
    return rows


async def _failpoint(args: argparse.Namespace, client: ControllerClient) -> int:
    targets = [args.node] if args.node else client.addrs
    rows: list[dict[str, Any]] = []
    for addr in targets:
        if args.action == "list":
            resp = await client.call_one(addr, RequestCode.ADMIN_FAILPOINT_LIST)
            rows += [{"node": addr, **fp} for fp in resp.header.get("failpoints", [])]
        elif args.action == "arm":
            if not args.name or not args.spec:
                raise AdminError("failpoint arm needs NAME and ACTION, e.g. `failpoint arm raft.before_apply 1*crash`")
            await client.call_one(addr, RequestCode.ADMIN_FAILPOINT_ARM, {"name": args.name, "action": args.spec})
            rows.append({"node": addr, "name": args.name, "action": args.spec})
        else:
            if not args.name:
                raise AdminError("failpoint disarm needs NAME (or '*')")
            await client.call_one(addr, RequestCode.ADMIN_FAILPOINT_DISARM, {"name": args.name})
            rows.append({"node": addr, "name": args.name, "action": "off"})
    _print(args, rows, "failpoints")
    return 0


def _store(args: argparse.Namespace) -> int:
    from system_under_test.controller.formation import StoreSignatures, StoreState

    rows = []
    for d in args.dirs:
        if not d.is_dir():
            raise AdminError(f"store {d}: not a directory")
        info = StoreSignatures(d).describe()
        clean = info.get("clean") or {}
        cluster = info.get("cluster") or {}
        raft_hs = _raft_position(d)
        rows.append({"dir": str(d), "state": info["state"], "cluster_id": cluster.get("cluster_id"),
                     "shutdown_id": clean.get("shutdown_id"), "last_index": raft_hs[1], "term": raft_hs[0],
                     "error": info.get("error")})
    ids = {r["cluster_id"] for r in rows if r["cluster_id"]}
    latest = max(rows, key=lambda r: (r["term"], r["last_index"]))
    for r in rows:
        r["latest"] = r is latest
    if args.action == "inspect":
        _print(args, {"stores": rows, "same_cluster": len(ids) <= 1, "latest": latest["dir"]} if args.json else rows,
               "stores" + ("" if len(ids) <= 1 else " (DIFFERENT CLUSTERS)"))
        return 0 if len(ids) <= 1 else 1
    if len(args.dirs) != 1:
        raise AdminError("store mark-clean takes exactly one DIR (the latest store, see `store inspect`)")
    sig = StoreSignatures(args.dirs[0])
    if sig.state() is StoreState.EMPTY:
        raise AdminError(f"{args.dirs[0]}: empty store (no cluster.sig); nothing to recover")
    import time

    sig.mark_clean(uuid.uuid4().hex, rows[0]["last_index"], rows[0]["term"], int(time.time() * 1000))
    _print(args, {"dir": str(args.dirs[0]), "state": "clean"}, "mark-clean")
    return 0


def _raft_position(d: Path) -> tuple[int, int]:
    """(term, last index) from a store's Raft directory, 0s if absent or unreadable."""
    try:
        from system_under_test.raft.storage import RaftStorage

        hs, snap, entries = RaftStorage(d / "raft").load()
        last = entries[-1].index if entries else (snap.index if snap else 0)
        return hs.term, last
    except Exception:
        return 0, 0


def run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_run(args))
    except AdminInputError as exc:
        print(f"splitbrain admin: {exc}", file=sys.stderr)
        return 2
    except AdminError as exc:
        print(f"splitbrain admin: {exc}", file=sys.stderr)
        return 1
    except NoControllerAvailable as exc:
        print(f"splitbrain admin: {exc}", file=sys.stderr)
        return 1
    except RpcError as exc:
        hint = ""
        if exc.code == ResponseCode.UNAUTHORIZED:
            hint = " (wrong or missing cluster token: --token-file or SPLITBRAIN_TOKEN)"
        elif exc.code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST:
            hint = " (unknown broker set)"
        print(f"splitbrain admin: {exc}{hint}", file=sys.stderr)
        return 1
    except (ConnectionLost, RequestTimeout) as exc:
        print(f"splitbrain admin: {exc}", file=sys.stderr)
        return 1
