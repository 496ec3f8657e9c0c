"""The ``queue`` workload: producers, consumers and a final drain, judged by the queue anomaly checker.

In a nutshell.  Every broker set ``broker-i`` holds queues ``0..queues_per_set-1`` of topic ``topic``
(default ``sb``); a queue is named ``"<topic>/<broker-set>/<queue-id>"``.  Client threads

* **send** a value that is unique in the whole test -- ``"w<worker>-<n>"``, ``n`` counting that worker
  thread's sends (per worker, not per process: a process id changes after every ``info``, so values keyed
  by it would shift between a run and its repro) -- to a random queue through the current master
  (``system_under_test.client.producer``);
* **poll** a queue from the thread's own cursor (a logical queue offset; the generator moves it past the
  records each ok poll returned), usually from the master and sometimes (``slave_read_fraction``) from a
  slave replica named by index (the client maps it to a broker id);
* **commit** the cursor as the consumer group's offset (``commit_fraction`` of the non-send ops).

After the nemesis heals and the cluster recovers, the final generator **drain**\\ s every queue from
offset 0 to its end (each queue retried until one drain completes ok).

Op values (exactly what ``checker.queue`` expects)::

    send   invoke {"queue": Q, "value": "w3-17"}          ok: + "offset" (queue offset), "master_epoch", "broker_id"
    poll   invoke {"queue": Q, "offset": F, "max": N[, "replica": k]}
           ok:    + "records": [[offset, value], ...], "next_offset", "max_offset", "broker_id"
    commit invoke {"queue": Q, "offset": F}                ok: unchanged
    drain  invoke {"queue": Q, "offset": 0}                ok: + "records" (every visible record)

Completions (:func:`workloads.common.completion_for`): a *definite* error (``protocol.codes.is_definite``, a producer
``SendError(definite=True)``, no controller or no master reachable before sending) is ``fail``; anything else
(timeout, lost connection, FLUSH_SLAVE_TIMEOUT, a non-definite code) is ``info`` -- except for read-only ops
(poll, drain, and the controller-register reads), which have no effect and therefore always ``fail``.

Settings.  With ``all_ack_in_sync_state_set: true`` and no unclean election (the *safe* settings) a lost
acknowledged send is a bug in the cluster; with ``all_ack_in_sync_state_set: false`` or
``enable_elect_unclean_master: true`` (*unsafe*) loss is allowed by design and the test proves the harness
*detects* it.  The queue checker's stats carry ``settings: safe|unsafe`` (see docs/workloads.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from checker.compose import Result
from checker.perf import analyze_perf
from checker.queue import check_queue
from harness import generator as g
from harness.errors import SpecError
from workloads.common import (
    StatsChecker,
    WireDB,
    cluster_options,
    completion_for,
    invocation,
    option,
    parse_options,
    thread_of,
    wire_spec_db,
)
from workloads.registry import Workload, WorkloadContext, register

__all__ = [
    "QUEUE_FS", "PerfChecker", "QueueChecker", "QueueClient", "QueueGen", "QueueOptions", "build_queue",
    "drain_generator", "queue_names", "queue_options", "settings_of",
]

log = logging.getLogger("splitbrain.workloads.queue")

QUEUE_FS = frozenset({"send", "poll", "commit", "drain"})


# ---------------------------------------------------------------------------------------------
# Options


@dataclass(frozen=True)
class QueueOptions:
    """Options of the queue workload (the spec's ``workloads[i].options``).

    Attributes:
        topic: topic name on every broker set.
        queues_per_set: queues per broker set; more queues = less contention per queue, longer drains.
        send_fraction: share of main-phase ops that are sends (the rest poll or commit).
        max_poll_batch: most records one poll asks for.
        slave_read_fraction: share of polls sent to a slave replica instead of the master.
        commit_fraction: share of non-send ops that commit the consumer's cursor.
        send_timeout_s: how long a producer keeps retrying definite refusals (keep below the runner's
            op timeout so a send can still end definitely).
        route_ttl_s: how long a worker reuses the controller's answer on where to poll (master and slave
            addresses) before asking again; a poll that fails drops it at once.  0 asks the controller
            before every poll (one controller round trip per poll: at high rates that doubled the client's
            RPCs and made the controllers the busiest nodes after the master).
        share_connections: all workers' producers and consumers share one connection per broker (requests
            from many workers in flight on it, written together: fewer system calls on both ends) instead of
            two per worker, and one controller client instead of two per worker.  A lost connection fails the
            ops in flight on it, as before (``info`` for a send, ``fail`` for a poll); false restores a producer
            and a consumer per worker with connections of their own.
    """

    topic: str = option("sb", pattern=r"[A-Za-z0-9_.-]{1,64}", allowed="a topic name of 1-64 chars [A-Za-z0-9_.-]")
    queues_per_set: int = option(4, 1, 64, allowed="an integer in [1, 64]")
    send_fraction: float = option(0.5, 0.0, 1.0, allowed="a number in [0, 1]")
    max_poll_batch: int = option(32, 1, 1024, allowed="an integer in [1, 1024]")
    slave_read_fraction: float = option(0.2, 0.0, 1.0, allowed="a number in [0, 1]")
    commit_fraction: float = option(0.1, 0.0, 1.0, allowed="a number in [0, 1]")
    send_timeout_s: float = option(3.0, 0.1, 60.0, allowed="a number of seconds in [0.1, 60]")
    route_ttl_s: float = option(1.0, 0.0, 60.0, allowed="a number of seconds in [0, 60]")
    share_connections: bool = option(True, allowed="true or false")


def queue_options(ctx: WorkloadContext) -> QueueOptions:
    """Validated :class:`QueueOptions` (SpecError names ``workloads[i].options.<key>``)."""
    return parse_options(ctx, QueueOptions)


def queue_names(topic: str, broker_sets: int, queues_per_set: int) -> tuple[str, ...]:
    return tuple(f"{topic}/broker-{s}/{q}" for s in range(broker_sets) for q in range(queues_per_set))


def settings_of(cluster_options: Any) -> str:
    """``safe`` (acked sends must survive) or ``unsafe`` (the cluster may lose them by design)."""
    if cluster_options is None:
        return "safe"
    unsafe = (not getattr(cluster_options, "all_ack_in_sync_state_set", True)
              or getattr(cluster_options, "enable_elect_unclean_master", False)
              or "ack-before-replication" in getattr(cluster_options, "bugs", ()))
    return "unsafe" if unsafe else "safe"


# ---------------------------------------------------------------------------------------------
# Generator


@dataclass(frozen=True, slots=True)
class QueueGen:
    """Main-phase generator (pure, seeded by ``ctx.rng``).  Dicts are never mutated: each step copies.

    ``seqs`` maps a worker thread to its next send number; ``cursors`` maps (thread, queue) to the thread's
    next poll offset and follows ok polls (see :meth:`update`).  Under :func:`harness.generator.pace` each
    op's draws come from that worker's own stream, so a worker's ops depend on the seed, the worker and
    what its own polls returned -- not on other workers' timing.
    """

    queues: tuple[str, ...]
    options: QueueOptions
    seqs: Mapping[Any, int]
    cursors: Mapping[tuple[Any, str], int]

    @staticmethod
    def start(queues: Sequence[str], options: QueueOptions) -> QueueGen:
        if not queues:
            raise ValueError("QueueGen needs at least one queue")
        return QueueGen(tuple(queues), options, {}, {})

    def op(self, ctx: g.Context) -> Any:
        thread = ctx.free_thread()
        if thread is None:
            return (g.PENDING, self)
        rng, o = ctx.rng, self.options
        queue = self.queues[rng.randrange(len(self.queues))]
        if rng.random() < o.send_fraction:
            n = self.seqs.get(thread, 0)
            inv = invocation(ctx, "send", {"queue": queue, "value": f"w{thread}-{n}"})
            return (inv, replace(self, seqs={**self.seqs, thread: n + 1}))
        cursor = self.cursors.get((thread, queue), 0)
        if rng.random() < o.commit_fraction:
            return (invocation(ctx, "commit", {"queue": queue, "offset": cursor}), self)
        value: dict[str, Any] = {"queue": queue, "offset": cursor, "max": o.max_poll_batch}
        if rng.random() < o.slave_read_fraction:
            value["replica"] = rng.randrange(4)
        return (invocation(ctx, "poll", value), self)

    def update(self, ctx: g.Context, event: dict[str, Any]) -> QueueGen:
        if event.get("f") != "poll" or event.get("type") != "ok":
            return self
        value = event.get("value")
        records = value.get("records") if isinstance(value, Mapping) else None
        if not records or not isinstance(value, Mapping):
            return self
        key = (thread_of(ctx, event["process"]), value["queue"])
        return replace(self, cursors={**self.cursors, key: int(records[-1][0]) + 1})


def drain_generator(queues: Sequence[str], *, retry_interval_s: float = 0.25) -> Any:
    """Drain each queue from offset 0 to its end, one queue after the other, retrying until one drain is ok."""
    return [g.until_ok(g.delay(retry_interval_s, g.repeat({"f": "drain", "value": {"queue": q, "offset": 0}})))
            for q in queues]


# ---------------------------------------------------------------------------------------------
# Client


def _split(queue: str) -> tuple[str, str, int]:
    topic, broker_set, queue_id = queue.rsplit("/", 2)
    return topic, broker_set, int(queue_id)


class QueueClient:
    """One producer + one consumer per worker, both following the controller's routing.

    With ``share_connections`` every client opened from this one shares one broker connection pool
    (:class:`~system_under_test.client.producer.BrokerConnections`, counted: the last client closed closes it)
    and one controller client (a producer's and a consumer's each per worker kept 64 idle controller links for 32
    workers, each PINGed by liveness every ping interval; the last client closed closes it).
    """

    def __init__(self, db: object, options: QueueOptions, *, producer: Any = None, consumer: Any = None,
                 ready_timeout_s: float = 30.0) -> None:
        self._db = db  # the DB the workload was built with; narrowed where it is called (:attr:`db`)
        self.options = options
        self.producer = producer
        self.consumer = consumer
        self.ready_timeout_s = ready_timeout_s
        self._routes: dict[str, tuple[float, dict[str, Any]]] = {}  # broker set -> (expiry, replica info)
        self._links: Any = None  # the shared BrokerConnections of the clients opened from this one
        self._controller: Any = None  # their shared ControllerClient, closed when the last of them closes
        self._users = 0  # clients opened from this one and not closed yet (with share_connections)
        self._root: QueueClient | None = None  # the client this one was opened from, if it shares its links

    @property
    def db(self) -> WireDB:
        """The DB as what this client calls of it (:class:`workloads.common.WireDB`)."""
        return wire_spec_db(self._db, "queue")

    async def open(self, test: dict[str, Any], node: str) -> QueueClient:
        from system_under_test.client.consumer import Consumer
        from system_under_test.client.controller_client import ControllerClient
        from system_under_test.client.producer import BrokerConnections, Producer

        addrs = self.db.controller_addrs(test)
        links = controller = None
        if self.options.share_connections:
            if self._links is None:
                self._links = BrokerConnections()
            if self._controller is None:
                self._controller = ControllerClient(list(addrs), token=self.db.token, timeout_s=1.0)
            links, controller = self._links, self._controller
        producer = Producer(addrs, self.db.token, timeout_s=self.options.send_timeout_s, producer_id=f"w-{node}",
                            brokers=links, controller=controller)
        consumer = Consumer(addrs, self.db.token, group="splitbrain-queue", timeout_s=2.0, brokers=links,
                            controller=controller)
        client = QueueClient(self._db, self.options, producer=producer, consumer=consumer)
        if controller is not None:
            self._users += 1
            client._root = self
        return client

    async def setup(self, test: dict[str, Any]) -> None:
        """Wait (bounded) until every broker set has a master, so the test does not start on an empty cluster."""
        client = self.db.client(test, timeout_s=1.0)
        pending = [f"broker-{i}" for i in range(len(self.db.spec.nodes.broker_sets))]
        deadline = time.monotonic() + self.ready_timeout_s
        try:
            while pending and time.monotonic() < deadline:
                for name in list(pending):
                    with contextlib.suppress(Exception):
                        if (await client.get_replica_info(name)).get("master_addr"):
                            pending.remove(name)
                if pending:
                    await asyncio.sleep(0.2)
        finally:
            await client.close()
        if pending:
            log.warning("queue workload: broker sets %s have no master after %.0fs; starting anyway", pending,
                        self.ready_timeout_s)

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        f, v = op["f"], op["value"]
        topic, broker_set, queue_id = _split(v["queue"])
        try:
            if f == "send":
                res = await self.producer.send(broker_set, topic, queue_id, str(v["value"]).encode())
                return {**op, "type": "ok", "value": {**v, "offset": res.queue_offset,
                                                      "master_epoch": res.master_epoch, "broker_id": res.broker_id}}
            if f == "poll":
                addr, broker_id = await self._route(broker_set, v.get("replica"))
                try:
                    pr = await self.consumer.pull(broker_set, topic, queue_id, int(v["offset"]), int(v["max"]),
                                                  addr=addr)
                except Exception:
                    self._routes.pop(broker_set, None)  # the next poll asks the controller again
                    raise
                return {**op, "type": "ok", "value": {**v, "records": _records(pr.messages), "broker_id": broker_id,
                                                      "next_offset": pr.next_offset, "max_offset": pr.max_offset}}
            if f == "commit":
                await self.consumer.commit(broker_set, topic, queue_id, int(v["offset"]))
                return {**op, "type": "ok"}
            if f == "drain":
                msgs = await self.consumer.pull_all(broker_set, topic, queue_id, start=int(v["offset"]))
                return {**op, "type": "ok", "value": {**v, "records": _records(msgs)}}
        except Exception as exc:
            return completion_for(op, exc, read_only=f in ("poll", "drain"))
        return {**op, "type": "fail", "error": f"queue workload: unknown f {f!r}; expected one of {sorted(QUEUE_FS)}"}

    async def _route(self, broker_set: str, replica: Any) -> tuple[str, Any]:
        """(address, broker id or "master") to poll: the master, or slave ``replica % slaves``, from the
        controller's replica info (reused for ``route_ttl_s``)."""
        now = time.monotonic()
        cached = self._routes.get(broker_set)
        if cached is not None and now < cached[0]:
            info = cached[1]
        else:
            info = await self.consumer.controller.get_replica_info(broker_set)
            if self.options.route_ttl_s > 0 and info.get("master_addr"):
                self._routes[broker_set] = (now + self.options.route_ttl_s, info)
        master_id, master_addr = info.get("master_id"), info.get("master_addr")
        if replica is not None:
            slaves = sorted((int(i), str(a)) for i, a in (info.get("body") or {}).get("brokers", [])
                            if i != master_id and a)
            if slaves:
                broker_id, addr = slaves[int(replica) % len(slaves)]
                return addr, broker_id
        if not isinstance(master_addr, str) or not master_addr:
            from system_under_test.client.consumer import NoRoute

            raise NoRoute(f"broker set {broker_set} has no master (epoch {info.get('master_epoch')})")
        return master_addr, master_id

    async def teardown(self, test: dict[str, Any]) -> None:
        return None

    async def close(self, test: dict[str, Any]) -> None:
        for c in (self.producer, self.consumer):
            if c is not None:
                with contextlib.suppress(Exception):
                    await c.close()
        root, self._root = self._root, None  # a second close releases nothing more
        if root is not None:
            root._users -= 1
            if root._users <= 0 and root._controller is not None:
                shared, root._controller = root._controller, None
                with contextlib.suppress(Exception):
                    await shared.close()


