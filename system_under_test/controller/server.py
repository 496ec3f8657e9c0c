"""The controller node: formation, Raft, request handling and the leader's scans, over the wire.

This is the shell around three pure cores: cluster formation (:mod:`.formation`), the Raft core
(:mod:`system_under_test.raft`) and the controller state machine + request decisions
(:mod:`.state_machine`, :mod:`.requests`, :mod:`.scan`).  Its duties, in order:

1. **Formation.**  Exchange FORMATION_STATUS with every peer until :func:`formation.decide` says
   ACTIVATE (write the cluster id, mark the store dirty) or ABORT (exit non-zero with the reason).
   Until then every client request gets FORMATION_PENDING.
2. **Raft.**  Start the RaftNode; incoming RAFT_MESSAGE frames go to it.
3. **Requests.**  Checked for the cluster token (state-changing codes), then:
   * metadata/admin requests are answered by any controller;
   * heartbeats are recorded by every controller (the soft lease table is warm on followers, so a
     new leader does not fence live brokers), but only the leader answers and acts on them;
   * other requests on a follower get CONTROLLER_NOT_LEADER with ``leader_id``/``leader_addr``;
   * reads on the leader pass a Raft read barrier (read-index) first, so they are linearizable;
   * writes are decided against the leader's state, proposed as one Raft entry, and answered only
     after the entry is committed and applied here -- the reply is built from the apply results,
     because the state machine re-validates every event at apply time (pipelined proposals).
4. **Scans.**  While leader, every ``scan_interval_ms``: fence expired leases and re-elect dead
   masters (proposed as events), after a grace period of one lease following the leadership
   change.
5. **Notify.**  After an applied election, push NOTIFY_BROKER_ROLE_CHANGED to the brokers of that
   set over the connections their heartbeats arrive on.
6. **Shutdown.**  Orderly: stop serving, stop Raft, write the clean marker when this is part of a
   whole-quorum shutdown (shared shutdown id) or this node is the last one running.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import eventloop
from system_under_test import failpoints, node_events
from system_under_test.admin_handlers import ADMIN_CODES, code_name, handle_admin, unauthorized
from system_under_test.clock import CLOCK
from system_under_test.controller import formation
from system_under_test.controller.barrier import SharedBarrier
from system_under_test.controller.batching import ProposalBatcher
from system_under_test.controller.config import ControllerConfig
from system_under_test.controller.events import Event, decode_events, encode_events
from system_under_test.controller.heartbeat import BrokerHeartbeatManager
from system_under_test.controller.observed import applied_event
from system_under_test.controller.queries import notifications
from system_under_test.controller.requests import DecideContext, Decision, complete, decide
from system_under_test.controller.routing import Route, route, scan_due
from system_under_test.controller.scan import scan
from system_under_test.controller.state_machine import ApplyResult, ControllerState
from system_under_test.protocol import (
    Connection,
    ConnectionLost,
    Frame,
    Reply,
    RequestCode,
    RequestTimeout,
    ResponseCode,
    RpcServer,
    connect,
    split_addr,
)
from system_under_test.raft import ProposalDropped, RaftError, RaftNode, RaftTransport
from system_under_test.raft.transport import messages_from_frame
from system_under_test.raft.types import RaftConfig

log = logging.getLogger("splitbrain.controller")

_REQUEST_CODES = {int(c): c for c in RequestCode}  # a dict lookup; RequestCode(code) showed per heartbeat
# Members used on every request, as module globals: ``RequestCode.X`` goes through EnumType's
# ``__getattr__`` hook on Python 3.11 (about 0.2 us a lookup).
_RAFT_MESSAGE, _FORMATION_STATUS = RequestCode.RAFT_MESSAGE, RequestCode.FORMATION_STATUS
FORMATION_LINGER_S = 2.0
"""How long a member that refuses to form keeps answering its peers' status requests before it exits."""
_GET_METADATA_INFO, _HEARTBEAT = RequestCode.CONTROLLER_GET_METADATA_INFO, RequestCode.BROKER_HEARTBEAT

