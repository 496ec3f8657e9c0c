"""The Raft transport over loopback: a peer that accepts but never answers (a silent link, as
behind a partition that drops packets) is redialed; with liveness off the old connection is kept.
In-process and quick; bench/heal.py and test_heal_real.py cover real partitions."""

from __future__ import annotations

import asyncio
import time

from system_under_test.protocol import LinkTimeouts
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
