"""Reachability hints (rpc duty 6, issue 17), over loopback: a host that connects to us ends our
pending connect attempt and redial backoff to it, so after a heal a link comes back as soon as
either end gets through.  Every wait is bounded; nothing asserts how fast: the long attempt and
backoff lengths make "it returned" possible only through the hint."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from system_under_test.protocol import Connection, Frame, LinkTimeouts, Reply, RpcServer, rpc
from system_under_test.protocol.rpc import connect, note_reached_by, sleep_unless_reached

#: Attempts longer than the bound on the dial: a dial that returns within the bound restarted its
#: first attempt because of the hint (after the grace of a tenth of the attempt).
SLOW_ATTEMPTS = LinkTimeouts(connect_attempt_s=12.0)
DIAL_BOUND_S = 10.0
BOUND_S = 20.0


async def sink(frame: Frame, conn: Connection) -> Reply | None:
    return None


def test_backoff_ends_early_when_the_host_reaches_us() -> None:
    async def main() -> None:
        sleeper = asyncio.ensure_future(sleep_unless_reached("10.9.9.9:9101", 60.0))
        await asyncio.sleep(0)
        note_reached_by("10.9.9.8")  # another host: no effect
        await asyncio.sleep(0.01)
        assert not sleeper.done()
        note_reached_by("10.9.9.9")
        assert await asyncio.wait_for(sleeper, BOUND_S) is True
        assert not rpc._reach_waiters, "a finished sleep must unregister"

    asyncio.run(main())


def test_backoff_without_a_hint_runs_its_course() -> None:
    async def main() -> None:
        assert await sleep_unless_reached("10.9.9.9:9101", 0.01) is False
        assert not rpc._reach_waiters

    asyncio.run(main())


def test_an_accepted_connection_wakes_dials_to_that_host() -> None:
    async def main() -> None:
        server = RpcServer(sink, liveness=LinkTimeouts())
        host, port = await server.start("127.0.0.1", 0)
        sleeper = asyncio.ensure_future(sleep_unless_reached(f"{host}:1", 60.0))
        await asyncio.sleep(0)
        conn = await connect(f"{host}:{port}", liveness=None)
        try:
            assert await asyncio.wait_for(sleeper, BOUND_S) is True
        finally:
            conn.close()
            await server.stop()

    asyncio.run(main())


def test_a_server_with_liveness_off_gives_no_hints() -> None:
    async def main() -> None:
        server = RpcServer(sink, liveness=None)
        host, port = await server.start("127.0.0.1", 0)
        sleeper = asyncio.ensure_future(sleep_unless_reached(f"{host}:1", 0.3))
        await asyncio.sleep(0)
        conn = await connect(f"{host}:{port}", liveness=None)
        try:
            assert await asyncio.wait_for(sleeper, BOUND_S) is False
        finally:
            conn.close()
            await server.stop()

    asyncio.run(main())


def test_a_hung_connect_attempt_is_restarted_when_the_host_reaches_us(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first attempt hangs like a SYN dropped by a partition; the hint starts a second one."""
    real_open = asyncio.open_connection
    calls: list[str] = []

    async def open_connection(host: str, port: int, **kw: Any) -> Any:
        calls.append(host)
        if len(calls) == 1:
            await asyncio.sleep(3600)  # the dropped SYN: no answer
        return await real_open(host, port, **kw)

    async def main() -> None:
        server = RpcServer(sink, liveness=None)
        host, port = await server.start("127.0.0.1", 0)
        monkeypatch.setattr(asyncio, "open_connection", open_connection)
        dial = asyncio.ensure_future(connect(f"{host}:{port}", timeout_s=BOUND_S, liveness=SLOW_ATTEMPTS))
        while not calls:
            await asyncio.sleep(0.01)
        await asyncio.sleep(SLOW_ATTEMPTS.connect_attempt_s / 10 + 0.05)  # past the "too young" grace
        note_reached_by(host)
        conn = await asyncio.wait_for(dial, DIAL_BOUND_S)
        try:
            assert len(calls) == 2
            assert not conn.closed
        finally:
            conn.close()
            await server.stop()

    asyncio.run(main())


def test_a_hint_during_a_young_attempt_restarts_it_after_the_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """A hint that arrives while the attempt is younger than a tenth of connect_attempt_s is kept,
    not lost: the attempt is restarted once the grace is over."""
    real_open = asyncio.open_connection
    calls: list[str] = []

    async def open_connection(host: str, port: int, **kw: Any) -> Any:
        calls.append(host)
        if len(calls) == 1:
            note_reached_by(host)  # the peer gets through while our SYN is in flight
            await asyncio.sleep(3600)
        return await real_open(host, port, **kw)

    async def main() -> None:
        server = RpcServer(sink, liveness=None)
        host, port = await server.start("127.0.0.1", 0)
        monkeypatch.setattr(asyncio, "open_connection", open_connection)
        dial = connect(f"{host}:{port}", timeout_s=BOUND_S, liveness=SLOW_ATTEMPTS)
        conn = await asyncio.wait_for(dial, DIAL_BOUND_S)
        try:
            assert len(calls) == 2
        finally:
            conn.close()
            await server.stop()

    asyncio.run(main())
