"""The Raft transport over loopback: a peer that accepts but never answers (a silent link, as
behind a partition that drops packets) is redialed; with liveness off the old connection is kept.
In-process and quick; bench/heal.py and test_heal_real.py cover real partitions."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from system_under_test.protocol import LinkTimeouts
from system_under_test.protocol.errors import ConnectionLost
from system_under_test.raft.transport import RaftTransport
from system_under_test.raft.types import Message, MessageType

FAST = LinkTimeouts(ping_interval_s=0.05, dead_after_s=0.3, connect_attempt_s=0.2)


def msg(i: int) -> Message:
    return Message(type=MessageType.HEARTBEAT, src="a", dst="b", term=1, commit=i)


async def mute_server() -> tuple[asyncio.Server, int, list[asyncio.StreamWriter]]:
    held: list[asyncio.StreamWriter] = []

    async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # accept, then never read or answer

    server = await asyncio.start_server(mute, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], held


async def feed(t: RaftTransport, seconds: float) -> None:
    """Send a heartbeat every 20 ms, as a leader would."""
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        t.send([msg(i)])
        i += 1
        await asyncio.sleep(0.02)


def test_a_silent_raft_link_is_redialed() -> None:
    async def main() -> None:
        server, port, held = await mute_server()
        t = RaftTransport("a", {"b": f"127.0.0.1:{port}"}, liveness=FAST, min_backoff_s=0.01, max_backoff_s=0.05)
        await t.start()
        try:
            deadline = time.monotonic() + 30
            while t.dials["b"] < 2 and time.monotonic() < deadline:
                await feed(t, 0.2)
            assert t.dials["b"] >= 2, t.status()
            assert t.status()["b"]["dials"] == t.dials["b"]
        finally:
            await t.stop()
            for w in held:
                w.close()
            server.close()

    asyncio.run(main())


def test_with_liveness_off_the_silent_link_is_kept() -> None:
    async def main() -> None:
        server, port, held = await mute_server()
        t = RaftTransport("a", {"b": f"127.0.0.1:{port}"}, liveness=None)
        await t.start()
        try:
            await feed(t, FAST.dead_after_s * 4)
            assert t.dials["b"] == 1, t.status()
        finally:
            await t.stop()
            for w in held:
                w.close()
            server.close()

    asyncio.run(main())


def _scripted_dials(monkeypatch: pytest.MonkeyPatch, t: RaftTransport, *, unanswered: bool) -> list[float]:
    """Replace the transport's dial with one that fails (after the whole budget when ``unanswered``,
    at once otherwise) and record the backoffs the sender waits between dials."""
    from system_under_test.raft import transport as transport_mod

    pauses: list[float] = []

    async def failing_connect(addr: str, **kw: Any) -> Any:
        if unanswered:
            await asyncio.sleep(kw["timeout_s"])
        raise ConnectionLost(f"cannot connect to {addr}: scripted")

    async def pause(peer: str, delay_s: float) -> None:
        pauses.append(delay_s)
        await asyncio.sleep(0)

    monkeypatch.setattr(transport_mod, "connect", failing_connect)
    monkeypatch.setattr(t, "_pause", pause)
    return pauses


@pytest.mark.parametrize("unanswered", [True, False], ids=["unanswered-no-backoff", "refused-backs-off"])
def test_an_unanswered_dial_is_repeated_without_backoff(monkeypatch: pytest.MonkeyPatch, unanswered: bool) -> None:
    """SYNs dropped by a partition: the dial's own attempts pace it, so no extra gap; a refused
    dial (peer process down) backs off as before."""
    async def main() -> None:
        t = RaftTransport("a", {"b": "127.0.0.1:9"}, liveness=FAST, connect_timeout_s=0.02,
                          min_backoff_s=0.01, max_backoff_s=0.05)
        pauses = _scripted_dials(monkeypatch, t, unanswered=unanswered)
        await t.start()
        try:
            for _ in range(2000):
                if len(pauses) >= 3:
                    break
                await asyncio.sleep(0.005)
            assert len(pauses) >= 3
            if unanswered:
                assert pauses[:3] == [0.0, 0.0, 0.0]
            else:
                assert all(p > 0 for p in pauses[:3])
        finally:
            await t.stop()

    asyncio.run(main())
