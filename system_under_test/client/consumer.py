"""Consumer: pulls records of a queue by logical offset from the master or a named replica, commits offsets.

A broker returns only records below its confirm offset, so everything a consumer sees is held by
every SyncStateSet member and survives a failover.  Offsets are committed on the broker the
consumer reads from (they are not replicated between brokers; see ``broker/consumer_offsets.py``).

:class:`SyncConsumer` wraps it for scripts.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from system_under_test.client.controller_client import ControllerClient
from system_under_test.client.producer import BrokerConnections
from system_under_test.protocol import ConnectionLost, Frame, RequestCode, RequestTimeout, ResponseCode, RpcError

_REROUTE = frozenset({ResponseCode.BROKER_FENCED, ResponseCode.NOT_READY, ResponseCode.NOT_MASTER})


@dataclass(frozen=True)
class Message:
    """One pulled record."""

    queue_offset: int
    phys_offset: int
    body: bytes
    key: str = ""
    properties: dict[str, str] = field(default_factory=dict)
    store_timestamp_ms: int = 0


@dataclass(frozen=True)
class PullResult:
    messages: list[Message]
    next_offset: int
    min_offset: int
    max_offset: int
    broker_addr: str


class NoRoute(Exception):
    """The broker set has no master (or the named replica is unknown) right now."""


class Consumer:
    """Reads queues of one consumer group."""

    def __init__(self, controllers: Sequence[str], token: str | None = None, *, group: str = "default",
                 timeout_s: float = 5.0) -> None:
        self.controller = ControllerClient(list(controllers), token=token, timeout_s=1.0)
        self.group = group
        self.timeout_s = timeout_s
        self.brokers = BrokerConnections()
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
            RpcError: e.g. OFFSET_OUT_OF_RANGE; ConnectionLost / RequestTimeout; NoRoute.
        """
        header = {"topic": topic, "queue_id": queue_id, "queue_offset": offset, "max_count": max_count}
        if addr is None:
            target = await self.resolve(broker_name, replica)
            try:
                resp = await self._call(target, RequestCode.PULL_MESSAGE, header)
            except (ConnectionLost, RequestTimeout, RpcError) as exc:
                if isinstance(exc, RpcError) and exc.code not in _REROUTE:
                    raise
                target = await self.resolve(broker_name, replica, refresh=True)
                resp = await self._call(target, RequestCode.PULL_MESSAGE, header)
            addr = target
        else:
            resp = await self._call(addr, RequestCode.PULL_MESSAGE, header)
        h = resp.header
        msgs = [Message(int(r[0]), int(r[1]), bytes(r[2]), str(r[3]), dict(r[4]), int(r[5])) for r in resp.body or []]
        return PullResult(msgs, int(h["next_offset"]), int(h["min_offset"]), int(h["max_offset"]), addr)

    async def pull_all(self, broker_name: str, topic: str, queue_id: int, *, start: int = 0,
                       replica: int | None = None, addr: str | None = None, max_rounds: int = 100_000) -> list[Message]:
        """Every visible record from ``start`` to the current max offset."""
        out: list[Message] = []
        offset = start
        for _ in range(max_rounds):
            res = await self.pull(broker_name, topic, queue_id, offset, 1024, replica=replica, addr=addr)
            out.extend(res.messages)
            if res.next_offset >= res.max_offset or res.next_offset == offset:
                return out
            offset = res.next_offset
        return out

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

    async def close(self) -> None:
        await self.brokers.close()
        await self.controller.close()

    async def __aenter__(self) -> Consumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            await self.close()


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
