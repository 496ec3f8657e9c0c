"""The controller's per-write fast paths give exactly what the plain paths give.

* the leader applies its own entries from the events it encoded, not from decoding them again;
* events decoded through ``slot_constructor`` are validated as their constructor validates;
* ``start_eagerly`` runs a failpoint hit in place and hands back the rest only when it waits.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from eventloop import start_eagerly
from system_under_test.controller.config import ControllerConfig
from system_under_test.controller.errors import EventError
from system_under_test.controller.events import (
    ApplyBrokerId,
    CleanBrokerData,
    FenceBroker,
    UpdateBrokerAddress,
    decode_events,
    encode_events,
    event_from_wire,
    event_to_wire,
)
from system_under_test.controller.metadata import BrokerInfo, BrokerSet
from system_under_test.controller.records import slot_constructor
from system_under_test.controller.server import ControllerStateMachine, NodeOptions


def _sm() -> ControllerStateMachine:
    opts = NodeOptions(node_id="c1", peers={"c1": "127.0.0.1:1"}, data_dir=Path("/nonexistent"), token="t",
                       controller=ControllerConfig(cluster_name="c"), wait_for=1)
    return ControllerStateMachine(opts)


def test_leader_applies_its_own_entries_like_a_follower() -> None:
    leader, follower = _sm(), _sm()
    entries = [
        [ApplyBrokerId("c", "b", 1, "a:1", "code1"), ApplyBrokerId("c", "b", 2, "a:2", "code2")],
        [UpdateBrokerAddress("c", "b", 1, "x:1"), UpdateBrokerAddress("c", "b", 3, "x:3")],  # 3: rejected
        [CleanBrokerData("c", "b", (2,)), UpdateBrokerAddress("c", "b", 1, "y:1")],
    ]
    for index, events in enumerate(entries, start=1):
        data = leader.encode(list(events))
        assert data == encode_events(events)
        assert leader.apply(index, data) == follower.apply(index, data)
    assert leader.state == follower.state
    assert not leader._encoded  # applied entries are forgotten


def test_remembered_entries_are_bounded() -> None:
    sm = _sm()
    for i in range(sm.MAX_REMEMBERED + 10):  # proposed, never applied here (lost leadership)
        sm.encode([UpdateBrokerAddress("c", "b", 1, f"z:{i}")])
    assert len(sm._encoded) == sm.MAX_REMEMBERED


@pytest.mark.parametrize("wire, match", [
    ([6, {"cluster_name": "c", "broker_name": "", "broker_id": 1, "broker_addr": "a"}], "broker_name"),
    ([6, {"cluster_name": "c", "broker_name": "b", "broker_id": 0, "broker_addr": "a"}], "broker_id"),
    ([8, {"cluster_name": "c", "broker_name": "b", "broker_id": 1, "broker_epoch": -1}], "broker_epoch"),
    ([5, {"cluster_name": "c", "broker_name": "b", "broker_ids": [2, 1]}], "sorted"),
])
def test_decoded_events_are_still_validated(wire: list[Any], match: str) -> None:
    with pytest.raises(EventError, match=match):
        event_from_wire(wire)


def test_decoded_events_equal_constructed_ones_and_stay_frozen() -> None:
    events = [FenceBroker("c", "b", 1, 7), CleanBrokerData("c", "b", (1, 2)), UpdateBrokerAddress("c", "b", 1, "a")]
    decoded = decode_events(encode_events(events))
    assert decoded == events and [type(e) for e in decoded] == [type(e) for e in events]
    assert [event_to_wire(e) for e in decoded] == [event_to_wire(e) for e in events]
    with pytest.raises(dataclasses.FrozenInstanceError):
        decoded[0].broker_epoch = 8  # type: ignore[misc]


def test_slot_constructor_builds_the_same_frozen_record() -> None:
    make = slot_constructor(BrokerSet)
    info = BrokerInfo(1, "a:1", "code")
    assert make("c", "b", 2, (info,), 1, 3, (1,), 4) == BrokerSet("c", "b", 2, (info,), 1, 3, (1,), 4)
    assert BrokerSet("c", "b").with_address(1, "z") is None
    moved = BrokerSet("c", "b", 2, (info,)).with_address(1, "z:1")
    assert moved is not None and moved.brokers == (BrokerInfo(1, "z:1", "code"),)
    with pytest.raises(dataclasses.FrozenInstanceError):
        moved.master_id = 5  # type: ignore[misc]

    @dataclasses.dataclass
    class Plain:
        x: int

    with pytest.raises(TypeError, match="slotted dataclass"):
        slot_constructor(Plain)


def test_start_eagerly_runs_in_place_and_resumes_only_what_waits() -> None:
    async def quick(log: list[str]) -> int:
        log.append("quick")
        return 1

    async def waits(log: list[str]) -> int:
        log.append("a")
        await asyncio.sleep(0.01)
        log.append("b")
        await asyncio.sleep(0)
        log.append("c")
        return 5

    async def boom() -> None:
        raise KeyError("x")

    async def main() -> None:
        log: list[str] = []
        assert start_eagerly(quick(log)) is None and log == ["quick"]
        log.clear()
        rest = start_eagerly(waits(log))
        assert rest is not None and log == ["a"]
        assert await rest == 5 and log == ["a", "b", "c"]
        with pytest.raises(KeyError):
            start_eagerly(boom())
        log.clear()
        rest = start_eagerly(waits(log))
        assert rest is not None

        async def finish() -> Any:
            return await rest

        task = asyncio.ensure_future(finish())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert log == ["a"]  # the cancellation reached the coroutine while it slept

    asyncio.run(main())
