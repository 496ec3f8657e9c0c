"""An async per-key register client for etcd over its v3 HTTP/JSON gateway (the thin shell around ``wire``).

One client per worker, bound to one member by :meth:`EtcdRegisterClient.open`.  Ops and their completions are
those of :mod:`systems.etcd.wire` (the ``cas-register`` shape plus a ``key``); every completion of an opened client
also names the member it went to in ``node``, so a stale read in the history says which member served it (a
member cut off from the majority, or one just restarted).  Completions:

* ``ok``   -- the member answered; a read carries the value, a cas took its success branch.
* ``fail`` -- certainly no effect: a cas whose compare did not match, a request never sent (connection refused
  or not made in time), an etcd refusal of a definite kind (``wire.DEFINITE_CODES``), and every failed read
  (a read changes nothing, so it never needs ``info``).
* ``info`` -- a write or cas that timed out, lost its connection after sending, or got an error etcd can also
  return after committing (e.g. "request timed out"): it may or may not have happened.

The read mode is the client's: ``linearizable`` (default; a quorum read through the leader) or ``serializable``
(the member answers from its own store, which Jepsen's 2020 etcd analysis found stale under partitions).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import httpx

from systems.etcd.wire import (
    READ_MODES,
    EtcdError,
    cas_pair,
    cas_request,
    error_from_reply,
    put_request,
    range_request,
    read_value,
    txn_succeeded,
)
from workloads.common import completion_for

__all__ = ["CLIENT_PORT", "EtcdRegisterClient", "post_json", "serializable_for", "transport_error"]

CLIENT_PORT = 2379

# httpx logs every request at INFO: under `splitbrain test` that is one line per op, which buries the progress
# line and the verdict.  Its warnings still show.
logging.getLogger("httpx").setLevel(logging.WARNING)

# Raised before a byte of the request reached the server: the request certainly had no effect.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def serializable_for(read_mode: str) -> bool:
    """The range request's ``serializable`` flag for a read mode.

    Raises:
        ValueError: an unknown mode (names the option ``read_mode`` and the allowed values).
    """
    try:
        return READ_MODES[read_mode]
    except (KeyError, TypeError):
        raise ValueError(f"read_mode: expected one of {sorted(READ_MODES)}, got {read_mode!r}") from None


def transport_error(path: str, exc: httpx.HTTPError) -> EtcdError:
    """The error an HTTP exception stands for: definite only if the request never left (no connection made,
    none free in the pool); a timeout or a broken connection after sending leaves the outcome unknown."""
    if isinstance(exc, _NOT_SENT):
        return EtcdError(f"{path} not sent: {type(exc).__name__}: {exc}", definite=True)
    return EtcdError(f"{path}: {type(exc).__name__}: {exc}", definite=False)


async def post_json(http: httpx.AsyncClient, path: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
    """POST ``body`` to the gateway at ``path``; the parsed JSON reply of a 200.

    Raises:
        EtcdError: ``definite`` if the request was never sent or etcd refused it before proposing; otherwise
            unknown (a timeout or a lost connection after sending, an error reply etcd may send after commit).
    """
    try:
        resp = await http.post(path, json=body)
    except httpx.HTTPError as exc:
        raise transport_error(path, exc) from None
    try:
        parsed: Any = resp.json()
    except ValueError:
        parsed = resp.text
    if resp.status_code != 200:
        raise error_from_reply(resp.status_code, parsed)
    if not isinstance(parsed, Mapping):
        raise EtcdError(f"{path}: HTTP 200 with a body that is not a JSON object: {str(parsed)[:200]!r}",
                        definite=False)
    return parsed


class EtcdRegisterClient:
    """Prototype (no connection) and per-worker client (an ``httpx.AsyncClient`` to one member).

    Args:
        port: the members' client port.
        read_mode: ``linearizable`` or ``serializable`` (see the module docstring).
        timeout_s: per-request bound (connect: at most 1 s of it); keep it below the runner's op timeout so
            the client, not the runner, decides between ``fail`` and ``info``.
    """

    def __init__(self, port: int = CLIENT_PORT, *, read_mode: str = "linearizable", timeout_s: float = 2.0,
                 http: httpx.AsyncClient | None = None, node: str | None = None) -> None:
        self.serializable = serializable_for(read_mode)
        self.read_mode = read_mode
        self.port = port
        self.timeout_s = timeout_s
        self.http = http
        self.node = node

    async def open(self, test: dict[str, Any], node: str) -> EtcdRegisterClient:
        base = f"http://{test['remote'].address(node)}:{self.port}"
        http = httpx.AsyncClient(base_url=base, timeout=httpx.Timeout(self.timeout_s,
                                                                      connect=min(1.0, self.timeout_s)))
        return EtcdRegisterClient(self.port, read_mode=self.read_mode, timeout_s=self.timeout_s, http=http, node=node)

    async def setup(self, test: dict[str, Any]) -> None:
        return None

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        comp = await self._invoke(op)
        return comp if self.node is None else {**comp, "node": self.node}

    async def _invoke(self, op: dict[str, Any]) -> dict[str, Any]:
        f, key = op.get("f"), op.get("key")
        try:
            if self.http is None:
                raise EtcdError("client is not open (call open(test, node) first)", definite=True)
            if not isinstance(key, str):
                raise EtcdError(f"op needs a string 'key' (the register's name), got {key!r}", definite=True)
            if f == "read":
                reply = await post_json(self.http, "/v3/kv/range", range_request(key, serializable=self.serializable))
                return {**op, "type": "ok", "value": read_value(reply)}
            if f == "write":
                await post_json(self.http, "/v3/kv/put", put_request(key, op.get("value")))
                return {**op, "type": "ok"}
            if f == "cas":
                expected, new = cas_pair(op.get("value"))
                reply = await post_json(self.http, "/v3/kv/txn", cas_request(key, expected, new))
                if txn_succeeded(reply):
                    return {**op, "type": "ok"}
                return {**op, "type": "fail", "error": f"cas: {key} does not hold {expected!r}"}
        except Exception as exc:
            return completion_for(op, exc, read_only=f == "read")
        return {**op, "type": "fail", "error": f"etcd register: unknown f {f!r}; expected read, write or cas"}

    async def teardown(self, test: dict[str, Any]) -> None:
        return None

    async def close(self, test: dict[str, Any]) -> None:
        if self.http is not None:
            await self.http.aclose()
            self.http = None
