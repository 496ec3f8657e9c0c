"""The runner's operator recovery (harness/runner.py ``_operator_recovery``): before the final phase, a DB that
offers :class:`harness.protocols.OperatorRecovery` is asked once per node, and what it did -- or why it could not
-- is kept for results.json; a DB without it is left alone."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from harness.protocols import OperatorRecovery
from harness.runner import _operator_recovery


class _Recovering:
    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    async def recover(self, test: dict[str, Any], node: str) -> str | None:
        self.asked.append(node)
        answer = self.answers.get(node)
        if isinstance(answer, Exception):
            raise answer
        return answer


def _run(db: object) -> Any:
    nodes = SimpleNamespace(all=("m1", "m2", "m3"))
    return SimpleNamespace(parts=SimpleNamespace(db=db), spec=SimpleNamespace(nodes=nodes), test={}, recovered={})


def test_every_node_is_asked_and_only_what_was_done_is_recorded() -> None:
    db = _Recovering({"m2": "rabbitmqctl start_app", "m3": RuntimeError("not started (start_app)")})
    assert isinstance(db, OperatorRecovery)
    r = _run(db)
    asyncio.run(_operator_recovery(r))
    assert db.asked == ["m1", "m2", "m3"]
    assert r.recovered == {"m2": "rabbitmqctl start_app",
                           "m3": "could not bring it back: RuntimeError: not started (start_app)"}


def test_a_db_without_it_is_left_alone() -> None:
    r = _run(object())
    asyncio.run(_operator_recovery(r))
    assert r.recovered == {}
