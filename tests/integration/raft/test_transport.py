"""RaftTransport and serve_raft over real loopback sockets, plus the pure frame decoding."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from system_under_test.protocol.frame import Frame, Kind
from system_under_test.raft.demo import free_ports
from system_under_test.raft.server import serve_raft
from system_under_test.raft.transport import RaftTransport, messages_from_frame
from system_under_test.raft.types import Entry, Message, MessageType, message_to_wire

pytestmark = [pytest.mark.integration, pytest.mark.timeout(30)]


def msg(i: int, src: str = "a", dst: str = "b") -> Message:
    return Message(MessageType.APPEND, src, dst, term=1, index=i, entries=(Entry(1, i + 1, b"x"),), commit=i)


def frame(body: Any, from_id: str = "a") -> Frame:
    return Frame(Kind.ONEWAY, 0, 1100, {"from_id": from_id}, body)


@pytest.mark.parametrize(
    ("body", "from_id", "error"),
    [
        pytest.param({"t": 1}, "a", "must be a list", id="body-not-list"),
        pytest.param([1], "a", "must be a dict", id="item-not-dict"),
        pytest.param([message_to_wire(msg(1))], "z", "carries a message from 'a'", id="spoofed-src"),
        pytest.param([{"t": 99, "s": "a", "d": "b", "term": 1}], "a", "malformed raft message", id="bad-type"),
    ],
)
def test_messages_from_frame_rejects(body: Any, from_id: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        messages_from_frame(frame(body, from_id))


def test_messages_from_frame_round_trip() -> None:
    msgs = [msg(i) for i in range(3)]
    assert messages_from_frame(frame([message_to_wire(m) for m in msgs])) == msgs


class Recorder:
    """Stands in for a RaftNode on the receiving side: records what serve_raft delivers."""

    def __init__(self, node_id: str) -> None:
        self.node_id = node_id
        self.got: list[Message] = []

    def handle_message(self, m: Message) -> None:
        self.got.append(m)


async def wait_until(pred: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s}s waiting for {what}")
        await asyncio.sleep(0.01)


def test_dead_peer_never_blocks_and_drops_when_full() -> None:
    async def body() -> None:
        (port,) = free_ports(1)  # nobody listens here
        t = RaftTransport("a", {"b": f"127.0.0.1:{port}"}, queue_batches=16)
        await t.start()
        try:
            for i in range(5000):  # send() is synchronous: returning at all means a dead peer never blocked it
                t.send([msg(i)])
            assert t.dropped["b"] >= 5000 - 16 - 1
            assert t.status()["b"]["queued"] <= 16
        finally:
            await t.stop()

    asyncio.run(body())


def test_delivery_batching_and_reconnect_after_peer_restart() -> None:
    async def body() -> None:
        (port,) = free_ports(1)
        rec = Recorder("b")
        t = RaftTransport("a", {"b": f"127.0.0.1:{port}", "a": "ignored:1"}, min_backoff_s=0.01, max_backoff_s=0.05)
        await t.start()
        try:
            t.send([msg(0)])  # queued while the peer is down
            server = await serve_raft(rec.handle_message, "127.0.0.1", port)
            assert server.address == f"127.0.0.1:{port}"
            await wait_until(lambda: len(rec.got) == 1, 5, "the queued message after the peer came up")
            t.send([msg(i) for i in range(1, 200)])
            await wait_until(lambda: len(rec.got) == 200, 5, "200 messages")
            assert [m.index for m in rec.got] == list(range(200))  # in order
            await server.stop()
            server = await serve_raft(rec.handle_message, "127.0.0.1", port)
            deadline = time.monotonic() + 5
            while len(rec.got) < 201 and time.monotonic() < deadline:  # the first sends may hit the dead link
                t.send([msg(999)])
                await asyncio.sleep(0.05)
            assert rec.got[-1].index == 999
            await server.stop()
        finally:
            await t.stop()

    asyncio.run(body())
