"""Observation: the stream of timed cluster events a run collects from its nodes, in ``events.jsonl``.

Vocabulary.  A *node event* is what a controller or broker process wrote in its own event log
(:mod:`system_under_test.node_events`: Raft leadership, applied controller events with master epochs and
SyncStateSet changes, broker role changes, SyncStateSet shrink/expand, fencing, registration, truncation,
failpoints).  An *observed event* is a node event placed on the run's time axis -- ``time`` in nanoseconds
since the history started, like every op in ``history.jsonl`` -- with the ``node`` and its ``role``
(``controller`` / ``broker``), plus two kinds the harness sees itself: ``node-restart`` (a node answered with
a new boot id: it was restarted, or crashed at a failpoint and came back) and ``client-outcome`` (the
outcome of a client op ``f`` changed, e.g. sends went from ``ok`` to ``info``; read from the history as it
is written).  Nothing is guessed from timing: every event is something a node or a client reported.

Systems that do not report events (etcd, Redis...: no ``event-observation`` capability) are observed from
outside, less finely: if the system can say who leads (``primaries``), the observer asks it every
``interval_s`` and turns each change into events (:func:`primary_events`): ``primary-change`` (a node
``gained`` or ``lost`` leadership) and ``primaries`` (how many lead now: ``none``, ``one``, ``several`` -- two
at once is what a partition of a leader looks like from outside).  Client outcomes are read from the history
for every system.  That is all guided mode and coverage have to go on for such a system (docs/systems.md); a
system that does neither (RabbitMQ: a leader per queue, not per cluster) is observed through its clients' outcomes
only.  :data:`SOURCES` is the one table of these ways of seeing a system, and :func:`sources_of` picks a system's.

:class:`Observer` is the shell: it asks every node for its events through the DB (every ``interval_s``;
:class:`harness.protocols.NodeEvents`, our cluster's DB sends ADMIN_EVENTS) -- or the system for its
primaries --, tails the history for client outcomes, appends each observed event to ``events.jsonl`` and to
:attr:`Observer.events` (which the guided nemesis reads), and tells listeners.  :func:`place`,
:func:`primary_events` and :class:`ClientOutcomes` are pure.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import orjson

from harness.protocols import CAPABILITIES, DB, NodeEvents

__all__ = ["SOURCES", "ClientOutcomes", "Observer", "Source", "clients_only", "place", "primary_events", "read_events",
           "reports_events", "sources_of"]

log = logging.getLogger("splitbrain.observe")

EVENTS_FILE = "events.jsonl"


def place(event: Mapping[str, Any], *, node: str, role: str, recv_ns: int, node_now_ns: int) -> dict[str, Any]:
    """A node event on the run's time axis: it happened ``node_now_ns - mono_ns`` before the reply that
    carried it was received at ``recv_ns`` (run time); never after ``recv_ns``.  Pure."""
    age = max(0, int(node_now_ns) - int(event.get("mono_ns", node_now_ns)))
    out = {k: v for k, v in event.items() if k not in ("mono_ns",)}
    out.update({"time": max(0, recv_ns - age), "node": node, "role": role})
    return out


def primary_count(primaries: frozenset[str]) -> str:
    """``none``, ``one`` or ``several``: the detail of a ``primaries`` event."""
    return "none" if not primaries else "one" if len(primaries) == 1 else "several"


def primary_events(was: frozenset[str], now: frozenset[str], *, recv_ns: int, role: str) -> list[dict[str, Any]]:
    """The events of the system's primaries changing from ``was`` to ``now`` (seen at run time ``recv_ns``): a
    ``primary-change`` per node that ``gained`` or ``lost`` leadership (in node order, losses first), then a
    ``primaries`` event if the count changed between none, one and several.  Pure; no change, no events."""
    out: list[dict[str, Any]] = [
        {"time": recv_ns, "node": n, "role": role, "kind": "primary-change", "change": change}
        for change, nodes in (("lost", was - now), ("gained", now - was)) for n in sorted(nodes)]
    if primary_count(was) != primary_count(now):
        out.append({"time": recv_ns, "node": None, "role": role, "kind": "primaries", "count": primary_count(now),
                    "nodes": sorted(now)})
    return out


def reports_events(db: DB) -> bool:
    """Whether ``db``'s nodes report their own events (the ``event-observation`` capability,
    :class:`harness.protocols.NodeEvents`)."""
    return isinstance(db, NodeEvents)


@dataclass(frozen=True)
class Source:
    """One way the observer sees a system.

    Attributes:
        name: as :func:`sources_of` returns it.
        capability: what the system must offer for it (:data:`harness.protocols.CAPABILITIES`); None: every system.
        yields: the events it yields, by ``kind``.
        raised_by_system: its events are the system's own doing (a client outcome is the clients'); guided mode
            counts only those as the cluster's reaction to a fault, unless a system has none
            (``clients_only`` of :func:`nemesis.guided.decide`).
    """

    name: str
    capability: str | None
    yields: str
    raised_by_system: bool


SOURCES: tuple[Source, ...] = (
    Source("node-events", "event-observation", "every kind the nodes write (system_under_test.node_events), asked of "
           "each node every interval_s, and node-restart", True),
    Source("leadership", "primaries", "primary-change and primaries, from asking the system who leads every "
           "interval_s (only when its nodes report no events: their own leadership events say more)", True),
    Source("client-outcomes", None, "client-outcome, from the history as it is written", False),
)
"""How the observer sees a system, best first; :func:`sources_of` takes the first of the two system sources the
system serves, and the clients' outcomes always.  Guided mode needs no capability (:data:`nemesis.faults.GUIDED_NEEDS`
is empty): the last row serves every system."""


def sources_of(db: Any) -> tuple[str, ...]:
    """The names of the :data:`SOURCES` the observer sees ``db`` through: its nodes' events if they report them, else
    its leadership if it can say who leads; then the clients' outcomes."""
    system = next((s.name for s in SOURCES if s.raised_by_system and _offers(db, s.capability)), None)
    return (*((system,) if system else ()), *(s.name for s in SOURCES if s.capability is None))


