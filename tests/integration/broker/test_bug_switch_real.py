"""``--bug ack-before-replication`` really loses acknowledged messages (the harness must be able to see it).

Set of 2 (allAckInSyncStateSet).  Replication is stalled (failpoint ``broker.master.before_transfer``
armed with ``pause``: the slave stays connected and in the set); with the bug the master acknowledges
a put anyway.  The master is then killed, the slave resumes and is elected (it is
still in the SyncStateSet), and the acknowledged message is gone.  Without the bug the same put would
end FLUSH_SLAVE_TIMEOUT (outcome unknown): the ``without-bug`` case.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from system_under_test.client.consumer import Consumer
from system_under_test.client.producer import Producer, SendError
from system_under_test.protocol import RequestCode, ResponseCode, connect
from systems.splitbrain.local_broker_set import LocalBrokerSet
from systems.splitbrain.local_cluster import LocalQuorum

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


async def scenario(q: LocalQuorum, s: LocalBrokerSet, bug: bool) -> None:
    await q.wait_leader()
    s.start_all()
    infos = await s.wait_for(lambda i: (m := s.master(i)) is not None and len(i[m].get("sync_state_set") or []) == 2,
                             "a SyncStateSet of 2", 30)
    master = s.master(infos)
    assert master is not None
    slave = next(n for n in s.nodes if n != master)
    p = Producer(q.addrs, q.token, timeout_s=5)
    kept = await p.send("bs", "t", 0, b"replicated")
    conn = await connect(s.addrs[master])  # stall replication; the slave stays connected and in the set
    await conn.request(RequestCode.ADMIN_FAILPOINT_ARM, {"token": q.token, "name": "broker.master.before_transfer",
                                                          "action": "pause"})
    conn.close()
    if not bug:
        with pytest.raises(SendError) as unacked:
            await p.send("bs", "t", 0, b"acked-but-unreplicated")
        assert unacked.value.code == ResponseCode.FLUSH_SLAVE_TIMEOUT and not unacked.value.definite
        s.kill(master)
        await p.close()
        return
    acked = await p.send("bs", "t", 0, b"acked-but-unreplicated")  # the bug: no slave has it
    s.kill(master)
    infos = await s.wait_for(lambda i: s.master(i) == slave, "the slave to take over", 30)
    c = Consumer(q.addrs, q.token)
    bodies = {m.queue_offset: m.body for m in await c.pull_all("bs", "t", 0)}
    assert bodies.get(kept.queue_offset) == b"replicated"
    assert bodies.get(acked.queue_offset) != b"acked-but-unreplicated", "the bug should have lost this message"
    await p.close()
    await c.close()


@pytest.mark.parametrize("bug", [True, False], ids=["with-bug", "without-bug"])
def test_ack_before_replication_loses_acknowledged_messages(tmp_path: Path, bug: bool) -> None:
    args = ["--flush-slave-timeout-ms", "1000", *(["--bug", "ack-before-replication"] if bug else [])]
    with LocalQuorum(tmp_path / "q") as q:
        q.start_all()
        with LocalBrokerSet(tmp_path / "b", q.addrs, tmp_path / "q" / "token", size=2, extra_args=args) as s:
            asyncio.run(scenario(q, s, bug))
