"""Raft transport: RAFT_MESSAGE one-way frames between controller nodes over protocol.rpc.

Words:

* **batch** -- the messages of one Ready for one peer, sent as one RAFT_MESSAGE one-way frame:
  header ``{"from_id": <sender>}``, body a list of :func:`message_to_wire` dicts.
* **outbox** -- a bounded per-peer queue of batches drained by that peer's sender task.

Guarantees:

1. :meth:`RaftTransport.send` never blocks and never raises for a dead or slow peer: when a
   peer's outbox is full the batch is dropped and counted.  Raft tolerates message loss (it
   retries through heartbeats and append responses), so loss is preferable to stalling the node
   loop.
2. Each peer has one outbound connection, reopened after it fails with jittered exponential
   backoff (:func:`~system_under_test.protocol.liveness.next_backoff_s`: starts under
   ``min_backoff_s``, at most ``max_backoff_s``); batches queued meanwhile wait in the outbox.
   With liveness on, a dial that got no answer at all is repeated without a backoff (see
   :meth:`RaftTransport._connect`), so a partitioned peer always has a SYN on its way.
3. Frames to one peer leave in the order they were queued (one connection, one sender task).
4. A silent link is redialed (issue 17): the connection is a protocol-layer link with liveness
   (:mod:`system_under_test.protocol.liveness`), so the peer answers PINGs on this one-way
   connection and a link that heard nothing for ``dead_after_s`` closes itself; the sender then
   redials at once instead of waiting for TCP's backed-off retransmission timer.  The batch in
   hand when a connection closed is carried to the next one (stale Raft messages are harmless).
5. A redial waits for no timer once the peer has reached us: when the peer's own redial is
   accepted by this process, our pending connect attempt and backoff to that peer end at once
   (:func:`~system_under_test.protocol.rpc.sleep_unless_reached`).  After a heal the link that
   matters (e.g. the leader's to a rejoining follower, which carries the heartbeat that tells the
   follower who leads) is back as soon as either end gets through.

Incoming frames are decoded by :func:`messages_from_frame` (the controller's server and the standalone
:mod:`system_under_test.raft.server` both use it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Sequence
from typing import Any

from system_under_test.protocol.codes import RequestCode
from system_under_test.protocol.errors import ConnectionLost, ProtocolError
from system_under_test.protocol.frame import Frame
from system_under_test.protocol.liveness import LinkTimeouts, next_backoff_s
from system_under_test.protocol.rpc import (
    PROCESS_DEFAULT,
    Connection,
    ProcessDefault,
    connect,
    link_timeouts,
    sleep_unless_reached,
)
from system_under_test.raft.types import Message, message_from_wire, message_to_wire

log = logging.getLogger("splitbrain.raft.transport")


class RaftTransport:
    """Outbound Raft messages of node ``node_id`` to ``peers`` (node id -> "host:port").

    Args:
        node_id: the sending node (goes into every frame's ``from_id``).
        peers: every other voter's address; the node's own id may be present and is ignored.
        queue_batches: outbox capacity per peer, in batches.
        max_frame_messages: at most this many messages are coalesced into one frame.
        connect_timeout_s: one dial's budget (tried every ``connect_attempt_s`` within it).
        min_backoff_s / max_backoff_s: the redial backoff (jittered).
        rng: the backoff's jitter source; default seeded from ``node_id`` (reproducible per node).
        liveness: the links' LinkTimeouts; default the process's (``SPLITBRAIN_LINK``), None = off.
    """

    def __init__(
        self,
        node_id: str,
        peers: dict[str, str],
        *,
        queue_batches: int = 256,
        max_frame_messages: int = 4096,
        connect_timeout_s: float = 1.0,
        min_backoff_s: float = 0.02,
        max_backoff_s: float = 0.25,
        token: str | None = None,
        rng: random.Random | None = None,
        liveness: LinkTimeouts | ProcessDefault | None = PROCESS_DEFAULT,
    ) -> None:
        if queue_batches < 1 or max_frame_messages < 1:
            raise ValueError("queue_batches and max_frame_messages must be >= 1")
        self.node_id = node_id
        self.peers = {p: a for p, a in peers.items() if p != node_id}
        self.queue_batches = queue_batches
        self.max_frame_messages = max_frame_messages
        self.connect_timeout_s = connect_timeout_s
        self.min_backoff_s = min_backoff_s
        self.max_backoff_s = max_backoff_s
        self.token = token  # the cluster token, sent with every RAFT_MESSAGE frame
        self._queues: dict[str, asyncio.Queue[list[dict[str, Any]]]] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._conns: dict[str, Connection] = {}
        self.sent: dict[str, int] = dict.fromkeys(self.peers, 0)
        self.dropped: dict[str, int] = dict.fromkeys(self.peers, 0)
        self.dials: dict[str, int] = dict.fromkeys(self.peers, 0)  # connections opened per peer (redials show)
        self._running = False
        self._rng = rng if rng is not None else random.Random(f"raft-transport-{node_id}")
        link = link_timeouts() if isinstance(liveness, ProcessDefault) else liveness
        self.liveness = link
        self._backoff = (LinkTimeouts(ping_interval_s=link.ping_interval_s, dead_after_s=link.dead_after_s,
                                      min_backoff_s=min_backoff_s, max_backoff_s=max(min_backoff_s, max_backoff_s))
                         if link is not None else None)

    async def start(self) -> None:
        """Start one sender task per peer."""
        if self._running:
            return
        self._running = True
        loop = asyncio.get_running_loop()
        for peer in self.peers:
            self._queues[peer] = asyncio.Queue(self.queue_batches)
            self._tasks[peer] = loop.create_task(self._sender(peer), name=f"raft-send-{self.node_id}->{peer}")

    async def stop(self) -> None:
        """Cancel the senders and close every connection; queued batches are discarded."""
        self._running = False
        tasks = list(self._tasks.values())
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        for conn in self._conns.values():
            conn.close("raft transport stopping")
        self._tasks.clear()
        self._conns.clear()

    def send(self, messages: Sequence[Message]) -> None:
        """Queue ``messages``, one batch per destination.  Never blocks; drops when an outbox is full."""
        by_peer: dict[str, list[dict[str, Any]]] = {}
        for m in messages:
            by_peer.setdefault(m.dst, []).append(message_to_wire(m))
        for peer, batch in by_peer.items():
            q = self._queues.get(peer)
            if q is None:
                if peer not in self.peers:
                    log.warning("%s: dropping %d raft messages to unknown peer %r", self.node_id, len(batch), peer)
                continue  # not started (or stopped): the messages are lost, as on a dead link
            try:
                q.put_nowait(batch)
            except asyncio.QueueFull:
                self.dropped[peer] += len(batch)

    def _next_backoff(self, attempt: int) -> float:
        if self._backoff is None:  # liveness off (SPLITBRAIN_LINK=off): the old doubling, no jitter
            return float(min(self.min_backoff_s * 2 ** min(attempt, 30), self.max_backoff_s))
        return next_backoff_s(attempt, self._backoff, self._rng)

    async def _connect(self, peer: str) -> Connection:
        """Dial ``peer`` until it answers.  A dial refused at once (peer process down) backs off; a
        dial that went unanswered for its whole ``connect_timeout_s`` (SYNs dropped by a partition)
        is repeated at once with liveness on: its attempts, one every ``connect_attempt_s``, already
        paced it, and a backoff on top would leave a gap with no SYN in flight just when the
        partition may heal."""
        loop = asyncio.get_running_loop()
        attempt = 0
        while True:
            started = loop.time()
            try:
                conn = await connect(self.peers[peer], timeout_s=self.connect_timeout_s, liveness=self.liveness)
                self.dials[peer] += 1
                log.info("%s: raft connection to %s (%s) open", self.node_id, peer, self.peers[peer])
                return conn
            except (ConnectionLost, ProtocolError, OSError) as exc:
                waited_out = (self.liveness is not None
                              and loop.time() - started >= 0.9 * self.connect_timeout_s)
                backoff = 0.0 if waited_out else self._next_backoff(attempt)
                log.debug("%s: cannot reach %s: %s; retry in %.3fs", self.node_id, peer, exc, backoff)
            await self._pause(peer, backoff)
            attempt += 1

    async def _pause(self, peer: str, delay_s: float) -> None:
        """A redial backoff; with liveness on it ends early when ``peer`` connects to us."""
        if self.liveness is None:
            await asyncio.sleep(delay_s)
        else:
            await sleep_unless_reached(self.peers[peer], delay_s)

    async def _sender(self, peer: str) -> None:
        q = self._queues[peer]
        header = {"from_id": self.node_id, **({"token": self.token} if self.token else {})}
        carry: list[dict[str, Any]] | None = None  # the batch in hand when a connection closed
        while True:
            conn = await self._connect(peer)
            self._conns[peer] = conn
            try:
                while not conn.closed:
                    body = carry if carry is not None else await q.get()
                    carry = None
                    if conn.closed:  # closed (e.g. by liveness) while we waited: send it on the next one
                        carry = body
                        break
                    while len(body) < self.max_frame_messages and not q.empty():
                        body.extend(q.get_nowait())
                    conn.send_oneway(RequestCode.RAFT_MESSAGE, header, body)
                    self.sent[peer] += len(body)
                    await conn.drain()
            except (ConnectionLost, ProtocolError, OSError) as exc:
                log.info("%s: raft connection to %s lost: %s", self.node_id, peer, exc)
            except Exception:  # a bug here must not silence the link for good
                log.exception("%s: raft sender to %s failed; reconnecting", self.node_id, peer)
            finally:
                conn.close("raft sender reconnecting")
                self._conns.pop(peer, None)
            await self._pause(peer, self._next_backoff(0))

    def status(self) -> dict[str, Any]:
        return {
            peer: {
                "addr": addr,
                "connected": peer in self._conns and not self._conns[peer].closed,
                "queued": self._queues[peer].qsize() if peer in self._queues else 0,
                "sent": self.sent[peer],
                "dropped": self.dropped[peer],
                "dials": self.dials[peer],
            }
            for peer, addr in self.peers.items()
        }


def messages_from_frame(frame: Frame) -> list[Message]:
    """Decode the body of a RAFT_MESSAGE frame.

    Raises:
        ValueError: the body is not a list of raft message dicts, or a message claims a sender other
            than the frame's ``from_id``.
    """
    body = frame.body
    if not isinstance(body, list):
        raise ValueError(f"RAFT_MESSAGE body must be a list of messages, got {type(body).__name__}")
    sender = frame.header.get("from_id")
    out = []
    for d in body:
        if not isinstance(d, dict):
            raise ValueError(f"RAFT_MESSAGE body item must be a dict, got {type(d).__name__}")
        m = message_from_wire(d)
        if m.src != sender:
            raise ValueError(f"RAFT_MESSAGE from_id {sender!r} carries a message from {m.src!r}")
        out.append(m)
    return out
