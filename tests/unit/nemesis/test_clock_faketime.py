"""The clock nemesis through the DB's Clocks (both ``clock-admin`` and ``clock-faketime`` offer it), and a
change that does not take effect on a node is reported as such (left out of ``nodes``, named under ``not_taken``;
an ``error`` when no node took it, so accounting counts the fault as not effective)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from harness.node_processes import FaketimeError
from harness.protocols import Clocks
from nemesis.accounting import judge
from nemesis.clock import ClockNemesis
from systems.splitbrain.selectors import SELECTORS


class FakeClockDB:
    """Clocks as a table; nodes in ``refuse`` raise what a DB raises for a change that did not take effect."""

    def __init__(self, refuse: Mapping[str, str] | None = None) -> None:
        nodes = SimpleNamespace(controllers=("c1", "c2"), broker_sets=(), selectors=SELECTORS)
        self.spec = SimpleNamespace(nodes=nodes,
                                    nemesis=SimpleNamespace(role_wait_s=0.1))
        self.refuse = dict(refuse or {})
        self.clocks: dict[str, dict[str, float]] = {n: {"offset_ms": 0.0, "rate": 1.0} for n in ("c1", "c2")}
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def _check(self, node: str) -> None:
        if node in self.refuse:
            raise FaketimeError(self.refuse[node])

    async def set_clock(self, test: dict[str, Any], node: str, *, offset_ms: float | None = None,
                        rate: float | None = None, reset: bool = False) -> Mapping[str, Any]:
        self._check(node)
        self.calls.append((node, {"offset_ms": offset_ms, "rate": rate, "reset": reset}))
        c = self.clocks[node]
        if reset:
            c.update(offset_ms=0.0, rate=1.0)
        if offset_ms is not None:
            c["offset_ms"] = offset_ms
        if rate is not None:
            c["rate"] = rate
        return await self.read_clock(test, node)

    async def read_clock(self, test: dict[str, Any], node: str) -> Mapping[str, Any]:
        self._check(node)
        c = self.clocks[node]
        return {**c, "skew_ms": c["offset_ms"], "line": f"{c['offset_ms'] / 1000:+.6f} x{c['rate']:g}"}


def invoke(nem: ClockNemesis, f: str, value: Any = None) -> dict[str, Any]:
    return asyncio.run(nem.invoke({}, {"type": "invoke", "process": "nemesis", "f": f, "value": value}))


def test_the_nemesis_sets_clocks_only_through_the_dbs_clocks() -> None:
    db = FakeClockDB()
    assert isinstance(db, Clocks)
    nem = ClockNemesis(db, random.Random(1))
    out = invoke(nem, "bump-clock", {"targets": "all", "delta_ms": 30_000})
    assert "error" not in out and out["value"]["nodes"] == ["c1", "c2"]
    out = invoke(nem, "bump-clock", {"targets": "c1", "delta_ms": 30_000})  # bumps add up
    assert out["value"]["offsets"]["c1"]["offset_ms"] == 60_000 and judge(out) == (True, None)
    out = invoke(nem, "skew-clock", {"targets": "c2", "rate": 2.0})
    assert out["value"]["offsets"]["c2"]["rate"] == 2.0
    out = invoke(nem, "check-clock-offsets")
    assert out["value"]["c1"]["skew_ms"] == 60_000 and out["value"]["c2"]["rate"] == 2.0
    out = invoke(nem, "reset-clock")
    assert out["value"] == {"reset": ["c1", "c2"], "unreachable": {}}
    assert db.clocks == {"c1": {"offset_ms": 0.0, "rate": 1.0}, "c2": {"offset_ms": 0.0, "rate": 1.0}}


def test_a_node_whose_clock_did_not_change_is_named_and_not_counted() -> None:
    db = FakeClockDB(refuse={"c2": "counter service c2 (pid 7) runs without libfaketime: not found"})
    nem = ClockNemesis(db, random.Random(1))
    out = invoke(nem, "bump-clock", {"targets": "all", "delta_ms": 1000})
    assert out["value"]["nodes"] == ["c1"] and judge(out) == (True, None)
    assert out["value"]["not_taken"] == {"c2": "counter service c2 (pid 7) runs without libfaketime: not found"}
    out = invoke(nem, "skew-clock", {"targets": "c2", "rate": 3})
    ok, why = judge(out)
    assert not ok and why is not None and "skew-clock took effect on no node" in why and "c2: counter service" in why
    assert db.clocks["c2"]["rate"] == 1.0


def test_a_strobe_flips_only_the_nodes_that_can_take_it_and_ends_at_zero() -> None:
    db = FakeClockDB(refuse={"c2": "not running"})
    nem = ClockNemesis(db, random.Random(1))

    async def strobe() -> dict[str, Any]:
        out = await nem.invoke({}, {"type": "invoke", "process": "nemesis", "f": "strobe-clock",
                                    "value": {"targets": "all", "delta_ms": 200, "period_ms": 10, "duration_s": 0.1}})
        await asyncio.gather(*nem._strobes)
        return out
    out = asyncio.run(strobe())
    assert out["value"]["nodes"] == ["c1"] and out["value"]["not_taken"] == {"c2": "not running"}
    offsets = [c["offset_ms"] for n, c in db.calls if n == "c1"]
    assert 200 in offsets and offsets[-1] == 0.0 and {n for n, _ in db.calls} == {"c1"}