def _offers(db: Any, capability: str | None) -> bool:
    """Whether ``db`` implements the protocol of ``capability`` (:data:`harness.protocols.CAPABILITIES`)."""
    protocol = CAPABILITIES[capability].protocol if capability is not None else None
    return protocol is not None and isinstance(db, protocol)


def clients_only(db: Any) -> bool:
    """Whether the observer sees nothing ``db`` raises itself, only its clients' outcomes (RabbitMQ)."""
    return not any(s.raised_by_system for s in SOURCES if s.name in sources_of(db))


@runtime_checkable
class BrokerRuntime(Protocol):
    """A DB that can ask a broker for its runtime info (our cluster: each master's ``slave_lag``), which the
    observer samples into :mod:`harness.lag`'s replication-lag figures."""

    async def runtime_info(self, test: Mapping[str, Any], node: str) -> Mapping[str, Any]: ...


@dataclass
class ClientOutcomes:
    """Client outcome changes from history records (pure): per op ``f``, the last completion type; a change
    (``ok`` -> ``info``, ``fail`` -> ``ok``...) is one ``client-outcome`` event."""

    last: dict[str, str] = field(default_factory=dict)

    def feed(self, records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for r in records:
            if r.get("process") == "nemesis" or r.get("type") not in ("ok", "fail", "info"):
                continue
            f, outcome = str(r.get("f")), str(r.get("type"))
            was = self.last.get(f)
            if was != outcome:
                self.last[f] = outcome
                out.append({"time": int(r.get("time", 0)), "node": None, "role": "client", "kind": "client-outcome",
                            "f": f, "outcome": outcome, "was": was})
        return out


def read_events(run_dir: str | Path) -> list[dict[str, Any]]:
    """The observed events of a run directory (empty when it has none)."""
    path = Path(run_dir) / EVENTS_FILE
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out


class Observer:
    """Collects observed events during a run (see the module docstring).

    Args:
        test: the test map (``remote`` resolves node addresses).
        db: the system: one whose nodes report events (:class:`harness.protocols.NodeEvents`, ours) is asked for
            them; another is watched through its ``primaries(test)`` if it has them, else only client outcomes are
            observed.
        now_ns: the run's clock (the history writer's ``now_ns``).
        run_dir: where ``events.jsonl`` goes; the history is tailed from ``history.jsonl`` there (or drained
            from ``history_tap``, the list the history writer appends each record to).
        interval_s: how often every node is asked.
    """

    db: Any  # a DB; the optional protocols it is asked through are the ones __init__'s flags found (admin: NodeEvents)

    def __init__(self, test: Mapping[str, Any], db: DB, nodes: Iterable[str], *, now_ns: Callable[[], int],
                 run_dir: str | Path, interval_s: float = 0.2, lag_interval_s: float = 0.5,
                 history_tap: list[dict[str, Any]] | None = None) -> None:
        self.test, self.db, self.nodes = test, db, list(nodes)
        self.now_ns = now_ns
        self.path = Path(run_dir) / EVENTS_FILE
        self.history_path = Path(run_dir) / "history.jsonl"
        self.interval_s = interval_s
        self.events: list[dict[str, Any]] = []
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        self.polls = 0
        self.poll_errors = 0
        self._since: dict[str, tuple[str | None, int]] = {n: (None, 0) for n in self.nodes}
        self._clients = ClientOutcomes()
        self._history_pos = 0
        self._fh: Any = None
        self._tasks: list[asyncio.Task[None]] = []
        self.lag_interval_s = lag_interval_s
        self.lag_samples: list[dict[str, Any]] = []  # harness.lag's samples: each master's word on each slave
        self._broker_nodes: dict[tuple[Any, Any], str] = {}  # (broker set, broker id) -> node, as last answered
        self.history_tap = history_tap  # the history writer's records as they are written, instead of the file
        self.sources = sources_of(db)
        self.clients_only = clients_only(db)  # what the guided nemesis reads (nemesis.guided_run.Feed)
        self.admin = "node-events" in self.sources
        self.watch_primaries = "leadership" in self.sources
        self._primaries: frozenset[str] = frozenset()

    async def start(self) -> Observer:
        self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 -- closed in stop()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._node_loop(n)) for n in self.nodes] if self.admin else []
        if self.watch_primaries:
            self._tasks.append(loop.create_task(self._primaries_loop()))
        self._tasks.append(loop.create_task(self._history_loop()))
        if (isinstance(self.db, NodeEvents) and isinstance(self.db, BrokerRuntime) and self.lag_interval_s > 0
                and any(self.db.role(n) == "broker" for n in self.nodes)):
            self._tasks.append(loop.create_task(self._lag_loop()))
        return self

    async def stop(self) -> None:
        """One last poll (so the end of the run is observed too), then close."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.poll_once(), 5.0)
        if self.admin:
            with contextlib.suppress(Exception):
                self.db.close_observation()
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    async def _node_loop(self, node: str) -> None:
        """One loop per node, so a paused or unreachable node does not delay what the others report."""
        while True:
            try:
                self._emit_all(await self._poll_node(node))
            except Exception:  # observation must never end the run; the node may be down or paused
                self.poll_errors += 1
            await asyncio.sleep(self.interval_s)

    async def _primaries_loop(self) -> None:
        """A system without event reports: ask it who leads every ``interval_s`` (see the module docstring)."""
        while True:
            try:
                self._emit_all(await self._poll_primaries())
            except Exception:  # the system may not answer during a fault; the next round asks again
                self.poll_errors += 1
            await asyncio.sleep(self.interval_s)

    async def _poll_primaries(self) -> list[dict[str, Any]]:
        self.polls += 1
        now = frozenset(await self.db.primaries(self.test))
        out = primary_events(self._primaries, now, recv_ns=self.now_ns(), role="member")
        self._primaries = now
        return out

    async def _history_loop(self) -> None:
        while True:
            self._emit_all(self._clients.feed(self._tail_history()))
            await asyncio.sleep(self.interval_s)

    async def _lag_loop(self) -> None:
        """Every ``lag_interval_s``: every broker's runtime info at once; each master's ``slave_lag`` becomes
        lag samples, its slave ids named by the brokers of its set that answered in the same round."""
        brokers = [n for n in self.nodes if self.db.role(n) == "broker"]
        while True:
            infos = await asyncio.gather(*(self._runtime_info(n) for n in brokers), return_exceptions=True)
            recv = self.now_ns()
            answered = {n: i for n, i in zip(brokers, infos) if isinstance(i, dict)}
            self._broker_nodes.update({(i.get("broker_name"), i.get("broker_id")): n for n, i in answered.items()})
            by_id = self._broker_nodes  # kept across rounds: a killed slave is still named by its node
            for node, info in answered.items():
                for sid, lag in (info.get("slave_lag") or {}).items():
                    if not isinstance(lag, dict):
                        continue
                    self.lag_samples.append({
                        "time": recv, "set": info.get("broker_name"), "master": node, "slave_id": int(sid),
                        "slave": by_id.get((info.get("broker_name"), int(sid))),
                        "records_behind": lag.get("records_behind"), "bytes_behind": lag.get("bytes_behind"),
                        "connected": bool(lag.get("connected", True))})
            await asyncio.sleep(self.lag_interval_s)

    async def _runtime_info(self, node: str) -> dict[str, Any]:
        return dict(await self.db.runtime_info(self.test, node))

    async def poll_once(self) -> None:
        """Ask every node (or the system, for its primaries) once and read the history written since the last
        poll."""
        polls = ([self._poll_node(n) for n in self.nodes] if self.admin
                 else [self._poll_primaries()] if self.watch_primaries else [])
        batches = await asyncio.gather(*polls, return_exceptions=True)
        new: list[dict[str, Any]] = []
        for b in batches:
            if isinstance(b, list):
                new.extend(b)
            else:
                self.poll_errors += 1
        new.extend(self._clients.feed(self._tail_history()))
        self._emit_all(new)

    def _emit_all(self, new: list[dict[str, Any]]) -> None:
        for e in sorted(new, key=lambda e: e["time"]):
            self._emit(e)

    def _emit(self, e: dict[str, Any]) -> None:
        self.events.append(e)
        if self._fh is not None:
            self._fh.write(json.dumps(e, separators=(",", ":"), default=str) + "\n")
            self._fh.flush()
        for listener in list(self.listeners):
            with contextlib.suppress(Exception):
                listener(e)

    async def _poll_node(self, node: str) -> list[dict[str, Any]]:
        self.polls += 1
        boot, since = self._since[node]
        reply = await self.db.node_events(self.test, node, since)
        recv = self.now_ns()
        out: list[dict[str, Any]] = []
        role = self.db.role(node)
        if reply.get("boot") != boot:
            if boot is not None:
                out.append({"time": recv, "node": node, "role": role, "kind": "node-restart"})
            if since:  # a new process: its log starts again at 1
                reply = await self.db.node_events(self.test, node, 0)
                recv = self.now_ns()
        for e in reply.get("events") or []:
            out.append(place(e, node=node, role=role, recv_ns=recv, node_now_ns=int(reply.get("now_ns", 0))))
        self._since[node] = (reply.get("boot"), int(reply.get("next", 0)))
        return out

    def _tail_history(self) -> list[dict[str, Any]]:
        """The history records written since the last call: drained from the writer's tap when there is one (at
        thousands of ops/s, reading the file back and decoding it cost ~7% of the harness), else from the file."""
        tap = self.history_tap
        if tap is not None:
            out = tap[:]
            del tap[:len(out)]
            return out
        try:
            with open(self.history_path, "rb") as fh:
                fh.seek(self._history_pos)
                data = fh.read()
        except OSError:
            return []
        end = data.rfind(b"\n")
        if end < 0:
            return []
        self._history_pos += end + 1
        if not end:
            return []
        try:  # one decode of every new line at once: at thousands of ops/s a decode per line cost ~10% of the harness
            parsed: list[dict[str, Any]] = orjson.loads(b"[" + data[:end].replace(b"\n", b",") + b"]")
            return parsed
        except orjson.JSONDecodeError:
            out = []
            for line in data[:end].splitlines():
                with contextlib.suppress(ValueError):
                    out.append(orjson.loads(line))
            return out
