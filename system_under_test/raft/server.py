"""A standalone Raft message server: for Raft-only clusters in tests, benchmarks and the demo.

The controller serves Raft on its client port through its own server (RAFT_MESSAGE frames among its
other codes); this one serves only RAFT_MESSAGE, so a bare :class:`~system_under_test.raft.node.RaftNode`
can be run without a controller around it.  It hands messages to a ``deliver`` callable, not to a node,
so it depends on the transport's frame format and nothing else.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from system_under_test.protocol.codes import RequestCode, ResponseCode
from system_under_test.protocol.frame import Frame
from system_under_test.protocol.rpc import Connection, Reply, RpcServer
from system_under_test.raft.transport import messages_from_frame
from system_under_test.raft.types import Message

__all__ = ["RaftServer", "deliver_frame", "serve_raft"]

log = logging.getLogger("splitbrain.raft.server")

Deliver = Callable[[Message], None]


def deliver_frame(deliver: Deliver, frame: Frame, *, name: str = "raft") -> int:
    """Hand every message of a RAFT_MESSAGE frame to ``deliver``; returns how many.  A malformed frame
    (including one whose messages claim another sender than the frame's ``from_id``) is logged and dropped."""
    try:
        messages = messages_from_frame(frame)
    except ValueError as exc:
        log.warning("%s: dropping malformed RAFT_MESSAGE: %s", name, exc)
        return 0
    for m in messages:
        deliver(m)
    return len(messages)


class RaftServer(RpcServer):
    """An :class:`RpcServer` that remembers its bound ``address`` ("host:port")."""

    address: str = ""

    async def start(self, host: str, port: int) -> tuple[str, int]:
        bound = await super().start(host, port)
        self.address = f"{bound[0]}:{bound[1]}"
        return bound


async def serve_raft(deliver: Deliver, host: str, port: int, *, name: str = "raft") -> RaftServer:
    """Start a server that routes incoming RAFT_MESSAGE one-ways to ``deliver`` (e.g. ``node.handle_message``).

    Port 0 picks a free port; the bound "host:port" is ``server.address``.  Other request codes
    get REQUEST_CODE_NOT_SUPPORTED.
    """

    async def handler(frame: Frame, conn: Connection) -> Reply | None:
        if frame.code == RequestCode.RAFT_MESSAGE:
            deliver_frame(deliver, frame, name=name)
            return None
        return Reply.error(
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"raft server serves only RAFT_MESSAGE, got {frame.code}"
        )

    server = RaftServer(handler, name=name)
    await server.start(host, port)
    return server
