"""HaMaster + HaSlave over a real loopback connection, in one process, with real stores.

Covers the replication flow of RIP-44 end to end without controllers: handshake, transfer in
batches that never cross an epoch, expansion of the SyncStateSet through a (fake) controller,
acks releasing puts, and the old-master-returns-as-slave truncation (seed "Truncation example").
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from system_under_test.broker.config import BrokerConfig
from system_under_test.broker.ha_master import HaMaster
from system_under_test.broker.ha_slave import HaSlave
from system_under_test.broker.store import MessageStore, Record, StoreConfig
from system_under_test.clock import CLOCK
from system_under_test.protocol import (
    Connection,
    Frame,
    Reply,
    RequestCode,
    RequestTimeout,
    ResponseCode,
    RpcError,
    RpcServer,
)

CFG = BrokerConfig(cluster_name="c", broker_name="b", listen="127.0.0.1:9", store_dir="/x",
                   controllers=("127.0.0.1:1",), token="tok", ha_transfer_batch_bytes=4096)
STORE = StoreConfig(segment_bytes=64 * 1024, max_message_bytes=16 * 1024, background_flush=False)


def now_ms() -> int:
    return CLOCK.monotonic_ns() // 1_000_000


def put(store: MessageStore, n: int, tag: str) -> int:
    res = store.put([Record("t", 0, f"{tag}-{i}".encode() * 20) for i in range(n)])
    return res[-1].phys_offset + res[-1].size


async def until(cond: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def serve(ha: HaMaster) -> tuple[RpcServer, str]:
    async def handle(frame: Frame, conn: Connection) -> Reply | None:
        if frame.code == RequestCode.HA_HANDSHAKE:
            return ha.handle_handshake(frame, conn)
        if frame.code == RequestCode.HA_ACK:
            ha.handle_ack(frame, conn)
        return None

    server = RpcServer(handle)
    host, port = await server.start("127.0.0.1", 0)
    return server, f"{host}:{port}"


def same_log(a: MessageStore, b: MessageStore) -> bool:
    return (a.max_phys_offset == b.max_phys_offset
            and a.read_raw(0, 1 << 24) == b.read_raw(0, 1 << 24)
            and a.epochs.entries == b.epochs.entries)


def test_replicate_expand_ack_and_truncate_old_master(tmp_path: Path) -> None:
    async def go() -> None:
        m_store = MessageStore.open(str(tmp_path / "m"), STORE, "cid")
        s_store = MessageStore.open(str(tmp_path / "s"), STORE, "cid")
        alters: list[tuple[list[int], int]] = []

        async def alter(members: frozenset[int], epoch: int) -> tuple[frozenset[int], int]:
            alters.append((sorted(members), epoch))
            return members, epoch + 1

        ha = HaMaster(m_store, CFG, alter, now_ms)
        server, addr = await serve(ha)
        m_store.epochs.start_epoch(1, 0)
        ha.activate(1, 1, frozenset({1}), 1)
        put(m_store, 50, "a")  # several 4 KiB batches
        ha.on_appended()
        assert m_store.confirm_offset == m_store.max_phys_offset, "a lone master confirms its max at once"

        slave = HaSlave(s_store, CFG, 2, 1, addr, 1, now_ms)
        slave.start()
        await until(lambda: same_log(m_store, s_store), "the slave to copy the log")
        await until(lambda: sorted(ha.view.members) == [1, 2], "the set to expand")
        assert alters == [([1, 2], 1)]
        await until(lambda: s_store.confirm_offset == m_store.confirm_offset, "the slave to adopt the confirm")

        end = put(m_store, 5, "b")
        ha.on_appended()
        assert m_store.confirm_offset < end, "confirm waits for the set"
        assert await ha.wait_replicated(end) is None
        assert m_store.confirm_offset == end and s_store.max_phys_offset == end
        assert len(m_store.get("t", 0, 0, 100).records) == 55

        # The slave goes away: the master shrinks the set (a disconnected member is out at the next check)
        # and appends a record no slave has -- as if it crashed right after the append.
        await slave.stop()
        put(m_store, 1, "c")
        await until(lambda: sorted(ha.view.members) == [1], "the set to shrink", timeout_s=8)
        assert alters[-1] == ([1], 2)

        # Role swap: the slave store becomes master of epoch 2 and writes; the old master, which has an
        # unreplicated record of epoch 1, returns as its slave and must truncate it.
        ha.deactivate("test: role swap")
        await server.stop()
        s_store.epochs.start_epoch(2, s_store.max_phys_offset)
        ha2 = HaMaster(s_store, CFG, alter, now_ms)
        server2, addr2 = await serve(ha2)
        ha2.activate(2, 2, frozenset({2}), 3)
        put(s_store, 7, "d")
        ha2.on_appended()
        old = HaSlave(m_store, CFG, 1, 2, addr2, 2, now_ms)
        old.start()
        await until(lambda: same_log(s_store, m_store), "the old master to truncate and catch up")
        assert [(e.epoch, e.start_offset) for e in m_store.epochs.entries] == [(1, 0), (2, end)]
        bodies = [d.record.body for d in s_store.get("t", 0, 0, 100).records]
        assert not any(b.startswith(b"c-") for b in bodies), "the unreplicated record was cut"
        await old.stop()
        await ha2.close()
        await server2.stop()
        await ha.close()
        m_store.close()
        s_store.close()

    asyncio.run(go())


def test_handshake_refused_by_inactive_or_stale_master(tmp_path: Path) -> None:
    async def go() -> None:
        store = MessageStore.open(str(tmp_path / "m"), STORE, "cid")

        async def alter(members: frozenset[int], epoch: int) -> tuple[frozenset[int], int]:
            raise AssertionError("no alter expected")

        ha = HaMaster(store, CFG, alter, now_ms)
        hs = {"token": "tok", "broker_id": 2, "async_learner": False, "sync_from_last_file": False,
              "max_offset": 0, "master_epoch": 3}
        frame = Frame(0, 1, int(RequestCode.HA_HANDSHAKE), hs, None)  # type: ignore[arg-type]
        assert ha.handle_handshake(frame, None).code == ResponseCode.NOT_MASTER  # type: ignore[arg-type]
        store.epochs.start_epoch(2, 0)
        ha.activate(1, 2, frozenset({1}), 1)
        reply = ha.handle_handshake(frame, None)  # type: ignore[arg-type]
        assert reply.code == ResponseCode.NOT_MASTER and "stale" in reply.header["message"]
        await ha.close()
        store.close()

    asyncio.run(go())


def test_alter_with_unknown_outcome_keeps_the_union(tmp_path: Path) -> None:
    """rocketmq#5663 generalised: an AlterSyncStateSet whose reply was lost may have been applied, so acks keep
    needing the union until the controller's set is known (or a grace period shows it was not applied)."""

    async def go() -> None:
        store = MessageStore.open(str(tmp_path / "m"), STORE, "cid")
        clock = [1_000_000]
        outcomes: list[BaseException | None] = [RequestTimeout("lost reply"), None]
        refreshes: list[int] = []

        async def alter(members: frozenset[int], epoch: int) -> tuple[frozenset[int], int]:
            exc = outcomes.pop(0)
            if exc is not None:
                raise exc
            return members, epoch + 1

        ha = HaMaster(store, CFG, alter, lambda: clock[0], lambda: refreshes.append(1))
        store.epochs.start_epoch(1, 0)
        ha.activate(1, 1, frozenset({1}), 5)
        ha._propose(frozenset({1, 2}))
        await asyncio.sleep(0.01)
        assert ha.view.synchronizing and refreshes == [1], "unknown outcome: keep the proposal, ask for the set"
        ha.adopt_controller_set(frozenset({1}), 5)
        assert ha.view.synchronizing, "within the grace period the union stays in force"
        clock[0] += 3_001
        ha.adopt_controller_set(frozenset({1}), 5)
        assert not ha.view.synchronizing and ha.view.members == frozenset({1}), "not applied: abandoned"
        ha._propose(frozenset({1, 2}))
        await asyncio.sleep(0.01)
        assert ha.view.members == frozenset({1, 2}) and ha.view.epoch == 6 and not ha.view.synchronizing
        ha.adopt_controller_set(frozenset({1}), 5)  # a stale report changes nothing
        assert ha.view.members == frozenset({1, 2})
        await ha.close()
        store.close()

    asyncio.run(go())


