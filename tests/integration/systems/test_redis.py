"""A real Redis + Sentinel deployment in three local network namespaces: streams, a master kill, a Sentinel
failover, the old master's return as a replica, teardown.

``RedisDB`` starts Debian's redis-server and redis-sentinel in three namespaces through ``LocalRemote``;
``RedisQueueClient`` asks each node's sentinel for the master and sends, polls and drains streams there.  The test
records every op as a history and, besides its own assertions, has the total-queue judgement check it (as a log:
nothing may be lost, since every acknowledged send waited for both replicas).  Needs root, iproute2, redis-server
and redis-sentinel (Debian packages; scripts/setup.sh installs them), skipped otherwise.  It asserts only on what it
created: its own state directory, namespaces, processes and files.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from checker.history import Op
from checker.total_queue import check_total_queue
from harness.control.local import LocalRemote
from systems.redis.client import RedisQueueClient
from systems.redis.config import RedisOptions
from systems.redis.db import RedisDB

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None, reason="needs root and iproute2"),
    pytest.mark.skipif(shutil.which("redis-server") is None or shutil.which("redis-sentinel") is None,
                       reason="needs redis-server and redis-sentinel (Debian packages; scripts/setup.sh)"),
]

NODES = ["n1", "n2", "n3"]


class Recorder:
    """Runs ops through clients and keeps them as a history (each op its own process, so none is reused)."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.t0 = time.monotonic_ns()

    def _add(self, d: dict[str, Any]) -> None:
        self.ops.append(Op.from_dict({**d, "index": len(self.ops), "time": time.monotonic_ns() - self.t0}))

    async def run(self, client: RedisQueueClient, f: str, value: dict[str, Any]) -> dict[str, Any]:
        op = {"process": len(self.ops), "type": "invoke", "f": f, "value": value}
        self._add(op)
        done = await client.invoke({}, dict(op))
        self._add(done)
        return done

    async def until_ok(self, client: RedisQueueClient, f: str, value: dict[str, Any], *,
                       bound_s: float = 30.0) -> dict[str, Any]:
        """Repeat the op until it is ok (bounded: a hang, not a speed); returns the last completion."""
        deadline = time.monotonic() + bound_s
        while True:
            done = await self.run(client, f, value)
            if done["type"] == "ok" or time.monotonic() > deadline:
                return done
            await asyncio.sleep(0.2)


async def until(probe: Any, bound_s: float) -> Any:
    """Poll ``probe()`` until it returns something true (bounded); returns its last answer."""
    deadline = time.monotonic() + bound_s
    while True:
        got = await probe()
        if got or time.monotonic() > deadline:
            return got
        await asyncio.sleep(0.2)


def netns_exists(name: str) -> bool:
    return subprocess.run(["ip", "netns", "pids", name], capture_output=True).returncode == 0