COMMIT_REPLY = failpoints.declare(
    "controller.after_commit_before_reply", "a write is committed and applied, the reply not yet sent"
)
BEFORE_PROPOSE = failpoints.declare("controller.before_propose", "a write was decided, not yet proposed to Raft")
EXPAND_COMMITTED = failpoints.declare(
    "controller.alter_sync_state_set.expand.after_commit",
    "an AlterSyncStateSet that adds a member is committed and applied, the reply not yet sent")
FORMATION_ROUND = failpoints.declare(
    "controller.formation.before_round", "formation: this node is about to ask its peers for their status"
)
FORMED = failpoints.declare(
    "controller.formation.formed", "formation decided and the cluster id written; Raft not started yet"
)

BUGS = frozenset({"stale-read", "no-epoch-fencing", "reuse-broker-id", "slow-failover"})


class FormationFailed(Exception):
    """Formation aborted (foreign store, option mismatch, manual recovery needed) or timed out."""


@dataclass(frozen=True)
class NodeOptions:
    """Everything one controller process needs; built and validated by ``main.py``."""

    node_id: str
    peers: dict[str, str]  # node id -> host:port, this node included
    data_dir: Path
    token: str
    controller: ControllerConfig
    wait_for: int
    dirty_recovery: str = "manual"
    formation_timeout_s: float = 120.0
    tick_interval_ms: int = 50
    election_ticks: int = 4
    heartbeat_ticks: int = 1
    snapshot_every_entries: int = 10_000
    listen_host: str | None = None
    seed: int | None = None
    bugs: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if self.node_id not in self.peers:
            raise ValueError(f"--node-id {self.node_id!r} is not in --peers {sorted(self.peers)}")
        for node, addr in self.peers.items():
            try:
                split_addr(addr)
            except ValueError as exc:
                raise ValueError(f"--peers: node {node!r}: {exc}") from None
        if not self.token:
            raise ValueError("a cluster token is required (--token-file FILE or SPLITBRAIN_TOKEN)")
        unknown = set(self.bugs) - BUGS
        if unknown:
            raise ValueError(f"--bug: unknown bug(s) {sorted(unknown)}; known: {sorted(BUGS)}")

    @property
    def addr(self) -> str:
        return self.peers[self.node_id]

    def critical_options(self) -> dict[str, Any]:
        return {
            **self.controller.critical_options(),
            "voters": sorted(self.peers),
            "election_ms": self.tick_interval_ms * self.election_ticks,
            "bugs": sorted(self.bugs),
        }


class ControllerStateMachine:
    """Adapter from the RaftNode's StateMachine protocol to :class:`ControllerState`.

    Entries this node encoded (:meth:`encode`, as leader) are applied from the events they were
    encoded from instead of decoding the data again: equal bytes decode to equal events
    (``decode_events(encode_events(evs)) == evs``), so the result is the same and the leader
    skips rebuilding and re-validating every event of its own entries.
    """

    #: Encoded entries remembered at most (entries proposed but never applied here -- a lost
    #: leadership -- are forgotten oldest first).
    MAX_REMEMBERED = 1024

    def __init__(self, options: NodeOptions) -> None:
        self.state = ControllerState(bugs=options.bugs) if options.bugs else ControllerState()
        self.on_applied: list[Any] = []
        self._encoded: dict[bytes, list[Event]] = {}

    def encode(self, events: list[Event]) -> bytes:
        """``encode_events(events)``, remembered until the entry is applied here."""
        data = encode_events(events)
        remembered = self._encoded
        if len(remembered) >= self.MAX_REMEMBERED:
            del remembered[next(iter(remembered))]
        remembered[data] = events
        return data

    def apply(self, index: int, data: bytes) -> list[ApplyResult]:
        if not data:
            return []
        events = self._encoded.pop(data, None) if self._encoded else None
        if events is None:
            events = decode_events(data)
        state = self.state
        results = []
        for event in events:
            name = getattr(event, "broker_name", None)
            before = state.replica_info(name) if name else None
            result = state.apply(event, index)
            results.append(result)
            fields = applied_event(event, before, state.replica_info(name) if name else None, result.ok)
            if fields is not None:
                node_events.record("apply", index=index, **fields)
        for callback in self.on_applied:
            callback(results)
        return results

    def snapshot(self) -> bytes:
        return self.state.snapshot()

    def restore(self, data: bytes, index: int) -> None:
        self.state.restore(data)


