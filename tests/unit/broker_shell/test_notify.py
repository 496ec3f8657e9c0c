"""KIP-380 on the broker: a NOTIFY_BROKER_ROLE_CHANGED for another broker epoch is rejected."""

from __future__ import annotations

import asyncio
import dataclasses

from system_under_test.broker.config import BrokerConfig
from system_under_test.broker.lifecycle import Broker
from system_under_test.protocol import Frame, Kind, RequestCode, ResponseCode

CFG = BrokerConfig(cluster_name="c", broker_name="b", listen="127.0.0.1:9000", store_dir="/nonexistent",
                   controllers=("127.0.0.1:1",), token="t")


def notify(broker_epoch: int | None, kind: Kind = Kind.REQUEST) -> Frame:
    header = {"broker_name": "b", "master_id": None, "master_addr": None, "master_epoch": 3,
              "sync_state_set": [], "sync_state_set_epoch": 1}
    if broker_epoch is not None:
        header["broker_epoch"] = broker_epoch
    return Frame(kind, 1, int(RequestCode.NOTIFY_BROKER_ROLE_CHANGED), header, None)


def test_stale_and_current_broker_epoch() -> None:
    async def go() -> None:
        b = Broker(CFG, seed=1)
        b.broker_epoch = 7
        stale = await b._on_controller_frame(notify(6), None)  # type: ignore[arg-type]
        assert stale is not None and stale.code == ResponseCode.STALE_BROKER_EPOCH
        assert "6" in stale.header["message"] and "7" in stale.header["message"]
        await b._on_controller_frame(notify(6, Kind.ONEWAY), None)  # type: ignore[arg-type]
        assert not b._tasks, "a stale push must not trigger a role change"
        ok = await b._on_controller_frame(notify(7), None)  # type: ignore[arg-type]
        assert ok is not None and ok.code == ResponseCode.SUCCESS
        assert len(b._tasks) == 1  # the role change is processed asynchronously
        await asyncio.gather(*b._tasks)
        other = await b._on_controller_frame(Frame(Kind.REQUEST, 2, int(RequestCode.SEND_MESSAGE), {}, None),
                                             None)  # type: ignore[arg-type]
        assert other is not None and other.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED

    asyncio.run(go())


def test_incarnation_id_is_random_per_process_even_with_the_same_seed() -> None:
    """A replayed seed must not make a restart look like the same incarnation (KIP-631)."""
    assert Broker(CFG, seed=1).incarnation_id != Broker(CFG, seed=1).incarnation_id
    assert Broker(CFG).incarnation_id != Broker(CFG).incarnation_id


def test_lease_expiry_and_clock_going_back_fence_the_broker() -> None:
    from system_under_test.clock import CLOCK

    now_ms = CLOCK.monotonic_ms
    from system_under_test.clock import CLOCK

    b = Broker(CFG, seed=1)
    b.fenced, b.last_renew_ms = False, now_ms()
    assert b.lease_valid()
    b.last_renew_ms = now_ms() - CFG.lease_timeout_ms - 1
    assert not b.lease_valid() and b.fenced, "an expired lease fences"
    b.fenced, b.last_renew_ms = False, now_ms()
    assert b.lease_valid()
    try:
        CLOCK.set(offset_ms=-5000.0)
        assert not b.lease_valid(), "a clock that went back cannot vouch for the lease"
        sent_before_jump = now_ms() + 4000
        b._on_heartbeat_reply({"fenced": False}, sent_before_jump)
        assert b.fenced, "a heartbeat sent before the jump does not renew"
        b._on_heartbeat_reply({"fenced": False}, now_ms())
        assert b.lease_valid(), "a heartbeat sent after the jump renews"
    finally:
        CLOCK.reset()


def test_an_expired_lease_answers_the_puts_waiting_for_acks_at_once(tmp_path: object) -> None:
    """A master that fences itself refuses new sends; a put already waiting for a slave's ack must not hold
    its client for the whole flush-slave timeout while a successor serves (bench/failover.py)."""
    from pathlib import Path

    from system_under_test.broker.ha_master import HaMaster
    from system_under_test.broker.store import MessageStore, Record, StoreConfig
    from system_under_test.clock import CLOCK

    async def go() -> None:
        store = MessageStore.open(str(Path(str(tmp_path)) / "s"), StoreConfig(background_flush=False), "cid")

        async def alter(members: frozenset[int], set_epoch: int) -> tuple[frozenset[int], int]:
            return members, set_epoch

        cfg = dataclasses.replace(CFG, flush_slave_timeout_ms=600_000)  # only the fencing can answer in time
        b = Broker(cfg, seed=1)
        b.ha_master = HaMaster(store, cfg, alter, CLOCK.monotonic_ms)
        b.ha_master.activate(1, 1, frozenset({1, 2}), 1)  # slave 2 never acks
        (put,) = store.put([Record(topic="t", queue_id=0, body=b"x")])
        waiting = asyncio.ensure_future(b.ha_master.wait_replicated(put.phys_offset + put.size))
        await asyncio.sleep(0.01)
        assert not waiting.done(), "the put waits for slave 2"
        b.fenced, b.last_renew_ms = False, CLOCK.monotonic_ms() - CFG.lease_timeout_ms - 1
        assert not b.lease_valid()
        assert await asyncio.wait_for(waiting, 60) == ResponseCode.FLUSH_SLAVE_TIMEOUT
        b.ha_master.deactivate("test over")
        store.close()

    asyncio.run(go())
