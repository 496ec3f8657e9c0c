"""Recovery after a silent partition heals (issue 17), on the local backend with real iptables drops.

The controller leader and the broker master are cut off from every other node for 30 s --
longer than TCP's retransmission backoff needs to grow past 10 s -- then healed.  The test asserts
that the cluster recovers (every controller agrees on one leader, a controller write commits, a
send is acknowledged) and that the isolated controller's Raft links were redialed rather than
left waiting on the old connections.  How fast is bench/heal.py's business; the waits here are
only bounds so a broken build fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from harness.control.local import LocalRemote
from harness.spec import spec_from_dict
from nemesis import grudge as gr
from nemesis.partition import PartitionNemesis
from system_under_test.client.producer import Producer
from system_under_test.protocol import RequestCode, connect
from systems.splitbrain.db import CONTROLLER_PORT, SplitbrainDB
from systems.splitbrain.options import cluster_options

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]

CONTROLLERS = ["c1", "c2", "c3"]
BROKERS = ["b1", "b2"]
PARTITION_S = 30.0
RECOVERY_BOUND_S = 90.0


async def eventually(what: str, probe: Callable[[], Awaitable[Any]], timeout_s: float) -> Any:
    """Poll ``probe`` until it returns something truthy; fail naming ``what`` and its last answer."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = await probe()
            if last:
                return last
        except Exception as exc:
            last = f"{exc.__class__.__name__}: {exc}"
        await asyncio.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout_s}s; last answer: {last!r}")


async def admin_status(test: dict[str, Any], node: str) -> dict[str, Any]:
    conn = await connect(f"{test['remote'].address(node)}:{CONTROLLER_PORT}", timeout_s=2.0)
    try:
        return dict((await conn.request(RequestCode.ADMIN_STATUS, {}, timeout_s=2.0)).header)
    finally:
        conn.close()


async def leaders(test: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for node in CONTROLLERS:
        try:
            out[node] = (await admin_status(test, node))["metadata"].get("leader_id")
        except Exception as exc:
            out[node] = f"no answer: {exc}"
    return out


def test_cluster_recovers_after_a_30s_silent_partition_of_leader_and_master(tmp_path: Path) -> None:
    spec = spec_from_dict({"name": "heal", "backend": "local",
                           "nodes": {"controllers": CONTROLLERS, "broker_sets": [BROKERS]},
                           "workloads": ["queue"], "seed": 17}, file="<test>")

    async def main() -> None:
        remote = await LocalRemote.create([*CONTROLLERS, *BROKERS], state_dir=tmp_path / "state")
        db = SplitbrainDB(spec, cluster_options({}))
        test: dict[str, Any] = {"remote": remote, "run_dir": str(tmp_path)}
        producer: Producer | None = None
        client = None
        nemesis = PartitionNemesis(db, random.Random(17))
        try:
            await asyncio.gather(*(db.setup(test, n) for n in CONTROLLERS))
            await asyncio.gather(*(db.setup(test, n) for n in BROKERS))
            await nemesis.setup(test)
            producer = Producer(db.controller_addrs(test), db.token, timeout_s=2.0)
            client = db.client(test, timeout_s=1.0)

            async def send() -> bool:
                assert producer is not None
                await producer.send("broker-0", "heal", 0, b"x", timeout_s=2.0)
                return True

            writes = [0]

            async def write() -> bool:  # RegisterBroker at a new address: one UpdateBrokerAddress entry
                writes[0] += 1
                await client.register_broker(db.options.cluster_name, "heal-probe", probe_id,
                                             f"10.99.0.{writes[0] % 250}:1", "heal-probe", None)
                return True

            probe_id = await client.get_next_broker_id(db.options.cluster_name, "heal-probe")
            await client.apply_broker_id(db.options.cluster_name, "heal-probe", probe_id, "probe", "10.99.0.1:1")
            await eventually("a first committed write", write, 30)
            await eventually("a first acknowledged send", send, 60)
            primaries = await eventually("a controller leader and a master", lambda: db.primaries(test), 30)
            leader = next(p for p in primaries if p in CONTROLLERS)
            master = next((p for p in primaries if p in BROKERS), None)
            isolated = [leader] + ([master] if master else [])
            await nemesis.apply(test, gr.isolate(isolated, [*CONTROLLERS, *BROKERS]))
            await asyncio.sleep(PARTITION_S)
            await nemesis.heal(test)

            async def agreed() -> dict[str, Any] | None:
                views = await leaders(test)
                ids = set(views.values())
                return views if len(ids) == 1 and None not in ids and all(
                    isinstance(v, str) and not v.startswith("no answer") for v in ids) else None

            await eventually("every controller agrees on one leader after the heal", agreed, RECOVERY_BOUND_S)
            await eventually("a committed controller write after the heal", write, RECOVERY_BOUND_S)
            await eventually("an acknowledged send after the heal", send, RECOVERY_BOUND_S)
            # Each of the isolated controller's links must have been closed and dialed again.  Polled, not read
            # once: the writes and sends above need only a majority, so they can succeed while one of its links
            # is still on its way back (seen: dials {'c1': 1, 'c2': 2} read right after the first send).
            async def redialed() -> dict[str, int] | None:
                transport = (await admin_status(test, leader))["raft"]["transport"]
                dials = {peer: st["dials"] for peer, st in transport.items()}
                return dials if all(n >= 2 for n in dials.values()) else None

            await eventually(f"the isolated controller {leader} to close and redial every silent Raft link",
                             redialed, RECOVERY_BOUND_S)
        finally:
            if producer is not None:
                await producer.close()
            if client is not None:
                await client.close()
            await nemesis.heal(test)
            for n in [*BROKERS, *CONTROLLERS]:
                await db.teardown(test, n)
            await remote.close()

    asyncio.run(main())
