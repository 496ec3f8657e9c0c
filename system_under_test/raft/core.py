"""The sans-IO Raft core: elections, log replication, snapshots, read-index and leadership transfer.

Theory of operation (Raft paper sections 5-7, in the style of etcd-raft ``raft.go``/``rawnode.go``):

The core is a deterministic state machine.  Inputs are method calls -- :meth:`RaftCore.tick`
(one logical time unit), :meth:`RaftCore.step` (a message from a peer), :meth:`RaftCore.propose`,
:meth:`RaftCore.read_index`, :meth:`RaftCore.transfer_leadership`, :meth:`RaftCore.campaign`,
:meth:`RaftCore.compact`.  Outputs are collected into a :class:`~.types.Ready` that the shell
fetches with :meth:`RaftCore.ready`, carries out in the order documented on ``Ready`` (persist,
fsync if ``must_sync``, send, apply) and acknowledges with :meth:`RaftCore.advance`.  The core
never reads a clock, never sleeps and never touches disk or network; randomness (the election
timeout) comes only from the injected ``random.Random``.

Roles and their step functions: FOLLOWER, PRE_CANDIDATE and CANDIDATE share
:meth:`RaftCore._step_candidate` / :meth:`RaftCore._step_follower`; LEADER uses
:meth:`RaftCore._step_leader`.  Term handling common to all roles happens first in
:meth:`RaftCore.step` (higher term: become follower, except for pre-votes and a
leader-stickiness lease; lower term: drop, or tell a stale leader about the new term).

Duties of the shell for each Ready (call ``ready()`` only when ``has_ready()``; one Ready at a time):

1. If ``ready.snapshot`` is set, it came from the leader and *replaces the whole log*: persist it and
   discard every stored entry (also those after its index, which conflict).  Then persist
   ``ready.entries``, overwriting stored entries from ``entries[0].index`` on, then ``hard_state``.
   fsync when ``must_sync`` (set whenever term, vote, entries or a snapshot changed; a commit-only
   hard state change may stay buffered: after a crash the core recovers the commit index).
2. Send ``ready.messages`` (never before step 1: votes and acks must not outrun the disk).
3. Restore ``ready.snapshot`` into the state machine, then apply ``committed_entries`` in order
   (NOOP entries carry no data); answer reads whose ``read_states`` index is now applied.
4. Call ``advance(ready)``.

A snapshot the application takes itself goes through :meth:`RaftCore.compact`, whose result the shell
persists before it deletes stored entries ``<= index`` (later entries stay).  To restart, pass the
stored hard state, snapshot and entries to the constructor and restore the state machine from the
snapshot; entries up to the commit index are re-delivered as committed entries.

Rules of this file:

1. Every message addressed to this node goes through :meth:`step`; messages for another node
   are ignored (never raised on: the network may misroute).
2. A vote is only ever sent in the same Ready that persists it (``must_sync``), so a vote can
   never outrun the disk.
3. The leader commits only an entry of its current term (§5.4.2); earlier entries commit
   indirectly.  A NOOP entry is appended on election so this happens promptly.
4. A broken invariant raises :class:`~.log.LogInvariantError` with the numbers; the core never
   continues past it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from system_under_test.raft.log import LogInvariantError, RaftLog
from system_under_test.raft.progress import Progress, ProgressEvent, ProgressState
from system_under_test.raft.quorum import VoteResult, committed_index, majority, vote_result
from system_under_test.raft.types import (
    Entry,
    EntryKind,
    HardState,
    Message,
    MessageType,
    ProposalDropped,
    RaftConfig,
    ReadState,
    Ready,
    Role,
    Snapshot,
    SoftState,
)

if TYPE_CHECKING:
    import random

__all__ = ["TRANSFER_CONTEXT", "RaftCore", "describe_ready"]

#: Context of a VOTE sent by a TIMEOUT_NOW campaign: it overrides leader stickiness.
TRANSFER_CONTEXT = b"transfer"

MT = MessageType
_NO_HARD_STATE = HardState()


class _PendingRead:
    __slots__ = ("acks", "context", "index")

    def __init__(self, context: bytes, index: int, self_id: str) -> None:
        self.context = context
        self.index = index
        self.acks = {self_id}


class RaftCore:
    """One Raft node's protocol logic (not thread-safe; call from one task).

    Args:
        config: static configuration (validated by :class:`~.types.RaftConfig`).
        rng: the only source of randomness (election timeouts); seed it for replayable runs.
        hard_state: the persisted (term, vote, commit) to restart from.
        snapshot: the persisted snapshot, if any; the shell restores the state machine from it.
        entries: the stable log after the snapshot (entries at or below ``snapshot.index`` are ignored).
        applied: index the state machine already reflects (default: the snapshot index).

    Raises:
        LogInvariantError: if the stored state is inconsistent (gap in the log, commit beyond it).
    """

    def __init__(self, config: RaftConfig, rng: random.Random, *, hard_state: HardState = _NO_HARD_STATE,
                 snapshot: Snapshot | None = None, entries: Sequence[Entry] = (), applied: int | None = None) -> None:
        self.config = config
        self._rng = rng
        self._id = config.node_id
        self._voters = config.voters
        self._peers = tuple(v for v in config.voters if v != config.node_id)
        self._quorum = majority(len(config.voters))
        self._term = hard_state.term
        self._vote = hard_state.vote
        self._lead: str | None = None
        self._role = Role.FOLLOWER
        self.log = RaftLog(snapshot=snapshot, entries=entries, committed=hard_state.commit, applied=applied)
        self._snapshot = snapshot
        self._prs: dict[str, Progress] = {}
        self._votes: dict[str, bool] = {}
        self._election_elapsed = 0
        self._heartbeat_elapsed = 0
        self._randomized_timeout = 0
        self._transferee: str | None = None
        self._reads: list[_PendingRead] = []
        self._reads_waiting: list[bytes] = []
        self._msgs: list[Message] = []
        self._read_states: list[ReadState] = []
        self._prev_hs = HardState(self._term, self._vote, self.log.committed)
        self._prev_ss = SoftState(None, Role.FOLLOWER)
        self._ready_outstanding = False
        self._reset_randomized_timeout()

    # ------------------------------------------------------------------ properties
    @property
    def node_id(self) -> str:
        return self._id

    @property
    def term(self) -> int:
        return self._term

    @property
    def vote(self) -> str | None:
        return self._vote

    @property
    def leader(self) -> str | None:
        return self._lead

    @property
    def role(self) -> Role:
        return self._role

    @property
    def commit_index(self) -> int:
        return self.log.committed

    @property
    def applied_index(self) -> int:
        return self.log.applied

    @property
    def last_index(self) -> int:
        return self.log.last_index

    @property
    def transferee(self) -> str | None:
        return self._transferee

    def progress(self, node_id: str) -> Progress | None:
        """The leader's progress record of ``node_id`` (None when not leader)."""
        return self._prs.get(node_id) if self._role is Role.LEADER else None

    def status(self) -> dict[str, Any]:
        """A JSON-able summary for logs and the admin CLI."""
        st: dict[str, Any] = {
            "node_id": self._id, "term": self._term, "vote": self._vote, "leader": self._lead,
            "role": self._role.value, "commit": self.log.committed, "applied": self.log.applied,
            "first_index": self.log.first_index, "last_index": self.log.last_index,
            "last_term": self.log.last_term,
        }
        if self._role is Role.LEADER:
            st["progress"] = {k: pr.describe() for k, pr in self._prs.items()}
            st["transferee"] = self._transferee
        return st

    def describe(self) -> str:
        return (f"{self._id} {self._role.value} term={self._term} vote={self._vote or '-'} "
                f"lead={self._lead or '-'} {self.log.describe()}")

    # ------------------------------------------------------------------ public inputs
    def tick(self) -> None:
        """Advance logical time by one tick (election timeout, heartbeats, quorum check)."""
        if self._role is Role.LEADER:
            self._tick_leader()
            return
        self._election_elapsed += 1
        if self._election_elapsed >= self._randomized_timeout:
            self._election_elapsed = 0
            self._hup(transfer=False)

    def campaign(self) -> None:
        """Start an election now (pre-vote first if configured); a no-op on the leader."""
        self._hup(transfer=False)

    def propose(self, data: bytes) -> int:
        """Append ``data`` as a new entry and start replicating it.

        Returns:
            the index of the new entry (it is committed once the shell sees it in committed_entries).

        Raises:
            ProposalDropped: not the leader (``leader`` carries the hint), or a transfer is in progress.
        """
        if self._role is not Role.LEADER:
            raise ProposalDropped(f"{self._id} is {self._role.value} at term {self._term}, not leader",
                                  leader=self._lead)
        if self._transferee is not None:
            raise ProposalDropped(f"{self._id} is transferring leadership to {self._transferee} (term {self._term})",
                                  leader=self._id)
        index = self._append_entry(Entry(self._term, self.log.last_index + 1, bytes(data)))
        self._bcast_append()
        return index

    def read_index(self, context: bytes) -> None:
        """Request a linearizable read point; a ``ReadState(index, context)`` appears in a later Ready.

        The leader records its commit index, confirms it is still leader by a heartbeat round
        acknowledged by a quorum, and only then emits the ReadState.  Requests made before the
        leader committed an entry of its own term wait for that commit.  ``context`` must be
        unique among outstanding reads.  A request is silently lost if the leader steps down:
        the shell must time out waiting reads.

        Raises:
            ProposalDropped: not the leader.
        """
        if self._role is not Role.LEADER:
            raise ProposalDropped(f"{self._id} is {self._role.value} at term {self._term}, not leader",
                                  leader=self._lead)
        if self.log.term(self.log.committed) != self._term:
            self._reads_waiting.append(bytes(context))
            return
        self._start_read(bytes(context))

    def transfer_leadership(self, target: str) -> None:
        """Hand leadership to ``target``: stop taking proposals, catch it up, send TIMEOUT_NOW.

        The attempt is abandoned after an election timeout.  Ignored if ``target`` is this node
        or is already the transfer target.

        Raises:
            ProposalDropped: not the leader.
            ValueError: ``target`` is not a voter.
        """
        if self._role is not Role.LEADER:
            raise ProposalDropped(f"{self._id} is not leader (term {self._term}); cannot transfer",
                                  leader=self._lead)
        if target not in self._voters:
            raise ValueError(f"transfer_leadership target {target!r} is not a voter of {list(self._voters)}")
        if target == self._id or target == self._transferee:
            return
        self._transferee = target
        self._election_elapsed = 0
        pr = self._prs[target]
        if pr.match == self.log.last_index:
            self._send(Message(MT.TIMEOUT_NOW, self._id, target, self._term))
        else:
            self._send_append(target)

    def compact(self, index: int, data: bytes) -> Snapshot:
        """The application snapshotted its state machine at applied ``index``; drop log entries <= index.

        Returns:
            the Snapshot the shell must persist (before it deletes the compacted entries from disk).

        Raises:
            ValueError: ``index`` is not in (current snapshot index, applied index].
        """
        if not self.log.snapshot_index < index <= min(self.log.applied, self.log.stable_index):
            raise ValueError(
                f"compact({index}) on {self._id}: expected snapshot index {self.log.snapshot_index} < index <= "
                f"applied {self.log.applied} (stable {self.log.stable_index}); snapshot only applied state"
            )
        term = self.log.compact(index)
        self._snapshot = Snapshot(index=index, term=term, data=bytes(data), voters=self._voters)
        return self._snapshot

    # ------------------------------------------------------------------ Ready / advance
    def has_ready(self) -> bool:
        if self._ready_outstanding:
            return False
        if self._msgs or self._read_states:
            return True
        lg = self.log
        committed = lg.committed
        hs, ss = self._prev_hs, self._prev_ss
        return (
            lg.stable_index < lg.last_index or lg.pending_snapshot is not None
            or (lg.applied < committed and lg.snapshot_index < committed)
            or self._term != hs.term or self._vote != hs.vote or committed != hs.commit
            or self._lead != ss.leader or self._role is not ss.role
        )

    def ready(self) -> Ready:
        """Collect what the shell must do next (see the Ready docstring for the order of duties).

        Messages and read states are handed over now; persistence and application are
        acknowledged by :meth:`advance`, which must be called before the next ``ready()``.

        Raises:
            RuntimeError: the previous Ready was not advanced yet.
        """
        if self._ready_outstanding:
            raise RuntimeError(f"{self._id}: ready() called again before advance() of the previous Ready")
        lg = self.log
        ss = None
        if self._lead != self._prev_ss.leader or self._role is not self._prev_ss.role:
            ss = SoftState(self._lead, self._role)
        hs = None
        prev = self._prev_hs
        if self._term != prev.term or self._vote != prev.vote or lg.committed != prev.commit:
            hs = HardState(self._term, self._vote, lg.committed)
        entries = tuple(lg.unstable_entries())
        snap = lg.pending_snapshot
        msgs = tuple(self._msgs)
        reads = tuple(self._read_states)
        self._msgs = []
        self._read_states = []
        must_sync = bool(entries) or snap is not None or (
            hs is not None and (hs.term != prev.term or hs.vote != prev.vote))
        self._ready_outstanding = True
        return Ready(soft_state=ss, hard_state=hs, entries=entries, snapshot=snap,
                     committed_entries=tuple(lg.next_committed_entries()), messages=msgs, read_states=reads,
                     must_sync=must_sync)

    def advance(self, ready: Ready) -> None:
        """The shell has persisted, sent and applied everything in ``ready``."""
        self._ready_outstanding = False
        if ready.soft_state is not None:
            self._prev_ss = ready.soft_state
        if ready.hard_state is not None:
            self._prev_hs = ready.hard_state
        lg = self.log
        if ready.snapshot is not None:
            if lg.pending_snapshot is ready.snapshot:
                lg.pending_snapshot = None
            lg.applied = max(lg.applied, ready.snapshot.index)
        if ready.entries:
            last = ready.entries[-1]
            lg.stable_to(last.index, last.term)
        if ready.committed_entries:
            lg.applied_to(ready.committed_entries[-1].index)

    # ------------------------------------------------------------------ step
    def step(self, msg: Message) -> None:
        """Deliver one message addressed to this node; stale and misaddressed messages are ignored.

        Raises:
            LogInvariantError: the message would break a log invariant (see the message text).
        """
        if msg.dst != self._id or msg.src not in self._voters:
            return
        t = msg.type
        if msg.term > self._term:
            if t is MT.VOTE or t is MT.PRE_VOTE:
                force = msg.context == TRANSFER_CONTEXT
                in_lease = (self.config.check_quorum or self.config.pre_vote) and self._lead is not None \
                    and self._election_elapsed < self.config.election_ticks
                if in_lease and not force:
                    return  # leader stickiness: we heard from a live leader recently
            if t is MT.PRE_VOTE or (t is MT.PRE_VOTE_RESP and not msg.reject):
                pass  # pre-votes never change our term; a granted pre-vote is at our term + 1
            elif t is MT.APPEND or t is MT.HEARTBEAT or t is MT.SNAPSHOT:
                self._become_follower(msg.term, msg.src)
            else:
                self._become_follower(msg.term, None)
        elif msg.term < self._term:
            if (self.config.check_quorum or self.config.pre_vote) and (t is MT.APPEND or t is MT.HEARTBEAT):
                # A stale leader (e.g. healed from a partition) learns of the new term from this reply.
                self._send(Message(MT.APPEND_RESP, self._id, msg.src, self._term))
            elif t is MT.PRE_VOTE:
                self._send(Message(MT.PRE_VOTE_RESP, self._id, msg.src, self._term, reject=True))
            return
        if t is MT.VOTE or t is MT.PRE_VOTE:
            self._handle_vote_request(msg)
        elif self._role is Role.LEADER:
            self._step_leader(msg)
        elif self._role is Role.FOLLOWER:
            self._step_follower(msg)
        else:
            self._step_candidate(msg)

    def _handle_vote_request(self, m: Message) -> None:
        pre = m.type is MT.PRE_VOTE
        can_vote = (self._vote == m.src or (self._vote is None and self._lead is None)
                    or (pre and m.term > self._term))
        resp_type = MT.PRE_VOTE_RESP if pre else MT.VOTE_RESP
        if can_vote and self.log.is_up_to_date(m.log_term, m.index):
            self._send(Message(resp_type, self._id, m.src, m.term))
            if not pre:
                self._election_elapsed = 0
                self._vote = m.src
        else:
            self._send(Message(resp_type, self._id, m.src, self._term, reject=True))

    def _step_follower(self, m: Message) -> None:
        t = m.type
        if t is MT.APPEND:
            self._election_elapsed = 0
            self._lead = m.src
            self._handle_append(m)
        elif t is MT.HEARTBEAT:
            self._election_elapsed = 0
            self._lead = m.src
            self._handle_heartbeat(m)
        elif t is MT.SNAPSHOT:
            self._election_elapsed = 0
            self._lead = m.src
            self._handle_snapshot(m)
        elif t is MT.TIMEOUT_NOW:
            self._hup(transfer=True)

    def _step_candidate(self, m: Message) -> None:
        t = m.type
        if t is MT.APPEND or t is MT.HEARTBEAT or t is MT.SNAPSHOT:
            self._become_follower(m.term, m.src)  # a leader exists at our term
            self._step_follower(m)
        elif (t is MT.PRE_VOTE_RESP and self._role is Role.PRE_CANDIDATE) or (
                t is MT.VOTE_RESP and self._role is Role.CANDIDATE):
            self._votes.setdefault(m.src, not m.reject)
            res = vote_result(self._voters, self._votes)
            if res is VoteResult.WON:
                if self._role is Role.PRE_CANDIDATE:
                    self._campaign(pre=False, transfer=False)
                else:
                    self._become_leader()
                    self._bcast_append()
            elif res is VoteResult.LOST:
                self._become_follower(self._term, None)

    def _step_leader(self, m: Message) -> None:
        pr = self._prs.get(m.src)
        if pr is None:
            return
        t = m.type
        if t is MT.APPEND_RESP:
            pr.recent_active = True
            self._handle_append_resp(m, pr)
        elif t is MT.HEARTBEAT_RESP:
            pr.recent_active = True
            pr.probe_sent = False
            if pr.state is ProgressState.REPLICATE and len(pr.inflight) >= pr.max_inflight and pr.inflight:
                pr.inflight.popleft()
            if pr.match < self.log.last_index or pr.state is ProgressState.PROBE:
                self._send_append(m.src)
            if m.context and self._reads:
                self._ack_read(m.context, m.src)

    def _handle_append_resp(self, m: Message, pr: Progress) -> None:
        if m.reject:
            hint = m.reject_hint
            if m.log_term > 0:
                hint, _ = self.log.find_conflict_by_term(hint, m.log_term)
            if pr.maybe_decrease_to(m.index, hint):
                if pr.state is ProgressState.REPLICATE:
                    pr.fire(ProgressEvent.REJECTED)
                self._send_append(m.src)
            return
        old_paused = pr.is_paused()
        if not pr.maybe_update(m.index):
            return
        if pr.state is ProgressState.PROBE:
            pr.fire(ProgressEvent.ACKED)
        elif pr.state is ProgressState.SNAPSHOT:
            if pr.match >= pr.pending_snapshot:
                pr.fire(ProgressEvent.SNAPSHOT_CAUGHT_UP)
                pr.fire(ProgressEvent.ACKED)
        else:
            pr.free_inflight_to(m.index)
        if self._maybe_commit():
            self._bcast_append()
        elif old_paused:
            self._send_append(m.src)
        while pr.state is ProgressState.REPLICATE and pr.next <= self.log.last_index and self._send_append(m.src):
            pass
        if m.src == self._transferee and pr.match == self.log.last_index:
            self._send(Message(MT.TIMEOUT_NOW, self._id, m.src, self._term))

    def _handle_append(self, m: Message) -> None:
        lg = self.log
        if m.index < lg.committed:
            self._send(Message(MT.APPEND_RESP, self._id, m.src, self._term, index=lg.committed))
            return
        last_new = lg.maybe_append(m.index, m.log_term, m.commit, m.entries)
        if last_new is not None:
            self._send(Message(MT.APPEND_RESP, self._id, m.src, self._term, index=last_new))
            return
        hint_index, hint_term = lg.find_conflict_by_term(min(m.index, lg.last_index), m.log_term)
        self._send(Message(MT.APPEND_RESP, self._id, m.src, self._term, index=m.index, reject=True,
                           reject_hint=hint_index, log_term=hint_term))

    def _handle_heartbeat(self, m: Message) -> None:
        self.log.commit_to(m.commit)
        self._send(Message(MT.HEARTBEAT_RESP, self._id, m.src, self._term, context=m.context))

    def _handle_snapshot(self, m: Message) -> None:
        s = m.snapshot
        lg = self.log
        if s is None:
            return
        if s.index <= lg.committed:
            idx = lg.committed
        elif lg.match_term(s.index, s.term):
            lg.commit_to(s.index)  # our log already has it: fast-forward instead of discarding entries
            idx = lg.committed
        else:
            lg.restore(s)
            self._snapshot = s
            idx = lg.last_index
        self._send(Message(MT.APPEND_RESP, self._id, m.src, self._term, index=idx))

    # ------------------------------------------------------------------ role changes
    def _reset(self, term: int) -> None:
        if term != self._term:
            self._term = term
            self._vote = None
        self._lead = None
        self._election_elapsed = 0
        self._heartbeat_elapsed = 0
        self._reset_randomized_timeout()
        self._transferee = None
        self._votes = {}
        self._prs = {}
        self._reads = []
        self._reads_waiting = []

    def _reset_randomized_timeout(self) -> None:
        n = self.config.election_ticks
        self._randomized_timeout = n + self._rng.randrange(n)

    def _become_follower(self, term: int, lead: str | None) -> None:
        self._reset(term)
        self._lead = lead
        self._role = Role.FOLLOWER

    def _become_pre_candidate(self) -> None:
        self._votes = {}
        self._lead = None
        self._role = Role.PRE_CANDIDATE
        self._prs = {}

    def _become_candidate(self) -> None:
        self._reset(self._term + 1)
        self._vote = self._id
        self._role = Role.CANDIDATE

    def _become_leader(self) -> None:
        if self._role is Role.FOLLOWER:
            raise LogInvariantError(f"{self._id}: invalid transition follower -> leader at term {self._term}")
        self._reset(self._term)
        self._lead = self._id
        self._role = Role.LEADER
        last = self.log.last_index
        mi = self.config.max_inflight
        self._prs = {v: Progress(v, next_index=last + 1, max_inflight=mi) for v in self._voters}
        for pr in self._prs.values():
            pr.recent_active = True
        me = self._prs[self._id]
        me.match = last
        me.fire(ProgressEvent.ACKED)
        self._append_entry(Entry(self._term, last + 1, b"", EntryKind.NOOP))

    def _hup(self, *, transfer: bool) -> None:
        if self._role is Role.LEADER:
            return
        self._campaign(pre=self.config.pre_vote and not transfer, transfer=transfer)

    def _campaign(self, *, pre: bool, transfer: bool) -> None:
        if pre:
            self._become_pre_candidate()
            vote_type, term = MT.PRE_VOTE, self._term + 1
        else:
            self._become_candidate()
            vote_type, term = MT.VOTE, self._term
        self._votes[self._id] = True
        if vote_result(self._voters, self._votes) is VoteResult.WON:
            if pre:
                self._campaign(pre=False, transfer=transfer)
            else:
                self._become_leader()
            return
        ctx = TRANSFER_CONTEXT if transfer else b""
        li, lt = self.log.last_index, self.log.last_term
        for p in self._peers:
            self._send(Message(vote_type, self._id, p, term, log_term=lt, index=li, context=ctx))

    # ------------------------------------------------------------------ leader internals
    def _tick_leader(self) -> None:
        self._heartbeat_elapsed += 1
        self._election_elapsed += 1
        for pr in self._prs.values():
            if pr.state is ProgressState.SNAPSHOT:
                pr.snapshot_elapsed += 1
                if pr.snapshot_elapsed >= self.config.election_ticks:
                    pr.abort_snapshot()
        if self._election_elapsed >= self.config.election_ticks:
            self._election_elapsed = 0
            if self.config.check_quorum:
                active = sum(1 for pr in self._prs.values() if pr.recent_active or pr.node_id == self._id)
                for pr in self._prs.values():
                    pr.recent_active = pr.node_id == self._id
                if active < self._quorum:
                    self._become_follower(self._term, None)
                    return
            self._transferee = None  # a transfer that did not finish within an election timeout is abandoned
        if self._heartbeat_elapsed >= self.config.heartbeat_ticks:
            self._heartbeat_elapsed = 0
            self._bcast_heartbeat(self._reads[-1].context if self._reads else b"")

    def _append_entry(self, e: Entry) -> int:
        index = self.log.append([e])
        self._prs[self._id].maybe_update(index)
        self._maybe_commit()
        return index

    def _maybe_commit(self) -> bool:
        mci = committed_index(self._voters, {k: pr.match for k, pr in self._prs.items()})
        if not self.log.maybe_commit(mci, self._term):
            return False
        if self._reads_waiting:
            waiting, self._reads_waiting = self._reads_waiting, []
            for ctx in waiting:
                self._start_read(ctx)
        return True

    def _send(self, m: Message) -> None:
        self._msgs.append(m)

    def _bcast_append(self) -> None:
        for p in self._peers:
            self._send_append(p)

    def _bcast_heartbeat(self, context: bytes) -> None:
        commit = self.log.committed
        for p in self._peers:
            pr = self._prs[p]
            self._send(Message(MT.HEARTBEAT, self._id, p, self._term, commit=min(pr.match, commit), context=context))

    def _send_append(self, to: str) -> bool:
        pr = self._prs[to]
        if pr.is_paused():
            return False
        lg = self.log
        prev_index = pr.next - 1
        prev_term = lg.term(prev_index)
        if prev_term is None:
            snap = self._snapshot
            if snap is None or prev_index > lg.last_index:
                raise LogInvariantError(
                    f"{self._id} term {self._term}: progress of {to} wants index {pr.next} but the log spans "
                    f"[{lg.first_index}, {lg.last_index}] and no snapshot is available"
                )
            pr.become_snapshot(snap.index)
            self._send(Message(MT.SNAPSHOT, self._id, to, self._term, snapshot=snap))
            return True
        hi = min(lg.last_index + 1, pr.next + self.config.max_batch_entries)
        ents = tuple(lg.slice(pr.next, hi)) if pr.next < hi else ()
        self._send(Message(MT.APPEND, self._id, to, self._term, log_term=prev_term, index=prev_index, entries=ents,
                           commit=lg.committed))
        pr.sent_entries(prev_index + len(ents), len(ents))
        return True

    def _start_read(self, context: bytes) -> None:
        if self._quorum == 1:
            self._read_states.append(ReadState(self.log.committed, context))
            return
        self._reads.append(_PendingRead(context, self.log.committed, self._id))
        self._bcast_heartbeat(context)

    def _ack_read(self, context: bytes, src: str) -> None:
        for i, rd in enumerate(self._reads):
            if rd.context == context:
                rd.acks.add(src)
                if len(rd.acks) >= self._quorum:
                    done, self._reads = self._reads[:i + 1], self._reads[i + 1:]
                    self._read_states.extend(ReadState(r.index, r.context) for r in done)
                return


def describe_ready(rd: Ready) -> str:
    """The canonical multi-line text form of a Ready (logs, golden files)."""
    lines = []
    if rd.soft_state is not None:
        lines.append(f"lead={rd.soft_state.leader or '-'} role={rd.soft_state.role.value}")
    if rd.hard_state is not None:
        lines.append(f"hard_state {rd.hard_state.describe()}")
    if rd.snapshot is not None:
        lines.append(f"snapshot {rd.snapshot.describe()}")
    if rd.entries:
        lines.append("entries: " + ", ".join(e.describe() for e in rd.entries))
    if rd.committed_entries:
        lines.append("committed: " + ", ".join(e.describe() for e in rd.committed_entries))
    for m in rd.messages:
        lines.append("  " + m.describe())
    for r in rd.read_states:
        lines.append(f"read_state index={r.index} context={r.context!r}")
    if rd.must_sync:
        lines.append("must_sync")
    return "\n".join(lines)
