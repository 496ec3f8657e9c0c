"""The role-change executor (broker/role_change.py) runs exactly the steps its cores return.

The executor is shell glue: here it acts on a real store and a real HaMaster, on a stand-in for the
:class:`~system_under_test.broker.lifecycle.Broker` (only the attributes of ``BrokerState``) and on
a recording stand-in for the HA client (a real one would dial the master).

The truncation question of issue 18 is decided by the seed (RIP-44, *Algorithm Consistency Proof*):
"each broker becomes Master and truncates the commitlog to the boundary of the last message".  A
store's max offset is such a boundary by construction (a torn tail is cut when the store opens:
``tests/unit/broker_store/test_store.py``), so becoming master truncates nothing: a tail beyond the
confirm offset -- records the old master may have acknowledged -- stays, and the new epoch starts
after it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import os
import typing
from pathlib import Path
from typing import Any

import pytest

import system_under_test.broker.role_change as role_change
from system_under_test.broker.config import BrokerConfig
from system_under_test.broker.ha import role
from system_under_test.broker.ha_master import HaMaster
from system_under_test.broker.roles import Role
from system_under_test.broker.store import MessageStore, Record, StoreConfig
from system_under_test.clock import CLOCK

CFG = BrokerConfig(cluster_name="c", broker_name="b", listen="127.0.0.1:9", store_dir="/x",
                   controllers=("127.0.0.1:1",), token="tok")
STORE = StoreConfig(segment_bytes=64 * 1024, max_message_bytes=16 * 1024, background_flush=False)


class RecordingHaClient:
    """Stands in for HaSlave: records start and stop."""

    instances: list[RecordingHaClient] = []

    def __init__(self, store: MessageStore, cfg: BrokerConfig, broker_id: int, master_id: int, master_addr: str,
                 master_epoch: int, now_ms: Any) -> None:
        self.master = (master_id, master_addr, master_epoch)
        self.calls: list[str] = []
        RecordingHaClient.instances.append(self)

    def start(self) -> None:
        self.calls.append("start")

    async def stop(self) -> None:
        self.calls.append("stop")


@dataclasses.dataclass
class StandInBroker:
    """The attributes of BrokerState the executor uses."""

    store: MessageStore
    ha_master: HaMaster
    cfg: BrokerConfig = CFG
    offsets: None = None
    ha_slave: Any = None
    role: Role = Role.NONE
    broker_id: int = 1
    routing_broker_id: int = 1
    master_epoch: int = 0
    master_id: int | None = None
    master_addr: str | None = None
    shutting_down: bool = False

    def lease_valid(self) -> bool:
        return True

    def runtime_info(self) -> dict[str, Any]:
        return {}

    def request_shutdown(self) -> None:
        pass


@pytest.fixture
def broker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StandInBroker:
    monkeypatch.setattr(role_change, "HaSlave", RecordingHaClient)
    RecordingHaClient.instances = []
    store = MessageStore.open(str(tmp_path / "s"), STORE, "cid")

    async def alter(members: frozenset[int], set_epoch: int) -> tuple[frozenset[int], int]:
        return members, set_epoch + 1

    return StandInBroker(store, HaMaster(store, CFG, alter, CLOCK.monotonic_ms))


def put(store: MessageStore, n: int) -> int:
    res = store.put([Record("t", 0, f"m{i}".encode() * 20) for i in range(n)])
    return res[-1].phys_offset + res[-1].size


def run(coro: Any) -> None:
    async def go() -> None:
        await coro

    asyncio.run(go())


# One instance of every step kind, and what executing it alone does to the broker.
EXAMPLES: dict[type, role.RoleStep] = {
    role.StopHaClient: role.StopHaClient(),
    role.DropSlaveConnections: role.DropSlaveConnections(),
    role.StopAcceptingWrites: role.StopAcceptingWrites(),
    role.AppendEpochEntry: role.AppendEpochEntry(7, 0),
    role.RecomputeConfirmOffset: role.RecomputeConfirmOffset(),
    role.RegisterRouting: role.RegisterRouting(0),
    role.AcceptWrites: role.AcceptWrites(7),
    role.StartHaClient: role.StartHaClient(2, "127.0.0.1:2", 7),
}


def test_every_step_kind_of_the_core_has_an_example() -> None:
    defined = {obj for _, obj in inspect.getmembers(role, inspect.isclass)
               if dataclasses.is_dataclass(obj) and obj.__module__ == role.__name__ and obj is not role.RoleDecision}
    assert set(typing.get_args(role.RoleStep)) == defined == set(EXAMPLES)


@pytest.mark.parametrize("kind", list(EXAMPLES), ids=lambda k: k.__name__)
def test_every_step_kind_is_executed(broker: StandInBroker, kind: type) -> None:
    b = broker
    end = put(b.store, 3)
    old_client = RecordingHaClient(b.store, CFG, 1, 2, "x", 1, None)
    b.ha_slave, b.role = old_client, Role.MASTER if kind is role.StopAcceptingWrites else Role.NONE

    async def go() -> None:
        b.ha_master.activate(1, 1, frozenset({1}), 1)  # active, confirm offset still 0
        await role_change.run_role_steps(b, [EXAMPLES[kind]], "test", role_change.SyncStateSet(frozenset({1}), 3))

    asyncio.run(go())
    effect = {
        role.StopHaClient: lambda: old_client.calls == ["stop"] and b.ha_slave is None,
        role.DropSlaveConnections: lambda: not b.ha_master.active,
        role.StopAcceptingWrites: lambda: b.role is Role.SLAVE,
        role.AppendEpochEntry: lambda: [(e.epoch, e.start_offset) for e in b.store.epochs.entries] == [(7, 0)],
        role.RecomputeConfirmOffset: lambda: b.store.confirm_offset == end,
        role.RegisterRouting: lambda: b.routing_broker_id == 0,
        role.AcceptWrites: lambda: (b.role, b.master_epoch, b.master_id, b.ha_master.master_epoch,
                                    b.ha_master.view.epoch) == (Role.MASTER, 7, 1, 7, 3),
        role.StartHaClient: lambda: (b.ha_slave is not old_client and b.ha_slave.calls == ["start"]
                                     and b.ha_slave.master == (2, "127.0.0.1:2", 7) and b.master_epoch == 7),
    }[kind]
    assert effect(), f"{kind.__name__} was not carried out"
    b.store.close()


def test_an_unknown_step_kind_raises(broker: StandInBroker) -> None:
    with pytest.raises(AssertionError):
        run(role_change.run_role_steps(broker, [object()], "test", role_change.SyncStateSet()))  # type: ignore[list-item]
    broker.store.close()


def test_become_master_stops_the_ha_client_then_keeps_the_tail_beyond_the_confirm_offset(
    broker: StandInBroker,
) -> None:
    b = broker
    b.store.epochs.start_epoch(1, 0)
    confirmed = put(b.store, 5)
    b.store.set_confirm_offset(confirmed)
    end = put(b.store, 5)  # replicated here, not yet confirmed to us: the old master may have acknowledged it
    tail = b.store.read_raw(confirmed, 1 << 20)
    client = b.ha_slave = RecordingHaClient(b.store, CFG, 1, 2, "x", 1, None)
    b.role, b.master_epoch = Role.SLAVE, 1

    async def go() -> None:
        await role_change.become_master(b, 2, role_change.SyncStateSet(frozenset({1}), 4), "test")
        await b.ha_master.close()

    asyncio.run(go())
    assert client.calls == ["stop"] and b.ha_slave is None
    assert b.store.max_phys_offset == end and b.store.read_raw(confirmed, 1 << 20) == tail, "nothing truncated"
    assert [(e.epoch, e.start_offset) for e in b.store.epochs.entries] == [(1, 0), (2, end)]
    assert (b.role, b.master_epoch, b.routing_broker_id) == (Role.MASTER, 2, 0)
    assert b.store.confirm_offset == end, "the set is {new master}: all it holds becomes visible"
    b.store.close()


def test_become_master_after_a_torn_tail_starts_the_epoch_at_the_last_whole_record(tmp_path: Path) -> None:
    d = str(tmp_path / "torn")
    store = MessageStore.open(d, STORE, "cid")
    store.epochs.start_epoch(1, 0)
    whole = put(store, 4)
    put(store, 1)
    store.close(clean=False)
    seg = sorted(os.listdir(os.path.join(d, "commitlog")))[-1]
    os.truncate(os.path.join(d, "commitlog", seg), whole + 5 - int(seg))  # half a record survives the crash
    store = MessageStore.open(d, STORE, "cid")
    assert store.max_phys_offset == whole

    async def alter(members: frozenset[int], set_epoch: int) -> tuple[frozenset[int], int]:
        return members, set_epoch + 1

    b = StandInBroker(store, HaMaster(store, CFG, alter, CLOCK.monotonic_ms))

    async def go() -> None:
        await role_change.become_master(b, 2, role_change.SyncStateSet(frozenset({1}), 1), "test")
        await b.ha_master.close()

    asyncio.run(go())
    assert [(e.epoch, e.start_offset) for e in store.epochs.entries] == [(1, 0), (2, whole)]
    store.close()


def test_become_slave_runs_the_slave_steps(broker: StandInBroker) -> None:
    b = broker

    async def go() -> None:
        b.ha_master.activate(1, 1, frozenset({1}), 1)
        b.role, b.master_epoch, b.routing_broker_id = Role.MASTER, 1, 0
        await role_change.become_slave(b, 2, "127.0.0.1:2", 2, "test")

    asyncio.run(go())
    assert (b.role, b.master_epoch, b.master_id, b.master_addr, b.routing_broker_id) == (
        Role.SLAVE, 2, 2, "127.0.0.1:2", 1)
    assert not b.ha_master.active and b.ha_slave.calls == ["start"]
    b.store.close()
