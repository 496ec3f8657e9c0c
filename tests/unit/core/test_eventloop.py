"""eventloop: uvloop by default when installed, asyncio on request, a clear error otherwise."""

from __future__ import annotations

import asyncio

import pytest

import eventloop


def test_default_is_uvloop_when_installed() -> None:
    pytest.importorskip("uvloop")
    assert eventloop.chosen({}) == "uvloop"


def test_asyncio_on_request() -> None:
    assert eventloop.chosen({eventloop.ENV: "asyncio"}) == "asyncio"
    assert eventloop.chosen({eventloop.ENV: " AsyncIO "}) == "asyncio"


def test_unknown_choice_names_the_variable() -> None:
    with pytest.raises(ValueError, match="SPLITBRAIN_EVENT_LOOP must be one of uvloop, asyncio, got 'tokio'"):
        eventloop.chosen({eventloop.ENV: "tokio"})


def test_run_returns_the_coroutine_result_on_the_chosen_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> str:
        return type(asyncio.get_running_loop()).__module__

    monkeypatch.setenv(eventloop.ENV, "asyncio")
    assert eventloop.run(main()).startswith("asyncio")
    if eventloop.chosen({}) == "uvloop":
        monkeypatch.delenv(eventloop.ENV)
        assert eventloop.run(main()).startswith("uvloop")
