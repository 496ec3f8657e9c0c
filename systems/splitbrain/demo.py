"""``splitbrain demo``: a walk-through of the controller quorum with real local processes (no faults beyond one
leader kill, no checker; ``splitbrain test`` is the chaos test).

It starts a 3-controller Raft quorum as real local processes, registers broker sets over the
wire exactly as brokers do (GetNextBrokerId -> ApplyBrokerId with a register code ->
RegisterBroker with an incarnation id -> heartbeats -> first ElectMaster), prints the metadata,
kills the controller leader with SIGKILL, checks that the new leader serves identical metadata,
restarts the killed node and waits for it to catch up, then shuts the quorum down in order
(clean markers) and inspects the stores.  Exit 0 when every check passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from system_under_test.client.controller_client import ControllerClient
from system_under_test.protocol import RequestCode
from systems.splitbrain.local_cluster import LocalQuorum

console = Console()


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dir", type=Path, help="work directory (default: a fresh temp dir, removed on success)")
    p.add_argument("--broker-sets", type=int, default=2)
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("--keep", action="store_true", help="keep the work directory")


async def register_broker(client: ControllerClient, cluster: str, name: str, addr: str) -> dict[str, Any]:
    """The broker-side registration steps of the persistent-unique-broker-id seed, over the wire."""
    next_id = await client.get_next_broker_id(cluster, name)
    code = f"{addr};{int(time.time() * 1000)};{secrets.token_hex(4)}"
    await client.apply_broker_id(cluster, name, next_id, code, addr)
    reply = await client.register_broker(cluster, name, next_id, addr, secrets.token_hex(8), None)
    return {"broker_name": name, "broker_id": next_id, "addr": addr, **reply}


async def heartbeat(client: ControllerClient, cluster: str, b: dict[str, Any]) -> dict[str, Any]:
    resp = await client.call(RequestCode.BROKER_HEARTBEAT, {
        "cluster_name": cluster, "broker_name": b["broker_name"], "broker_id": b["broker_id"],
        "broker_addr": b["addr"], "broker_epoch": b["broker_epoch"], "master_epoch": 0, "max_offset": 0,
        "confirm_offset": 0})
    return resp.header


async def sync_state(client: ControllerClient) -> list[dict[str, Any]]:
    resp = await client.call(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, {"broker_names": []})
    rows = resp.body or []
    for r in rows:  # liveness is soft state per controller; compare only the replicated part
        for m in r.get("members", []):
            m.pop("alive", None)
    return sorted(rows, key=lambda r: r["broker_name"])


def show(title: str, rows: list[dict[str, Any]]) -> None:
    table = Table(title=title)
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols]
    for c in cols:
        table.add_column(c)
    for r in rows:
        table.add_row(*[json.dumps(r.get(c)) if isinstance(r.get(c), (list, dict)) else str(r.get(c)) for c in cols])
    console.print(table)


async def demo(work: Path, broker_sets: int, replicas: int) -> bool:
    ok = True

    def check(cond: bool, what: str) -> None:
        nonlocal ok
        ok &= cond
        console.print(("[green]PASS[/] " if cond else "[red]FAIL[/] ") + what)

    with LocalQuorum(work, size=3, cluster_name="demo") as q:
        q.start_all()
        t0 = time.monotonic()
        leader = await q.wait_leader(60)
        console.print(f"quorum formed, leader [bold]{leader}[/] after {time.monotonic() - t0:.2f}s; "
                      f"logs in {work}")
        client = q.client()
        brokers: list[dict[str, Any]] = []
        for s in range(broker_sets):
            for r in range(replicas):
                brokers.append(await register_broker(client, "demo", f"broker-{s}", f"10.0.{s}.{r + 1}:10911"))
        for b in brokers:
            await heartbeat(client, "demo", b)
        for s in range(broker_sets):
            first = next(b for b in brokers if b["broker_name"] == f"broker-{s}")
            await client.elect_master(f"broker-{s}", first["broker_id"], cluster_name="demo")
        show("registered brokers", [{k: b.get(k) for k in ("broker_name", "broker_id", "addr", "broker_epoch")}
                                    for b in brokers])
        ids = [(b["broker_name"], b["broker_id"]) for b in brokers]
        check(len(set(ids)) == len(ids), "broker ids are unique per broker set")
        epochs = [b["broker_epoch"] for b in brokers]
        check(epochs == sorted(epochs) and len(set(epochs)) == len(epochs), "broker epochs strictly increase")
        before = await sync_state(client)
        show("SyncStateSet (before failover)", [{k: v for k, v in r.items() if k != "members"} for r in before])

        console.print(f"kill -9 controller leader {leader}")
        q.kill(leader, signal.SIGKILL)
        t1 = time.monotonic()
        new_leader = await q.wait_leader(30, exclude={leader})
        console.print(f"new leader [bold]{new_leader}[/] after {time.monotonic() - t1:.2f}s")
        after = await sync_state(client)
        check(after == before, "the new leader serves identical broker-set metadata")
        q.start(leader)
        status = await _wait_caught_up(client, q.peers[leader], q.peers[new_leader])
        check(status, f"restarted {leader} caught up with the leader's applied index")

        await _shutdown_all(client)
        await client.close()
        await asyncio.sleep(0.5)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(q.alive(n) for n in q.node_ids):
            await asyncio.sleep(0.1)
        check(not any(q.alive(n) for n in q.node_ids), "orderly shutdown stopped every controller")
        from system_under_test.controller.formation import StoreSignatures

        states = {n: StoreSignatures(q.data_dir(n)).state().value for n in q.node_ids}
        check(set(states.values()) == {"clean"}, f"every store carries the clean marker: {states}")
    return ok


async def _wait_caught_up(client: ControllerClient, addr: str, leader_addr: str, timeout_s: float = 30) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            mine = (await client.call_one(addr, RequestCode.ADMIN_STATUS)).header["raft"]
            theirs = (await client.call_one(leader_addr, RequestCode.ADMIN_STATUS)).header["raft"]
            if mine.get("applied_index", -1) >= theirs.get("commit_index", 0) > 0:
                return True
        except Exception:
            pass
        await asyncio.sleep(0.1)
    return False


async def _shutdown_all(client: ControllerClient) -> None:
    """Ask every controller for an orderly shutdown (one shutdown id); a failure is printed, the check after
    it finds the controller still alive."""
    sid = secrets.token_hex(8)
    for addr in client.addrs:
        try:
            await client.call_one(addr, RequestCode.ADMIN_SHUTDOWN, {"shutdown_id": sid})
        except Exception as exc:
            console.print(f"shutdown of {addr} failed: {exc}")


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.broker_sets <= 20 or not 1 <= args.replicas <= 9:
        console.print("--broker-sets must be 1..20 and --replicas 1..9")
        return 2
    work = args.dir or Path(tempfile.mkdtemp(prefix="splitbrain-demo-"))
    ok = False
    try:
        ok = asyncio.run(demo(work, args.broker_sets, args.replicas))
    except TimeoutError as exc:
        console.print(f"[red]demo failed:[/] {exc}")
    console.print("[green]demo passed[/]" if ok else f"[red]demo failed[/] (logs in {work})")
    if ok and not args.keep and args.dir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1
