"""Link liveness in the asyncio shell, over loopback: PING is answered by the protocol layer, a
one-way link to a live peer stays open, a silent peer's link closes itself, and liveness can be
switched off.  Every wait is bounded; nothing asserts how fast."""

from __future__ import annotations

import asyncio

from system_under_test.protocol import (
    Connection,
    Frame,
    LinkTimeouts,
    Reply,
    RequestCode,
    ResponseCode,
    RpcServer,
    connect,
)

FAST = LinkTimeouts(ping_interval_s=0.05, dead_after_s=0.3, connect_attempt_s=0.2)
#: For "stays open" assertions: generous enough that a loaded CI machine's scheduling pauses do not
#: look like a dead peer.
STEADY = LinkTimeouts(ping_interval_s=0.1, dead_after_s=1.0)


async def serves_nothing(frame: Frame, conn: Connection) -> Reply | None:
    return Reply.error(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "nothing here")


def test_ping_is_answered_by_the_protocol_layer_whatever_the_handler() -> None:
    async def main() -> None:
        server = RpcServer(serves_nothing, liveness=FAST)
        host, port = await server.start("127.0.0.1", 0)
        conn = await connect(f"{host}:{port}", liveness=None)
        try:
            resp = await conn.request(RequestCode.PING, {}, timeout_s=10)
            assert resp.code == ResponseCode.SUCCESS
        finally:
            conn.close()
            await server.stop()

    asyncio.run(main())


def test_one_way_link_to_a_live_peer_stays_open_past_dead_after() -> None:
    """The sender never gets a reply to its one-ways; the peer's PING answers keep the link alive."""
    got: list[int] = []

    async def sink(frame: Frame, conn: Connection) -> Reply | None:
        got.append(frame.code)
        return None

    async def main() -> None:
        server = RpcServer(sink, liveness=STEADY)
        host, port = await server.start("127.0.0.1", 0)
        conn = await connect(f"{host}:{port}", liveness=STEADY)
        try:
            conn.send_oneway(RequestCode.RAFT_MESSAGE, {"from_id": "a"}, [])
            await asyncio.sleep(STEADY.dead_after_s * 2.5)
            assert not conn.closed, conn.close_reason
            assert got == [RequestCode.RAFT_MESSAGE]  # pings never reach the handler
        finally:
            conn.close()
            await server.stop()

    asyncio.run(main())


def test_a_silent_peer_closes_the_link_and_fails_pending_requests() -> None:
    """A peer that accepts but never answers (as behind a partition that drops packets)."""

    async def main() -> None:
        held: list[asyncio.StreamWriter] = []

        async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            held.append(writer)  # keep it open, never read, never write

        server = await asyncio.start_server(mute, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        conn = await connect(f"127.0.0.1:{port}", liveness=FAST)
        pending = asyncio.ensure_future(conn.request(RequestCode.ADMIN_STATUS, {}, timeout_s=60))
        try:
            await asyncio.wait_for(conn.wait_closed(), 30)
            assert "nothing from the peer" in conn.close_reason
            try:
                await asyncio.wait_for(pending, 5)
                raise AssertionError("a request on a dead link must not succeed")
            except Exception as exc:
                assert type(exc).__name__ == "ConnectionLost"
        finally:
            conn.close()
            for w in held:
                w.close()
            server.close()

    asyncio.run(main())


def test_liveness_off_keeps_a_silent_link_open() -> None:
    """The baseline switch (SPLITBRAIN_LINK=off passes None): no pings, no verdicts."""

    async def main() -> None:
        held: list[asyncio.StreamWriter] = []
        seen: list[bytes] = []

        async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            held.append(writer)
            seen.append(await reader.read(1024))

        server = await asyncio.start_server(mute, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        conn = await connect(f"127.0.0.1:{port}", liveness=None)
        try:
            await asyncio.sleep(FAST.dead_after_s * 3)
            assert not conn.closed
            assert not any(seen)  # not a byte was sent: no PING
        finally:
            conn.close()
            for w in held:
                w.close()
            server.close()

    asyncio.run(main())