class ControllerServer:
    def __init__(self, options: NodeOptions) -> None:
        self.options = options
        self.rng = random.Random(options.seed)
        self.signatures = formation.StoreSignatures(options.data_dir)
        self.proposed_cluster_id = uuid.UUID(int=self.rng.getrandbits(128)).hex
        self.active = False
        # formation decided and the cluster id written: peers still forming must join us, not judge our
        # store dirty (it is, until the clean marker) -- set with the write, before Raft starts
        self.formed = False
        self.cluster_id: str | None = None
        self.rpc = RpcServer(self._handle, name=options.node_id)
        self.sm = ControllerStateMachine(options)
        self.sm.on_applied.append(self._after_apply)
        self.heartbeats = BrokerHeartbeatManager()
        self.raft: RaftNode | None = None
        self.batcher = ProposalBatcher(self._propose_entry, encode=self.sm.encode)
        self._ctx_cache: DecideContext | None = None
        self._barrier = SharedBarrier(self._one_barrier)
        self.broker_conns: dict[tuple[str, int], Connection] = {}
        self._leader_since_ms: int | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._side_tasks: set[asyncio.Task[None]] = set()  # writes finishing after an armed failpoint
        self._expansions: set[int] = set()  # ids of AlterSyncStateSet decisions in flight that add a member
        self._stopped = asyncio.Event()
        self._shutdown_id: str | None = None

    # -- life cycle --------------------------------------------------------------------------

    async def start(self) -> None:
        host, port = split_addr(self.options.addr)
        await self.rpc.start(self.options.listen_host or host, port)
        log.info("controller %s listening on %s (data %s)", self.options.node_id, self.options.addr,
                 self.options.data_dir)
        try:
            await self._form()
            await self._start_raft()
        except BaseException:
            await self.rpc.stop()
            raise
        self._tasks.append(asyncio.get_running_loop().create_task(self._scan_loop()))

    async def _form(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.options.formation_timeout_s
        peers: dict[str, formation.MemberStatus] = {}
        last_log = 0.0
        conns: dict[str, Connection] = {}
        try:
            while True:
                me = self._my_status()
                decision = formation.decide(
                    me, peers, voters=tuple(sorted(self.options.peers)), wait_for=self.options.wait_for,
                    dirty_recovery=self.options.dirty_recovery,
                )
                if decision.verdict is formation.Verdict.ABORT:
                    # Keep answering FORMATION_STATUS a little longer: a peer whose first round missed this
                    # member (it started a moment later) must still learn its store to reach the same
                    # verdict, instead of waiting for a member that has already exited.
                    log.info("formation: %s; answering peers for %.1fs before exiting", decision.reason,
                             FORMATION_LINGER_S)
                    await asyncio.sleep(FORMATION_LINGER_S)
                    raise FormationFailed(decision.reason)
                if decision.verdict is formation.Verdict.ACTIVATE:
                    assert decision.cluster_id is not None
                    self.signatures.write_cluster(decision.cluster_id, self.options.controller.cluster_name,
                                                  CLOCK.wall_ms())
                    self.signatures.mark_dirty()
                    self.cluster_id = decision.cluster_id
                    self.formed = True  # no await since the write: no status was answered in between
                    log.info("formation: %s; cluster id %s", decision.reason, decision.cluster_id)
                    await failpoints.ahit(FORMED)
                    return
                if loop.time() > deadline:
                    raise FormationFailed(f"formation timed out after {self.options.formation_timeout_s}s: "
                                          f"{decision.reason}; still waiting for {list(decision.waiting_for)}")
                if loop.time() - last_log > 5:
                    log.info("formation: %s; waiting for %s", decision.reason, list(decision.waiting_for))
                    last_log = loop.time()
                await failpoints.ahit(FORMATION_ROUND)
                for node, addr in self.options.peers.items():
                    if node == self.options.node_id:
                        continue
                    status = await self._exchange_status(conns, node, addr, me)
                    if status is not None:
                        peers[node] = status
                await asyncio.sleep(0.1)
        finally:
            for c in conns.values():
                c.close("formation done")

    async def _exchange_status(self, conns: dict[str, Connection], node: str, addr: str,
                               me: formation.MemberStatus) -> formation.MemberStatus | None:
        try:
            conn = conns.get(node)
            if conn is None or conn.closed:
                conn = conns[node] = await connect(addr, timeout_s=0.5)
            resp = await conn.request(RequestCode.FORMATION_STATUS, {**me.to_wire(), "token": self.options.token},
                                      timeout_s=1.0)
            return formation.MemberStatus.from_wire(resp.header)
        except (ConnectionLost, RequestTimeout, TimeoutError, OSError):
            return None
        except Exception as exc:
            log.warning("formation: bad status from %s: %s", node, exc)
            return None

    def _my_status(self) -> formation.MemberStatus:
        state = self.signatures.state()
        clean = self.signatures.clean() if state is formation.StoreState.CLEAN else None
        return formation.MemberStatus(
            node_id=self.options.node_id,
            store_state=state,
            cluster_id=self.signatures.cluster_id(),
            shutdown_id=None if clean is None else str(clean.get("shutdown_id")),
            options=self.options.critical_options(),
            proposed_cluster_id=self.proposed_cluster_id,
            active=self.formed,
            last_index=self.raft.applied_index if self.raft is not None else 0,
        )

    async def _start_raft(self) -> None:
        o = self.options
        # max_inflight=4: with group commit a small window batches more entries per append (measured
        # 12.2k vs 7.7k writes/s with 64 in bench/raft_throughput.py)
        config = RaftConfig(node_id=o.node_id, voters=tuple(sorted(o.peers)), election_ticks=o.election_ticks,
                            heartbeat_ticks=o.heartbeat_ticks, max_inflight=4)
        self.raft = RaftNode(
            config, o.data_dir / "raft", dict(o.peers), self.sm, tick_interval_ms=o.tick_interval_ms,
            rng=self.rng, snapshot_every_entries=o.snapshot_every_entries,
            transport=RaftTransport(o.node_id, dict(o.peers), token=o.token),
        )
        self.raft.on_role_change.append(self._on_role_change)
        await self.raft.start()
        self.active = True
        log.info("controller %s active (cluster %s)", o.node_id, self.cluster_id)

    def _on_role_change(self, is_leader: bool, term: int) -> None:
        self._leader_since_ms = CLOCK.monotonic_ns() // 1_000_000 if is_leader else None
        node_events.record("raft-leader" if is_leader else "raft-stepdown", term=term)
        log.info("controller %s is %s in term %d", self.options.node_id, "LEADER" if is_leader else "not leader",
                 term)

    async def stop(self, *, clean: bool = False, shutdown_id: str | None = None) -> None:
        """Orderly stop.  Writes the clean marker if ``clean`` (whole-quorum shutdown or last node).

        The server counts as stopped even if a step raises (say, the data directory is gone): the error
        propagates to the caller, but ``wait_stopped`` returns, so the process can exit.
        """
        try:
            for t in self._tasks:
                t.cancel()
            await self.rpc.stop()
            if self.raft is not None:
                last_index, term = self.raft.applied_index, self.raft.term
                await self.raft.stop()
                if clean and self.cluster_id is not None:
                    self.signatures.mark_clean(shutdown_id or uuid.uuid4().hex, last_index, term, CLOCK.wall_ms())
                    log.info("controller %s wrote clean marker (index %d, term %d)", self.options.node_id,
                             last_index, term)
        finally:
            self._stopped.set()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    async def peers_reachable(self) -> list[str]:
        """Peers that accept a TCP connection right now (decides 'last one running')."""
        alive = []
        for node, addr in self.options.peers.items():
            if node == self.options.node_id:
                continue
            with contextlib.suppress(Exception):
                conn = await connect(addr, timeout_s=0.3)
                conn.close()
                alive.append(node)
        return alive

    # -- request handling ----------------------------------------------------------------------

    def _leader_hint(self) -> dict[str, Any]:
        leader = self.raft.leader_id if self.raft is not None else None
        return {"leader_id": leader, "leader_addr": self.options.peers.get(leader) if leader else None}

    def _handle(self, frame: Frame, conn: Connection) -> Reply | Awaitable[Reply | None] | None:
        """Answer at once when no wait is needed (heartbeats, refusals, local reads); return an
        awaitable for requests that wait for a read barrier or a commit."""
        refused = unauthorized(frame, self.options.token)
        if refused is not None:
            log.warning("rejected %s from %s: missing or wrong cluster token", code_name(frame.code), conn.peer)
            return refused
        code = frame.code
        if code == _RAFT_MESSAGE:
            if self.raft is not None:
                try:  # the whole frame or nothing: a message claiming another sender than from_id is refused
                    messages = messages_from_frame(frame)
                except ValueError as exc:
                    log.warning("dropping malformed RAFT_MESSAGE from %s: %s", conn.peer, exc)
                    messages = []
                for m in messages:
                    self.raft.handle_message(m)
            return None
        if code == _FORMATION_STATUS:
            return Reply(header=self._my_status().to_wire())
        if code == _GET_METADATA_INFO:
            return Reply(header=self._metadata())
        if code in ADMIN_CODES:
            return handle_admin(frame, self._status, self._shutdown_later)
        if not self.active or self.raft is None:
            return Reply.error(ResponseCode.FORMATION_PENDING, "the controller quorum is still forming")
        if code == _HEARTBEAT:
            key = (str(frame.header["broker_name"]), int(frame.header["broker_id"]))
            self.broker_conns[key] = conn
        now_ms = CLOCK.monotonic_ns() // 1_000_000
        request = _REQUEST_CODES.get(code)
        if request is None:
            return Reply.error(ResponseCode.CONTROLLER_INVALID_REQUEST, f"{code} is not a valid RequestCode")
        how = route(request, is_leader=self.raft.is_leader, bugs=self.options.bugs)
        if how is Route.READ_AFTER_BARRIER or how is Route.DECIDE_AFTER_BARRIER:
            return self._read_after_barrier(request, frame, now_ms)
        if how is Route.DECIDE:
            return self._decide_and_commit(request, frame, now_ms)
        try:
            if how is Route.RECORD_THEN_REFUSE:
                decide(request, frame.header, frame.body, self._ctx(now_ms))  # records the lease locally
            elif how is Route.ANSWER_FROM_MEMORY:
                d = decide(request, frame.header, frame.body, self._ctx(now_ms))  # BUG stale-read: follower memory
                return Reply(d.code, d.header, d.body)
        except ValueError as exc:
            return Reply.error(ResponseCode.CONTROLLER_INVALID_REQUEST, str(exc))
        return Reply.error(ResponseCode.CONTROLLER_NOT_LEADER, f"{self.options.node_id} is not the leader",
                           **self._leader_hint())

    async def _read_after_barrier(self, request: RequestCode, frame: Frame, now_ms: int) -> Reply:
        assert self.raft is not None
        try:
            await self._barrier.wait()
        except (ProposalDropped, RaftError) as exc:
            return Reply.error(ResponseCode.CONTROLLER_NOT_LEADER, f"read barrier failed: {exc}",
                               **self._leader_hint())
        result = self._decide_and_commit(request, frame, now_ms)
        return await result if not isinstance(result, Reply) else result

    async def _one_barrier(self) -> None:
        if self.raft is None:
            raise RaftError(f"{self.options.node_id}: raft is not running")
        await self.raft.read_barrier(timeout_s=3.0)

    def _decide_and_commit(self, request: RequestCode, frame: Frame, now_ms: int) -> Reply | Awaitable[Reply]:
        try:
            decision = decide(request, frame.header, frame.body, self._ctx(now_ms))
        except ValueError as exc:
            return Reply.error(ResponseCode.CONTROLLER_INVALID_REQUEST, str(exc))
        if not decision.events:
            return Reply(decision.code, decision.header, decision.body)
        return self._propose(decision)

    def _ctx(self, now_ms: int) -> DecideContext:
        """The decide context for ``now_ms``, shared by every request decided against the same
        state in the same millisecond (building one per heartbeat was a measurable cost)."""
        ctx = self._ctx_cache
        state = self.sm.state
        if ctx is None or ctx.now_ms != now_ms or ctx.state is not state or ctx.cluster_id != self.cluster_id:
            ctx = DecideContext(state=state, heartbeats=self.heartbeats, config=self.options.controller,
                                now_ms=now_ms, node_id=self.options.node_id, cluster_id=self.cluster_id)
            self._ctx_cache = ctx
        return ctx

    async def _propose_entry(self, data: bytes) -> tuple[int, Any]:
        if self.raft is None:
            raise RaftError(f"{self.options.node_id}: raft is not running")
        return await self.raft.propose(data, timeout_s=5.0)

    def _propose(self, decision: Decision) -> Awaitable[Reply]:
        """Hand the decision's events to the group commit; the returned future resolves with the reply
        once they are committed and applied.  Callbacks rather than a task per write (a task cost
        more than the rest of a write's handling); the failpoints are still hit once per write, and
        an armed delay or pause continues the write in a task."""
        if decision.request is RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET and self._expands(decision):
            self._expansions.add(id(decision))
        try:
            rest = eventloop.start_eagerly(failpoints.ahit(BEFORE_PROPOSE))
        except BaseException:
            self._expansions.discard(id(decision))
            raise
        return self._submit(decision) if rest is None else self._submit_after(rest, decision)

    def _expands(self, decision: Decision) -> bool:
        """Whether an AlterSyncStateSet decision adds a member to the set the state holds now."""
        h = decision.request_header
        bs = self.sm.state.broker_set(str(h.get("broker_name")))
        requested = h.get("sync_state_set")
        return bs is not None and isinstance(requested, list) and bool(set(requested) - set(bs.sync_state_set))

    async def _after_commit(self, expansion: bool) -> None:
        await failpoints.ahit(COMMIT_REPLY)
        if expansion:
            await failpoints.ahit(EXPAND_COMMITTED)

    def _submit(self, decision: Decision) -> asyncio.Future[Reply]:
        reply: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self.batcher.submit(decision.events).add_done_callback(functools.partial(self._committed, decision, reply))
        return reply

    async def _submit_after(self, before: Awaitable[Any], decision: Decision) -> Reply:
        try:
            await before
        except BaseException:
            self._expansions.discard(id(decision))
            raise
        return await self._submit(decision)

    def _committed(self, decision: Decision, reply: asyncio.Future[Reply],
                   done: asyncio.Future[list[ApplyResult]]) -> None:
        """The group commit of ``decision`` finished: reply from the apply results, or with the failure."""
        expansion = False
        if self._expansions:
            expansion = id(decision) in self._expansions
            self._expansions.discard(id(decision))
        if reply.done():
            return
        try:
            results = done.result()
            after = eventloop.start_eagerly(self._after_commit(expansion))
        except asyncio.CancelledError:
            reply.cancel()
            return
        except ProposalDropped as exc:
            reply.set_result(Reply.error(ResponseCode.CONTROLLER_NOT_LEADER, f"proposal dropped: {exc}",
                                         **self._leader_hint()))
            return
        except RaftError as exc:
            reply.set_result(Reply.error(ResponseCode.CONTROLLER_RAFT_INTERNAL_ERROR, f"commit not confirmed: {exc}"))
            return
        except Exception as exc:  # an armed error failpoint: the connection turns it into an error reply
            reply.set_exception(exc)
            return
        if after is not None:
            task = asyncio.get_running_loop().create_task(self._reply_after(after, decision, results, reply))
            self._side_tasks.add(task)
            task.add_done_callback(self._side_tasks.discard)
            return
        try:
            reply.set_result(self._completed(decision, results))
        except Exception as exc:
            reply.set_exception(exc)

    async def _reply_after(self, before: Awaitable[Any], decision: Decision, results: list[ApplyResult],
                           reply: asyncio.Future[Reply]) -> None:
        try:
            await before
            completed = self._completed(decision, results)
        except Exception as exc:
            if not reply.done():
                reply.set_exception(exc)
            return
        if not reply.done():
            reply.set_result(completed)

    def _completed(self, decision: Decision, results: list[ApplyResult]) -> Reply:
        code, header, body = complete(decision, results, self.sm.state)
        return Reply(code, header, body)

    def _metadata(self) -> dict[str, Any]:
        raft = self.raft
        return {
            "node_id": self.options.node_id,
            "addr": self.options.addr,
            "active": self.active,
            "cluster_id": self.cluster_id,
            "cluster_name": self.options.controller.cluster_name,
            "is_leader": bool(raft and raft.is_leader),
            "term": raft.term if raft else 0,
            "peers": dict(self.options.peers),
            **self._leader_hint(),
        }

    def _status(self) -> dict[str, Any]:
        status = self.raft.status() if self.raft is not None else {}
        return {"metadata": self._metadata(), "raft": _plain(status), "state": self.sm.state.describe()}

    def _shutdown_later(self, header: dict[str, Any]) -> None:
        """ADMIN_SHUTDOWN: stop in 50 ms (the reply goes out first); a shared ``shutdown_id`` marks a
        whole-quorum shutdown."""
        asyncio.get_running_loop().call_later(0.05, self._request_shutdown, header.get("shutdown_id"))

    def _request_shutdown(self, shutdown_id: str | None) -> None:
        self._shutdown_id = shutdown_id or ""
        asyncio.get_running_loop().create_task(self._shutdown_from_admin())

    async def _shutdown_from_admin(self) -> None:
        sid = self._shutdown_id
        clean = bool(sid) or not await self.peers_reachable()
        await self.stop(clean=clean, shutdown_id=sid or None)

    # -- leader duties -------------------------------------------------------------------------

    async def _scan_loop(self) -> None:
        interval = self.options.controller.scan_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            raft = self.raft
            if raft is None or not raft.is_leader:
                continue
            now_ms = CLOCK.monotonic_ns() // 1_000_000
            if not scan_due(now_ms, self._leader_since_ms, self.options.controller.lease_timeout_ms):
                continue  # grace: let every live broker heartbeat the new leader first
            try:
                events = scan(self.sm.state, self.heartbeats, self.options.controller, now_ms, bugs=self.options.bugs)
            except Exception:
                log.exception("scan failed")
                continue
            if not events:
                continue
            log.info("scan proposes %s", [e.describe() for e in events])
            try:
                await raft.propose(encode_events(list(events)), timeout_s=5.0)
            except (ProposalDropped, RaftError) as exc:
                log.info("scan proposal not committed: %s", exc)

    def _after_apply(self, results: list[ApplyResult]) -> None:
        if self.raft is None or not self.raft.is_leader or not self.options.controller.notify_broker_role_changed:
            return
        for result in results:
            name = getattr(result, "notify_broker_set", None)
            if name:
                self._notify(str(name))

    def _notify(self, broker_name: str) -> None:
        for broker_id, _addr, header in notifications(self.sm.state, broker_name):
            conn = self.broker_conns.get((broker_name, broker_id))
            if conn is None or conn.closed:
                continue  # the broker also polls GetReplicaInfo
            with contextlib.suppress(Exception):
                conn.send_oneway(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, header)


def _plain(obj: Any) -> Any:
    """Make a status dict msgpack-able (enums and dataclasses to str)."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, (int, float, str, bool, bytes)) or obj is None:
        return obj
    return str(obj)


__all__ = ["ControllerServer", "ControllerStateMachine", "FormationFailed", "NodeOptions"]