def test_alter_refused_definitely_is_abandoned(tmp_path: Path) -> None:
    async def go() -> None:
        store = MessageStore.open(str(tmp_path / "m"), STORE, "cid")

        async def alter(members: frozenset[int], epoch: int) -> tuple[frozenset[int], int]:
            raise RpcError(ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH, "stale set epoch")

        ha = HaMaster(store, CFG, alter, now_ms)
        store.epochs.start_epoch(1, 0)
        ha.activate(1, 1, frozenset({1}), 5)
        ha._propose(frozenset({1, 2}))
        await asyncio.sleep(0.01)
        assert not ha.view.synchronizing and ha.view.members == frozenset({1})
        await ha.close()
        store.close()

    asyncio.run(go())


def test_sync_flush_replicates_only_fsynced_bytes_and_acks_only_fsynced_bytes(tmp_path: Path) -> None:
    """Under SYNC the master sends only bytes below its stable (synced) offset; the slave appends
    off the event loop, merging the batches that queue up during a slow fsync, and acks only what
    it has fsynced."""
    from system_under_test import failpoints
    from system_under_test.broker.store import FP_BEFORE_FSYNC, FlushPolicy

    sync = StoreConfig(segment_bytes=64 * 1024, max_message_bytes=16 * 1024, background_flush=False,
                       flush_policy=FlushPolicy.SYNC)

    async def go() -> None:
        m_store = MessageStore.open(str(tmp_path / "m"), sync, "cid")
        s_store = MessageStore.open(str(tmp_path / "s"), sync, "cid")
        ha = HaMaster(m_store, CFG, lambda members, epoch: _accept(members, epoch), now_ms)
        violations: list[str] = []
        read_raw, handle_ack = m_store.read_raw, ha.handle_ack

        def checked_read_raw(phys_offset: int, max_bytes: int) -> bytes:
            data = read_raw(phys_offset, max_bytes)
            if phys_offset + len(data) > m_store.stable_offset:
                violations.append(f"sent [{phys_offset}, {phys_offset + len(data)}) past {m_store.stable_offset}")
            return data

        def checked_ack(frame: Frame, conn: Connection) -> None:
            if int(frame.header["max_offset"]) > s_store.synced_offset:
                violations.append(f"ack {frame.header['max_offset']} past synced {s_store.synced_offset}")
            handle_ack(frame, conn)

        m_store.read_raw = checked_read_raw  # type: ignore[method-assign]
        ha.handle_ack = checked_ack  # type: ignore[method-assign]
        server, addr = await serve(ha)
        m_store.epochs.start_epoch(1, 0)
        ha.activate(1, 1, frozenset({1}), 1)
        slave = HaSlave(s_store, CFG, 2, 1, addr, 1, now_ms)
        slave.start()
        await until(lambda: sorted(ha.view.members) == [1, 2], "the set to expand")
        failpoints.arm(FP_BEFORE_FSYNC, "delay(30)")  # slow disks: transfers queue up behind each append
        try:
            ends = []
            start, fsyncs_before = m_store.max_phys_offset, s_store.fsync_stats()["fsyncs"]
            for i in range(3):  # each put is ~40 transfer batches (4 KiB) that reach the slave at once
                ends.append(await asyncio.to_thread(put, m_store, 150, f"p{i}"))
                ha.on_appended()
            results = await asyncio.gather(*(ha.wait_replicated(e) for e in ends))
        finally:
            failpoints.disarm(FP_BEFORE_FSYNC)
        assert results == [None] * len(ends)
        await until(lambda: same_log(m_store, s_store), "the slave to copy the log")
        batches = (m_store.max_phys_offset - start) // CFG.ha_transfer_batch_bytes
        assert s_store.fsync_stats()["fsyncs"] - fsyncs_before < batches / 4, "queued batches share an fsync"
        assert violations == []
        await slave.stop()
        await ha.close()
        await server.stop()
        m_store.close()
        s_store.close()

    asyncio.run(go())


