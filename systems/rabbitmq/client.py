"""An async queue client for RabbitMQ over AMQP 0-9-1 (``aiormq``), to the ``queue-client`` contract.

One client per worker, bound to one node by :meth:`RabbitQueueClient.open`: it talks only to the broker on that
node, so during a partition clients on both sides keep publishing, which is how a mirrored queue comes to have two
masters.  The connection is made on the first op and made again after any error (an error leaves the channel in a
state nobody can reason about, so it is dropped).  Every completion names the node in ``node``.

Ops (the value is a dict; ``queue`` names the queue, which the client declares, durable and of the DB's queue
type, the first time it uses it on a connection; declaring is idempotent):

* ``send {"queue": Q, "value": V}`` -- publish ``V`` (persistent, ``mandatory``) on a channel in confirm mode.
  ``ok`` once the broker confirmed it (basic.ack); ``fail`` when it certainly was not taken: no connection,
  channel or queue before publishing, a nack, or the message came back unroutable; ``info`` when the confirm
  did not come in time or the connection broke after publishing.
* ``poll {"queue": Q, "max": N}`` -- up to ``N`` basic.get with manual ack; ``ok`` with ``records`` (``[[None,
  V], ...]``: AMQP gives a message no position), then one ack for all of them.  Records taken are reported even
  if the ack (or a later get) fails: the broker then delivers them again, which the checker sees as a duplicate,
  never a loss.  ``fail`` if it failed before taking anything.
* ``drain {"queue": Q}`` -- basic.get until the queue says empty, then one ack for all: ``ok`` with ``records``.
  ``fail`` if it fails before the queue said empty (nothing was acked, so everything taken is delivered again).
  A drain is the one op that may go to another node: when its own broker takes no connection or cannot declare
  the queue (after a partition, ``autoheal`` can leave a node's broker stopped for good), it tries the other
  nodes in order; ``node`` then names the node that served it and ``client_node`` the worker's own.  Sends and
  polls never do: a client on each side of a partition talking to its own side is what the test is about.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

import aiormq
from aiormq.abc import AbstractChannel, AbstractConnection
from pamqp import commands as spec

from systems.rabbitmq.config import AMQP_PORT, QueueType, queue_type

__all__ = ["RabbitQueueClient", "check_op"]

# aiormq warns about confirms that arrive after a publish timed out, and logs every broken connection: under a
# partition that is one line per op (each op's completion says what went wrong).
logging.getLogger("aiormq").setLevel(logging.CRITICAL)

FS = ("send", "poll", "drain")


def check_op(op: Mapping[str, Any]) -> str | None:
    """What is wrong with ``op``'s shape for this client (None if nothing): pure, so unit-tested."""
    f, value = op.get("f"), op.get("value")
    if f not in FS:
        return f"rabbitmq queue: unknown f {f!r}; expected one of {', '.join(FS)}"
    if not isinstance(value, Mapping) or not isinstance(value.get("queue"), str) or not value["queue"]:
        return f"rabbitmq queue: {f} needs a value dict with a non-empty string 'queue', got {value!r}"
    if f == "send" and not isinstance(value.get("value"), str):
        return f"rabbitmq queue: send needs a string 'value', got {value.get('value')!r}"
    if f == "poll" and (type(value.get("max")) is not int or value["max"] < 1):
        return f"rabbitmq queue: poll needs an int 'max' >= 1, got {value.get('max')!r}"
    return None


class _NotSent(Exception):
    """The op failed before anything that changes the queue reached the broker."""


