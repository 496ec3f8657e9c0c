"""The asyncio RPC shell against real loopback sockets: replies, errors, and hostile peers."""

from __future__ import annotations

import asyncio
import struct

import pytest

from system_under_test.protocol import (
    Connection,
    ConnectionLost,
    Frame,
    Kind,
    Reply,
    RequestCode,
    RequestTimeout,
    ResponseCode,
    RpcError,
    RpcServer,
    connect,
    encode_frame,
)


async def handler(frame: Frame, conn: Connection) -> Reply | None:
    if frame.code == RequestCode.ADMIN_STATUS:
        return Reply(header={"echo": frame.body})
    if frame.code == RequestCode.ADMIN_CLOCK_GET:
        raise RuntimeError("boom")
    if frame.code == RequestCode.ADMIN_SHUTDOWN:
        await asyncio.sleep(10)
    return Reply.error(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "nope")


async def _server() -> tuple[RpcServer, str]:
    server = RpcServer(handler)
    host, port = await server.start("127.0.0.1", 0)
    return server, f"{host}:{port}"


def test_request_reply_errors_and_timeouts() -> None:
    async def main() -> None:
        server, addr = await _server()
        conn = await connect(addr)
        resp = await conn.request(RequestCode.ADMIN_STATUS, {}, b"hi")
        assert resp.header == {"echo": b"hi"}
        many = await asyncio.gather(*(conn.request(RequestCode.ADMIN_STATUS, {}, i) for i in range(200)))
        assert [r.header["echo"] for r in many] == list(range(200))
        with pytest.raises(RpcError) as err:
            await conn.request(RequestCode.ADMIN_CLOCK_GET)
        assert err.value.code == ResponseCode.SYSTEM_ERROR and "boom" in err.value.message
        with pytest.raises(RpcError) as err:
            await conn.request(RequestCode.CONTROLLER_APPLY_BROKER_ID, {"broker_id": "x"})
        assert err.value.code == ResponseCode.MALFORMED_REQUEST and err.value.definite
        with pytest.raises(RequestTimeout):
            await conn.request(RequestCode.ADMIN_SHUTDOWN, {}, timeout_s=0.05)
        conn.close()
        await server.stop()

    asyncio.run(main())


@pytest.mark.parametrize(
    "garbage",
    [struct.pack(">I", 2**31), struct.pack(">I", 3) + b"\xc1\xc1\xc1", b"\x00\x00\x00\x02[]"],
    ids=["oversized", "bad-msgpack", "not-an-array"],
)
def test_malformed_frame_closes_only_that_connection(garbage: bytes) -> None:
    async def main() -> None:
        server, addr = await _server()
        good = await connect(addr)
        host, port = addr.split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(garbage)
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 2) == b""  # server closed the bad connection
        resp = await good.request(RequestCode.ADMIN_STATUS, {}, 1)  # and still serves others
        assert resp.header["echo"] == 1
        good.close()
        await server.stop()

    asyncio.run(main())


def test_pending_requests_fail_with_connection_lost_when_server_dies() -> None:
    async def main() -> None:
        server, addr = await _server()
        conn = await connect(addr)
        task = asyncio.create_task(conn.request(RequestCode.ADMIN_SHUTDOWN, {}, timeout_s=5))
        await asyncio.sleep(0.05)
        await server.stop()
        with pytest.raises(ConnectionLost):
            await task
        with pytest.raises(ConnectionLost):
            await connect("127.0.0.1:1", timeout_s=0.5)

    asyncio.run(main())


def test_server_can_push_oneway_to_client() -> None:
    async def main() -> None:
        got: asyncio.Queue[Frame] = asyncio.Queue()

        async def client_handler(frame: Frame, conn: Connection) -> Reply | None:
            await got.put(frame)
            return None

        async def push_handler(frame: Frame, conn: Connection) -> Reply | None:
            conn.send_oneway(RequestCode.RAFT_MESSAGE, {"from_id": "x"})
            return Reply()

        server = RpcServer(push_handler)
        host, port = await server.start("127.0.0.1", 0)
        conn = await connect(f"{host}:{port}", client_handler)
        await conn.request(RequestCode.ADMIN_STATUS)
        frame = await asyncio.wait_for(got.get(), 2)
        assert frame.kind == Kind.ONEWAY and frame.header == {"from_id": "x"}
        conn.close()
        await server.stop()

    asyncio.run(main())


def test_encode_frame_is_what_decoder_expects() -> None:
    data = encode_frame(Frame(Kind.ONEWAY, 0, 1))
    assert data[:4] == struct.pack(">I", len(data) - 4)


def test_future_answers_reply_from_their_callback_without_a_task() -> None:
    """A handler may return an asyncio.Future resolved by someone else (the controller's group
    commit): its result, exception or cancellation becomes the reply, no reply, or an error reply."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        waiting: list[asyncio.Future[Reply]] = []

        def deferred(frame: Frame, conn: Connection) -> asyncio.Future[Reply]:
            fut: asyncio.Future[Reply] = loop.create_future()
            waiting.append(fut)
            return fut

        server = RpcServer(deferred)
        host, port = await server.start("127.0.0.1", 0)
        conn = await connect(f"{host}:{port}")
        calls = [asyncio.ensure_future(conn.request(RequestCode.ADMIN_STATUS, {}, timeout_s=2)) for _ in range(3)]
        while len(waiting) < 3:
            await asyncio.sleep(0.01)
        tasks_before = len(asyncio.all_tasks())
        waiting[0].set_result(Reply(header={"n": 0}))
        waiting[1].set_exception(RuntimeError("late boom"))
        waiting[2].cancel()
        assert (await calls[0]).header == {"n": 0}
        with pytest.raises(RpcError) as err:
            await calls[1]
        assert err.value.code == ResponseCode.SYSTEM_ERROR and "late boom" in err.value.message
        with pytest.raises(RequestTimeout):  # a cancelled answer sends no reply
            await calls[2]
        assert len(asyncio.all_tasks()) <= tasks_before
        conn.close()
        await server.stop()

    asyncio.run(main())


def test_a_short_timeout_after_a_long_one_still_fires_on_time() -> None:
    """Request deadlines share one connection timer: a shorter deadline re-arms it, an answered
    request leaves it, and every waiting request still times out by its own deadline."""

    async def main() -> None:
        server, addr = await _server()
        conn = await connect(addr)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        slow = asyncio.ensure_future(conn.request(RequestCode.ADMIN_SHUTDOWN, {}, timeout_s=2.0))
        await asyncio.sleep(0)
        with pytest.raises(RequestTimeout):
            await conn.request(RequestCode.ADMIN_SHUTDOWN, {}, timeout_s=0.05)
        assert not slow.done()  # the short deadline fired by itself, not with the long one (an order, no speed)
        assert (await conn.request(RequestCode.ADMIN_STATUS, {}, b"x", timeout_s=60)).header == {"echo": b"x"}
        with pytest.raises(RequestTimeout):
            await slow
        assert loop.time() - t0 >= 2.0 - 0.05  # never before its own deadline (timers may run one tick early)
        assert not conn._deadlines  # nothing left behind
        conn.close()
        await server.stop()

    asyncio.run(main())
