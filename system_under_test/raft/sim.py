"""Deterministic simulator of a Raft cluster built from :class:`~.core.RaftCore`, with safety checks.

Words:

* **schedule** -- the sequence of events chosen by one seeded ``random.Random``: deliver a
  message (picked at random from the in-flight set, so the network reorders), tick every live
  node (one unit of virtual time; a node may miss a tick, which models clock skew), propose,
  crash / restart a node, partition / heal links, compact a log, transfer leadership, request
  a read-index.  The network also drops and duplicates messages when they are sent.
* **seed configuration** -- drawn first from the seed (so replay stays exact), swarm style: the
  leader's ``max_batch_entries`` (:data:`BATCH_SIZES`: 1, one entry per APPEND, as etcd sends
  with ``MaxSizePerMsg`` 0; or 4) and how often a crash or a partition aims at the leader
  (:data:`LEADER_BIASES`).  One entry per APPEND is what lets a new leader's APPEND carrying an
  entry of an earlier term be acknowledged without the NOOP of its own term that follows it:
  with 4 the two travel together whenever fewer than 4 old entries are missing, so a leader
  that commits by counting replicas (Raft §5.4.2, figure 8; ``--bug old-term-commit``) was
  not caught in 7,000 seeds of 200 steps.  At one entry per APPEND, leader-aimed faults made the
  figure's leader changes (a leader lost right after it appended) about three times as frequent
  (docs/simulation.md has the measured figures).
* **disk** -- what a node has persisted.  Entries, snapshots and term/vote changes are written
  with ``must_sync`` and survive a crash; a commit-only hard-state change is buffered and is
  lost on a crash with probability 1/2.  A crash may also land between persisting a Ready and
  sending its messages.  A restarted node comes back with only its disk.
* **checks** (after every event): election safety (one leader per term, and no node grants two
  votes in one term), log matching (every persisted entry (index, term) has the same data and
  the same predecessor term on every node, which by induction makes the logs identical up to
  there), leader completeness (a new leader holds every entry applied anywhere), state-machine
  safety (no two nodes apply different entries at an index; snapshots carry the same state
  hash), commit/applied monotonicity within a node's lifetime, and read-index safety (a
  ReadState is never behind a commit that happened before the read was requested).

Deliberately broken variants (``bug=``) exist to prove that the checks can fail; see :data:`BUGS`.

CLI: ``python -m system_under_test.raft.sim --seeds 2000 [--start S] [--nodes 3] [--steps 1000] [--bug B]
[--max-batch-entries N] [--leader-bias P]`` (the last two pin what the seed would draw).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from system_under_test.raft.core import RaftCore
from system_under_test.raft.log import RaftLog
from system_under_test.raft.types import (
    Entry,
    HardState,
    Message,
    MessageType,
    ProposalDropped,
    RaftConfig,
    Ready,
    Role,
    Snapshot,
)

__all__ = ["BATCH_SIZES", "BUGS", "LEADER_BIASES", "Cluster", "SafetyViolation", "SimResult", "main", "run_seed"]

#: ``max_batch_entries`` a seed draws from: 1 splits a new leader's old-term entries from its NOOP (figure 8).
BATCH_SIZES: tuple[int, ...] = (1, 4)
#: probability that a crash or partition hits the current leader rather than a random node, drawn per seed.
LEADER_BIASES: tuple[float, ...] = (0.0, 0.8)


class SafetyViolation(AssertionError):
    """A Raft safety property failed in the simulation (the text names the property and the numbers)."""


class _DoubleVoteCore(RaftCore):
    """BUG: grants a vote to any candidate whose log is up to date, even after voting in this term."""

    def _handle_vote_request(self, m: Message) -> None:
        if m.type is MessageType.VOTE and self.log.is_up_to_date(m.log_term, m.index):
            self._vote = None
        super()._handle_vote_request(m)


class _OldTermCommitCore(RaftCore):
    """BUG: the leader commits by counting replicas of any entry, ignoring Raft §5.4.2 (the Figure 8 bug)."""

    def _maybe_commit(self) -> bool:
        mci = sorted((pr.match for pr in self._prs.values()), reverse=True)[self._quorum - 1]
        if mci > self.log.committed:
            self.log.commit_to(mci)
            return True
        return False


class _NoLogCheckCore(RaftCore):
    """BUG: votes without the §5.4.1 up-to-date check, so a stale log can win an election."""

    def _handle_vote_request(self, m: Message) -> None:
        m2 = Message(m.type, m.src, m.dst, m.term, log_term=1 << 30, index=1 << 30, context=m.context)
        super()._handle_vote_request(m2)


#: name -> (core class, disk forgets votes on restart, description)
BUGS: dict[str, tuple[type[RaftCore], bool, str]] = {
    "none": (RaftCore, False, "the real core"),
    "double-vote": (_DoubleVoteCore, False, "a node may vote twice in one term"),
    "forget-vote": (RaftCore, True, "the disk loses the vote on restart"),
    "old-term-commit": (_OldTermCommitCore, False, "leader commits old-term entries by counting replicas"),
    "no-log-check": (_NoLogCheckCore, False, "votes ignore the candidate's log position"),
}


class _Disk:
    __slots__ = ("entries", "hs", "hs_durable", "snapshot")

    def __init__(self) -> None:
        self.hs = HardState()  # what the node wrote (maybe only buffered)
        self.hs_durable = HardState()  # what survives a crash
        self.snapshot: Snapshot | None = None
        self.entries: list[Entry] = []  # contiguous, after the snapshot


class _Node:
    __slots__ = ("applied", "commit", "core", "disk", "node_id", "sm_hash", "sm_index")

    def __init__(self, node_id: str) -> None:
        self.node_id = node_id
        self.core: RaftCore | None = None
        self.disk = _Disk()
        self.sm_index = 0
        self.sm_hash = 0
        self.commit = 0
        self.applied = 0


def _snapshot_data(index: int, sm_hash: int) -> bytes:
    return f"{index}:{sm_hash}".encode()


@dataclass
class SimResult:
    """Outcome of one seed: ``ok`` or the first violation, the schedule trace and counters."""

    seed: int
    ok: bool
    violation: str | None
    trace: list[str]
    stats: dict[str, int] = field(default_factory=dict)
    nodes: int = 3
    steps: int = 200
    bug: str = "none"
    max_batch_entries: int = 4  # what the seed drew (or the pin)
    leader_bias: float = 0.0
    pins: str = ""  # the CLI options that pinned a drawn value, for the replay command

    def replay_command(self) -> str:
        bug = f" --bug {self.bug}" if self.bug != "none" else ""
        return (f"python -m system_under_test.raft.sim --seeds 1 --start {self.seed} --nodes {self.nodes} "
                f"--steps {self.steps}{bug}{self.pins} --trace")


class Cluster:
    """N simulated nodes, a lossy network and the safety checker; every choice comes from ``rng``."""

    def __init__(self, n_nodes: int, rng: random.Random, *, bug: str = "none", election_ticks: int = 5,
                 max_batch_entries: int = 4, max_inflight: int = 3, drop_rate: float = 0.04,
                 dup_rate: float = 0.02, pre_vote: bool = True, check_quorum: bool = True,
                 leader_bias: float = 0.0) -> None:
        if bug not in BUGS:
            raise ValueError(f"unknown bug {bug!r}; expected one of {sorted(BUGS)}")
        self.rng = rng
        self.drop_rate = drop_rate
        self.leader_bias = leader_bias
        self.dup_above = 1.0 - dup_rate
        self.ids = tuple(f"n{i + 1}" for i in range(n_nodes))
        self.core_cls, self.forget_vote, _ = BUGS[bug]
        self.configs = {i: RaftConfig(node_id=i, voters=self.ids, election_ticks=election_ticks, heartbeat_ticks=1,
                                      max_batch_entries=max_batch_entries, max_inflight=max_inflight,
                                      pre_vote=pre_vote, check_quorum=check_quorum)
                        for i in self.ids}
        self.nodes = {i: _Node(i) for i in self.ids}
        self.net: list[Message] = []
        self.cut: set[tuple[str, str]] = set()
        self.trace: list[tuple[Any, ...]] = []
        self.leaders: dict[int, str] = {}  # term -> leader
        self.votes: dict[tuple[str, int], str] = {}  # (voter, term) -> candidate
        self.entries: dict[tuple[int, int], tuple[int, bytes]] = {}  # (index, term) -> (prev term, data)
        self.applied: dict[int, tuple[int, bytes, int]] = {}  # index -> (term, data, state hash after it)
        self.max_commit = 0
        self.reads: dict[bytes, int] = {}  # read context -> max commit anywhere when requested
        self.next_proposal = 0
        self.on_ready: Callable[[str, Ready], None] | None = None  # observer (interaction tests, debugging)
        self.stats = {"delivered": 0, "elections": 0, "applied": 0, "crashes": 0, "snapshots_sent": 0,
                      "reads": 0, "reads_served": 0, "compactions": 0, "transfers": 0}
        for i in self.ids:
            self._start(self.nodes[i])

    # ------------------------------------------------------------------ node lifecycle
    def _start(self, node: _Node) -> None:
        d = node.disk
        hs = d.hs_durable
        if self.forget_vote:
            hs = d.hs = d.hs_durable = HardState(hs.term, None, hs.commit)
        node.core = self.core_cls(self.configs[node.node_id], random.Random(self.rng.getrandbits(32)),
                                  hard_state=hs, snapshot=d.snapshot, entries=d.entries)
        if d.snapshot is not None:
            idx, h = (int(x) for x in d.snapshot.data.decode().split(":"))
            node.sm_index, node.sm_hash = idx, h
        else:
            node.sm_index, node.sm_hash = 0, 0
        node.commit = node.core.commit_index
        node.applied = node.core.applied_index

    def crash(self, node_id: str, *, mid_ready: bool = False) -> None:
        node = self.nodes[node_id]
        core = node.core
        if core is None:
            return
        self.trace.append(("crash", node_id, mid_ready))
        self.stats["crashes"] += 1
        if mid_ready and core.has_ready():
            self._persist(node, core.ready())  # on disk, but the messages never leave
        if self.rng.random() < 0.5:
            node.disk.hs_durable = node.disk.hs  # the OS happened to flush the buffered commit
        node.core = None

    def restart(self, node_id: str) -> None:
        node = self.nodes[node_id]
        if node.core is not None:
            return
        self.trace.append(("restart", node_id))
        self._start(node)

    # ------------------------------------------------------------------ Ready handling
    def _persist(self, node: _Node, rd: Ready) -> None:
        d = node.disk
        if rd.snapshot is not None:
            d.snapshot = rd.snapshot
            d.entries = []  # a snapshot from the leader replaces the whole log
        if rd.entries:
            first = rd.entries[0].index
            base = d.snapshot.index if d.snapshot is not None else 0
            del d.entries[first - base - 1:]
            prev_term = d.entries[-1].term if d.entries else (d.snapshot.term if d.snapshot is not None else 0)
            known = self.entries
            for e in rd.entries:
                key = (e.index, e.term)
                val = (prev_term, e.data)
                seen = known.setdefault(key, val)
                if seen != val:
                    raise SafetyViolation(
                        f"log matching: {node.node_id} persisted entry {e.term}/{e.index} with predecessor term "
                        f"{prev_term} and data {e.data!r}, another node has predecessor term {seen[0]} and data "
                        f"{seen[1]!r}"
                    )
                prev_term = e.term
            d.entries.extend(rd.entries)
        hs = rd.hard_state
        if hs is not None:
            old = d.hs
            if hs.term < old.term or (hs.term == old.term and old.vote is not None and hs.vote != old.vote):
                raise SafetyViolation(f"{node.node_id} persisted hard state {hs.describe()} after {old.describe()}: "
                                      f"terms never decrease and a vote never changes within a term")
            d.hs = hs
        if rd.must_sync:
            d.hs_durable = d.hs

    def process(self, node_id: str) -> None:
        """Run every pending Ready of ``node_id`` through persist, send, apply, advance."""
        node = self.nodes[node_id]
        core = node.core
        while core is not None and core.has_ready():
            rd = core.ready()
            if self.on_ready is not None:
                self.on_ready(node_id, rd)
            self._persist(node, rd)
            for m in rd.messages:
                self._send(m)
            if rd.snapshot is not None:
                self._restore_sm(node, rd.snapshot)
            for e in rd.committed_entries:
                self._apply(node, e)
            for rs in rd.read_states:
                self.stats["reads_served"] += 1
                want = self.reads.pop(rs.context, None)
                if want is not None and rs.index < want:
                    raise SafetyViolation(f"read-index: {node_id} returned read point {rs.index} for "
                                          f"{rs.context!r}, but index {want} was committed before the request")
            core.advance(rd)
            self._check_node(node, core)

    def _send(self, m: Message) -> None:
        if m.type is MessageType.VOTE_RESP and not m.reject:
            key = (m.src, m.term)
            prev = self.votes.setdefault(key, m.dst)
            if prev != m.dst:
                raise SafetyViolation(f"election safety: {m.src} granted votes to {prev} and {m.dst} in term {m.term}")
        r = self.rng.random()
        if r < self.drop_rate:
            return  # dropped
        self.net.append(m)
        if r > self.dup_above:
            self.net.append(m)  # duplicated

    def _restore_sm(self, node: _Node, snap: Snapshot) -> None:
        idx, h = (int(x) for x in snap.data.decode().split(":"))
        known = self.applied.get(idx)
        if known is not None and known[2] != h:
            raise SafetyViolation(f"state-machine safety: {node.node_id} installed snapshot at {idx} with state "
                                  f"hash {h}, but the state there is {known[2]}")
        node.sm_index, node.sm_hash = idx, h

    def _apply(self, node: _Node, e: Entry) -> None:
        if e.index != node.sm_index + 1:
            raise SafetyViolation(f"{node.node_id} applied entry {e.term}/{e.index} after state index {node.sm_index}")
        h = zlib.crc32(e.data, zlib.crc32(b"%d/%d" % (e.term, e.index), node.sm_hash))
        known = self.applied.setdefault(e.index, (e.term, e.data, h))
        if known[0] != e.term or known[1] != e.data or known[2] != h:
            raise SafetyViolation(
                f"state-machine safety: {node.node_id} applied {e.term}/{e.index} data={e.data!r}, another node "
                f"applied term {known[0]} data={known[1]!r} at that index"
            )
        node.sm_index, node.sm_hash = e.index, h
        self.stats["applied"] += 1

    def _check_node(self, node: _Node, core: RaftCore) -> None:
        c, a = core.commit_index, core.applied_index
        if c < node.commit or a < node.applied:
            raise SafetyViolation(f"monotonicity: {node.node_id} commit {node.commit}->{c} applied {node.applied}->{a}")
        node.commit, node.applied = c, a
        if c > self.max_commit:
            self.max_commit = c
        if core.role is Role.LEADER:
            self._check_leader(core)

    def _check_leader(self, core: RaftCore) -> None:
        term = core.term
        prev = self.leaders.get(term)
        if prev == core.node_id:
            return
        if prev is not None:
            raise SafetyViolation(f"election safety: {prev} and {core.node_id} are both leader of term {term}")
        self.leaders[term] = core.node_id
        self.stats["elections"] += 1
        lg: RaftLog = core.log
        for index in range(lg.snapshot_index + 1, max(self.applied, default=0) + 1):
            got = lg.term(index)
            want = self.applied.get(index)
            if want is not None and got != want[0]:
                raise SafetyViolation(
                    f"leader completeness: {core.node_id} became leader of term {term} with term {got} at index "
                    f"{index}, but entry {want[0]}/{index} is committed (log ends at {lg.last_index})"
                )

    # ------------------------------------------------------------------ events
    def deliver(self, i: int) -> None:
        m = self.net[i]
        self.net[i] = self.net[-1]
        self.net.pop()
        node = self.nodes[m.dst]
        if node.core is None or (m.src, m.dst) in self.cut:
            self.trace.append(("lost", m, "destination down" if node.core is None else "link cut"))
            return
        self.trace.append(("deliver", m))
        self.stats["delivered"] += 1
        if m.type is MessageType.SNAPSHOT:
            self.stats["snapshots_sent"] += 1
        node.core.step(m)
        self.process(m.dst)

    def deliver_matching(self, pred: Callable[[Message], bool]) -> int:
        """Deliver (in send order) in-flight messages matching ``pred``, including the ones their delivery
        causes, until none matches (at most ``10_000``); returns how many were delivered."""
        n = 0
        while n < 10_000:
            hits = [m for m in self.net if pred(m)]
            if not hits:
                break
            self.net = [m for m in self.net if not pred(m)]
            for m in hits:
                self.net.append(m)
                self.deliver(len(self.net) - 1)
            n += len(hits)
        return n

    def drop_matching(self, pred: Callable[[Message], bool]) -> int:
        before = len(self.net)
        self.net = [m for m in self.net if not pred(m)]
        return before - len(self.net)

    def stabilize(self, *, max_messages: int = 10_000) -> None:
        """Deliver messages in send order until none is in flight (bounded by ``max_messages``)."""
        for _ in range(max_messages):
            if not self.net:
                return
            self.net.append(self.net.pop(0))
            self.deliver(len(self.net) - 1)
        raise RuntimeError(f"network did not quiesce after {max_messages} messages; in flight: {len(self.net)}")

    def tick_node(self, node_id: str, n: int = 1) -> None:
        core = self.nodes[node_id].core
        if core is None:
            return
        for _ in range(n):
            core.tick()
            self.process(node_id)

    def core(self, node_id: str) -> RaftCore:
        core = self.nodes[node_id].core
        if core is None:
            raise KeyError(f"node {node_id} is down")
        return core

    def tick(self) -> None:
        self.trace.append(("tick",))
        for node in self.nodes.values():
            if node.core is not None and self.rng.random() < 0.92:
                node.core.tick()
                self.process(node.node_id)

    def leader(self) -> RaftCore | None:
        best = None
        for node in self.nodes.values():
            c = node.core
            if c is not None and c.role is Role.LEADER and (best is None or c.term > best.term):
                best = c
        return best

    def _target(self) -> RaftCore | None:
        """Usually the newest leader, sometimes any live node (which will drop the request)."""
        lead = self.leader()
        if lead is not None and self.rng.random() < 0.9:
            return lead
        live = [n.core for n in self.nodes.values() if n.core is not None]
        return self.rng.choice(live) if live else None

    def propose(self) -> None:
        core = self._target()
        if core is None:
            return
        self.next_proposal += 1
        data = b"p%d" % self.next_proposal
        try:
            index = core.propose(data)
        except ProposalDropped:
            return
        self.trace.append(("propose", core.node_id, data, index))
        self.process(core.node_id)

    def read(self) -> None:
        core = self._target()
        if core is None:
            return
        self.next_proposal += 1
        ctx = b"r%d" % self.next_proposal
        try:
            core.read_index(ctx)
        except ProposalDropped:
            return
        self.stats["reads"] += 1
        self.reads[ctx] = self.max_commit
        self.trace.append(("read_index", core.node_id, ctx))
        self.process(core.node_id)

    def compact(self, node_id: str) -> None:
        node = self.nodes[node_id]
        core = node.core
        if core is None or core.applied_index <= core.log.snapshot_index or node.sm_index != core.applied_index:
            return
        index = core.applied_index
        snap = core.compact(index, _snapshot_data(index, node.sm_hash))
        d = node.disk
        base = d.snapshot.index if d.snapshot is not None else 0
        d.entries = d.entries[index - base:]
        d.snapshot = snap
        self.stats["compactions"] += 1
        self.trace.append(("compact", node_id, index))

    def transfer(self) -> None:
        lead = self.leader()
        if lead is None:
            return
        target = self.rng.choice(self.ids)
        self.trace.append(("transfer", lead.node_id, target))
        self.stats["transfers"] += 1
        lead.transfer_leadership(target)
        self.process(lead.node_id)

    def _victim(self) -> str:
        """The node a crash or a partition hits: the newest live leader with probability ``leader_bias``, else
        any node.  Real fault injectors aim at the leader (Jepsen's nemeses target ``:primaries``), and a
        leader lost right after it appended is what leaves the uncommitted entries of two terms that Raft's
        figure 8 needs."""
        lead = self.leader()
        if lead is not None and self.rng.random() < self.leader_bias:
            return lead.node_id
        return self.rng.choice(self.ids)

    def partition(self, victim: str | None = None) -> None:
        """Cut ``victim`` (default: a random node) off from the others (both directions)."""
        if victim is None:
            victim = self.rng.choice(self.ids)
        for other in self.ids:
            if other != victim:
                self.cut.add((victim, other))
                self.cut.add((other, victim))
        self.trace.append(("partition", victim))

    def heal(self) -> None:
        self.cut.clear()
        self.trace.append(("heal",))

    def step_random(self) -> None:
        """One scheduler event, chosen by ``rng``."""
        rng = self.rng
        r = rng.random()
        n_net = len(self.net)
        if n_net and r < (0.55 if n_net < 6 else 0.8):
            self.deliver(rng.randrange(n_net))
        elif r < 0.86:
            self.tick()
        elif r < 0.93:
            self.propose()
        else:
            self._nemesis(rng.random())

    def _nemesis(self, r: float) -> None:
        rng = self.rng
        down = [i for i, n in self.nodes.items() if n.core is None]
        if r < 0.15:
            if len(down) < (len(self.ids) - 1) // 2 + (1 if rng.random() < 0.2 else 0):
                self.crash(self._victim(), mid_ready=rng.random() < 0.5)
        elif r < 0.4:
            if down:
                self.restart(rng.choice(down))
        elif r < 0.5:
            self.partition(self._victim())
        elif r < 0.65:
            self.heal()
        elif r < 0.8:
            self.compact(rng.choice(self.ids))
        elif r < 0.9:
            self.read()
        else:
            self.transfer()

    def describe_trace(self) -> list[str]:
        out: list[str] = []
        step = ""
        for ev in self.trace:
            kind = ev[0]
            if kind == "step":
                step = f"{ev[1]:>4} "
                continue
            if kind == "deliver":
                text = "deliver " + ev[1].describe()
            elif kind == "lost":
                text = f"lost ({ev[2]}) " + ev[1].describe()
            else:
                text = " ".join(str(x) for x in ev)
            out.append(step + text)
            step = "     "
        return out


def run_seed(seed: int, *, nodes: int = 3, steps: int = 200, bug: str = "none", keep_trace: bool = False,
             max_batch_entries: int | None = None, leader_bias: float | None = None) -> SimResult:
    """Simulate ``steps`` scheduler events for ``nodes`` nodes from ``seed``; check safety after each.

    ``max_batch_entries`` and ``leader_bias`` are drawn from the seed (:data:`BATCH_SIZES`,
    :data:`LEADER_BIASES`) unless given; both draws happen even when pinned, so a pin changes
    nothing else in the schedule.

    Returns:
        a SimResult; ``trace`` is rendered on failure or when ``keep_trace`` is set.
    """
    rng = random.Random(seed)
    drawn_batch, drawn_bias = rng.choice(BATCH_SIZES), rng.choice(LEADER_BIASES)
    batch = drawn_batch if max_batch_entries is None else max_batch_entries
    bias = drawn_bias if leader_bias is None else leader_bias
    pins = (f" --max-batch-entries {batch}" if max_batch_entries is not None else "") + (
        f" --leader-bias {bias:g}" if leader_bias is not None else "")
    cluster = Cluster(nodes, rng, bug=bug, max_batch_entries=batch, leader_bias=bias)
    cluster.trace.append(("config", f"max_batch_entries={batch}", f"leader_bias={bias:g}"))
    violation = None
    try:
        for step in range(steps):
            cluster.trace.append(("step", step))
            cluster.step_random()
    except SafetyViolation as exc:
        violation = str(exc)
    except Exception as exc:  # an invariant the core itself caught, or a crash: also a finding
        violation = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"
    trace = cluster.describe_trace() if violation is not None or keep_trace else []
    return SimResult(seed=seed, ok=violation is None, violation=violation, trace=trace, stats=dict(cluster.stats),
                     nodes=nodes, steps=steps, bug=bug, max_batch_entries=batch, leader_bias=bias, pins=pins)


def run_seeds(start: int, count: int, *, nodes: int = 3, steps: int = 200, bug: str = "none",
              on_result: Callable[[SimResult], None] | None = None, max_batch_entries: int | None = None,
              leader_bias: float | None = None) -> list[SimResult]:
    """Run ``count`` consecutive seeds from ``start``; returns the failures."""
    failures = []
    for seed in range(start, start + count):
        res = run_seed(seed, nodes=nodes, steps=steps, bug=bug, max_batch_entries=max_batch_entries,
                       leader_bias=leader_bias)
        if on_result is not None:
            on_result(res)
        if not res.ok:
            failures.append(res)
    return failures


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {n}")
    return n


def _probability(text: str) -> float:
    try:
        p = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= p <= 1.0:
        raise argparse.ArgumentTypeError(f"a probability is in [0, 1], got {p:g}")
    return p


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m system_under_test.raft.sim", description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, default=2000, help="number of seeds to run")
    p.add_argument("--start", type=int, default=0, help="first seed")
    p.add_argument("--nodes", type=int, default=3, choices=(3, 5))
    p.add_argument("--steps", type=int, default=1000,
                   help="scheduler events per seed (figure 8 needs four leader changes: 1 in 10,000 seeds of 200)")
    p.add_argument("--bug", default="none", choices=sorted(BUGS), help="run a deliberately broken variant")
    p.add_argument("--trace", action="store_true", help="print the schedule of every seed run")
    p.add_argument("--stop-on-failure", action="store_true")
    p.add_argument("--max-batch-entries", type=_positive_int, metavar="N", default=None,
                   help=f"pin the leader's entries per APPEND (default: drawn per seed from {list(BATCH_SIZES)})")
    p.add_argument("--leader-bias", type=_probability, default=None, metavar="P",
                   help=f"pin the chance a crash/partition hits the leader (default: drawn from {list(LEADER_BIASES)})")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    failures = 0
    totals: dict[str, int] = {}
    for seed in range(args.start, args.start + args.seeds):
        res = run_seed(seed, nodes=args.nodes, steps=args.steps, bug=args.bug, keep_trace=args.trace,
                       max_batch_entries=args.max_batch_entries, leader_bias=args.leader_bias)
        for k, v in res.stats.items():
            totals[k] = totals.get(k, 0) + v
        if args.trace:
            print(f"--- seed {seed}")
            print("\n".join(res.trace))
        if not res.ok:
            failures += 1
            print(f"FAIL seed={seed} (max_batch_entries={res.max_batch_entries} leader_bias={res.leader_bias:g}): "
                  f"{res.violation}")
            print(f"  replay: {res.replay_command()}")
            if args.stop_on_failure:
                break
    dt = time.perf_counter() - t0
    rate = args.seeds / dt * 60 if dt > 0 else float("inf")
    print(f"seeds {args.start}..{args.start + args.seeds - 1} nodes={args.nodes} steps={args.steps} bug={args.bug}: "
          f"{failures} failed, {dt:.1f}s, {rate:.0f} seeds/min")
    print("totals: " + " ".join(f"{k}={v}" for k, v in totals.items()))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