def _records(messages: Sequence[Any]) -> list[list[Any]]:
    return [[m.queue_offset, m.body.decode("utf-8", "replace")] for m in messages]


# ---------------------------------------------------------------------------------------------
# Checkers


@dataclass(frozen=True)
class QueueChecker:
    """``checker.queue.check_queue`` plus the run's settings (``safe``/``unsafe``) in the stats."""

    settings: str = "safe"

    def check(self, test: dict[str, Any], history: Sequence[Any], opts: Mapping[str, Any]) -> Result:
        res = check_queue(history)
        return Result(res.valid, res.anomalies, {**res.stats, "settings": self.settings}, res.error, res.counts)


@dataclass(frozen=True)
class PerfChecker:
    """Latency quantiles, fault windows and availability (time to first ok op after each heal) as statistics.

    ``plots=True`` also writes ``latency.png`` / ``rate.png`` into the run directory; off by default because
    ``splitbrain test`` draws them for the whole history after checking.
    """

    plots: bool = False

    def check(self, test: dict[str, Any], history: Sequence[Any], opts: Mapping[str, Any]) -> dict[str, Any]:
        run_dir = test.get("run_dir")
        stats = analyze_perf(history, run_dir or ".", plots=self.plots and bool(run_dir))
        return {"valid": True, **stats}


# ---------------------------------------------------------------------------------------------
# Builder


@register("queue", needs=("splitbrain-protocol",), roles=("controllers", "broker_sets"))
def build_queue(ctx: WorkloadContext) -> Workload:
    """The queue workload for ``ctx`` (see the module docstring).

    Raises:
        SpecError: a bad option, or a spec without broker sets.
    """
    options = queue_options(ctx)
    sets = len(ctx.spec.nodes.broker_sets)
    if sets == 0:
        raise SpecError(getattr(ctx.spec, "source", "<spec>"), "nodes.broker_sets", [],
                        "at least one broker set (the queue workload sends to brokers)")
    queues = queue_names(options.topic, sets, options.queues_per_set)
    settings = settings_of(cluster_options(ctx.db))
    return Workload(
        name="queue",
        client=QueueClient(ctx.db, options),
        generator=QueueGen.start(queues, options),
        checkers={"queue": QueueChecker(settings), "stats": StatsChecker(("send", "poll"), QUEUE_FS),
                  "perf": PerfChecker()},
        fs=QUEUE_FS,
        final_generator=drain_generator(queues),
        extra={"queues": queues, "settings": settings},
    )