async def _accept(members: frozenset[int], epoch: int) -> tuple[frozenset[int], int]:
    return members, epoch + 1


def test_stopping_a_connected_slave_does_not_wait_out_the_retry_pause(tmp_path: Path,
                                                                      monkeypatch: object) -> None:
    """stop() closes the session's connection and cancels its task; the close can end the session first and
    asyncio.wait_for may then swallow the cancellation.  The loop must see ``stopped`` instead of sleeping
    RETRY_S: every role change of a slave (a failover's new master, the other slaves) stops its client."""
    import pytest

    from system_under_test.broker import ha_slave

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    monkeypatch.setattr(ha_slave, "RETRY_S", 600.0)  # only a stop that skips the pause ends in time

    async def go() -> None:
        m_store = MessageStore.open(str(tmp_path / "m"), STORE, "cid")
        s_store = MessageStore.open(str(tmp_path / "s"), STORE, "cid")
        ha = HaMaster(m_store, CFG, _accept, now_ms)
        server, addr = await serve(ha)
        m_store.epochs.start_epoch(1, 0)
        ha.activate(1, 1, frozenset({1}), 1)
        put(m_store, 3, "a")
        ha.on_appended()
        for _ in range(5):  # the race is timing-dependent: several stops, each must end at once
            slave = HaSlave(s_store, CFG, 2, 1, addr, 1, now_ms)
            slave.start()
            await until(lambda s=slave: s.state == "TRANSFER", "the session to start")
            stopping = asyncio.ensure_future(slave.stop())
            done, _ = await asyncio.wait({stopping}, timeout=30)
            if not done:  # end the test instead of its pause: cancel the retry sleep, then fail
                assert slave._task is not None
                slave._task.cancel()
                await stopping
            assert done, "stop() waited out the retry pause"
        ha.deactivate("test over")
        await server.stop()
        m_store.close()
        s_store.close()

    asyncio.run(go())
