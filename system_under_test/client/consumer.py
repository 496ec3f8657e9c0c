"""Consumer: pulls records of a queue by logical offset from the master or a named replica, commits offsets.

A broker returns only records below its confirm offset, so everything a consumer sees is held by
every SyncStateSet member and survives a failover.  A PULL_MESSAGE reply carries the records' raw
commit-log frames; the consumer decodes them and verifies every CRC and that the records are the
queue's, in order (a damaged or misplaced record raises STORE_ERROR, as a broker-side check would).
Offsets are committed on the broker the consumer reads from (they are not replicated between
brokers; see ``broker/consumer_offsets.py``).

:class:`SyncConsumer` wraps it for scripts.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from system_under_test.broker.store import decode_pulled
from system_under_test.client.controller_client import ControllerClient
from system_under_test.client.producer import BrokerConnections, SharedLinks
from system_under_test.protocol import ConnectionLost, Frame, RequestCode, RequestTimeout, ResponseCode, RpcError

_REROUTE = frozenset({ResponseCode.BROKER_FENCED, ResponseCode.NOT_READY, ResponseCode.NOT_MASTER})


class Message(NamedTuple):
    """One pulled record (a named tuple: a pull builds a thousand of them per reply)."""

    queue_offset: int
    phys_offset: int
    body: bytes
    key: str = ""
    properties: dict[str, str] = {}  # a shared default: pulls always pass their own dict; never mutate it
    store_timestamp_ms: int = 0


_MAKE_MESSAGE = functools.partial(tuple.__new__, Message)  # a Message from its field tuple, with no Python call


@dataclass(frozen=True)
class PullResult:
    messages: list[Message]
    next_offset: int
    min_offset: int
    max_offset: int
    broker_addr: str


class NoRoute(Exception):
    """The broker set has no master (or the named replica is unknown) right now."""

    definite = True  # raised before anything was sent


class Consumer(SharedLinks):
    """Reads queues of one consumer group.

    ``brokers``: a :class:`BrokerConnections` pool to share with other clients (default: a pool of its own).
    ``controller``: a ControllerClient to share with other clients, left open by :meth:`close` (its owner closes
    it); default: one of its own, closed by :meth:`close`.
    """

    def __init__(self, controllers: Sequence[str], token: str | None = None, *, group: str = "default",
                 timeout_s: float = 5.0, brokers: BrokerConnections | None = None,
                 controller: ControllerClient | None = None) -> None:
        super().__init__(controllers, token, brokers, controller)
        self.group = group
        self.timeout_s = timeout_s
        self._routes: dict[tuple[str, int | None], str] = {}

    async def resolve(self, broker_name: str, replica: int | None = None, *, refresh: bool = False) -> str:
        """Address of the master (``replica=None``) or of broker id ``replica`` of the set (cached).

        Raises:
            NoRoute: no master, or no such broker id.
        """
        key = (broker_name, replica)
        if not refresh and key in self._routes:
            return self._routes[key]
        addr = await self._resolve(broker_name, replica)
        self._routes[key] = addr
        return addr

    async def _resolve(self, broker_name: str, replica: int | None) -> str:
        info = await self.controller.get_replica_info(broker_name)
        if replica is None:
            addr = info.get("master_addr")
            if not isinstance(addr, str) or not addr:
                raise NoRoute(f"broker set {broker_name} has no master (epoch {info.get('master_epoch')})")
            return addr
        for broker_id, addr in (info.get("body") or {}).get("brokers", []):
            if broker_id == replica and addr:
                return str(addr)
        raise NoRoute(f"broker set {broker_name} has no broker id {replica}")

    async def _call(self, addr: str, code: RequestCode, header: dict[str, Any]) -> Frame:
        conn = await self.brokers.get(addr)
        return await conn.request(code, header, timeout_s=self.timeout_s)

    async def pull(self, broker_name: str, topic: str, queue_id: int, offset: int, max_count: int = 32, *,
                   replica: int | None = None, addr: str | None = None) -> PullResult:
        """Records from ``offset`` on (at most ``max_count``).

        A resolved address that fails (unreachable, fenced, not ready) is resolved again once.

        Raises:
            RpcError: e.g. OFFSET_OUT_OF_RANGE, or STORE_ERROR for a record that fails its CRC;
                ConnectionLost / RequestTimeout; NoRoute.
        """
        resp, used = await self._pull_reply(broker_name, topic, queue_id, offset, max_count, replica, addr)
        h = resp.header
        next_offset = int(h["next_offset"])
        msgs = messages_of(resp, topic, queue_id, offset, next_offset, used)
        return PullResult(msgs, next_offset, int(h["min_offset"]), int(h["max_offset"]), used)

    async def _pull_reply(self, broker_name: str, topic: str, queue_id: int, offset: int, max_count: int,
                          replica: int | None, addr: str | None) -> tuple[Frame, str]:
        """The PULL_MESSAGE reply (undecoded) and the address that gave it."""
        header = {"topic": topic, "queue_id": queue_id, "queue_offset": offset, "max_count": max_count}
        if addr is not None:
            return await self._call(addr, RequestCode.PULL_MESSAGE, header), addr
        target = await self.resolve(broker_name, replica)
        try:
            return await self._call(target, RequestCode.PULL_MESSAGE, header), target
        except (ConnectionLost, RequestTimeout, RpcError) as exc:
            if isinstance(exc, RpcError) and exc.code not in _REROUTE:
                raise
            target = await self.resolve(broker_name, replica, refresh=True)
            return await self._call(target, RequestCode.PULL_MESSAGE, header), target

    async def pull_all(self, broker_name: str, topic: str, queue_id: int, *, start: int = 0,
                       replica: int | None = None, addr: str | None = None, max_rounds: int = 100_000) -> list[Message]:
        """Every visible record from ``start`` to the current max offset.

        The next pull is sent as soon as a reply's header names its ``next_offset``, so the broker
        reads the next batch while this one is decoded and checked (each reply is still checked
        before its records are returned, and a failure cancels the pull in flight).
        """
        out: list[Message] = []
        offset = start
        loop = asyncio.get_running_loop()
        pending = loop.create_task(self._pull_reply(broker_name, topic, queue_id, offset, 1024, replica, addr))
        try:
            for _ in range(max_rounds):
                resp, used = await pending
                h = resp.header
                next_offset = int(h["next_offset"])
                done = next_offset >= int(h["max_offset"]) or next_offset == offset
                if not done:
                    pending = loop.create_task(self._pull_reply(broker_name, topic, queue_id, next_offset, 1024,
                                                                replica, addr))
                out.extend(messages_of(resp, topic, queue_id, offset, next_offset, used))
                if done:
                    return out
                offset = next_offset
            return out
        finally:
            if not pending.done():
                pending.cancel()
                with contextlib.suppress(BaseException):
                    await pending

    async def commit(self, broker_name: str, topic: str, queue_id: int, offset: int, *,
                     replica: int | None = None) -> None:
        addr = await self.resolve(broker_name, replica)
        await self._call(addr, RequestCode.UPDATE_CONSUMER_OFFSET, {"topic": topic, "queue_id": queue_id,
                                                                     "group": self.group, "offset": offset})

    async def committed(self, broker_name: str, topic: str, queue_id: int, *, replica: int | None = None) -> int | None:
        addr = await self.resolve(broker_name, replica)
        resp = await self._call(addr, RequestCode.QUERY_CONSUMER_OFFSET, {"topic": topic, "queue_id": queue_id,
                                                                           "group": self.group})
        value = resp.header.get("offset")
        return int(value) if isinstance(value, int) else None

    async def runtime_info(self, addr: str) -> dict[str, Any]:
        return dict((await self._call(addr, RequestCode.GET_BROKER_RUNTIME_INFO, {})).header)

    async def __aenter__(self) -> Consumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            await self.close()


def messages_of(resp: Frame, topic: str, queue_id: int, offset: int, next_offset: int, addr: str) -> list[Message]:
    """The records of a PULL_MESSAGE reply, CRC-checked and checked to be ``topic/queue_id`` at
    increasing queue offsets in ``[offset, next_offset)``.

    Raises:
        RpcError: STORE_ERROR naming the broker and the offset, for a damaged or misplaced record.
    """
    body = resp.body
    spans = resp.header.get("spans") or []
    if body is None and not spans:
        return []
    try:
        if not isinstance(body, bytes | bytearray):
            raise ValueError(f"the reply body must be bytes (record frames), got {type(body).__name__}")
        return decode_pulled(bytes(body), spans, topic, queue_id, offset, next_offset, _MAKE_MESSAGE)
    except ValueError as exc:
        raise RpcError(ResponseCode.STORE_ERROR, f"PULL_MESSAGE {topic}/{queue_id}@{offset} from {addr}: {exc}",
                       dict(resp.header)) from exc


def is_out_of_range(exc: BaseException) -> bool:
    return isinstance(exc, RpcError) and exc.code == ResponseCode.OFFSET_OUT_OF_RANGE


class SyncConsumer:
    """Blocking wrapper around :class:`Consumer` (its own event loop)."""

    def __init__(self, controllers: Sequence[str], token: str | None = None, *, group: str = "default") -> None:
        self._loop = asyncio.new_event_loop()
        self._consumer = Consumer(controllers, token, group=group)

    def pull(self, broker_name: str, topic: str, queue_id: int, offset: int, max_count: int = 32,
             **kw: Any) -> PullResult:
        return self._loop.run_until_complete(self._consumer.pull(broker_name, topic, queue_id, offset, max_count,
                                                                 **kw))

    def commit(self, broker_name: str, topic: str, queue_id: int, offset: int) -> None:
        self._loop.run_until_complete(self._consumer.commit(broker_name, topic, queue_id, offset))

    def close(self) -> None:
        self._loop.run_until_complete(self._consumer.close())
        self._loop.close()
