"""Each fault is proven real on the local backend (controllers in network namespaces):
partitions stop TCP (one-way only one direction), a killed process is gone, a paused one makes no
progress, a bumped clock moves while the host's does not, netem delay shows in round trips."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from harness.control.local import LocalRemote
from harness.spec import spec_from_dict
from nemesis.clock import ClockNemesis
from nemesis.failpoint import FailpointNemesis
from nemesis.packet import PacketNemesis
from nemesis.partition import PartitionNemesis
from nemesis.process import ProcessNemesis
from system_under_test.protocol import RequestCode, RequestTimeout, connect
from systems.splitbrain.db import CONTROLLER_PORT, SplitbrainDB
from systems.splitbrain.options import cluster_options

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]

CONNECT = ("import socket,sys; s=socket.socket(); s.settimeout(0.7)\n"
           "try:\n s.connect((sys.argv[1], int(sys.argv[2]))); print('OK')\n"
           "except OSError as e: print('FAIL', e)")


async def probe(test: dict[str, Any], src: str, dst: str, script: str, *, timeout_s: float,
                check: bool = False) -> str:
    """Run a Python ``script`` on node ``src`` with ``dst``'s address and the controller port as
    arguments; returns what it printed."""
    remote = test["remote"]
    res = await remote.exec(src, [sys.executable, "-c", script, remote.address(dst), str(CONTROLLER_PORT)],
                            timeout_s=timeout_s, check=check)
    return str(res.stdout)


async def can_connect(test: dict[str, Any], src: str, dst: str) -> bool:
    return (await probe(test, src, dst, CONNECT, timeout_s=10)).startswith("OK")


LISTEN = ("import socket,sys; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('0.0.0.0', 9555));"
          "s.settimeout(2.0)\ntry:\n print('GOT', s.recv(100))\nexcept OSError: print('NOTHING')")
SEND = ("import socket,sys,time; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "for _ in range(10): s.sendto(b'x', (sys.argv[1], 9555)); time.sleep(0.1)")


async def datagram_arrives(test: dict[str, Any], src: str, dst: str) -> bool:
    """UDP src -> dst: tells one direction apart from the other (TCP needs both)."""
    remote = test["remote"]
    listener = asyncio.ensure_future(remote.exec(dst, [sys.executable, "-c", LISTEN], timeout_s=10))
    await asyncio.sleep(0.4)
    await remote.exec(src, [sys.executable, "-c", SEND, remote.address(dst)], timeout_s=10)
    return (await listener).stdout.startswith("GOT")


def with_quorum(body: Callable[[dict[str, Any], SplitbrainDB], Coroutine[Any, Any, None]], tmp: Path) -> None:
    spec = spec_from_dict({"name": "nem", "backend": "local", "nodes": {"controllers": 3, "broker_sets": []},
                           "workloads": ["queue"], "seed": 5}, file="<test>")

    async def main() -> None:
        remote = await LocalRemote.create(list(spec.nodes.all), state_dir=tmp / "state")
        db = SplitbrainDB(spec, cluster_options({}))
        test = {"remote": remote, "run_dir": str(tmp)}
        try:
            await asyncio.gather(*(db.setup(test, n) for n in spec.nodes.controllers))
            await body(test, db)
        finally:
            for n in spec.nodes.controllers:
                await db.teardown(test, n)
            await remote.close()

    asyncio.run(main())


def op(f: str, value: Any = None) -> dict[str, Any]:
    return {"type": "invoke", "process": "nemesis", "f": f, "value": value}


def test_partition_blocks_tcp_and_heal_restores_it_one_way_blocks_one_direction(tmp_path: Path) -> None:
    async def body(test: dict[str, Any], db: SplitbrainDB) -> None:
        nem = await PartitionNemesis(db, random.Random(1)).setup(test)
        assert await can_connect(test, "c1", "c2")
        done = await nem.invoke(test, op("start-partition", {"kind": "isolate", "targets": "c1"}))
        assert done["type"] == "info" and "error" not in done, done
        assert done["value"]["grudge"] == {"c1": ["c2", "c3"], "c2": ["c1"], "c3": ["c1"]}
        assert not await can_connect(test, "c1", "c2") and not await can_connect(test, "c3", "c1")
        assert await can_connect(test, "c2", "c3")
        await nem.invoke(test, op("stop-partition"))
        assert await can_connect(test, "c1", "c2")
        # one-way: c2 drops what c1 sends; c2 -> c1 still flows
        done = await nem.invoke(test, op("start-partition", {"kind": "one-way", "from": "c1", "to": "c2"}))
        assert done["value"]["grudge"] == {"c2": ["c1"]}
        assert not await datagram_arrives(test, "c1", "c2")
        assert await datagram_arrives(test, "c2", "c1")
        await nem.teardown(test)
        assert await can_connect(test, "c1", "c2")
        bad = await nem.invoke(test, op("start-partition", {"kind": "nonsense"}))
        assert bad["type"] == "info" and "unknown kind" in bad["error"]

    with_quorum(body, tmp_path)


def test_kill_removes_the_process_and_pause_stops_progress(tmp_path: Path) -> None:
    async def body(test: dict[str, Any], db: SplitbrainDB) -> None:
        nem = ProcessNemesis(db, random.Random(2))
        pid = db.pids["c1"]
        done = await nem.invoke(test, op("kill", "c1"))
        assert done["value"] == ["c1"]
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
        done = await nem.invoke(test, op("start"))
        assert done["value"] == ["c1"]
        await db.wait_ready(test, "c1")
        await nem.invoke(test, op("pause", "c2"))
        for _ in range(50):  # SIGSTOP is delivered asynchronously
            state = Path(f"/proc/{db.pids['c2']}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "T":
                break
            await asyncio.sleep(0.02)
        assert state == "T"  # stopped
        conn = await connect(db.admin_addr(test, "c2"), timeout_s=2)
        with pytest.raises(RequestTimeout):  # a paused process answers nothing
            await conn.request(RequestCode.ADMIN_STATUS, timeout_s=1.0)
        conn.close()
        await nem.invoke(test, op("resume"))
        conn = await connect(db.admin_addr(test, "c2"), timeout_s=2)
        assert (await conn.request(RequestCode.ADMIN_STATUS, timeout_s=5.0)).header["metadata"]["node_id"] == "c2"
        conn.close()

    with_quorum(body, tmp_path)


def test_clock_bump_moves_the_node_clock_not_the_host_clock(tmp_path: Path) -> None:
    async def body(test: dict[str, Any], db: SplitbrainDB) -> None:
        nem = ClockNemesis(db, random.Random(3))
        host_before = time.time()
        done = await nem.invoke(test, op("bump-clock", {"targets": "c2", "delta_ms": 3_600_000}))
        skew = done["value"]["offsets"]["c2"]["skew_ms"]
        assert 3_590_000 < skew < 3_610_000, done
        assert abs(time.time() - host_before) < 30  # the host clock did not jump
        offsets = (await nem.invoke(test, op("check-clock-offsets")))["value"]
        assert abs(offsets["c1"]["skew_ms"]) < 1000
        await nem.invoke(test, op("reset-clock"))
        offsets = (await nem.invoke(test, op("check-clock-offsets")))["value"]
        assert all(abs(v["skew_ms"]) < 1000 for v in offsets.values())

    with_quorum(body, tmp_path)


def test_netem_delay_shows_in_round_trips(tmp_path: Path) -> None:
    async def rtt(test: dict[str, Any], db: SplitbrainDB) -> float:
        conn = await connect(db.admin_addr(test, "c1"), timeout_s=2)
        try:
            samples = []
            for _ in range(5):
                t0 = time.monotonic()
                await conn.request(RequestCode.CONTROLLER_GET_METADATA_INFO, timeout_s=5)
                samples.append(time.monotonic() - t0)
            return sorted(samples)[2]
        finally:
            conn.close()

    async def body(test: dict[str, Any], db: SplitbrainDB) -> None:
        nem = await PacketNemesis(db, random.Random(4)).setup(test)
        base = await rtt(test, db)
        done = await nem.invoke(test, op("start-packet", {"targets": "c1", "behavior": {"delay": {"time_ms": 100}}}))
        assert "error" not in done, done
        slow = await rtt(test, db)
        assert slow - base > 0.08, (base, slow)
        await nem.invoke(test, op("stop-packet"))
        assert await rtt(test, db) < base + 0.05

    with_quorum(body, tmp_path)


def test_failpoint_nemesis_arms_on_the_node(tmp_path: Path) -> None:
    async def body(test: dict[str, Any], db: SplitbrainDB) -> None:
        nem = FailpointNemesis(db, random.Random(5))
        done = await nem.invoke(test, op("arm-failpoint", {"targets": "c1", "name": "raft.before_apply",
                                                            "action": "delay(1)"}))
        assert done["value"]["results"] == {"c1": "ok"}
        conn = await connect(db.admin_addr(test, "c1"), timeout_s=2)
        points = (await conn.request(RequestCode.ADMIN_FAILPOINT_LIST, timeout_s=5)).header["failpoints"]
        conn.close()
        assert next(p for p in points if p["name"] == "raft.before_apply")["action"] == "delay(1)"
        done = await nem.invoke(test, op("arm-failpoint", {"targets": "c1", "name": "no.such", "action": "crash"}))
        assert "unknown failpoint" in done["value"]["results"]["c1"]

    with_quorum(body, tmp_path)


CONNECT_MS = ("import socket,sys,time\nbest=1e9\nfor _ in range(3):\n"
              " s=socket.socket(); s.settimeout(5); t=time.monotonic(); s.connect((sys.argv[1], int(sys.argv[2])))\n"
              " best=min(best,(time.monotonic()-t)*1000); s.close()\nprint(best)")


async def connect_ms(test: dict[str, Any], src: str, dst: str) -> float:
    return float((await probe(test, src, dst, CONNECT_MS, timeout_s=30, check=True)).strip())


def test_packet_delay_between_a_pair_only(tmp_path: Path) -> None:
    async def body(test: dict[str, Any], db: SplitbrainDB) -> None:
        nem = await PacketNemesis(db, random.Random(6)).setup(test)
        done = await nem.invoke(test, op("start-packet", {"targets": "c1", "to": "c2",
                                                          "behavior": {"delay": {"time_ms": 150}}}))
        assert "error" not in done and done["value"]["to"] == ["c2"], done
        # c1's SYN-ACKs to c2 wait 150 ms; to c3 they do not
        assert await connect_ms(test, "c2", "c1") >= 120
        assert await connect_ms(test, "c3", "c1") < 100
        await nem.invoke(test, op("stop-packet"))
        assert await connect_ms(test, "c2", "c1") < 100

    with_quorum(body, tmp_path)


def test_crash_at_kills_the_leader_between_commit_and_reply_and_restarts_it(tmp_path: Path) -> None:
    async def body(test: dict[str, Any], db: SplitbrainDB) -> None:
        nem = FailpointNemesis(db, random.Random(7))
        leader = (await db.primaries(test))[0]
        old_pid = db.pids[leader]
        crash = asyncio.ensure_future(nem.invoke(test, op("crash-at", {
            "targets": "controller-leader", "name": "controller.after_commit_before_reply", "timeout_s": 20})))
        client = db.client(test, timeout_s=1.0)
        try:
            for i in range(200):  # writes until one reaches the step on the leader
                if crash.done():
                    break
                with contextlib.suppress(Exception):
                    await client.apply_broker_id(db.options.cluster_name, "bs-crash", i + 1, f"code-{i}",
                                                 f"10.1.1.{i % 250 + 1}:10911")
                await asyncio.sleep(0.05)
        finally:
            await client.close()
        done = await crash
        rep = done["value"]["nodes"][leader]
        assert "error" not in done and rep["armed"] == "ok" and rep["crashed"], done
        assert rep["restarted"] == "ready" and db.pids[leader] != old_pid, done
        log_text = (Path(test["remote"].node_dir(leader)) / "node.log").read_text()
        assert "FAILPOINT controller.after_commit_before_reply: crash" in log_text
        # This quorum has no broker sets, so no AlterSyncStateSet can expand one: a step no write reaches
        # (before_propose was reached here by a write still in flight after the restart).
        missing = await nem.invoke(test, op("crash-at", {
            "targets": "c1", "name": "controller.alter_sync_state_set.expand.after_commit", "timeout_s": 0.5}))
        assert missing["value"]["nodes"]["c1"]["crashed"] is False  # never reached: disarmed
        assert missing["value"]["nodes"]["c1"]["disarm"] == "ok"

    with_quorum(body, tmp_path)