async def scenario(tmp: Path) -> dict[str, Any]:
    remote = await LocalRemote.create(NODES, state_dir=tmp / "state")
    namespaces = [n["netns"] for n in remote.state["nodes"].values()]
    test: dict[str, Any] = {"name": "redis-it", "nodes": list(NODES), "remote": remote}
    db = RedisDB(options=RedisOptions(down_after_ms=1500, failover_timeout_ms=4000), start_timeout_s=30.0)
    rec, out = Recorder(), {"namespaces": namespaces, "state_path": remote.state_path}
    clients: dict[str, RedisQueueClient] = {}
    try:
        await asyncio.gather(*(db.setup(test, n) for n in NODES))
        out["primaries_before"] = await db.primaries(test)
        proto = RedisQueueClient(timeout_s=2.0, wait=2, wait_timeout_ms=2000)
        clients = {n: await proto.open(test, n) for n in NODES}
        out["sends"] = [await rec.run(clients[n], "send", {"queue": "q0", "value": f"{n}-0"}) for n in NODES]
        out["poll"] = await rec.run(clients["n2"], "poll", {"queue": "q0", "max": 2})
        out["poll_more"] = await rec.run(clients["n2"], "poll", {"queue": "q0", "max": 2})

        old = out["primaries_before"][0]
        await db.kill(test, old)
        survivors = [n for n in NODES if n != old]

        async def promoted() -> list[str]:
            return [n for n in await db.primaries(test) if n != old]

        out["promoted"] = await until(promoted, 30.0)
        # the sentinels' clients follow; with the old master down only one replica is left to WAIT for
        one = RedisQueueClient(timeout_s=2.0, wait=1, wait_timeout_ms=2000)
        after = {n: await one.open(test, n) for n in survivors}
        try:
            out["sends_after"] = [await rec.until_ok(after[n], "send", {"queue": "q0", "value": f"{n}-1"})
                                  for n in survivors]
        finally:
            for c in after.values():
                await c.close({})

        await db.start(test, old)

        async def demoted() -> bool:
            try:
                return await db.role(test, old) == "slave"
            except Exception:
                return False

        out["old_master_replica"] = await until(demoted, 30.0)
        out["drains"] = {n: await rec.until_ok(clients[n], "drain", {"queue": "q0"}) for n in NODES}
        out["log_files"] = {n: db.log_files(test, n) for n in NODES}
    finally:
        for c in clients.values():
            await c.close({})
        pids = {**{("redis", n): p for n, p in db.pids.items()},
                **{("sentinel", n): p for n, p in db.sentinel_pids.items()}}
        for n in NODES:
            await db.teardown(test, n)
        out["alive_after_teardown"] = [k for k, p in pids.items() if await remote.is_alive(k[1], p)]
        out["data_left"] = [n for n in NODES if (Path(remote.node_dir(n)) / "redis.data").exists()]
        out["logs_kept"] = all(Path(p).exists() for m in out.get("log_files", {}).values() for p in m)
        await remote.close()
    out["history"] = rec.ops
    return out


@pytest.mark.timeout(150)
def test_a_master_kill_fails_over_and_the_old_master_returns_as_a_replica(tmp_path: Path) -> None:
    started = time.monotonic()
    out = asyncio.run(scenario(tmp_path))
    print(f"redis scenario: {time.monotonic() - started:.1f} s, {len(out['history'])} history entries")
    for op in out["history"]:
        if op.type in ("fail", "info"):
            print(f"  {op.describe()}")

    assert out["primaries_before"] == ["n1"]
    assert [(d["type"], d["node"], d["client_node"]) for d in out["sends"]] == [
        ("ok", "n1", "n1"), ("ok", "n1", "n2"), ("ok", "n1", "n3")], out["sends"]
    positions = [d["value"]["position"] for d in out["sends"]]
    assert [r[1] for r in out["poll"]["value"]["records"]] == ["n1-0", "n2-0"]
    assert out["poll_more"]["value"]["records"] == [[positions[2], "n3-0"]]  # the cursor moved on

    assert len(out["promoted"]) == 1 and out["promoted"][0] != "n1", out["promoted"]
    assert all(d["type"] == "ok" and d["node"] == out["promoted"][0] for d in out["sends_after"]), out["sends_after"]
    assert out["old_master_replica"] is True
    expected = ["n1-0", "n2-0", "n3-0"] + [d["value"]["value"] for d in out["sends_after"]]
    for node, drain in out["drains"].items():
        assert drain["type"] == "ok" and [r[1] for r in drain["value"]["records"]] == expected, (node, drain)

    verdict = check_total_queue(out["history"], log=True)
    assert verdict.valid is True and verdict.stats["lost"] == 0, verdict.describe()
    assert verdict.stats["acknowledged"] == 5

    assert out["alive_after_teardown"] == []
    assert out["data_left"] == []
    assert out["logs_kept"] is True
    assert not Path(out["state_path"]).exists()
    assert not any(netns_exists(ns) for ns in out["namespaces"])
