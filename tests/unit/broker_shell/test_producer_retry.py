"""The producer's retry rule against a scripted fake broker/controller on loopback.

A definite refusal (NOT_MASTER, BROKER_FENCED) is retried with fresh routing; an unknown outcome
(timeout, lost connection, FLUSH_SLAVE_TIMEOUT) is raised with ``definite=False`` after exactly one
attempt -- never silently retried; a definite non-retryable error is raised with ``definite=True``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from system_under_test.client.producer import Producer, SendError
from system_under_test.protocol import Connection, Frame, Reply, RequestCode, ResponseCode, RpcServer

OK = Reply(header={"queue_offset": 7, "phys_offset": 700, "count": 1, "master_epoch": 3, "broker_id": 2})


async def run(script: list[Any], timeout_s: float = 2.0) -> tuple[SendResultOrError, int, int]:
    sends = 0
    routes = 0

    async def handle(frame: Frame, conn: Connection) -> Reply | None:
        nonlocal sends, routes
        if frame.code == RequestCode.CONTROLLER_GET_REPLICA_INFO:
            routes += 1
            return Reply(header={"master_addr": addr, "master_epoch": 3, "master_id": 2})
        if frame.code == RequestCode.SEND_MESSAGE:
            step = script[min(sends, len(script) - 1)]
            sends += 1
            if step == "hang":
                await asyncio.sleep(30)
            if step == "close":
                conn.close("scripted drop")
                return None
            return step  # type: ignore[no-any-return]
        return None

    server = RpcServer(handle)
    host, port = await server.start("127.0.0.1", 0)
    addr = f"{host}:{port}"
    p = Producer([addr], "tok", timeout_s=timeout_s)
    try:
        result: SendResultOrError = await p.send("bs", "t", 0, b"x")
    except SendError as exc:
        result = exc
    finally:
        await p.close()
        await server.stop()
    return result, sends, routes


SendResultOrError = Any


def go(script: list[Any], timeout_s: float = 2.0) -> tuple[Any, int, int]:
    return asyncio.run(run(script, timeout_s))


def test_success_first_time() -> None:
    res, sends, _ = go([OK])
    assert (res.queue_offset, res.phys_offset, res.master_epoch, sends) == (7, 700, 3, 1)


@pytest.mark.parametrize("code", [ResponseCode.NOT_MASTER, ResponseCode.BROKER_FENCED], ids=lambda c: c.name)
def test_definite_refusal_is_retried_with_fresh_routing(code: ResponseCode) -> None:
    res, sends, routes = go([Reply.error(code, "not me"), Reply.error(code, "not me"), OK])
    assert res.queue_offset == 7 and sends == 3 and routes >= 3


@pytest.mark.parametrize("script", [
    ["close"],
    [Reply.error(ResponseCode.FLUSH_SLAVE_TIMEOUT, "slow slaves")],
    [Reply.error(ResponseCode.SYSTEM_ERROR, "boom")],
], ids=["connection-lost", "flush-slave-timeout", "system-error"])
def test_unknown_outcome_is_raised_after_one_attempt(script: list[Any]) -> None:
    res, sends, _ = go([*script, OK])
    assert isinstance(res, SendError) and not res.definite and sends == 1


def test_timeout_is_unknown() -> None:
    res, sends, _ = go(["hang"], timeout_s=0.5)
    assert isinstance(res, SendError) and not res.definite and sends == 1 and res.code is None


def test_definite_error_is_raised_not_retried() -> None:
    res, sends, _ = go([Reply.error(ResponseCode.IN_SYNC_REPLICAS_NOT_ENOUGH, "set too small"), OK])
    assert isinstance(res, SendError) and res.definite and sends == 1
    assert res.code == ResponseCode.IN_SYNC_REPLICAS_NOT_ENOUGH


def test_refusals_until_the_deadline_are_definite() -> None:
    res, sends, _ = go([Reply.error(ResponseCode.NOT_MASTER, "never")], timeout_s=0.5)
    assert isinstance(res, SendError) and res.definite and sends >= 2
