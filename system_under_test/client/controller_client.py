"""A client of the controller quorum that follows the leader.

Used by brokers (registration, heartbeats, AlterSyncStateSet), the admin CLI and the workloads.
It keeps one connection per controller address, sends to the last known leader, and on
``CONTROLLER_NOT_LEADER`` follows the ``leader_addr`` hint (or tries the next address).  Which controller
comes first is decided by :class:`~.controller_route.ControllerRoute` (pure): a controller that left a
request or a probe unanswered is *silent* -- never the believed leader, tried last, and PINGed (within
``probe_timeout_s``) before anything is sent to it, hints naming it included; so is the believed leader when
its link has gone quiet or was closed (a stopped process still completes a TCP handshake).  A paused controller
leader therefore costs each client at most the one request it had in flight, not a request timeout per request
for as long as the pause lasts.

Retry rule: a request is retried only when it certainly had no effect -- a *definite* error
(NOT_LEADER, FORMATION_PENDING, ...), a connection that could not be opened, or a probe that got no
answer (nothing was sent).  A timeout or a connection lost after sending leaves the outcome unknown and
is raised to the caller, who must record it as such (``info``); the controller becomes silent.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from system_under_test.client.controller_route import ControllerRoute
from system_under_test.client.quiet_link import link_gone_quiet
from system_under_test.client.register_requests import elect_call, register_broker_call
from system_under_test.client.workload_requests import apply_id_call, next_id_call, replica_info_call
from system_under_test.protocol import (
    SCHEMAS,
    Connection,
    ConnectionLost,
    Frame,
    Handler,
    RequestCode,
    RequestTimeout,
    ResponseCode,
    RpcError,
    connect,
)
from system_under_test.protocol.rpc import _no_handler

RETRYABLE = {ResponseCode.CONTROLLER_NOT_LEADER, ResponseCode.FORMATION_PENDING, ResponseCode.NOT_READY,
             ResponseCode.SYSTEM_BUSY}
_MAX_BACKOFF_S = 0.25  # between passes that found no leader: about one Raft election (tick 50 ms x 4 ticks, x1-2)


class NoControllerAvailable(Exception):
    """No controller answered within the deadline (names every address and its last error)."""

    definite = True  # no controller accepted the request, so it had no effect


class ControllerClient:
    """Leader-following client.  Not thread-safe; use from one event loop.

    Args:
        addrs: the controllers' ``host:port`` addresses.
        token: the cluster token, added to the requests whose schema carries one.
        timeout_s: how long one request waits for its reply (a call's default deadline is twice this).
        probe_timeout_s: how long a silent controller gets to answer a PING before it is passed over
            (at most ``timeout_s``).  Too low passes over a live controller on a loaded machine (it is
            probed again on the next pass); too high lengthens each pass while a controller is paused.
        handler: serves requests the controllers send on these connections.
    """

    def __init__(
        self, addrs: list[str], *, token: str | None = None, timeout_s: float = 3.0, probe_timeout_s: float = 0.5,
        handler: Handler = _no_handler,
    ) -> None:
        if not addrs:
            raise ValueError("ControllerClient needs at least one controller address")
        if not probe_timeout_s > 0:  # NaN too
            raise ValueError(f"ControllerClient probe_timeout_s must be > 0 seconds, got {probe_timeout_s!r}")
        self.route = ControllerRoute.of(addrs)
        self.token = token
        self.timeout_s = timeout_s
        self.probe_timeout_s = min(probe_timeout_s, timeout_s)
        self.handler = handler
        self._conns: dict[str, Connection] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    @property
    def addrs(self) -> list[str]:
        """Every controller address known (configured ones first, then those learnt from hints)."""
        return list(self.route.addrs)

    @property
    def leader_addr(self) -> str | None:
        """The controller believed to lead (None: unknown)."""
        return self.route.leader

    async def _conn(self, addr: str, timeout_s: float | None = None) -> Connection:
        conn = self._conns.get(addr)
        if conn is not None and not conn.closed:
            return conn
        lock = self._locks.setdefault(addr, asyncio.Lock())
        async with lock:
            conn = self._conns.get(addr)
            if conn is None or conn.closed:
                conn = await connect(addr, self.handler, timeout_s=timeout_s or min(self.timeout_s, 2.0))
                self._conns[addr] = conn
        return conn

    def _with_token(self, code: int, header: dict[str, Any]) -> dict[str, Any]:
        schema = SCHEMAS.get(code)  # type: ignore[call-overload]  # IntEnum keys hash like ints
        if self.token is not None and schema is not None and "token" in schema and "token" not in header:
            return {**header, "token": self.token}
        return header

    async def call_one(self, addr: str, code: int, header: dict[str, Any] | None = None, body: Any = None, *,
                       timeout_s: float | None = None, check: bool = True) -> Frame:
        """Send one request to one controller (no leader following); what it shows of the controller's
        liveness (an answer, or silence) updates the route."""
        try:
            conn = await self._conn(addr)
            resp = await conn.request(code, self._with_token(code, header or {}), body,
                                      timeout_s=timeout_s or self.timeout_s, check=check)
        except RpcError:
            self.route = self.route.answered(addr)
            raise
        except (ConnectionLost, RequestTimeout):
            self.route = self.route.went_silent(addr)
            raise
        self.route = self.route.answered(addr)
        return resp

    def _gone_quiet(self, addr: str) -> bool:
        """The connection to ``addr`` has not heard from its peer for a while (:func:`link_gone_quiet`), or was
        closed (the link's liveness closes a silent one): a new connection proves nothing -- the kernel opens
        one to a stopped process -- so a PING must, before a request goes out on it."""
        conn = self._conns.get(addr)
        if conn is None:
            return False
        if conn.closed:
            return True
        ping_s = conn.liveness.ping_interval_s if conn.liveness is not None else None
        return link_gone_quiet(asyncio.get_running_loop().time() - conn.received_at, ping_s)

    async def _probe(self, addr: str, remaining_s: float) -> str | None:
        """PING a silent controller (or one whose link went quiet): None if it answered (it is not silent), else
        why it is passed over.  A PING changes nothing, so a probe that gets no answer is a definite failure."""
        timeout_s = max(0.01, min(self.probe_timeout_s, remaining_s))
        try:
            conn = await self._conn(addr, timeout_s)
            await conn.request(RequestCode.PING, {}, timeout_s=timeout_s)
        except (ConnectionLost, RequestTimeout, RpcError) as exc:
            self.route = self.route.went_silent(addr)
            return f"silent: no answer to a probe within {timeout_s:.2f}s ({exc})"
        self.route = self.route.answered(addr)
        return None

    async def call(self, code: int, header: dict[str, Any] | None = None, body: Any = None, *,
                   deadline_s: float | None = None) -> Frame:
        """Send to the leader, following hints, until success or ``deadline_s``.

        The order of each pass comes from :meth:`ControllerRoute.plan`; a silent controller is PINGed
        before the request is sent to it.

        Raises:
            RpcError: a non-retryable error reply (definite or not, see ``RpcError.definite``).
            RequestTimeout / ConnectionLost: outcome unknown (the request was sent); the controller
                becomes silent.
            NoControllerAvailable: nobody took the request within the deadline (it had no effect).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (deadline_s if deadline_s is not None else self.timeout_s * 2)
        errors: dict[str, str] = {}
        order = self.route.plan()
        i = 0
        backoff = 0.02

        async def back_off() -> None:
            nonlocal backoff
            await asyncio.sleep(min(backoff, max(0.0, deadline - loop.time())))
            backoff = min(backoff * 2, _MAX_BACKOFF_S)

        while True:
            if i >= len(order):
                order, i = self.route.plan(), 0
            attempt = order[i]
            addr = attempt.addr
            i += 1
            remaining = deadline - loop.time()
            if remaining <= 0:
                detail = "; ".join(f"{a}: {e}" for a, e in errors.items()) or "no attempt"
                raise NoControllerAvailable(f"no controller leader reachable for {RequestCode(code).name}: {detail}")
            # silent now, not when the pass was planned (another call may know more), or its link went quiet
            if addr in self.route.silent or self._gone_quiet(addr):
                why = await self._probe(addr, remaining)
                if why is not None:
                    errors[addr] = why
                    await back_off()  # a refused connect fails at once: no busy loop over dead controllers
                    continue
            try:
                conn = await self._conn(addr)
            except ConnectionLost as exc:
                errors[addr] = str(exc)
                self.route = self.route.went_silent(addr)
                await back_off()
                continue
            try:
                resp = await conn.request(code, self._with_token(code, header or {}), body,
                                          timeout_s=min(self.timeout_s, max(remaining, 0.05)))
            except RpcError as exc:
                if exc.code not in RETRYABLE:
                    self.route = self.route.accepted(addr)
                    raise
                errors[addr] = str(exc)
                hint = exc.header.get("leader_addr") if exc.code == ResponseCode.CONTROLLER_NOT_LEADER else None
                self.route, follow = self.route.not_leader(addr, hint if isinstance(hint, str) else None)
                if follow:
                    assert isinstance(hint, str)
                    order, i = self.route.after_hint(order, i, hint), 0
                    if hint in errors:  # it refused this call already: hints going round in a circle
                        await back_off()
                else:
                    await back_off()
                continue
            except (ConnectionLost, RequestTimeout):
                self.route = self.route.went_silent(addr)
                raise
            self.route = self.route.accepted(addr)
            return resp

    async def call_all(self, code: int, header: dict[str, Any] | None = None, *,
                       timeout_s: float | None = None) -> dict[str, Frame | BaseException]:
        """Send to every controller concurrently (heartbeats); returns reply or exception per address."""
        addrs = self.addrs

        async def one(addr: str) -> Frame | BaseException:
            try:
                return await self.call_one(addr, code, header, timeout_s=timeout_s, check=False)
            except Exception as exc:
                return exc

        results = await asyncio.gather(*(one(a) for a in addrs))
        for addr, res in zip(addrs, results, strict=True):
            if isinstance(res, Frame) and res.code == ResponseCode.SUCCESS and self.route.leader is None:
                self.route = self.route.accepted(addr)
        return dict(zip(addrs, results, strict=True))

    async def close(self) -> None:
        for conn in self._conns.values():
            conn.close("client closed")
        self._conns.clear()

    async def __aenter__(self) -> ControllerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            await self.close()

    # -- typed helpers ------------------------------------------------------------------------

    async def get_metadata(self, addr: str | None = None) -> dict[str, Any]:
        if addr is not None:
            return (await self.call_one(addr, RequestCode.CONTROLLER_GET_METADATA_INFO)).header
        return (await self.call(RequestCode.CONTROLLER_GET_METADATA_INFO)).header

    async def get_next_broker_id(self, cluster_name: str, broker_name: str) -> int:
        resp = await self.call(*next_id_call(cluster_name, broker_name))
        return int(resp.header["next_broker_id"])

    async def apply_broker_id(self, cluster_name: str, broker_name: str, broker_id: int, register_code: str,
                              broker_addr: str) -> None:
        await self.call(*apply_id_call(cluster_name, broker_name, broker_id, register_code, broker_addr))

    async def register_broker(self, cluster_name: str, broker_name: str, broker_id: int, broker_addr: str,
                              incarnation_id: str, cluster_id: str | None) -> dict[str, Any]:
        resp = await self.call(*register_broker_call(cluster_name, broker_name, broker_id, broker_addr,
                                                     incarnation_id, cluster_id))
        return {**resp.header, "body": resp.body}

    async def get_replica_info(self, broker_name: str) -> dict[str, Any]:
        resp = await self.call(*replica_info_call(broker_name))
        return {**resp.header, "body": resp.body}

    async def elect_master(self, broker_name: str, broker_id: int | None = None, *, designate: bool = False,
                           cluster_name: str | None = None) -> dict[str, Any]:
        resp = await self.call(*elect_call(broker_name, broker_id, designate=designate, cluster_name=cluster_name))
        return {**resp.header, "body": resp.body}
