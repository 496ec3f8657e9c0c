"""Three RaftNodes in one event loop over real loopback TCP with real files.

Each test builds a :class:`LocalCluster` (system_under_test.raft.demo) in ``tmp_path``; "kill" stops a
node without a clean shutdown (no final sync, connections dropped), "restart" starts it again from
its directory.  Seeds are fixed per test; a failure message names the nodes and their views.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import msgpack
import pytest

from system_under_test import failpoints
from system_under_test.raft import ProposalDropped, RaftError
from system_under_test.raft.demo import LocalCluster, kv_entry
from system_under_test.raft.server import serve_raft

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def run(coro_fn: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(coro_fn(), 45))


async def propose_many(cluster: LocalCluster, n: int, *, prefix: str = "k", parallel: int = 100) -> int:
    """Propose ``n`` distinct keys through the leader; returns the highest index acknowledged."""
    top = 0
    for start in range(0, n, parallel):
        results = await asyncio.gather(
            *(cluster.propose(kv_entry(f"{prefix}{i}", i)) for i in range(start, min(n, start + parallel)))
        )
        top = max(top, *(index for index, _ in results))
    return top


def test_elect_replicate_kill_leader_restart_catch_up(tmp_path: Path) -> None:
    async def body() -> None:
        c = LocalCluster(tmp_path, 3, seed=11)
        await c.start()
        try:
            leader = await c.wait_leader()
            top = await propose_many(c, 1000)
            old = leader.node_id
            await c.kill(old)
            new = await c.wait_leader(exclude=old)
            assert new.node_id != old
            # the new leader commits a NOOP of its term, which commits (and applies) everything before it
            await c.wait_applied(top)
            for node_id in c.nodes:
                data = c.machines[node_id].data
                missing = [i for i in range(1000) if data.get(f"k{i}") != i]
                assert not missing, f"{node_id} lost committed keys {missing[:10]}"
            top2 = await propose_many(c, 200, prefix="after")
            await c.start_node(old)
            await c.wait_applied(top2, timeout_s=15)
            views = {nid: m.data for nid, m in c.machines.items()}
            assert views[old] == views[new.node_id] and len(views[old]) == 1200
        finally:
            await c.stop()

    run(body)


def test_lagging_node_catches_up_by_snapshot_after_compaction(tmp_path: Path) -> None:
    async def body() -> None:
        c = LocalCluster(tmp_path, 3, seed=5, snapshot_every_entries=100, segment_bytes=2048)
        await c.start()
        try:
            leader = await c.wait_leader()
            lagger = next(nid for nid in c.ids if nid != leader.node_id)
            await propose_many(c, 50, prefix="early")
            await c.kill(lagger)
            top = await propose_many(c, 600)
            assert leader.status()["snapshot_index"] >= 500, leader.status()
            first_seg = min(int(p.stem) for p in (tmp_path / leader.node_id / "log").glob("*.seg"))
            assert first_seg > 60, "the leader should have deleted the segments the lagger still needs"
            node = await c.start_node(lagger)
            await c.wait_applied(top, timeout_s=20)
            assert node.status()["snapshot_index"] >= 500  # installed the leader's snapshot, not a log replay
            assert c.machines[lagger].data == c.machines[leader.node_id].data
            # and it restarts again from its own snapshot + log
            await c.kill(lagger)
            node = await c.start_node(lagger)
            await c.wait_applied(top, timeout_s=10)
            assert c.machines[lagger].data == c.machines[leader.node_id].data
        finally:
            await c.stop()

    run(body)


def test_follower_refuses_proposals_with_a_leader_hint(tmp_path: Path) -> None:
    async def body() -> None:
        c = LocalCluster(tmp_path, 3, seed=3)
        await c.start()
        try:
            leader = await c.wait_leader()
            await propose_many(c, 1)
            follower = next(n for nid, n in c.nodes.items() if nid != leader.node_id)
            with pytest.raises(ProposalDropped) as info:
                await follower.propose(kv_entry("x", 1))
            assert info.value.leader == leader.node_id
        finally:
            await c.stop()

    run(body)


def test_read_barrier_sees_every_acknowledged_write(tmp_path: Path) -> None:
    async def body() -> None:
        c = LocalCluster(tmp_path, 3, seed=4)
        await c.start()
        try:
            leader = await c.wait_leader()
            top = await propose_many(c, 20)
            await leader.read_barrier(timeout_s=5)
            assert leader.applied_index >= top
            follower = next(n for nid, n in c.nodes.items() if nid != leader.node_id)
            with pytest.raises(ProposalDropped):
                await follower.read_barrier(timeout_s=1)
        finally:
            await c.stop()

    run(body)


def test_leadership_transfer_and_role_callbacks(tmp_path: Path) -> None:
    async def body() -> None:
        c = LocalCluster(tmp_path, 3, seed=8)
        await c.start()
        try:
            leader = await c.wait_leader()
            seen: list[tuple[str, bool, int]] = []
            def recorder(nid: str) -> Callable[[bool, int], None]:
                return lambda is_leader, term: seen.append((nid, is_leader, term))

            for nid, n in c.nodes.items():
                n.on_role_change.append(recorder(nid))
            await propose_many(c, 10)
            target = next(nid for nid in c.ids if nid != leader.node_id)
            await leader.transfer_leadership(target, timeout_s=5)
            new = await c.wait_leader()
            assert new.node_id == target
            assert any(nid == leader.node_id and not is_leader for nid, is_leader, _ in seen), seen
            assert (target, True, new.term) in seen
            await propose_many(c, 10, prefix="post")
        finally:
            await c.stop()

    run(body)


def test_a_persist_error_halts_only_that_node(tmp_path: Path) -> None:
    async def body() -> None:
        c = LocalCluster(tmp_path, 3, seed=9)
        await c.start()
        try:
            await c.wait_leader()
            await propose_many(c, 10)
            failpoints.arm("raft.before_persist", "1*error")
            await propose_many(c, 30, prefix="during")  # retried through whichever node leads
            halted = [nid for nid, n in c.nodes.items() if n.failed]
            assert len(halted) == 1, {nid: n.failed for nid, n in c.nodes.items()}
            with pytest.raises(RaftError, match=r"not running|halted"):
                await c.nodes[halted[0]].propose(b"x")
        finally:
            failpoints.disarm("raft.before_persist")
            await c.stop()

    run(body)


def test_snapshot_state_round_trips_through_restart_of_every_node(tmp_path: Path) -> None:
    async def body() -> None:
        c = LocalCluster(tmp_path, 3, seed=21, snapshot_every_entries=40)
        await c.start()
        try:
            await c.wait_leader()
            top = await propose_many(c, 150)
            await c.wait_applied(top)
            before = {nid: dict(m.data) for nid, m in c.machines.items()}
            await c.stop()
            await c.start()
            await c.wait_leader()
            await c.wait_applied(top)
            after = {nid: dict(m.data) for nid, m in c.machines.items()}
            assert after == before
            assert all(msgpack.unpackb(m.snapshot())[1] == m.data for m in c.machines.values())
        finally:
            await c.stop()

    run(body)


def test_proposal_overwritten_after_partition_is_dropped(tmp_path: Path) -> None:
    """A leader cut off from its peers appends an entry that never commits; once healed, the new
    leader's entry at that index wins and the old proposal fails with ProposalDropped (definite)."""

    async def body() -> None:
        c = LocalCluster(tmp_path, 3, seed=13)
        await c.start()
        try:
            old = await c.wait_leader()
            await propose_many(c, 5)
            host, port = c.addrs[old.node_id].rsplit(":", 1)
            await c.servers[old.node_id].stop()  # drop everything to and from the old leader
            await old.transport.stop()
            doomed = asyncio.ensure_future(old.propose(kv_entry("lost", 1), timeout_s=20))
            await asyncio.sleep(0)
            new = await c.wait_leader(exclude=old.node_id, timeout_s=10)
            assert new.node_id != old.node_id
            won = await asyncio.gather(*(new.propose(kv_entry(f"won{i}", i)) for i in range(5)))
            assert not doomed.done()
            await old.transport.start()  # heal
            c.servers[old.node_id] = await serve_raft(old.handle_message, host, int(port))
            with pytest.raises(ProposalDropped, match="committed with term"):
                await asyncio.wait_for(doomed, 10)
            await c.wait_applied(max(i for i, _ in won))
            assert "lost" not in c.machines[old.node_id].data
            assert c.machines[old.node_id].data == c.machines[new.node_id].data
        finally:
            await c.stop()

    run(body)
