"""The total-queue judgement (Jepsen's ``total-queue``) for queues whose record ids are opaque.

:mod:`checker.queue` judges our own broker's queues, whose offsets are dense integers: it can say that a poll
read *past* a missing record, that two values sit at one offset, that a consumer skipped.  A system we did not
write names its records its own way -- a Redis stream id (``"1732800000000-3"``), a RabbitMQ delivery, a NATS
sequence -- and the generic ``generic-queue`` workload (:mod:`workloads.generic_queue`) passes that id through as
an opaque ``position``.  Without an order on positions only the multiset questions remain, and they are what
Jepsen's total-queue checker asks: was every acknowledged send read at least once, was anything read that was
never sent, was anything read twice?

Ops (the contract of :class:`harness.protocols.QueueClients`)::

    send   invoke {"queue": Q, "value": V}     ok: + "position" (optional, opaque)   fail / info
    poll   invoke {"queue": Q, "max": N}       ok: + "records": [[position, value], ...]
    drain  invoke {"queue": Q}                 ok: + "records"   (final phase, after the heal)

Two reads of one position are one record read twice (a log re-read from its start: the final drain of a Redis
stream re-reads what the polls consumed), so they are not a duplicate; reads at different positions, or reads
without a position (``null``), are separate deliveries.

The anomaly names are the queue checker's (:data:`checker.queue.ANOMALY_TYPES`, docs/anomalies.md), with the
total-queue detection rules:

* ``lost-write`` (invalidates) -- an acknowledged send whose value no ok poll or drain of its queue returned,
  although an ok drain of that queue was invoked after the acknowledgement: the drain read everything left (a
  queue) or everything (a log) and it was not there.  For a *log* (``log``: the system keeps what was read, a
  Redis stream) the rule is stronger and the same as for a set's final read: an acknowledged send missing from
  the last ok drain invoked after its acknowledgement is lost even if a poll had read it -- the record was there
  and vanished (``stats["lost_after_read"]`` counts those).
* ``unseen`` (does not invalidate, but leaves the verdict ``unknown``) -- an acknowledged send never read, with
  no ok drain of its queue invoked after its acknowledgement: nothing proves it gone, and nothing proves it kept.
  A run whose drains all failed (the system never served again after the heal) is therefore ``unknown``, not
  valid: it showed no loss only because it could not be read.
* ``unexpected`` (invalidates) -- a value read from a queue that no send to that queue carried, or only sends
  that definitely failed.
* ``duplicate`` (invalidates only when the system promises exactly-once delivery, ``exactly_once``) -- a value
  delivered more times than it was acknowledged, and never sent indeterminately (a client may have retried an
  ``info`` send).  Without that promise it is counted in ``stats["duplicated"]`` only: an at-least-once queue
  redelivers whatever was delivered but not acknowledged, which is a duplicate, not a loss.

``recovered``: an ``info`` (or never completed) send that some read returned -- it did happen.

Pure: the history in, a :class:`checker.compose.Result` out; O(ops + records read) time and memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from checker.compose import Anomaly, Result, result_from_anomalies
from checker.history import Op

__all__ = ["NS_PER_S", "QUEUE_FS", "TotalQueue", "check_total_queue", "judge"]

QUEUE_FS = frozenset({"send", "poll", "drain"})
"""The ``f`` of a generic queue op."""

NS_PER_S = 1_000_000_000
_MAX_RECORDS = 1000  # anomaly records kept per type (all are counted)


def _key(v: Any) -> Any:
    """A hashable stand-in for a JSON value (values and positions are normally strings or ints)."""
    if isinstance(v, list):
        return tuple(_key(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((str(k), _key(x)) for k, x in v.items()))
    return v


@dataclass
class _Send:
    """What the history says about one (queue, value): its attempts and every read of it."""

    invoke: int  # index of the first send invoke
    ok: int = 0
    info: int = 0
    fail: int = 0
    ack: Op | None = None  # the first ok completion
    positions: set[Any] = field(default_factory=set)  # distinct positions it was read at
    unpositioned_reads: int = 0  # reads without a position: each one a delivery
    first_read: int | None = None  # op index of the first read that returned it
    first_poll: Op | None = None  # the first ok poll that returned it


@dataclass
class _Drain:
    invoke: int
    done: Op
    records: int
    positions: tuple[Any, Any]  # the first and the last position it returned (None when empty)
    values: frozenset[Any] = frozenset()  # what it returned (kept for a log only: a drain there reads everything)


@dataclass
class TotalQueue:
    """The judgement's working state, fed one op at a time (:meth:`feed`), judged by :meth:`result`."""

    exactly_once: bool = False
    log: bool = False
    max_records: int = _MAX_RECORDS
    sends: dict[str, dict[Any, _Send]] = field(default_factory=dict)  # queue -> value -> what happened
    unexpected: dict[str, dict[Any, list[Any]]] = field(default_factory=dict)  # queue -> value -> [index, value]
    drains: dict[str, list[_Drain]] = field(default_factory=dict)
    polls: int = 0
    records_read: int = 0
    _open: dict[Any, Op] = field(default_factory=dict)  # process -> its open invoke

    def feed(self, history: Iterable[Any]) -> TotalQueue:
        for raw in history:
            self._step(raw if isinstance(raw, Op) else Op.from_dict(raw))
        return self

    def _step(self, op: Op) -> None:
        if not op.is_client or op.f not in QUEUE_FS:
            return
        if op.type == "invoke":
            self._open[op.process] = op
            if op.f == "send":
                q, v = _queue_value(op)
                self.sends.setdefault(q, {}).setdefault(_key(v), _Send(invoke=op.index))
            return
        inv = self._open.pop(op.process, None)
        q = _queue_of(op) if inv is None else _queue_of(inv)
        if op.f == "send":
            _, v = _queue_value(inv if inv is not None else op)
            s = self.sends.setdefault(q, {}).setdefault(_key(v), _Send(invoke=op.index))
            if op.type == "ok":
                s.ok += 1
                if s.ack is None:
                    s.ack = op
            elif op.type == "info":
                s.info += 1
            else:
                s.fail += 1
            return
        if op.type != "ok":
            return
        records = _records_of(op)
        self.records_read += len(records)
        if op.f == "poll":
            self.polls += 1
        else:
            first = records[0][0] if records else None
            last = records[-1][0] if records else None
            values = frozenset(_key(v) for _, v in records) if self.log else frozenset()
            self.drains.setdefault(q, []).append(
                _Drain(inv.index if inv is not None else op.index, op, len(records), (first, last), values))
        sent = self.sends.get(q, {})
        for position, value in records:
            v = _key(value)
            got = sent.get(v)
            if got is None:
                self.unexpected.setdefault(q, {}).setdefault(v, [op.index, value])
                continue
            if got.first_read is None:
                got.first_read = op.index
            if got.first_poll is None and op.f == "poll":
                got.first_poll = op
            if position is None:
                got.unpositioned_reads += 1
            else:
                got.positions.add(_key(position))

    def result(self) -> Result:
        """The verdict (see the module docstring); ``stats`` is the total-queue summary."""
        return judge(self)


