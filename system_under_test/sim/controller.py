"""A simulated controller: the production Raft core, controller state machine, requests, leases and scan.

:class:`SimController` is wired as ``controller/server.py`` wires the same cores, on simulated time and
messages.  Production code it runs unchanged: :class:`~system_under_test.raft.core.RaftCore` (tick, step,
propose, read-index, Ready), :class:`~system_under_test.controller.state_machine.ControllerState` (apply),
``encode_events``/``decode_events`` (the Raft entry data), :func:`~system_under_test.controller.requests.decide`
and :func:`~system_under_test.controller.requests.complete`, the
:class:`~system_under_test.controller.heartbeat.BrokerHeartbeatManager`,
:func:`~system_under_test.controller.scan.scan` (with the election policy), the request routing and scan gate
of :mod:`system_under_test.controller.routing`, and :func:`~system_under_test.controller.queries.notifications`.

What is the shell's and re-stated here (docs/simulation.md lists it): the Ready loop (persist, send, apply,
advance -- as ``raft/node.py`` does it and ``raft/sim.py`` already simulates), resolving a proposal by index and
term, read barriers with a 3-s timeout, proposal timeouts (5 s), and pushing NOTIFY_BROKER_ROLE_CHANGED after
an applied election.  Formation is not simulated: the quorum starts formed (one cluster id).  The group commit
of ``batching.py`` is not simulated either: each decided write is its own Raft entry.

Disk: entries and term/vote are fsynced with the Ready that carries them (``must_sync``); a commit-only hard
state is written lazily and a crash loses it with probability 1/2 (the real node writes it at most every
``COMMIT_PERSIST_INTERVAL_S``); the core recovers the commit index from its peers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from system_under_test.controller.config import ControllerConfig
from system_under_test.controller.events import decode_events, encode_events
from system_under_test.controller.heartbeat import BrokerHeartbeatManager
from system_under_test.controller.queries import notifications
from system_under_test.controller.requests import DecideContext, Decision, complete, decide
from system_under_test.controller.routing import Route, route, scan_due
from system_under_test.controller.scan import scan
from system_under_test.controller.state_machine import KNOWN_BUGS, ApplyResult, ControllerState
from system_under_test.protocol.codes import RequestCode, ResponseCode
from system_under_test.raft.core import RaftCore
from system_under_test.raft.types import Entry, EntryKind, HardState, Message, ProposalDropped, RaftConfig, Role
from system_under_test.sim.network import Network, Request, SimNode, request_key
from system_under_test.sim.world import World

__all__ = ["CLUSTER_ID", "ControllerTiming", "SimController"]

CLUSTER_ID = "sim-cluster"
READ_BARRIER_TIMEOUT_MS = 3000
PROPOSE_TIMEOUT_MS = 5000
_CODES = {int(c): c for c in RequestCode}


@dataclass(frozen=True)
class ControllerTiming:
    """Raft timing of the controllers (the harness's defaults: 50-ms ticks, 4 ticks to an election)."""

    tick_interval_ms: int = 50
    election_ticks: int = 4
    heartbeat_ticks: int = 1


class _Disk:
    """What one controller has persisted: the Raft log and hard state (``hs_durable`` survives a crash)."""

    __slots__ = ("entries", "hs", "hs_durable")

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.hs = HardState()
        self.hs_durable = HardState()


@dataclass
class _Pending:
    term: int
    decision: Decision
    req: Request
    deadline_ms: int


class SimController(SimNode):
    """One controller process (module docstring)."""

    def __init__(self, name: str, world: World, net: Network, voters: tuple[str, ...], config: ControllerConfig,
                 timing: ControllerTiming, bugs: frozenset[str]) -> None:
        super().__init__(name, world, net)
        self.voters = voters
        self.config = config
        self.timing = timing
        self.bugs = bugs
        self.raft_config = RaftConfig(node_id=name, voters=voters, election_ticks=timing.election_ticks,
                                      heartbeat_ticks=timing.heartbeat_ticks)
        self.disk = _Disk()
        self.core: RaftCore | None = None
        self.state = ControllerState()
        self.heartbeats = BrokerHeartbeatManager()
        self.pending: dict[int, _Pending] = {}
        self.reads: dict[bytes, tuple[Request, RequestCode, int]] = {}
        self.read_waits: list[tuple[int, bytes]] = []
        self.broker_nodes: dict[tuple[str, int], str] = {}
        self.applied = 0
        self.leader_since_ms: int | None = None
        self._read_seq = 0
        self.on_leader: Callable[[str, int], None] | None = None  # observer: (node, term)
        self.on_apply: Callable[[str, int, bytes], None] | None = None  # observer: (node, index, data)

    # -- life cycle ------------------------------------------------------------------------------
    def on_start(self) -> None:
        d = self.disk
        self.state = ControllerState(bugs=self.bugs & KNOWN_BUGS)
        self.heartbeats = BrokerHeartbeatManager()
        self.pending, self.reads, self.read_waits = {}, {}, []
        self.broker_nodes = {}
        self.applied = 0
        self.leader_since_ms = None
        self.core = RaftCore(self.raft_config, self.world.sub_rng(), hard_state=d.hs_durable, entries=list(d.entries))
        self.timer(self.timing.tick_interval_ms, self._tick)
        self.timer(self.config.scan_interval_ms, self._scan_loop)
        self._process()

    def on_crash(self) -> None:
        d = self.disk
        if self.world.rng.random() < 0.5:
            d.hs_durable = d.hs  # the lazily written commit happened to reach the disk
        d.hs = d.hs_durable
        self.core = None

    @property
    def is_leader(self) -> bool:
        return self.core is not None and self.core.role is Role.LEADER

    # -- Raft ------------------------------------------------------------------------------------
    def _tick(self) -> None:
        assert self.core is not None
        self.core.tick()
        self._process()
        self._expire(self.now_ms())
        self.timer(self.timing.tick_interval_ms, self._tick)

    def _process(self) -> None:
        """Each Ready in order: persist (fsync when ``must_sync``), send, apply, advance (``raft/node.py``)."""
        core = self.core
        while core is not None and core.has_ready():
            rd = core.ready()
            d = self.disk
            if rd.entries:
                first = rd.entries[0].index
                del d.entries[first - 1:]
                d.entries.extend(rd.entries)
            if rd.hard_state is not None:
                d.hs = rd.hard_state
            if rd.must_sync:
                d.hs_durable = d.hs
            for m in rd.messages:
                self.send(m.dst, m, "raft")
            for e in rd.committed_entries:
                self._apply(e)
            for rs in rd.read_states:
                self.read_waits.append((rs.index, rs.context))
            if rd.soft_state is not None:
                self._on_soft_state(core)
            core.advance(rd)
            self._release_reads()

    def _on_soft_state(self, core: RaftCore) -> None:
        leader = core.role is Role.LEADER
        if leader and self.leader_since_ms is None:
            self.leader_since_ms = self.now_ms()
            if self.on_leader is not None:
                self.on_leader(self.name, core.term)
        elif not leader and self.leader_since_ms is not None:
            self.leader_since_ms = None
            for ctx, (req, _, _) in list(self.reads.items()):
                self._refuse(req, f"{self.name} lost leadership")
                del self.reads[ctx]
            self.read_waits.clear()

    def _apply(self, e: Entry) -> None:
        if e.index <= self.applied:
            return
        self.applied = e.index
        results: list[ApplyResult] = []
        if e.kind is EntryKind.NORMAL and e.data:
            if self.on_apply is not None:
                self.on_apply(self.name, e.index, e.data)
            results = [self.state.apply(ev, e.index) for ev in decode_events(e.data)]
        p = self.pending.pop(e.index, None)
        if p is not None:
            if p.term == e.term:
                code, header, body = complete(p.decision, results, self.state)
                self.reply(p.req, code, header, body)
            else:
                self._refuse(p.req, f"index {e.index} was committed with term {e.term}, not {p.term}")
        if self.is_leader and self.config.notify_broker_role_changed:
            for r in results:
                if r.notify_broker_set:
                    self._notify(r.notify_broker_set)

    def _notify(self, broker_name: str) -> None:
        for broker_id, _addr, header in notifications(self.state, broker_name):
            node = self.broker_nodes.get((broker_name, broker_id))
            if node is not None:
                self.send(node, Request(0, self.name, RequestCode.NOTIFY_BROKER_ROLE_CHANGED, header, oneway=True))

    def _release_reads(self) -> None:
        if not self.read_waits:
            return
        keep = []
        for index, ctx in self.read_waits:
            if index > self.applied:
                keep.append((index, ctx))
                continue
            got = self.reads.pop(ctx, None)
            if got is not None:
                req, code, _ = got
                self._decide_and_reply(req, code)
        self.read_waits = keep

    def _expire(self, now: int) -> None:
        for ctx, (req, _, deadline) in list(self.reads.items()):
            if now >= deadline:
                del self.reads[ctx]
                self._refuse(req, "read barrier timed out")
        for index, p in list(self.pending.items()):
            if now >= p.deadline_ms:
                del self.pending[index]
                self.reply(p.req, ResponseCode.CONTROLLER_RAFT_INTERNAL_ERROR,
                           {"message": f"commit not confirmed within {PROPOSE_TIMEOUT_MS} ms"})

    # -- requests --------------------------------------------------------------------------------
    def on_message(self, src: str, msg: Any) -> None:
        core = self.core
        if core is None:
            return
        if isinstance(msg, Message):
            core.step(msg)
            self._process()
            return
        if not isinstance(msg, Request):
            return
        code = _CODES.get(msg.code)
        if code is None:
            self.reply(msg, ResponseCode.CONTROLLER_INVALID_REQUEST, {"message": f"{msg.code} is not a RequestCode"})
            return
        if code == RequestCode.BROKER_HEARTBEAT:
            self.broker_nodes[(str(msg.header["broker_name"]), int(msg.header["broker_id"]))] = src
        how = route(code, is_leader=self.is_leader, bugs=self.bugs)
        if how is Route.READ_AFTER_BARRIER or how is Route.DECIDE_AFTER_BARRIER:
            self._read_index(msg, code)
        elif how is Route.DECIDE:
            self._decide_and_reply(msg, code)
        elif how is Route.RECORD_THEN_REFUSE:
            try:
                decide(code, msg.header, msg.body, self._ctx())  # records the lease locally
            except ValueError as exc:
                self.reply(msg, ResponseCode.CONTROLLER_INVALID_REQUEST, {"message": str(exc)})
                return
            self._refuse(msg, f"{self.name} is not the leader")
        elif how is Route.ANSWER_FROM_MEMORY:
            d = decide(code, msg.header, msg.body, self._ctx())  # BUG stale-read: follower memory
            self.reply(msg, d.code, d.header, d.body)
        else:
            self._refuse(msg, f"{self.name} is not the leader")

    def _ctx(self) -> DecideContext:
        return DecideContext(state=self.state, heartbeats=self.heartbeats, config=self.config, now_ms=self.now_ms(),
                             node_id=self.name, cluster_id=CLUSTER_ID)

    def _refuse(self, req: Request, why: str) -> None:
        core = self.core
        leader = core.leader if core is not None else None
        self.reply(req, ResponseCode.CONTROLLER_NOT_LEADER, {"message": why, "leader_id": leader,
                                                              "leader_addr": leader})

    def _read_index(self, req: Request, code: RequestCode) -> None:
        assert self.core is not None
        self._read_seq += 1
        ctx = b"r%d" % self._read_seq
        try:
            self.core.read_index(ctx)
        except ProposalDropped as exc:
            self._refuse(req, f"read barrier failed: {exc}")
            return
        self.reads[ctx] = (req, code, self.now_ms() + READ_BARRIER_TIMEOUT_MS)
        self._process()

    def _decide_and_reply(self, req: Request, code: RequestCode) -> None:
        try:
            d = decide(code, req.header, req.body, self._ctx())
        except ValueError as exc:
            self.reply(req, ResponseCode.CONTROLLER_INVALID_REQUEST, {"message": str(exc)})
            return
        if code == RequestCode.BROKER_HEARTBEAT and d.code == ResponseCode.SUCCESS:
            # decide recorded the lease just now: the moment the controller's lease of the broker counts from
            self.world.node_event(self.name, "lease-granted", broker_name=str(req.header["broker_name"]),
                                  broker_id=int(req.header["broker_id"]), heartbeat=request_key(req.src, req.req_id))
        if not d.events:
            self.reply(req, d.code, d.header, d.body)
            return
        core = self.core
        if core is None or not self.is_leader:
            self._refuse(req, "no longer leader")
            return
        try:
            index = core.propose(encode_events(list(d.events)))
        except ProposalDropped as exc:
            self._refuse(req, f"proposal dropped: {exc}")
            return
        old = self.pending.pop(index, None)
        if old is not None:
            self._refuse(old.req, f"index {index} was reused by a later proposal")
        self.pending[index] = _Pending(core.term, d, req, self.now_ms() + PROPOSE_TIMEOUT_MS)
        self._process()

    # -- the leader's scan -----------------------------------------------------------------------
    def _scan_loop(self) -> None:
        self.timer(self.config.scan_interval_ms, self._scan_loop)
        core = self.core
        if core is None or not self.is_leader:
            return
        now = self.now_ms()
        if not scan_due(now, self.leader_since_ms, self.config.lease_timeout_ms):
            return
        events = scan(self.state, self.heartbeats, self.config, now, bugs=self.bugs)
        if not events:
            return
        try:
            core.propose(encode_events(list(events)))
        except ProposalDropped:
            return
        self._process()
