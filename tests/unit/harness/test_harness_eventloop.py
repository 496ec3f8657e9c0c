"""harness/eventloop.py answers SPLITBRAIN_EVENT_LOOP as the nodes' system_under_test/eventloop.py does."""

from __future__ import annotations

import asyncio

import pytest

import harness.eventloop as harness_loop
import system_under_test.eventloop as node_loop


def test_the_harness_and_the_nodes_read_the_same_setting() -> None:
    assert (harness_loop.ENV, harness_loop.CHOICES) == (node_loop.ENV, node_loop.CHOICES)


@pytest.mark.parametrize("value", ["", "asyncio", " AsyncIO ", "uvloop", "tokio"])
def test_each_value_gets_the_same_answer_or_the_same_error(value: str) -> None:
    env = {harness_loop.ENV: value}

    def answer(module: object) -> str:
        try:
            return str(module.chosen(env))  # type: ignore[attr-defined]
        except ValueError as exc:
            return f"error: {exc}"

    assert answer(harness_loop) == answer(node_loop)


def test_run_uses_the_chosen_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> str:
        return type(asyncio.get_running_loop()).__module__

    monkeypatch.setenv(harness_loop.ENV, "asyncio")
    assert harness_loop.run(main()).startswith("asyncio")
