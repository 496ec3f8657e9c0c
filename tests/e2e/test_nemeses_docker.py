"""Every nemesis proven real on the docker backend, against the real cluster in containers (3
controllers and a broker set of 2): partitions stop TCP between containers (one-way only one
direction) and heal restores it, a killed broker is gone and a paused controller answers nothing,
a bumped clock moves inside one process only, packet delay shows in round trips, and the disk
faults (slow fsync, lose-unfsynced, tail corruption) do what they record."""

from __future__ import annotations

import asyncio
import random
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.control.docker import DockerRemote
from harness.spec import spec_from_dict
from nemesis.clock import ClockNemesis
from nemesis.disk import DiskNemesis
from nemesis.packet import PacketNemesis
from nemesis.partition import PartitionNemesis
from nemesis.process import ProcessNemesis
from system_under_test.client.producer import Producer, SendError
from system_under_test.protocol import RequestCode, RequestTimeout, connect
from systems.splitbrain.db import CONTROLLER_PORT, SplitbrainDB
from systems.splitbrain.options import cluster_options

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

CONNECT = ("import socket,sys; s=socket.socket(); s.settimeout(0.7)\n"
           "try:\n s.connect((sys.argv[1], int(sys.argv[2]))); print('OK')\n"
           "except OSError as e: print('FAIL', e)")


def op(f: str, value: Any = None) -> dict[str, Any]:
    return {"type": "invoke", "process": "nemesis", "f": f, "value": value}


async def can_connect(test: dict[str, Any], src: str, dst: str) -> bool:
    remote = test["remote"]
    res = await remote.exec(src, [sys.executable, "-c", CONNECT, remote.address(dst), str(CONTROLLER_PORT)],
                            timeout_s=20)
    return res.stdout.startswith("OK")


async def admin(test: dict[str, Any], db: SplitbrainDB, node: str, timeout_s: float = 5.0) -> dict[str, Any]:
    conn = await connect(db.admin_addr(test, node), timeout_s=2)
    try:
        return dict((await conn.request(RequestCode.ADMIN_STATUS, timeout_s=timeout_s)).header)
    finally:
        conn.close()


async def round_trip_ms(test: dict[str, Any], db: SplitbrainDB, node: str, n: int = 5) -> float:
    conn = await connect(db.admin_addr(test, node), timeout_s=5)
    try:
        best = float("inf")
        for _ in range(n):
            t0 = time.monotonic()
            await conn.request(RequestCode.ADMIN_CLOCK_GET, timeout_s=10)
            best = min(best, (time.monotonic() - t0) * 1000)
        return best
    finally:
        conn.close()


async def send_retrying(p: Producer, body: bytes, attempts: int = 3) -> None:
    """Send, retrying an unknown outcome (a slave slow to ack on a loaded host): this test is about the
    nemeses, not about a single send; duplicates do not matter here."""
    for left in range(attempts - 1, -1, -1):
        try:
            await p.send("broker-0", "e2e", 0, body, timeout_s=20)
            return
        except SendError as exc:
            if exc.definite or not left:
                raise


