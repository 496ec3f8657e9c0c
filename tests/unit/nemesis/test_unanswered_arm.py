"""A failpoint armed by a request nobody answered may still fire (a stopped node reads the request when it resumes): a
node the DB paused is not armed at all, ``crash-at`` watches and restarts a node whose arm went unanswered, and the
final heal starts any node whose process is gone, whatever stopped it. Nemesis shells over a fake DB and a fake
admin connection; what is under test is only the bookkeeping (a control run at base 4f8693d left a controller dead
this way: the arm timed out while the node was paused, the nemesis reported it unarmed, the node crashed at the step
6 s later on resume and nobody started it again, so the availability checker saw writes stop under what it thought
was one dead controller)."""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace
from typing import Any

import pytest

from nemesis import failpoint
from nemesis.failpoint import FailpointNemesis, admin_failpoints
from nemesis.process import ProcessNemesis
from system_under_test.protocol import ConnectionLost, ResponseCode, RpcError


class FakeDB:
    """Nodes c1..c3 (controllers) and b1 (a broker); ``dead`` nodes are not alive; ``start`` revives one."""

    token = "t"

    def __init__(self, dead: set[str] | None = None) -> None:
        nodes = SimpleNamespace(controllers=("c1", "c2", "c3"), broker_sets=(("b1",),))
        self.spec = SimpleNamespace(nodes=nodes, nemesis=SimpleNamespace(role_wait_s=0.1))
        self.dead = set(dead or ())
        self.started: list[str] = []
        self.die_after_checks: dict[str, int] = {}

    async def primaries(self, test: dict[str, Any]) -> list[str]:
        return ["c1", "b1"]

    async def alive(self, test: dict[str, Any], node: str) -> bool:
        left = self.die_after_checks.get(node)
        if left is not None:
            if left <= 0:
                self.dead.add(node)
                del self.die_after_checks[node]
            else:
                self.die_after_checks[node] = left - 1
        return node not in self.dead

    async def start(self, test: dict[str, Any], node: str) -> None:
        self.started.append(node)
        self.dead.discard(node)

    async def wait_ready(self, test: dict[str, Any], node: str, timeout_s: float | None = None) -> None:
        return None

    def admin_addr(self, test: dict[str, Any], node: str) -> str:
        return node


class FakeConn:
    def __init__(self, error: Exception | None) -> None:
        self.error = error

    async def request(self, code: Any, header: Any, timeout_s: float) -> None:
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        return None


def fake_connect(errors: dict[str, Exception | None]) -> Any:
    async def connect(addr: str, timeout_s: float) -> FakeConn:
        return FakeConn(errors.get(addr))
    return connect


def test_an_unanswered_request_is_unknown_a_refusal_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(failpoint, "connect", fake_connect({
        "c1": ConnectionLost("nothing from the peer for 1.50s"),
        "c2": RpcError(ResponseCode.SYSTEM_ERROR, "no such failpoint"),
        "c3": None,
    }))
    got = asyncio.run(admin_failpoints(FakeDB(), {}, ["c1", "c2", "c3"], "arm-failpoint", "raft.before_apply"))
    assert got["c1"].startswith("unknown: ") and got["c2"].startswith("error: ") and got["c3"] == "ok"


def test_crash_at_watches_and_restarts_a_node_whose_arm_went_unanswered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(failpoint, "connect", fake_connect({"c2": ConnectionLost("no answer")}))
    db = FakeDB()
    db.die_after_checks["c2"] = 3  # the paused node resumes, reads the arm and dies at the step a while later
    nem = FailpointNemesis(db, random.Random(1))
    out = asyncio.run(nem._crash_at({}, {"targets": "c2", "name": "broker.x", "timeout_s": 5.0, "trigger": "none"}))
    report = out["nodes"]["c2"]
    assert report["armed"].startswith("unknown: ")
    assert report["crashed"] is not False and report["restarted"] == "ready" and db.started == ["c2"]


def test_the_final_heal_starts_every_dead_node_a_bare_start_only_its_own() -> None:
    db = FakeDB(dead={"c1"})  # c1 died, not by this nemesis
    nem = ProcessNemesis(db, random.Random(1))
    assert asyncio.run(nem._start({}, None)) == [] and db.started == []
    assert asyncio.run(nem._start({}, "dead")) == ["c1"] and db.started == ["c1"]


class PausingDB(FakeDB):
    def __init__(self, paused: set[str]) -> None:
        super().__init__()
        self.paused = paused

    def is_paused(self, node: str) -> bool:
        return node in self.paused


def test_a_paused_node_is_not_armed(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[str] = []

    async def connect(addr: str, timeout_s: float) -> FakeConn:
        sent.append(addr)
        return FakeConn(None)
    monkeypatch.setattr(failpoint, "connect", connect)
    got = asyncio.run(admin_failpoints(PausingDB({"c1"}), {}, ["c1", "c2"], "arm-failpoint", "raft.before_apply"))
    assert got["c1"].startswith("skipped: paused") and got["c2"] == "ok" and sent == ["c2"]
