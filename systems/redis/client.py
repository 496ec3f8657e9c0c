"""The queue client of the Redis adapter: Redis Streams, one stream per queue, found through the local Sentinel.

One client per worker, opened on a node (:meth:`RedisQueueClient.open`).  Before an op it asks the sentinel on
*its own* node where the master is (``SENTINEL get-master-addr-by-name``; the answer is kept for ``route_ttl_s``
and dropped after any error) and sends the op there -- as an application using Sentinel does.  So while a
partition cuts the old master off, the clients whose sentinel is on its side (or has not yet heard of the
failover) keep writing to it: that is how Jepsen's Redis finding arises.

Ops (:class:`harness.protocols.QueueClients`; the queue's name is the stream's key, the value its field ``v``):

* ``send`` -- ``XADD Q * v V``; with ``wait`` > 0, then ``WAIT wait wait_timeout_ms`` and ``ok`` only if that many
  replicas confirmed it (fewer: ``info``, the master has it but it may not survive).  ``ok`` adds ``position``
  (the entry id).
* ``poll`` -- ``XREAD COUNT max STREAMS Q cursor`` on the master, from this client's own cursor (``0-0`` at first),
  which moves past what it returned.
* ``drain`` -- ``XRANGE Q - +`` on the master, in pages: every entry of the stream.

Every completion names in ``node`` the node whose Redis answered (the master it asked) and in ``client_node`` the
worker's node.  Errors: a poll or drain that fails is ``fail``; a send is ``fail`` when Redis refused it or no
connection was made (:func:`systems.redis.config.is_definite`), else ``info``.  redis-py's own retries are off: a
retried XADD would append twice behind the history's back.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from systems.redis.config import MASTER_NAME, REDIS_PORT, SENTINEL_PORT, is_definite, master_addr

__all__ = ["FIELD", "NoMaster", "RedisQueueClient", "records_of", "xread_records"]

FIELD = "v"
"""The stream entry's field that holds the sent value."""
_PAGE = 1000


class NoMaster(RuntimeError):
    """The local sentinel names no master (or does not answer): nothing was sent (``definite``)."""

    definite = True


class _Refused(RuntimeError):
    """A send Redis certainly did not apply."""

    definite = True


def records_of(entries: Sequence[Any]) -> list[list[Any]]:
    """``[[id, value], ...]`` from XRANGE/XREAD entries ``[(id, {"v": value}), ...]`` (a missing field: None)."""
    out = []
    for entry in entries:
        entry_id, fields = entry[0], entry[1]
        out.append([entry_id, fields.get(FIELD) if isinstance(fields, Mapping) else None])
    return out


def xread_records(reply: Any, queue: str) -> list[list[Any]]:
    """The records of ``queue`` in an XREAD reply: ``[[name, entries], ...]`` (RESP2) or ``{name: [entries]}``
    (RESP3, as redis-py returns it); nothing new is ``None``."""
    if not reply:
        return []
    if isinstance(reply, Mapping):
        got = reply.get(queue) or [[]]
        return records_of(got[0])
    for name, entries in reply:
        if name == queue:
            return records_of(entries)
    return []


