"""The ``generic-queue`` workload: sends, consuming polls and a final drain of named queues on any system that
offers a queue client, judged as a total queue.

Like the ``register`` workload it is written against a small client protocol, not one system: the system's DB
makes the client (:class:`harness.protocols.QueueClients`, the capability ``queue-client``), so an adapter that
offers it (Redis streams: :mod:`systems.redis`) gets this workload, its generator and its checker, and a spec
naming it for a system that does not is refused at validation (on ``workloads[i].name``).

Queues are named ``q0`` .. ``q<queues-1>``.  Client threads

* **send** a value unique in the test, ``"w<thread>-<n>"`` (``n`` counts that worker thread's sends; per thread,
  not per process, so the values do not shift between a run and its repro), to a random queue
  (``send_fraction`` of the ops);
* **poll** up to ``max_poll`` records of a random queue (the rest): the client consumes them (see the protocol).

After the nemesis heals and the system recovers, the final generator **drain**\\ s every queue, each retried until
one drain is ok.  Op values (the protocol's contract)::

    send   invoke {"queue": Q, "value": "w3-17"}     ok: + "position" (optional, opaque)
    poll   invoke {"queue": Q, "max": N}             ok: + "records": [[position, value], ...]
    drain  invoke {"queue": Q}                       ok: + "records"

The history is judged by :func:`checker.total_queue.check_total_queue` (Jepsen's total-queue): ``lost-write`` --
an acknowledged send that no read returned although an ok drain ran after it -- and ``unexpected`` invalidate;
``duplicate`` invalidates only for a DB that promises exactly-once delivery
(:class:`harness.protocols.DeliveryPromise`), else it is a statistic.  For a DB whose queues are logs
(:class:`harness.protocols.LogQueues`, a Redis stream) a send the final drain no longer holds is lost even if a poll
had read it.  Positions are opaque, so none of the
queue checker's offset anomalies (:mod:`checker.queue`) are claimed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from checker.compose import Result
from checker.total_queue import QUEUE_FS, check_total_queue
from harness import generator as g
from harness.protocols import DeliveryPromise, LogQueues, QueueClients
from workloads.common import StatsChecker, invocation, option, parse_options, unserved
from workloads.registry import Workload, WorkloadContext, register

__all__ = ["GenericQueueGen", "GenericQueueOptions", "TotalQueueChecker", "build_generic_queue", "drain_all",
           "is_log", "promises_exactly_once", "queue_names"]


@dataclass(frozen=True)
class GenericQueueOptions:
    """Options of the generic-queue workload (see the module docstring)."""

    queues: int = option(2, 1, 64, allowed="an integer in [1, 64] (how many queues, q0..)")
    send_fraction: float = option(0.5, 0.0, 1.0, allowed="a number in [0, 1] (the share of ops that are sends)")
    max_poll: int = option(16, 1, 1024, allowed="an integer in [1, 1024] (most records one poll asks for)")
    timeout_s: float = option(2.0, 0.1, 30.0, allowed="seconds in [0.1, 30] (one request's bound in the client)")


def queue_names(n: int) -> tuple[str, ...]:
    return tuple(f"q{i}" for i in range(n))


@dataclass(frozen=True, slots=True)
class GenericQueueGen:
    """Main-phase generator (pure, seeded by ``ctx.rng``): sends and polls; ``seqs`` maps a worker thread to its
    next send number."""

    queues: tuple[str, ...]
    send_fraction: float
    max_poll: int
    seqs: Mapping[Any, int]

    @staticmethod
    def start(queues: Sequence[str], o: GenericQueueOptions) -> GenericQueueGen:
        if not queues:
            raise ValueError("GenericQueueGen needs at least one queue")
        return GenericQueueGen(tuple(queues), o.send_fraction, o.max_poll, {})

    def op(self, ctx: g.Context) -> Any:
        thread = ctx.free_thread()
        if thread is None:
            return (g.PENDING, self)
        queue = self.queues[ctx.rng.randrange(len(self.queues))]
        if ctx.rng.random() < self.send_fraction:
            n = self.seqs.get(thread, 0)
            inv = invocation(ctx, "send", {"queue": queue, "value": f"w{thread}-{n}"})
            return (inv, replace(self, seqs={**self.seqs, thread: n + 1}))
        return (invocation(ctx, "poll", {"queue": queue, "max": self.max_poll}), self)

    def update(self, ctx: g.Context, event: dict[str, Any]) -> GenericQueueGen:
        return self


def drain_all(queues: Sequence[str], *, retry_interval_s: float = 0.25) -> Any:
    """Drain each queue, one after the other, retrying each until one drain is ok."""
    return [g.until_ok(g.delay(retry_interval_s, g.repeat({"f": "drain", "value": {"queue": q}}))) for q in queues]


def promises_exactly_once(db: object) -> bool:
    """Whether ``db`` promises exactly-once delivery (:class:`harness.protocols.DeliveryPromise`)."""
    return isinstance(db, DeliveryPromise) and db.exactly_once is True


def is_log(db: object) -> bool:
    """Whether ``db``'s queues are logs (:class:`harness.protocols.LogQueues`): a drain reads every record."""
    return isinstance(db, LogQueues) and db.log is True


@dataclass(frozen=True)
class TotalQueueChecker:
    """:func:`checker.total_queue.check_total_queue` on the run's history, with the DB's delivery promise and
    queue kind (log or queue)."""

    exactly_once: bool = False
    log: bool = False

    def check(self, test: dict[str, Any], history: Sequence[Any], opts: Mapping[str, Any]) -> Result:
        return check_total_queue(history, exactly_once=self.exactly_once, log=self.log)


@register("generic-queue", needs=("queue-client",))
def build_generic_queue(ctx: WorkloadContext) -> Workload:
    """The generic-queue workload for ``ctx``; the client is the system's (``ctx.db.queue_client``).

    Raises:
        SpecError: a bad option (``workloads[i].options.<key>``), or a DB that makes no queue client
            (``workloads[i].name``; validation normally refuses that earlier, by capability).
    """
    o = parse_options(ctx, GenericQueueOptions)
    if not isinstance(ctx.db, QueueClients):
        raise unserved(ctx, "generic-queue", "queue-client")
    queues = queue_names(o.queues)
    exactly_once, log = promises_exactly_once(ctx.db), is_log(ctx.db)
    required = ("send", "poll") if 0.0 < o.send_fraction < 1.0 else (("send",) if o.send_fraction else ("poll",))
    return Workload(
        name="generic-queue",
        client=ctx.db.queue_client(timeout_s=o.timeout_s),
        generator=GenericQueueGen.start(queues, o),
        checkers={"total-queue": TotalQueueChecker(exactly_once, log), "stats": StatsChecker(required, QUEUE_FS)},
        fs=QUEUE_FS,
        final_generator=drain_all(queues),
        op_timeouts={"send": o.timeout_s + 2.0, "poll": o.timeout_s + 2.0, "drain": 4 * o.timeout_s + 10.0},
        extra={"queues": queues, "exactly_once": exactly_once, "log": log},
    )
