"""KIP-380 on the broker: a NOTIFY_BROKER_ROLE_CHANGED for another broker epoch is rejected."""

from __future__ import annotations

import asyncio

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
