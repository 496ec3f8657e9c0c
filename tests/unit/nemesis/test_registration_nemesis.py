"""The ``registration-crash`` nemesis drives a system only through the ``Registration`` capability
(harness.protocols): the failpoint names, the broker nodes and the extra broker slots come from the DB."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.protocols import ExtraBrokerSlots, Registration
from nemesis.registration import RegistrationCrashNemesis


@dataclass
class FakeSlots:
    """Records every call; a start serves with id 7, a crash is hit."""

    calls: list[tuple[Any, ...]] = field(default_factory=list)
    pids: dict[tuple[str, str], int] = field(default_factory=dict)

    def addr(self, test: Mapping[str, Any], node: str, port: int) -> str:
        return f"{node}:{port}"

    async def start_slot(self, test: Mapping[str, Any], node: str, slot: str, broker_name: str, port: int, *,
                         timeout_s: float = 8.0) -> dict[str, Any]:
        self.calls.append(("start", node, slot, broker_name, port))
        return {"broker_id": 7, "broker_epoch": 1, "addr": self.addr(test, node, port), "role": "slave"}

    async def crash_at(self, test: Mapping[str, Any], node: str, slot: str, broker_name: str, port: int,
                       failpoint: str, *, timeout_s: float = 8.0) -> dict[str, Any]:
        self.calls.append(("crash", node, slot, port, failpoint))
        return {"failpoint": failpoint, "hit": True, "files": {}}

    async def kill(self, test: Mapping[str, Any], node: str, slot: str) -> None:
        self.calls.append(("kill", node, slot))

    async def terminate(self, test: Mapping[str, Any], node: str, slot: str) -> None:
        self.calls.append(("terminate", node, slot))

    async def alive(self, test: Mapping[str, Any], node: str, slot: str) -> bool:
        return False

    async def runtime_info(self, test: Mapping[str, Any], node: str, port: int) -> dict[str, Any]:
        return {}

    async def kill_all(self, test: Mapping[str, Any]) -> None:
        self.calls.append(("kill_all",))


@dataclass
class FakeDB:
    slots: FakeSlots = field(default_factory=FakeSlots)
    roots: list[str] = field(default_factory=list)
    registration_failpoints: tuple[str, ...] = ("fresh.step", "restart.step")
    first_registration_failpoints: frozenset[str] = frozenset({"fresh.step"})
    broker_nodes: tuple[str, ...] = ("b1", "b2")

    def extra_brokers(self, root: str) -> ExtraBrokerSlots:
        self.roots.append(root)
        return self.slots


def test_the_walk_comes_from_the_db_and_a_restart_point_registers_first() -> None:
    db = FakeDB()
    assert isinstance(db, Registration) and isinstance(db.slots, ExtraBrokerSlots)
    nem = RegistrationCrashNemesis(db, random.Random(0), base_port=100)
    first = asyncio.run(nem.invoke({}, {"type": "invoke", "f": "registration-crash", "value": None}))
    second = asyncio.run(nem.invoke({}, {"type": "invoke", "f": "registration-crash", "value": None}))
    asyncio.run(nem.teardown({}))
    assert db.roots == ["rcrash"]
    assert (first["value"]["failpoint"], second["value"]["failpoint"]) == ("fresh.step", "restart.step")
    assert "first" not in first["value"] and second["value"]["first"]["broker_id"] == 7
    assert db.slots.calls == [
        ("crash", "b1", "rc0", 100, "fresh.step"), ("start", "b1", "rc0", "rcrash-0", 101), ("kill", "b1", "rc0"),
        ("start", "b2", "rc1", "rcrash-0", 102), ("kill", "b2", "rc1"), ("crash", "b2", "rc1", 102, "restart.step"),
        ("start", "b2", "rc1", "rcrash-0", 103), ("kill", "b2", "rc1"),
        ("kill_all",)]
    assert second["value"]["identity"] == "b2/rc1" and second["type"] == "info"
