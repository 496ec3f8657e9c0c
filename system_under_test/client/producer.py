"""Producer: sends records to the current master of a broker set.

Routing comes from the controller (GetReplicaInfo ``master_addr``: the address the master
registered).  A send is retried only when its outcome is *definite* -- the broker proved it did
nothing (NOT_MASTER, BROKER_FENCED, SYSTEM_BUSY, NOT_READY) or the connection could not even be
opened; routing is refreshed before the retry.  Any other failure raises :class:`SendError`, whose
``definite`` flag (from ``protocol.codes.is_definite``) tells the caller whether to record the
operation as ``fail`` (definite) or ``info`` (unknown: it may have been stored).  A send whose
outcome is unknown is never retried silently.

A master whose link has gone quiet or was closed (:mod:`.quiet_link`: a paused master keeps its sockets, and the
kernel even opens new connections to it) is PINGed before a record is sent to it, within ``probe_timeout_s``:
an unanswered PING is a definite failure, so the producer refreshes the route and tries again instead of sending
a record whose outcome would stay unknown, and a send to a stale route that names a stopped master fails over
as soon as the controller names the new one.

:class:`SyncProducer` wraps the asyncio producer for scripts (its own event loop; not thread-safe).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from system_under_test.client.controller_client import ControllerClient, NoControllerAvailable
from system_under_test.client.quiet_link import link_gone_quiet
from system_under_test.protocol import (
    Connection,
    ConnectionLost,
    RequestCode,
    RequestTimeout,
    ResponseCode,
    RpcError,
    connect,
    is_definite,
)

RETRY_CODES = frozenset({ResponseCode.NOT_MASTER, ResponseCode.BROKER_FENCED, ResponseCode.SYSTEM_BUSY,
                         ResponseCode.NOT_READY})

RETRY_BACKOFF_S = (0.02, 0.1)
"""First and longest pause between the retries of one send.  Each retry asks the controller for the master
again, so the longest pause is how late a producer can learn of a new master during a failover; at 0.25 s it
was a quarter of the time from the election to the first acknowledged send (bench/failover.py)."""


@dataclass(frozen=True)
class SendResult:
    """Where an acknowledged send landed: first record's queue and physical offsets."""

    queue_offset: int
    phys_offset: int
    count: int
    master_epoch: int
    broker_id: int
    broker_addr: str


class SendError(Exception):
    """A send that was not acknowledged.

    Attributes:
        code: the response code (None for a lost connection or timeout).
        definite: True if the send certainly did not happen (record ``fail``), False if unknown (``info``).
    """

    def __init__(self, message: str, *, code: int | None, definite: bool) -> None:
        super().__init__(message)
        self.code = code
        self.definite = definite


class BrokerConnections:
    """One connection per broker address, reopened on demand, shareable by many producers and consumers.

    Why share: a connection carries any number of requests in flight (each has its own id, timeout and
    future), and a connection writes everything queued in one event-loop iteration with one system call, so
    clients that share it -- the harness's workers -- send their requests together and the broker answers them
    together: fewer system calls and reads on both ends than one connection per client.  A connection that
    fails or times out a request fails only the requests in flight on it (``ConnectionLost`` /
    ``RequestTimeout``: outcome unknown), as with one connection per client.

    Sharing is counted: each user calls :meth:`acquire` and, when done, :meth:`release`; the last
    release closes the connections (a later acquire reopens them on demand).  :meth:`close` closes them at once.
    """

    def __init__(self) -> None:
        self._conns: dict[str, Connection] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.users = 0

    def acquire(self) -> BrokerConnections:
        """Count one more user; returns self."""
        self.users += 1
        return self

    async def release(self) -> None:
        """One user is done; the last one closes the connections."""
        self.users = max(0, self.users - 1)
        if self.users == 0:
            await self.close()

    async def get(self, addr: str, timeout_s: float = 2.0) -> Connection:
        conn = self._conns.get(addr)
        if conn is not None and not conn.closed:
            return conn
        async with self._locks.setdefault(addr, asyncio.Lock()):
            conn = self._conns.get(addr)
            if conn is None or conn.closed:
                conn = await connect(addr, timeout_s=timeout_s)
                self._conns[addr] = conn
            return conn

    def gone_quiet(self, addr: str) -> bool:
        """The connection to ``addr`` has heard nothing for a while or was closed (:func:`link_gone_quiet`): a
        request must not go out on it, or on the connection that replaces it, before a PING is answered."""
        conn = self._conns.get(addr)
        if conn is None:
            return False
        if conn.closed:
            return True
        ping_s = conn.liveness.ping_interval_s if conn.liveness is not None else None
        return link_gone_quiet(asyncio.get_running_loop().time() - conn.received_at, ping_s)

    async def close(self) -> None:
        for conn in self._conns.values():
            conn.close("client closed")
        self._conns.clear()
        self._locks.clear()  # a lock binds to the loop it first waited on; a reopened pool may run on another


class SharedLinks:
    """What a Producer or Consumer talks through, and how it lets go of it: a counted share of a
    :class:`BrokerConnections` pool and a ControllerClient, its own or one shared with other clients."""

    def __init__(self, controllers: Sequence[str], token: str | None, brokers: BrokerConnections | None,
                 controller: ControllerClient | None) -> None:
        self._owns_controller = controller is None
        self.controller = controller if controller is not None else ControllerClient(list(controllers), token=token,
                                                                                     timeout_s=1.0)
        self.brokers = (brokers if brokers is not None else BrokerConnections()).acquire()
        self._released = False

    async def close(self) -> None:
        if not self._released:  # a second close must not release a shared pool twice
            self._released = True
            await self.brokers.release()
        elif self.brokers.users == 0:
            await self.brokers.close()  # used again after a close: close what that reopened
        if self._owns_controller:
            await self.controller.close()


