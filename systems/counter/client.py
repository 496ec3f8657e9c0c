"""The counter service's client: ``add`` and ``read`` over our wire protocol (:mod:`systems.counter.service`'s codes).

Completions follow :class:`harness.protocols.CounterClients`: an error reply the service marks definite is
``fail``; a lost connection or a timeout is ``info`` (the add may have happened).  A connection that closed (the
link went silent while the node was paused, or the service was killed) is dialled again by the next op; an op
that cannot connect is ``fail``, since nothing was sent.
"""

from __future__ import annotations

from typing import Any

from system_under_test.protocol import ConnectionLost, RequestTimeout, RpcError, connect
from systems.counter.service import CounterCode

__all__ = ["CounterClient"]


class CounterClient:
    """One connection to one node's counter service (``addr``), dialled again when it has closed."""

    def __init__(self, port: int = 7400, *, conn: Any = None, timeout_s: float = 2.0, addr: str | None = None) -> None:
        self.port = port
        self.conn = conn
        self.timeout_s = timeout_s
        self.addr = addr

    async def open(self, test: dict[str, Any], node: str) -> CounterClient:
        addr = f"{test['remote'].address(node)}:{self.port}"
        conn = await connect(addr, timeout_s=self.timeout_s)
        return CounterClient(self.port, conn=conn, timeout_s=self.timeout_s, addr=addr)

    async def setup(self, test: dict[str, Any]) -> None:
        return None

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        f = op["f"]
        if self.addr is not None and (self.conn is None or self.conn.closed):
            try:
                self.conn = await connect(self.addr, timeout_s=self.timeout_s)
            except ConnectionLost as exc:
                return {**op, "type": "fail", "error": f"reconnect to {self.addr}: {exc}"}
        try:
            if f == "add":
                await self.conn.request(CounterCode.COUNTER_ADD, {"delta": op["value"]}, timeout_s=self.timeout_s)
                return {**op, "type": "ok"}
            if f == "read":
                resp = await self.conn.request(CounterCode.COUNTER_READ, {}, timeout_s=self.timeout_s)
                return {**op, "type": "ok", "value": resp.header["value"]}
        except RpcError as exc:
            return {**op, "type": "fail" if exc.definite else "info", "error": str(exc)}
        except (ConnectionLost, RequestTimeout) as exc:
            return {**op, "type": "info", "error": f"{exc.__class__.__name__}: {exc}"}
        return {**op, "type": "fail", "error": f"unknown f {f!r}"}

    async def teardown(self, test: dict[str, Any]) -> None:
        return None

    async def close(self, test: dict[str, Any]) -> None:
        if self.conn is not None:
            self.conn.close("client closed")