class RedisQueueClient:
    """Prototype (not opened) and per-worker client (see the module docstring).

    Args:
        timeout_s: one request's bound (connect: at most 1 s of it).
        wait: replicas each send waits for with ``WAIT`` (0: none).
        wait_timeout_ms: how long one ``WAIT`` waits.
        route_ttl_s: how long the sentinel's answer is reused.
    """

    def __init__(self, *, timeout_s: float = 2.0, wait: int = 0, wait_timeout_ms: int = 1000,
                 route_ttl_s: float = 0.5, port: int = REDIS_PORT, sentinel_port: int = SENTINEL_PORT) -> None:
        self.timeout_s = timeout_s
        self.wait = wait
        self.wait_timeout_ms = wait_timeout_ms
        self.route_ttl_s = route_ttl_s
        self.port = port
        self.sentinel_port = sentinel_port
        self.node: str | None = None
        self.nodes_by_ip: dict[str, str] = {}
        self.sentinel: Redis | None = None
        self.master: tuple[float, str, Redis] | None = None  # (expiry, ip, connection)
        self.cursors: dict[str, str] = {}

    def _conn(self, host: str, port: int) -> Redis:
        return Redis(host=host, port=port, socket_timeout=self.timeout_s,
                     socket_connect_timeout=min(1.0, self.timeout_s), decode_responses=True,
                     retry=Retry(NoBackoff(), 0), single_connection_client=True)

    async def open(self, test: dict[str, Any], node: str) -> RedisQueueClient:
        c = RedisQueueClient(timeout_s=self.timeout_s, wait=self.wait, wait_timeout_ms=self.wait_timeout_ms,
                             route_ttl_s=self.route_ttl_s, port=self.port, sentinel_port=self.sentinel_port)
        c.node = node
        c.nodes_by_ip = {test["remote"].address(n): n for n in test["nodes"]}
        c.sentinel = c._conn(test["remote"].address(node), self.sentinel_port)
        return c

    async def setup(self, test: dict[str, Any]) -> None:
        return None

    async def _master(self) -> tuple[str, Redis]:
        """The master's (ip, connection): the sentinel's answer, asked again once ``route_ttl_s`` passed (the
        connection is kept while the answer stays the same)."""
        now = time.monotonic()
        if self.master is not None and now < self.master[0]:
            return self.master[1], self.master[2]
        if self.sentinel is None:
            raise NoMaster("client is not open (call open(test, node) first)")
        try:
            reply = await self.sentinel.execute_command("SENTINEL", "get-master-addr-by-name", MASTER_NAME)
        except Exception as exc:
            raise NoMaster(f"sentinel on {self.node}: {type(exc).__name__}: {exc}") from None
        addr = master_addr(reply)
        if addr is None:
            raise NoMaster(f"sentinel on {self.node} names no master for {MASTER_NAME!r} (reply {reply!r})")
        if self.master is not None and self.master[1] == addr[0]:
            self.master = (now + self.route_ttl_s, addr[0], self.master[2])
            return addr[0], self.master[2]
        await self._drop_master()
        conn = self._conn(addr[0], addr[1])
        self.master = (now + self.route_ttl_s, addr[0], conn)
        return addr[0], conn

    async def _drop_master(self) -> None:
        if self.master is not None:
            conn, self.master = self.master[2], None
            try:
                await conn.aclose()
            except Exception:  # closing a broken connection may fail any way; it is gone either way
                pass

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        f, v = op.get("f"), op.get("value")
        where: dict[str, Any] = {"client_node": self.node}
        try:
            if not isinstance(v, Mapping) or not isinstance(v.get("queue"), str):
                raise _Refused(f"op needs a value with a string 'queue', got {v!r}")
            queue = v["queue"]
            ip, master = await self._master()
            where["node"] = self.nodes_by_ip.get(ip, ip)
            if f == "send":
                position = str(await master.xadd(queue, {FIELD: str(v["value"])}))  # an id such as "1764..-0"
                if self.wait > 0:
                    acked = int(await master.execute_command("WAIT", self.wait, self.wait_timeout_ms))
                    if acked < self.wait:
                        return {**op, **where, "type": "info", "value": {**v, "position": position},
                                "error": f"WAIT: {acked} of {self.wait} replicas confirmed {position} within "
                                         f"{self.wait_timeout_ms} ms"}
                return {**op, **where, "type": "ok", "value": {**v, "position": position}}
            if f == "poll":
                cursor = self.cursors.get(queue, "0-0")
                reply = await master.xread({queue: cursor}, count=int(v.get("max", 16)))
                records = xread_records(reply, queue)
                if records:
                    self.cursors[queue] = str(records[-1][0])
                return {**op, **where, "type": "ok", "value": {**v, "records": records}}
            if f == "drain":
                records, start = [], "-"
                while True:
                    page = records_of(await master.xrange(queue, min=start, max="+", count=_PAGE) or [])
                    records.extend(page)
                    if len(page) < _PAGE:
                        break
                    start = f"({page[-1][0]}"
                return {**op, **where, "type": "ok", "value": {**v, "records": records}}
        except Exception as exc:
            await self._drop_master()
            kind = "fail" if f != "send" or is_definite(exc) or getattr(exc, "definite", False) is True else "info"
            return {**op, **where, "type": kind, "error": f"{type(exc).__name__}: {exc}"}
        return {**op, **where, "type": "fail", "error": f"redis queue: unknown f {f!r}; expected send, poll or drain"}

    async def teardown(self, test: dict[str, Any]) -> None:
        return None

    async def close(self, test: dict[str, Any]) -> None:
        await self._drop_master()
        if self.sentinel is not None:
            sentinel, self.sentinel = self.sentinel, None
            try:
                await sentinel.aclose()
            except Exception:  # as in _drop_master
                pass