def _queue_value(op: Op) -> tuple[str, Any]:
    v = op.value
    if not isinstance(v, Mapping) or "queue" not in v or "value" not in v:
        raise ValueError(f"op {op.index} ({op.f}) needs a value {{'queue': Q, 'value': V}}; got {v!r}")
    return str(v["queue"]), v["value"]


def _queue_of(op: Op) -> str:
    v = op.value
    if not isinstance(v, Mapping) or "queue" not in v:
        raise ValueError(f"op {op.index} ({op.f}) needs a value with a 'queue'; got {v!r}")
    return str(v["queue"])


def _records_of(op: Op) -> list[tuple[Any, Any]]:
    v = op.value
    records = v.get("records") if isinstance(v, Mapping) else None
    if records is None:
        return []
    if not isinstance(records, list) or not all(isinstance(r, list | tuple) and len(r) == 2 for r in records):
        raise ValueError(f"op {op.index} ({op.f} ok) needs 'records' as a list of [position, value] pairs; "
                         f"got {str(records)[:200]}")
    return [(r[0], r[1]) for r in records]


def _secs(ns: int) -> str:
    return f"{ns / NS_PER_S:.2f} s"


def _ack_words(s: _Send) -> str:
    """``acknowledged by n1 at 61.40 s (#6102 p5, client on n2, position '1764..-0')``: who took the send, when."""
    ack = s.ack
    assert ack is not None
    pos = ack.value.get("position") if isinstance(ack.value, Mapping) else None
    by = f" by {ack.node}" if ack.node is not None else ""
    via = ack.extra.get("client_node")
    more = (f", client on {via}" if isinstance(via, str) and via != ack.node else "") + \
           (f", position {pos!r}" if pos is not None else "")
    return f"acknowledged{by} at {_secs(ack.time)} (#{ack.index} p{ack.process}{more})"


def _drain_words(d: _Drain, ack: Op, polled: str) -> str:
    span = "" if d.records == 0 else f" ({d.positions[0]!r} .. {d.positions[1]!r})"
    later = (d.done.time - ack.time) / NS_PER_S
    by = f" from {d.done.node}" if d.done.node is not None else ""
    nor = "" if polled else ", nor did any poll"
    return (f"the drain #{d.invoke}-#{d.done.index}{by} (ok at {_secs(d.done.time)}, {later:.1f} s later) returned "
            f"{d.records} records{span} without it{polled}{nor}")


