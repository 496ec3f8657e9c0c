"""SyncStateSet shrink/expand and put acks on real processes (reference 2.4, AutoSwitchHATest
ConfirmOffset / OptionAllAckInSyncStateSet, AutoSwitchRoleIntegrationTest CheckSyncStateSet).

A set of 2 brokers with allAckInSyncStateSet and minInSyncReplicas=2:

1. puts succeed while both are in the set;
2. the slave is paused (SIGSTOP): a put waits for its ack and ends FLUSH_SLAVE_TIMEOUT (outcome unknown);
3. after haMaxTimeSlaveNotCatchup the master shrinks the set to itself through the controller, and puts
   are refused up front with IN_SYNC_REPLICAS_NOT_ENOUGH (definite);
4. the slave resumes (SIGCONT), catches up, the set expands again and puts succeed;
5. the unacknowledged put is either absent or present once -- never duplicated.

Before that, a broker started on a store of another cluster exits 4 (the store's initial signature);
after it, the admin RPCs the nemeses use: ADMIN_CLOCK_SET/GET (token required) and ADMIN_SHUTDOWN.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
from pathlib import Path

import pytest

from system_under_test.broker.store import MessageStore, StoreConfig
from system_under_test.client.consumer import Consumer, SyncConsumer
from system_under_test.client.producer import Producer, SendError, SyncProducer
from system_under_test.protocol import RequestCode, ResponseCode, RpcError, connect
from systems.splitbrain.local_broker_set import LocalBrokerSet
from systems.splitbrain.local_cluster import LocalQuorum

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

ARGS = ["--min-in-sync-replicas", "2", "--flush-slave-timeout-ms", "500", "--ha-max-time-slave-not-catchup-ms",
        "2500"]


def foreign_store_refused(s: LocalBrokerSet, tmp_path: Path) -> None:
    """A store that belongs to another cluster id is refused before registration: exit 4."""
    foreign = tmp_path / "foreign"
    MessageStore.open(str(foreign), StoreConfig(), "another-cluster-id").close()
    argv = s.argv("n1")
    argv[argv.index("--store-dir") + 1] = str(foreign)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 4, proc.stderr[-2000:]
    assert "another-cluster-id" in proc.stderr


async def scenario(q: LocalQuorum, s: LocalBrokerSet, tmp_path: Path) -> None:
    await q.wait_leader()
    foreign_store_refused(s, tmp_path)
    s.start_all()

    def set_size(n: int):  # type: ignore[no-untyped-def]
        return lambda i: (m := s.master(i)) is not None and len(i[m].get("sync_state_set") or []) == n

    infos = await s.wait_for(set_size(2), "a SyncStateSet of 2", 30)
    master = s.master(infos)
    assert master is not None
    slave = next(n for n in s.nodes if n != master)
    p = Producer(q.addrs, q.token, timeout_s=5)
    for k in range(10):
        await p.send("bs", "t", 0, f"ok-{k}".encode())

    s.procs[slave].send_signal(signal.SIGSTOP)
    with pytest.raises(SendError) as slow:
        await p.send("bs", "t", 0, b"unknown-outcome")
    assert slow.value.code == ResponseCode.FLUSH_SLAVE_TIMEOUT and not slow.value.definite

    await s.wait_for(lambda i: i.get(master, {}).get("sync_state_set") == [i[master]["broker_id"]],
                     "the master to shrink the set to itself", 15)
    with pytest.raises(SendError) as refused:
        await p.send("bs", "t", 0, b"refused")
    assert refused.value.code == ResponseCode.IN_SYNC_REPLICAS_NOT_ENOUGH and refused.value.definite

    s.procs[slave].send_signal(signal.SIGCONT)
    await s.wait_for(set_size(2), "the set to expand after the slave caught up", 20)
    res = await p.send("bs", "t", 0, b"after")
    c = Consumer(q.addrs, q.token)
    bodies = [m.body for m in await c.pull_all("bs", "t", 0)]
    assert bodies[:10] == [f"ok-{k}".encode() for k in range(10)]
    assert bodies.count(b"unknown-outcome") <= 1 and b"refused" not in bodies
    assert bodies[res.queue_offset] == b"after"
    await p.close()
    await c.close()


async def admin_rpcs(q: LocalQuorum, s: LocalBrokerSet) -> None:
    """Admin RPCs the nemeses use: the process clock, and an orderly shutdown of the slave."""
    infos = await s.wait_for(lambda i: s.master(i) is not None, "a master", 10)
    slave = next(n for n in s.nodes if n != s.master(infos))
    conn = await connect(s.addrs[slave])
    with pytest.raises(RpcError) as unauthorized:
        await conn.request(RequestCode.ADMIN_CLOCK_SET, {"offset_ms": 1.0})
    assert unauthorized.value.code == ResponseCode.UNAUTHORIZED
    clock = (await conn.request(RequestCode.ADMIN_CLOCK_SET, {"token": q.token, "offset_ms": 250.0})).header
    assert clock["offset_ms"] == 250.0
    assert (await conn.request(RequestCode.ADMIN_CLOCK_GET, {})).header["offset_ms"] == 250.0
    await conn.request(RequestCode.ADMIN_SHUTDOWN, {"token": q.token})
    conn.close()
    assert s.procs[slave].wait(timeout=30) == 0
    assert (s.store_dir(slave) / "clean.sig").exists()


def sync_wrappers(q: LocalQuorum) -> None:
    """The blocking wrappers (their own event loop) send and read like the async clients."""
    p = SyncProducer(q.addrs, q.token)
    c = SyncConsumer(q.addrs, q.token, group="sync")
    try:
        res = p.send("bs", "sync", 0, b"blocking")
        got = c.pull("bs", "sync", 0, res.queue_offset, 1)
        assert [m.body for m in got.messages] == [b"blocking"]
        c.commit("bs", "sync", 0, got.next_offset)
    finally:
        p.close()
        c.close()


def test_shrink_expand_and_min_in_sync(tmp_path: Path) -> None:
    with LocalQuorum(tmp_path / "q") as q:
        q.start_all()
        with LocalBrokerSet(tmp_path / "b", q.addrs, tmp_path / "q" / "token", size=2, extra_args=ARGS) as s:
            try:
                asyncio.run(scenario(q, s, tmp_path))
                sync_wrappers(q)
                asyncio.run(admin_rpcs(q, s))
            except BaseException:
                for node in s.nodes:
                    s.procs[node].send_signal(signal.SIGCONT)
                    p = s.log_path(node)
                    if p.exists():
                        print(f"--- {node} ---\n" + "\n".join(p.read_text(errors="replace").splitlines()[-40:]))
                raise
