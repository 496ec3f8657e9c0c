"""Role selectors wait for their role (nemesis shell with a fake DB: only the waiting logic is under test)."""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace
from typing import Any

from nemesis.accounting import Accounted
from nemesis.process import ProcessNemesis
from systems.splitbrain.selectors import SELECTORS


class FakeDB:
    def __init__(self, answers: list[list[str]], role_wait_s: float) -> None:
        nodes = SimpleNamespace(controllers=("c1", "c2", "c3"), broker_sets=(("b1", "b2"),), selectors=SELECTORS)
        self.spec = SimpleNamespace(nodes=nodes, nemesis=SimpleNamespace(role_wait_s=role_wait_s))
        self.answers = answers
        self.asked = 0
        self.killed: list[str] = []

    async def primaries(self, test: dict[str, Any]) -> list[str]:
        self.asked += 1
        return self.answers[min(self.asked, len(self.answers)) - 1]

    async def kill(self, test: dict[str, Any], node: str) -> None:
        self.killed.append(node)


def kill(db: FakeDB, selector: str) -> dict[str, Any]:
    nem = Accounted(ProcessNemesis(db, random.Random(1)), seed=1)
    return asyncio.run(nem.invoke({}, {"type": "invoke", "process": "nemesis", "f": "kill", "value": selector}))


def test_a_missing_leader_is_waited_for() -> None:
    db = FakeDB([[], ["b1"], ["c3", "b1"]], role_wait_s=5.0)  # mid-election twice, then c3 leads
    done = kill(db, "controller-followers:one+masters")
    assert db.asked == 3 and done["effective"] is True
    assert set(done["value"]) - {"b1"} <= {"c1", "c2"} and "b1" in done["value"]
    (record,) = done["targets"]
    assert record["roles"]["b1"] == "master" and set(record["roles"].values()) == {"master", "controller-follower"}


def test_a_role_that_never_appears_is_not_effective_with_the_reason() -> None:
    db = FakeDB([["b1"]], role_wait_s=0.3)
    done = kill(db, "controller-leader")
    assert done["effective"] is False and "no controller-leader right now" in done["why"]
    assert db.killed == [] and db.asked >= 2
