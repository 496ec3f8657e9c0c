"""A failpoint armed by a request nobody answered may still fire (a stopped node reads the request when it resumes): a
node the DB paused is not armed at all, ``crash-at`` watches and restarts a node whose arm went unanswered, and the
final heal starts any node whose process is gone, whatever stopped it. Nemesis shells over a fake DB whose
``set_failpoint`` raises what a real one raises for each outcome; what is under test is only the bookkeeping (a
control run at base 4f8693d left a controller dead this way: the arm timed out while the node was paused, the
nemesis reported it unarmed, the node crashed at the step 6 s later on resume and nobody started it again, so the
availability checker saw writes stop under what it thought was one dead controller)."""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace
from typing import Any

from harness.protocols import FailpointRefused, FailpointUnreachable
from nemesis.failpoint import FailpointNemesis, admin_failpoints
from nemesis.process import ProcessNemesis
from systems.splitbrain.selectors import SELECTORS


class FakeDB:
    """Nodes c1..c3 (controllers) and b1 (a broker); ``dead`` nodes are not alive; ``start`` revives one."""

    token = "t"

    def __init__(self, dead: set[str] | None = None, errors: dict[str, Exception] | None = None) -> None:
        nodes = SimpleNamespace(controllers=("c1", "c2", "c3"), broker_sets=(("b1",),), selectors=SELECTORS)
        self.spec = SimpleNamespace(nodes=nodes, nemesis=SimpleNamespace(role_wait_s=0.1))
        self.dead = set(dead or ())
        self.started: list[str] = []
        self.die_after_checks: dict[str, int] = {}
        self.errors = dict(errors or {})
        self.sent: list[tuple[str, str, str | None]] = []

    async def set_failpoint(self, test: dict[str, Any], node: str, name: str, action: str | None) -> None:
        if not isinstance(self.errors.get(node), FailpointUnreachable):
            self.sent.append((node, name, action))
        if node in self.errors:
            raise self.errors[node]

    async def probe_write(self, test: dict[str, Any]) -> bool:
        return True

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

def test_an_unanswered_request_is_unknown_a_refusal_is_an_error() -> None:
    db = FakeDB(errors={"c1": TimeoutError("nothing from the peer for 1.50s"),
                        "c2": FailpointRefused("no such failpoint"), "b1": FailpointUnreachable("connection refused")})
    got = asyncio.run(admin_failpoints(db, {}, ["c1", "c2", "c3", "b1"], "arm-failpoint", "raft.before_apply"))
    assert got["c1"].startswith("unknown: ") and got["c2"].startswith("error: ") and got["c3"] == "ok"
    assert got["b1"].startswith("unreachable: ")
    assert db.sent == [("c1", "raft.before_apply", "1*crash"), ("c2", "raft.before_apply", "1*crash"),
                       ("c3", "raft.before_apply", "1*crash")]
    asyncio.run(admin_failpoints(db, {}, ["c3"], "disarm-failpoint", "raft.before_apply"))
    assert db.sent[-1] == ("c3", "raft.before_apply", None)


def test_crash_at_watches_and_restarts_a_node_whose_arm_went_unanswered() -> None:
    db = FakeDB(errors={"c2": TimeoutError("no answer")})
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


def test_a_paused_node_is_not_armed() -> None:
    db = PausingDB({"c1"})
    got = asyncio.run(admin_failpoints(db, {}, ["c1", "c2"], "arm-failpoint", "raft.before_apply"))
    assert got["c1"].startswith("skipped: paused") and got["c2"] == "ok"
    assert [n for n, _, _ in db.sent] == ["c2"]