class RabbitQueueClient:
    """Prototype (no connection) and per-worker client (see the module docstring).

    Args:
        port: the brokers' AMQP port.
        queue_type: a name of :data:`systems.rabbitmq.config.QUEUE_TYPES`, how queues are declared.
        timeout_s: bound of each AMQP step (connect, declare, one publish's confirm, one get); keep it below the
            runner's op timeout so the client, not the runner, decides between ``fail`` and ``info``.
        drain_bound_s: bound of one whole drain.
    """

    def __init__(self, port: int = AMQP_PORT, *, queue_type_name: str = "quorum", timeout_s: float = 2.0,
                 drain_bound_s: float = 30.0, node: str | None = None, address: str | None = None) -> None:
        self.qtype: QueueType = queue_type(queue_type_name)
        self.port = port
        self.timeout_s = timeout_s
        self.drain_bound_s = drain_bound_s
        self.node = node
        self.address = address
        self._conn: AbstractConnection | None = None
        self._channel: AbstractChannel | None = None
        self._declared: set[str] = set()
        self.others: tuple[tuple[str, str], ...] = ()
        """The other nodes (name, address) a drain may go to, in the test's order."""
        self._fallbacks: dict[str, RabbitQueueClient] = {}

    async def open(self, test: dict[str, Any], node: str) -> RabbitQueueClient:
        client = self._bound(node, test["remote"].address(node))
        client.others = tuple((n, test["remote"].address(n)) for n in test.get("nodes", ()) if n != node)
        return client

    def _bound(self, node: str, address: str) -> RabbitQueueClient:
        return RabbitQueueClient(self.port, queue_type_name=self.qtype.name, timeout_s=self.timeout_s,
                                 drain_bound_s=self.drain_bound_s, node=node, address=address)

    async def setup(self, test: dict[str, Any]) -> None:
        return None

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        comp = await self._invoke(op)
        return comp if self.node is None or "node" in comp else {**comp, "node": self.node}

    async def teardown(self, test: dict[str, Any]) -> None:
        return None

    async def close(self, test: dict[str, Any]) -> None:
        await self._reset()
        for other in self._fallbacks.values():
            await other._reset()
        self._fallbacks.clear()

    # -- ops -----------------------------------------------------------------------------------------

    async def _invoke(self, op: dict[str, Any]) -> dict[str, Any]:
        problem = check_op(op)
        if problem is not None:
            return {**op, "type": "fail", "error": problem}
        if self.address is None:
            return {**op, "type": "fail", "error": "rabbitmq queue: client is not open (call open(test, node) first)"}
        value = op["value"]
        try:
            channel = await self._ready(value["queue"])
        except _NotSent as exc:
            await self._reset()
            if op["f"] == "drain" and self.others:
                return await self._drain_elsewhere(op, str(exc))
            return {**op, "type": "fail", "error": str(exc)}
        if op["f"] == "send":
            return await self._send(op, channel, value)
        return await self._take(op, channel, value)

    async def _drain_elsewhere(self, op: dict[str, Any], why: str) -> dict[str, Any]:
        """The drain through the first other node that serves it (see the module docstring)."""
        errors = [why]
        for node, address in self.others:
            other = self._fallbacks.get(node)
            if other is None:
                other = self._fallbacks[node] = self._bound(node, address)
            done = await other._invoke(op)
            if done["type"] == "ok":
                return {**done, "node": node, "client_node": self.node}
            errors.append(str(done.get("error")))
        return {**op, "type": "fail", "error": "; ".join(errors)}

    async def _send(self, op: dict[str, Any], channel: AbstractChannel, value: Mapping[str, Any]) -> dict[str, Any]:
        try:
            confirm = await channel.basic_publish(
                value["value"].encode(), routing_key=value["queue"], mandatory=True, timeout=self.timeout_s,
                properties=spec.Basic.Properties(delivery_mode=2, message_id=value["value"][:200]))
        except aiormq.exceptions.DeliveryError as exc:  # a nack, or returned as unroutable (PublishError)
            return {**op, "type": "fail", "error": f"refused by the broker: {exc}"}
        except Exception as exc:  # a timeout or a broken connection after publishing: it may have been taken
            await self._reset()
            return {**op, "type": "info", "error": f"{type(exc).__name__}: {exc}"}
        if isinstance(confirm, spec.Basic.Ack):
            return {**op, "type": "ok"}
        return {**op, "type": "fail", "error": f"refused by the broker: {type(confirm).__name__}"}

    async def _take(self, op: dict[str, Any], channel: AbstractChannel, value: Mapping[str, Any]) -> dict[str, Any]:
        drain = op["f"] == "drain"
        limit = None if drain else int(value["max"])
        deadline = time.monotonic() + self.drain_bound_s
        records: list[list[Any]] = []
        last_tag: int | None = None
        error: BaseException | None = None
        try:
            while limit is None or len(records) < limit:
                msg = await channel.basic_get(value["queue"], no_ack=False, timeout=self.timeout_s)
                if not isinstance(msg.delivery, spec.Basic.GetOk):
                    break  # GetEmpty: nothing ready
                records.append([None, msg.body.decode(errors="replace")])
                last_tag = msg.delivery.delivery_tag
                if drain and time.monotonic() > deadline:
                    raise TimeoutError(f"{value['queue']} not empty after {self.drain_bound_s:g} s of draining")
        except Exception as exc:
            error = exc
        if error is not None and (drain or not records):
            await self._reset()  # nothing acked: every message taken is delivered again
            return {**op, "type": "fail", "error": f"{type(error).__name__}: {error}"}
        if error is not None:
            await self._reset()  # records taken but not acked: reported, and delivered again (duplicates)
        elif last_tag is not None:
            try:
                await channel.basic_ack(last_tag, multiple=True)
            except Exception:
                await self._reset()  # an ack that did not arrive: the records come again, a duplicate
        return {**op, "type": "ok", "value": {**value, "records": records}}

    # -- connection ----------------------------------------------------------------------------------

    async def _ready(self, queue: str) -> AbstractChannel:
        """A confirm-mode channel on which ``queue`` is declared.

        Raises:
            _NotSent: no connection, channel or declaration within ``timeout_s`` (nothing was published).
        """
        step = "connect"
        try:
            if self._conn is None or self._conn.is_closed:
                self._channel, self._declared = None, set()
                conn = aiormq.Connection(f"amqp://guest:guest@{self.address}:{self.port}/?heartbeat=10")
                self._conn = conn
                await asyncio.wait_for(conn.connect(), self.timeout_s)
            if self._channel is None or self._channel.is_closed:
                step = "channel"
                self._declared = set()
                self._channel = await asyncio.wait_for(self._conn.channel(publisher_confirms=True), self.timeout_s)
            if queue not in self._declared:
                step = f"declare {queue}"
                await self._channel.queue_declare(queue, durable=True, arguments=dict(self.qtype.arguments),
                                                  timeout=self.timeout_s)
                self._declared.add(queue)
            return self._channel
        except Exception as exc:
            raise _NotSent(f"{step} on {self.node} ({self.address}:{self.port}): "
                           f"{type(exc).__name__}: {exc}") from None

    async def _reset(self) -> None:
        conn, self._conn, self._channel, self._declared = self._conn, None, None, set()
        if conn is not None:
            try:
                await asyncio.wait_for(conn.close(), 1.0)
            except Exception:  # closing a broken connection may fail any way; it is dropped either way
                pass