def judge(state: TotalQueue) -> Result:
    """Classify every sent value of ``state`` (pure; see the module docstring for the rules)."""
    found: dict[str, list[Anomaly]] = {"lost-write": [], "unseen": [], "unexpected": [], "duplicate": []}
    counts = dict.fromkeys(found, 0)
    n = dict.fromkeys(("attempted", "acknowledged", "failed", "indeterminate", "delivered", "lost", "lost_after_read",
                       "unseen", "duplicated", "recovered", "unexpected"), 0)

    unseen_queues: set[str] = set()

    def keep(kind: str, a: Anomaly) -> None:
        counts[kind] += 1
        if len(found[kind]) < state.max_records:
            found[kind].append(a)

    for q in sorted(state.sends):
        drains = state.drains.get(q, [])
        for v, s in state.sends[q].items():
            n["attempted"] += 1
            read = bool(s.positions) or s.unpositioned_reads > 0
            deliveries = len(s.positions) + s.unpositioned_reads
            if s.ok:
                n["acknowledged"] += 1
            elif s.info or not (s.ok or s.fail):
                n["indeterminate"] += 1
            else:
                n["failed"] += 1
            if read:
                n["delivered"] += 1
                if _only_failed(s):
                    n["unexpected"] += 1
                    keep("unexpected", Anomaly(
                        "unexpected", q, (s.invoke, s.first_read if s.first_read is not None else s.invoke),
                        "no read of a value whose sends all failed", v,
                        f"{q}: {v!r} was read (#{s.first_read}) although every send of it definitely failed"))
                elif not s.ok:
                    n["recovered"] += 1
            if s.ok and deliveries > s.ok and not s.info:
                n["duplicated"] += 1
                ack = s.ack
                assert ack is not None
                keep("duplicate", Anomaly(
                    "duplicate", q, (ack.index, s.first_read or ack.index), f"{s.ok} delivery", deliveries,
                    f"{q}: {v!r} was sent once ({_ack_words(s)}) and delivered {deliveries} times"
                    + (f" at positions {sorted(map(str, s.positions))}" if s.positions else "")))
            if s.ok and (not read or state.log):
                ack = s.ack
                assert ack is not None
                after = [d for d in drains if d.invoke > ack.index]
                d = after[-1] if after else None
                if d is not None and (not read or v not in d.values):
                    n["lost"] += 1
                    polled = ""
                    if s.first_poll is not None:
                        n["lost_after_read"] += 1
                        p = s.first_poll
                        polled = (f", although a poll had read it (#{p.index}" + (f" from {p.node}" if p.node else "")
                                  + f" at {_secs(p.time)})")
                    keep("lost-write", Anomaly(
                        "lost-write", q, (s.invoke, ack.index, d.done.index), "read by a poll or the drain", None,
                        f"{q}: {v!r}, {_ack_words(s)}, is gone: {_drain_words(d, ack, polled)}"))
                elif not read:
                    n["unseen"] += 1
                    unseen_queues.add(q)
                    keep("unseen", Anomaly(
                        "unseen", q, (s.invoke, ack.index), "read by a poll or the drain", None,
                        f"{q}: {v!r}, {_ack_words(s)}, was never read, but no drain of {q} was ok after it"))
    for q in sorted(state.unexpected):
        for index, value in state.unexpected[q].values():
            n["unexpected"] += 1
            keep("unexpected", Anomaly("unexpected", q, (index,), "a value some send to the queue carried", value,
                                       f"{q}: {value!r} was read (#{index}) but no send to {q} carried it"))
    bad = {"lost-write", "unexpected"} | ({"duplicate"} if state.exactly_once else set())
    stats: dict[str, Any] = {
        **n, "polls": state.polls, "records_read": state.records_read,
        "drained_queues": sorted(state.drains), "queues": sorted(set(state.sends) | set(state.unexpected)),
        "exactly_once": state.exactly_once, "log": state.log, "positions": "opaque",
    }
    explanation = next((found[k][0].explanation for k in ("lost-write", "unexpected", "duplicate")
                        if found[k] and k in bad), None)
    if explanation is not None:
        stats["explanation"] = explanation
    result = result_from_anomalies({k: v for k, v in found.items() if v}, bad_types=bad, stats=stats,
                                   counts={k: c for k, c in counts.items() if c})
    if result.valid is True and n["unseen"]:
        return replace(result, valid="unknown", error=(
            f"{n['unseen']} acknowledged send(s) were never read and no drain of their queue "
            f"({', '.join(sorted(unseen_queues))}) was ok after them: nothing proves them kept or lost"))
    return result


def _only_failed(s: _Send) -> bool:
    return s.ok == 0 and s.info == 0 and s.fail > 0


def check_total_queue(history: Iterable[Any], *, exactly_once: bool = False, log: bool = False,
                      max_records: int = _MAX_RECORDS) -> Result:
    """Judge a send/poll/drain history (``Op`` objects or history dicts, in history order) as a total queue.

    Args:
        exactly_once: the system promises each acknowledged send is delivered once: ``duplicate`` invalidates.
        log: the system keeps what was read (a log: a drain returns every record from the start), so an
            acknowledged send missing from the last ok drain of its queue is lost even if a poll had read it.
        max_records: anomaly records kept per type (``Result.counts`` has the full numbers).

    Raises:
        ValueError: a queue op without the value shape of the module docstring (naming the op).
    """
    return TotalQueue(exactly_once=exactly_once, log=log, max_records=max_records).feed(history).result()
