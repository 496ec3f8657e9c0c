"""A client of the controller quorum that follows the leader.

Used by brokers (registration, heartbeats, AlterSyncStateSet), the admin CLI and the workloads.
It keeps one connection per controller address, sends to the last known leader, and on
``CONTROLLER_NOT_LEADER`` follows the ``leader_addr`` hint (or tries the next address).

Retry rule: a request is retried only when it certainly had no effect -- a *definite* error
(NOT_LEADER, FORMATION_PENDING, ...) or a connection that could not be opened.  A timeout or a
connection lost after sending leaves the outcome unknown and is raised to the caller, who must
record it as such (``info``).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from system_under_test.protocol import (
    SCHEMAS,
    Connection,
    ConnectionLost,
    Frame,
    Handler,
    RequestCode,
    ResponseCode,
    RpcError,
    connect,
)
from system_under_test.protocol.rpc import _no_handler

RETRYABLE = {ResponseCode.CONTROLLER_NOT_LEADER, ResponseCode.FORMATION_PENDING, ResponseCode.NOT_READY,
             ResponseCode.SYSTEM_BUSY}


class NoControllerAvailable(Exception):
    """No controller answered within the deadline (names every address and its last error)."""

    definite = True  # no controller accepted the request, so it had no effect


class ControllerClient:
    """Leader-following client.  Not thread-safe; use from one event loop."""

    def __init__(
        self, addrs: list[str], *, token: str | None = None, timeout_s: float = 3.0, handler: Handler = _no_handler,
    ) -> None:
        if not addrs:
            raise ValueError("ControllerClient needs at least one controller address")
        self.addrs = list(dict.fromkeys(addrs))
        self.token = token
        self.timeout_s = timeout_s
        self.handler = handler
        self.leader_addr: str | None = None
        self._conns: dict[str, Connection] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def _conn(self, addr: str) -> Connection:
        conn = self._conns.get(addr)
        if conn is not None and not conn.closed:
            return conn
        lock = self._locks.setdefault(addr, asyncio.Lock())
        async with lock:
            conn = self._conns.get(addr)
            if conn is None or conn.closed:
                conn = await connect(addr, self.handler, timeout_s=min(self.timeout_s, 2.0))
                self._conns[addr] = conn
        return conn

    def _with_token(self, code: int, header: dict[str, Any]) -> dict[str, Any]:
        schema = SCHEMAS.get(code)  # type: ignore[call-overload]  # IntEnum keys hash like ints
        if self.token is not None and schema is not None and "token" in schema and "token" not in header:
            return {**header, "token": self.token}
        return header

    async def call_one(self, addr: str, code: int, header: dict[str, Any] | None = None, body: Any = None, *,
                       timeout_s: float | None = None, check: bool = True) -> Frame:
        """Send one request to one controller (no leader following)."""
        conn = await self._conn(addr)
        return await conn.request(code, self._with_token(code, header or {}), body,
                                  timeout_s=timeout_s or self.timeout_s, check=check)

    async def call(self, code: int, header: dict[str, Any] | None = None, body: Any = None, *,
                   deadline_s: float | None = None) -> Frame:
        """Send to the leader, following hints, until success or ``deadline_s``.

        Raises:
            RpcError: a non-retryable error reply (definite or not, see ``RpcError.definite``).
            RequestTimeout / ConnectionLost: outcome unknown (the request was sent).
            NoControllerAvailable: nobody took the request within the deadline (it had no effect).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (deadline_s if deadline_s is not None else self.timeout_s * 2)
        errors: dict[str, str] = {}
        order = self._order()
        i = 0
        backoff = 0.02
        while True:
            addr = order[i % len(order)]
            i += 1
            remaining = deadline - loop.time()
            if remaining <= 0:
                detail = "; ".join(f"{a}: {e}" for a, e in errors.items()) or "no attempt"
                raise NoControllerAvailable(f"no controller leader reachable for {RequestCode(code).name}: {detail}")
            try:
                conn = await self._conn(addr)
            except ConnectionLost as exc:
                errors[addr] = str(exc)
                if self.leader_addr == addr:
                    self.leader_addr = None
                await asyncio.sleep(min(backoff, max(0.0, remaining)))
                backoff = min(backoff * 2, 0.5)
                continue
            try:
                resp = await conn.request(code, self._with_token(code, header or {}), body,
                                          timeout_s=min(self.timeout_s, max(remaining, 0.05)))
            except RpcError as exc:
                if exc.code not in RETRYABLE:
                    self.leader_addr = addr
                    raise
                errors[addr] = str(exc)
                hint = exc.header.get("leader_addr")
                if exc.code == ResponseCode.CONTROLLER_NOT_LEADER and isinstance(hint, str) and hint and hint != addr:
                    self.leader_addr = hint
                    if hint not in self.addrs:
                        self.addrs.append(hint)
                    order = [hint] + [a for a in self.addrs if a != hint]
                    i = 0
                else:
                    self.leader_addr = None
                    await asyncio.sleep(min(backoff, max(0.0, remaining)))
                    backoff = min(backoff * 2, 0.5)
                continue
            self.leader_addr = addr
            return resp

    def _order(self) -> list[str]:
        if self.leader_addr:
            return [self.leader_addr] + [a for a in self.addrs if a != self.leader_addr]
        return list(self.addrs)

    async def call_all(self, code: int, header: dict[str, Any] | None = None, *,
                       timeout_s: float | None = None) -> dict[str, Frame | BaseException]:
        """Send to every controller concurrently (heartbeats); returns reply or exception per address."""

        async def one(addr: str) -> Frame | BaseException:
            try:
                return await self.call_one(addr, code, header, timeout_s=timeout_s, check=False)
            except Exception as exc:
                return exc

        results = await asyncio.gather(*(one(a) for a in self.addrs))
        for addr, res in zip(self.addrs, results, strict=True):
            if isinstance(res, Frame) and res.code == ResponseCode.SUCCESS:
                self.leader_addr = self.leader_addr or addr
        return dict(zip(self.addrs, results, strict=True))

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
        resp = await self.call(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
                               {"cluster_name": cluster_name, "broker_name": broker_name})
        return int(resp.header["next_broker_id"])

    async def apply_broker_id(self, cluster_name: str, broker_name: str, broker_id: int, register_code: str,
                              broker_addr: str) -> None:
        await self.call(RequestCode.CONTROLLER_APPLY_BROKER_ID, {
            "cluster_name": cluster_name, "broker_name": broker_name, "broker_id": broker_id,
            "register_code": register_code, "broker_addr": broker_addr})

    async def register_broker(self, cluster_name: str, broker_name: str, broker_id: int, broker_addr: str,
                              incarnation_id: str, cluster_id: str | None) -> dict[str, Any]:
        resp = await self.call(RequestCode.CONTROLLER_REGISTER_BROKER, {
            "cluster_name": cluster_name, "broker_name": broker_name, "broker_id": broker_id,
            "broker_addr": broker_addr, "incarnation_id": incarnation_id, "cluster_id": cluster_id})
        return {**resp.header, "body": resp.body}

    async def get_replica_info(self, broker_name: str) -> dict[str, Any]:
        resp = await self.call(RequestCode.CONTROLLER_GET_REPLICA_INFO, {"broker_name": broker_name})
        return {**resp.header, "body": resp.body}

    async def elect_master(self, broker_name: str, broker_id: int | None = None, *, designate: bool = False,
                           cluster_name: str | None = None) -> dict[str, Any]:
        header: dict[str, Any] = {"broker_name": broker_name, "broker_id": broker_id, "designate": designate}
        if cluster_name:
            header["cluster_name"] = cluster_name
        resp = await self.call(RequestCode.CONTROLLER_ELECT_MASTER, header)
        return {**resp.header, "body": resp.body}