def test_every_nemesis_on_a_docker_cluster(node_image: str, tmp_path: Path) -> None:
    spec = spec_from_dict({"name": "nem-docker", "backend": "docker",
                           "nodes": {"controllers": 3, "broker_sets": [["b1", "b2"]]},
                           "workloads": ["queue"], "seed": 11}, file="<e2e>")

    async def main() -> None:
        remote = await DockerRemote.create(list(spec.nodes.all), image=node_image)
        db = SplitbrainDB(spec, cluster_options({"flush": "sync"}))
        test: dict[str, Any] = {"remote": remote, "run_dir": str(tmp_path)}
        try:
            await asyncio.gather(*(db.setup(test, n) for n in spec.nodes.controllers))
            await asyncio.gather(*(db.setup(test, n) for n in ("b1", "b2")))
            rng = random.Random(1)

            part = await PartitionNemesis(db, rng).setup(test)
            assert await can_connect(test, "c2", "c1")
            done = await part.invoke(test, op("start-partition", {"kind": "isolate", "targets": "c1"}))
            assert "error" not in done and done["value"]["grudge"]["c1"] == ["b1", "b2", "c2", "c3"], done
            assert not await can_connect(test, "c2", "c1") and not await can_connect(test, "c1", "c3")
            assert await can_connect(test, "c2", "c3")
            await part.invoke(test, op("stop-partition"))
            assert await can_connect(test, "c2", "c1")
            await part.invoke(test, op("start-partition", {"kind": "one-way", "from": "c1", "to": "c2"}))
            assert not await can_connect(test, "c1", "c2")  # c2 drops what c1 sends
            await part.teardown(test)
            assert await can_connect(test, "c1", "c2")

            proc = ProcessNemesis(db, rng)
            pid = db.pids["b2"]
            assert (await proc.invoke(test, op("kill", "b2")))["value"] == ["b2"]
            assert not await remote.is_alive("b2", pid)
            await proc.invoke(test, op("start"))
            await db.wait_ready(test, "b2")
            await proc.invoke(test, op("pause", "c3"))
            with pytest.raises(RequestTimeout):
                await admin(test, db, "c3", timeout_s=1.0)
            await proc.invoke(test, op("resume"))
            assert (await admin(test, db, "c3"))["metadata"]["node_id"] == "c3"

            clock = ClockNemesis(db, rng)
            host = time.time()
            done = await clock.invoke(test, op("bump-clock", {"targets": "b1", "delta_ms": 600_000}))
            assert 590_000 < done["value"]["offsets"]["b1"]["skew_ms"] < 610_000, done
            assert abs(time.time() - host) < 60
            offsets = (await clock.invoke(test, op("check-clock-offsets")))["value"]
            assert abs(offsets["c1"]["skew_ms"]) < 1000, offsets
            await clock.invoke(test, op("reset-clock"))

            packet = await PacketNemesis(db, rng).setup(test)
            base = await round_trip_ms(test, db, "b1")
            done = await packet.invoke(test, op("start-packet", {"targets": "b1",
                                                                 "behavior": {"delay": {"time_ms": 150}}}))
            assert "error" not in done, done
            slowed = await round_trip_ms(test, db, "b1")
            await packet.invoke(test, op("stop-packet"))
            assert slowed >= base + 120, (base, slowed, done)

            disk = DiskNemesis(db, rng)
            async with Producer(db.controller_addrs(test), db.token, timeout_s=20) as p:
                for i in range(20):
                    await send_retrying(p, f"m{i}".encode())
                master = (await db.primaries(test))[-1]
                await disk.invoke(test, op("start-disk", {"fault": "slow-fsync", "targets": master, "delay_ms": 200}))
                await send_retrying(p, b"slow")
                assert (await admin(test, db, master))["disk"]["fsync_last_ms"] >= 200
                await disk.invoke(test, op("stop-disk"))
            slave = "b2" if master == "b1" else "b1"
            done = await disk.invoke(test, op("lose-unfsynced", {"targets": slave}))
            rep = done["value"]["nodes"][slave]
            assert rep["restarted"] == "ready" and rep["dropped"] == rep["max_offset"] - rep["synced_offset"], done
            done = await disk.invoke(test, op("corrupt-file", {"targets": slave, "mode": "truncate-tail"}))
            rep = done["value"]["nodes"][slave]
            assert rep["changed"] and rep["size_after"] == rep["offset"] and rep["restarted"] == "ready", done
            log = await remote.exec(slave, ["cat", str(Path(remote.node_dir(slave)) / "node.log")])
            assert "torn tail" in log.stdout
        finally:
            for n in spec.nodes.all:
                await db.teardown(test, n)
            await remote.close()

    asyncio.run(main())