class Producer(SharedLinks):
    """Leader-following producer.  Use one per event loop; ``await close()`` at the end.

    ``brokers``: a :class:`BrokerConnections` pool to share with other clients (default: a pool of its own).
    ``controller``: a ControllerClient to share with other clients, left open by :meth:`close` (its owner closes
    it); default: one of its own, closed by :meth:`close`.
    """

    def __init__(self, controllers: Sequence[str], token: str | None = None, *, timeout_s: float = 5.0,
                 producer_id: str = "", probe_timeout_s: float = 0.5,
                 brokers: BrokerConnections | None = None, controller: ControllerClient | None = None) -> None:
        if not probe_timeout_s > 0:  # NaN too
            raise ValueError(f"Producer probe_timeout_s must be > 0 seconds, got {probe_timeout_s!r}")
        super().__init__(controllers, token, brokers, controller)
        self.timeout_s = timeout_s
        self.probe_timeout_s = probe_timeout_s  # how long a master whose link went quiet gets to answer a PING
        self.producer_id = producer_id
        self.routes: dict[str, tuple[str, int]] = {}  # broker set -> (master addr, master epoch)

    async def master_of(self, broker_name: str, *, refresh: bool = False) -> tuple[str, int] | None:
        """(master address, master epoch) of a broker set, from the cache or the controller."""
        if not refresh and broker_name in self.routes:
            return self.routes[broker_name]
        try:
            info = await self.controller.get_replica_info(broker_name)
        except (RpcError, NoControllerAvailable, ConnectionLost, RequestTimeout):
            return None
        addr, epoch = info.get("master_addr"), info.get("master_epoch")
        if isinstance(addr, str) and addr and type(epoch) is int:
            self.routes[broker_name] = (addr, epoch)
            return addr, epoch
        self.routes.pop(broker_name, None)
        return None

    async def send(self, broker_name: str, topic: str, queue_id: int, body: bytes | Sequence[bytes], *,
                   key: str = "", properties: Mapping[str, str] | None = None,
                   timeout_s: float | None = None) -> SendResult:
        """Send one record (or a batch of bodies, stored contiguously) and wait for the master's ack.

        Raises:
            SendError: not acknowledged; ``definite`` says whether it certainly had no effect.
        """
        bodies = [body] if isinstance(body, bytes | bytearray) else list(body)
        records = [[bytes(b), key, dict(properties or {})] for b in bodies]
        header: dict[str, Any] = {"topic": topic, "queue_id": queue_id}
        if self.producer_id:
            header["producer_id"] = self.producer_id
        deadline = time.monotonic() + (timeout_s if timeout_s is not None else self.timeout_s)
        refresh = False
        last = "no master known"
        backoff, longest = RETRY_BACKOFF_S
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SendError(f"send to {broker_name} not attempted in time: {last}", code=None, definite=True)
            route = await self.master_of(broker_name, refresh=refresh)
            refresh = True
            if route is None:
                last = f"broker set {broker_name} has no master"
                await asyncio.sleep(min(backoff, remaining))
                backoff = min(backoff * 2, longest)
                continue
            addr, epoch = route
            quiet = self.brokers.gone_quiet(addr)
            try:
                conn = await self.brokers.get(addr, timeout_s=min(1.0, remaining))
                if quiet:  # a PING changes nothing: no answer is a definite failure (module docstring)
                    await conn.request(RequestCode.PING, {}, timeout_s=max(0.01, min(self.probe_timeout_s, remaining)))
            except (ConnectionLost, RequestTimeout, RpcError) as exc:  # nothing was sent: definite
                last = f"master {addr} did not answer a probe: {exc}" if quiet else str(exc)
                await asyncio.sleep(min(backoff, max(0.0, deadline - time.monotonic())))
                backoff = min(backoff * 2, longest)
                continue
            try:
                resp = await conn.request(RequestCode.SEND_MESSAGE, {**header, "master_epoch": epoch}, records,
                                          timeout_s=max(0.05, remaining))
            except RpcError as exc:
                if exc.code in RETRY_CODES:
                    last = str(exc)
                    await asyncio.sleep(min(backoff, max(0.0, deadline - time.monotonic())))
                    backoff = min(backoff * 2, longest)
                    continue
                raise SendError(f"send to {broker_name} via {addr}: {exc}", code=int(exc.code),
                                definite=is_definite(exc.code)) from exc
            except (ConnectionLost, RequestTimeout) as exc:
                self.routes.pop(broker_name, None)
                raise SendError(f"send to {broker_name} via {addr}: outcome unknown: {exc}", code=None,
                                definite=False) from exc
            h = resp.header
            return SendResult(int(h["queue_offset"]), int(h["phys_offset"]), int(h["count"]),
                              int(h["master_epoch"]), int(h["broker_id"]), addr)

    async def __aenter__(self) -> Producer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            await self.close()


class SyncProducer:
    """Blocking wrapper: ``SyncProducer(controllers, token).send(...)``; call ``close()`` at the end."""

    def __init__(self, controllers: Sequence[str], token: str | None = None, *, timeout_s: float = 5.0) -> None:
        self._loop = asyncio.new_event_loop()
        self._producer = Producer(controllers, token, timeout_s=timeout_s)

    def send(self, broker_name: str, topic: str, queue_id: int, body: bytes, **kw: Any) -> SendResult:
        return self._loop.run_until_complete(self._producer.send(broker_name, topic, queue_id, body, **kw))

    def close(self) -> None:
        self._loop.run_until_complete(self._producer.close())
        self._loop.close()
