"""RaftNode: the asyncio shell that runs one :class:`RaftCore` with real time, disk and network.

The core decides; this shell acts.  One task (the *ready loop*) takes each :class:`Ready` from the
core and carries out its duties in this fixed order:

1. **persist** -- the snapshot (if any), then the entries (overwriting any suffix from
   ``entries[0].index``) with fsync, then the hard state: fsynced when its term or vote changed;
   a change of the commit index alone is written (without fsync) at most every
   ``COMMIT_PERSIST_INTERVAL_S`` and on a clean stop -- Raft recomputes the commit index after a
   restart, and a file rename per Ready would halve throughput.  The writes run in a worker thread
   (``asyncio.to_thread``) so the loop keeps receiving messages and proposals meanwhile:
   everything that arrives during one fsync lands in the *next* Ready and shares its fsync (group
   commit).  Failpoints ``raft.before_persist`` / ``raft.after_persist`` surround this step (only
   for Readies that write something).
2. **send** the messages -- only now, because a vote or an append acknowledgement must never
   outrun the disk.
3. **apply** -- restore the snapshot into the state machine (if any), then hit
   ``raft.before_apply`` and apply the committed entries in order, resolving the proposals this
   node made; read-index requests whose index is now applied are released.
4. **advance** the core.

Then, every ``snapshot_every_entries`` applied entries, the state machine is snapshotted, the
core compacts its log (:meth:`RaftCore.compact`) and the storage writes the snapshot and deletes
whole segments below it.

A separate task ticks the core every ``tick_interval_ms`` of :data:`system_under_test.clock.CLOCK`
time.  Everything runs on one event loop; the core is never touched from the worker thread.

A persist failure (disk error, StorageCorruption, an ``error`` failpoint) or an exception from
``StateMachine.apply`` halts the node: every pending request fails, the transport stops and
:attr:`RaftNode.failed` says why.  Continuing would risk acknowledging data that is not on disk, or
serving a state machine that diverged from its peers.  Restart the node (a new RaftNode on the same
directory) once the cause is fixed.

Proposals are resolved by index *and term*: when this node applies index ``i`` it resolves the
proposal it made at ``i`` with the apply result if the applied entry has the proposal's term, and
with ProposalDropped otherwise (a later leader overwrote it).  Timeouts are checked on every tick.

Errors raised to callers (all :class:`RaftError`)::

    RaftError
     +-- ProposalDropped   definitely not committed: not the leader, or another entry won the index
     +-- RaftTimeout       outcome unknown: not known to be committed within the timeout
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from system_under_test.clock import CLOCK
from system_under_test.failpoints import ahit, declare
from system_under_test.raft.core import RaftCore
from system_under_test.raft.storage import RaftStorage
from system_under_test.raft.transport import RaftTransport
from system_under_test.raft.types import (
    EntryKind,
    HardState,
    Message,
    ProposalDropped,
    RaftConfig,
    RaftError,
    Ready,
    Role,
)

log = logging.getLogger("splitbrain.raft.node")

#: A hard state whose term and vote are unchanged (only the commit index moved) is written at most
#: this often and without fsync: the commit index is recomputed after a restart anyway, and writing
#: it on every Ready would cost a file rename per Ready.
COMMIT_PERSIST_INTERVAL_S = 1.0

BEFORE_PERSIST = declare("raft.before_persist", "a Ready is about to be written to the raft log / hard state")
AFTER_PERSIST = declare("raft.after_persist", "a Ready is durable; its messages are not yet sent")
BEFORE_APPLY = declare("raft.before_apply", "committed entries are about to be applied to the state machine")


class RaftTimeout(RaftError):
    """The entry (or read barrier) was not known to be committed within the timeout: outcome unknown."""


class StateMachine(Protocol):
    """What the node replicates.

    ``apply`` must be deterministic and must not raise for any entry that was proposed (validate
    before proposing): an exception halts the node.  All three methods run on the event loop.
    """

    def apply(self, index: int, data: bytes) -> Any:
        """Apply the committed entry at ``index``; the return value goes to the proposer."""

    def snapshot(self) -> bytes:
        """Serialize the whole state (as of the last applied index)."""

    def restore(self, data: bytes, index: int) -> None:
        """Replace the whole state by a snapshot taken at ``index``."""


@dataclass
class _Pending:
    term: int
    future: asyncio.Future[tuple[int, Any]]
    deadline: float  # CLOCK.monotonic() after which the proposer gets RaftTimeout
    timeout_s: float


class RaftNode:
    """One Raft member: core + storage + transport + state machine.

    Args:
        config: the core's configuration (node id, voters, election/heartbeat ticks).
        storage_dir: this node's raft directory (log segments, hard state, snapshot).
        peers: node id -> "host:port" of every voter (this node's own entry is ignored).
        state_machine: receives committed entries.
        tick_interval_ms: real milliseconds per core tick; election timeout is
            ``config.election_ticks`` ticks (randomized up to twice that by the core).
        rng: the seeded random source of the core (election jitter).
        snapshot_every_entries: snapshot + compact after this many applied entries.
        transport: outbound messages; default a :class:`RaftTransport` over ``peers``.
    """

    def __init__(
        self,
        config: RaftConfig,
        storage_dir: Path,
        peers: dict[str, str],
        state_machine: StateMachine,
        *,
        tick_interval_ms: int = 50,
        rng: random.Random,
        snapshot_every_entries: int = 10_000,
        transport: RaftTransport | None = None,
        segment_bytes: int | None = None,
    ) -> None:
        if tick_interval_ms < 1:
            raise ValueError(f"tick_interval_ms must be >= 1, got {tick_interval_ms}")
        if snapshot_every_entries < 1:
            raise ValueError(f"snapshot_every_entries must be >= 1, got {snapshot_every_entries}")
        self.config = config
        self.node_id = config.node_id
        self.peers = dict(peers)
        self.state_machine = state_machine
        self.tick_interval_ms = tick_interval_ms
        self.rng = rng
        self.snapshot_every_entries = snapshot_every_entries
        self.storage = (
            RaftStorage(storage_dir) if segment_bytes is None else RaftStorage(storage_dir, segment_bytes=segment_bytes)
        )
        self.transport = transport if transport is not None else RaftTransport(self.node_id, self.peers)
        self.on_role_change: list[Callable[[bool, int], None]] = []
        self.failed: str | None = None
        self._core: RaftCore | None = None
        self._applied = 0
        self._snapshot_index = 0
        self._pending: dict[int, _Pending] = {}
        self._reads: dict[bytes, asyncio.Future[None]] = {}
        self._read_waits: list[tuple[int, bytes]] = []
        self._read_seq = 0
        self._wake = asyncio.Event()
        self._leader_changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._persist_task: asyncio.Future[None] | None = None
        self._persisted_hs = HardState()
        self._hs_written_at = 0.0  # CLOCK.monotonic() of the last commit-only hard state write
        self._latest_hs = HardState()  # newest hard state handed over by the core (maybe not yet on disk)
        self._was_leader = False
        self.readies = 0
        self.fsyncs = 0

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Load storage, rebuild the state machine from the snapshot and start the loops.

        The state machine must be empty (or is replaced by the stored snapshot): committed entries
        after the snapshot are applied again.  Prefer a fresh RaftNode + state machine to restart.

        Raises:
            StorageCorruption: the raft directory is damaged (the node must not start).
        """
        if self._core is not None:
            raise RuntimeError(f"RaftNode {self.node_id} already started")
        self._applied = self._snapshot_index = 0
        self.failed = None
        hs, snap, entries = await asyncio.to_thread(self.storage.load)
        self._persisted_hs = self._latest_hs = hs
        if snap is not None:
            self.state_machine.restore(snap.data, snap.index)
            self._applied = self._snapshot_index = snap.index
        self._core = RaftCore(self.config, self.rng, hard_state=hs, snapshot=snap, entries=entries)
        log.info("%s: started at %s, %s; %d entries after the snapshot", self.node_id, hs.describe(),
                 snap.describe() if snap else "no snapshot", len(entries))
        await self.transport.start()
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._ready_loop(), name=f"raft-ready-{self.node_id}"),
            loop.create_task(self._ticker(), name=f"raft-tick-{self.node_id}"),
        ]
        self._wake.set()

    async def stop(self, *, clean: bool = True) -> None:
        """Stop the loops and the transport; fail every pending request.

        With ``clean=False`` nothing more is written (as close to a crash as one process allows:
        an fsync already running finishes, nothing after it happens).
        """
        tasks, self._tasks = self._tasks, []
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self._persist_task is not None:
            with contextlib.suppress(Exception):
                await self._persist_task
        await self.transport.stop()
        if clean and self.failed is None and self._core is not None:
            try:
                self.storage.sync()
                if self._latest_hs != self._persisted_hs:
                    self.storage.save_hard_state(self._latest_hs)
                    self._persisted_hs = self._latest_hs
            except Exception:
                log.exception("%s: final sync on stop failed", self.node_id)
        self.storage.close()
        self._fail_all(RaftError(f"raft node {self.node_id} stopped"))
        self._core = None

    def _halt(self, reason: str) -> None:
        log.error("%s: raft node halted: %s", self.node_id, reason)
        self.failed = reason
        self._fail_all(RaftError(f"raft node {self.node_id} halted: {reason}"))
        for t in self._tasks:
            if t is not asyncio.current_task():
                t.cancel()
        self._tasks.append(asyncio.get_running_loop().create_task(self.transport.stop()))

    def _fail_all(self, exc: RaftError) -> None:
        for p in self._pending.values():
            if not p.future.done():
                p.future.set_exception(exc)
        self._pending.clear()
        for fut in self._reads.values():
            if not fut.done():
                fut.set_exception(exc)
        self._reads.clear()
        self._read_waits.clear()

    # -- observers ------------------------------------------------------------------------------

    def _require_core(self) -> RaftCore:
        if self._core is None or self.failed is not None:
            raise RaftError(f"raft node {self.node_id} is not running" + (f" ({self.failed})" if self.failed else ""))
        return self._core

    @property
    def is_leader(self) -> bool:
        return self._core is not None and self.failed is None and self._core.role == Role.LEADER

    @property
    def leader_id(self) -> str | None:
        return None if self._core is None else self._core.leader

    @property
    def term(self) -> int:
        return 0 if self._core is None else self._core.term

    @property
    def commit_index(self) -> int:
        return 0 if self._core is None else self._core.commit_index

    @property
    def applied_index(self) -> int:
        return self._applied

    def status(self) -> dict[str, Any]:
        core = self._core
        return {
            "node_id": self.node_id,
            "running": core is not None,
            "failed": self.failed,
            "role": core.role.value if core else None,
            "term": self.term,
            "leader": self.leader_id,
            "commit_index": self.commit_index,
            "applied_index": self._applied,
            "snapshot_index": self._snapshot_index,
            "pending_proposals": len(self._pending),
            "pending_reads": len(self._reads),
            "readies": self.readies,
            "fsyncs": self.fsyncs,
            "storage": self.storage.status(),
            "transport": self.transport.status(),
            "core": core.status() if core else None,
        }

    # -- requests -------------------------------------------------------------------------------

    async def propose(self, data: bytes, *, timeout_s: float = 5.0) -> tuple[int, Any]:
        """Replicate ``data``; resolves once THIS node applied it.

        Returns:
            (index, the state machine's apply result).

        Raises:
            ProposalDropped: not the leader (``.leader`` hints the leader), or a different entry was
                committed at this index (leadership changed).  Definitely not committed.
            RaftTimeout: not applied within ``timeout_s`` -- outcome unknown.
            RaftError: the node stopped or halted -- outcome unknown.
        """
        core = self._require_core()
        index = core.propose(data)
        old = self._pending.pop(index, None)
        if old is not None and not old.future.done():
            old.future.set_exception(ProposalDropped(f"index {index} was reused by a later proposal", core.leader))
        fut: asyncio.Future[tuple[int, Any]] = asyncio.get_running_loop().create_future()
        # No per-proposal timer: the ticker sweeps expired proposals (cheap at 10k proposals/s).
        self._pending[index] = _Pending(core.term, fut, CLOCK.monotonic() + timeout_s, timeout_s)
        self._wake.set()
        return await fut

    async def read_barrier(self, *, timeout_s: float = 5.0) -> None:
        """Return once this node has applied everything committed before the call (read-index).

        Raises:
            ProposalDropped: the core refused (not leader / no leader known).
            RaftTimeout: leadership could not be confirmed within ``timeout_s``.
        """
        core = self._require_core()
        self._read_seq += 1
        ctx = f"{self.node_id}:{self._read_seq}".encode()
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._reads[ctx] = fut
        try:
            core.read_index(ctx)
            self._wake.set()
            await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            raise RaftTimeout(
                f"{self.node_id}: read barrier not confirmed within {timeout_s}s (leader={self.leader_id})"
            ) from None
        finally:
            self._reads.pop(ctx, None)

    async def transfer_leadership(self, target: str, *, timeout_s: float = 5.0) -> None:
        """Hand leadership to ``target`` and wait until this node sees it lead.

        Raises:
            RaftTimeout: ``target`` did not become leader within ``timeout_s``.
        """
        core = self._require_core()
        core.transfer_leadership(target)
        self._wake.set()
        deadline = CLOCK.monotonic() + timeout_s
        while self.leader_id != target or self.is_leader:
            remaining = deadline - CLOCK.monotonic()
            if remaining <= 0:
                raise RaftTimeout(f"{self.node_id}: leadership not transferred to {target} within {timeout_s}s "
                                  f"(leader={self.leader_id})")
            self._leader_changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._leader_changed.wait(), min(remaining, 0.05))

    def campaign(self) -> None:
        """Start an election now (tests and bootstrap)."""
        self._require_core().campaign()
        self._wake.set()

    def handle_message(self, msg: Message) -> None:
        """Feed one incoming message to the core (the RpcServer calls this for RAFT_MESSAGE)."""
        core = self._core
        if core is None or self.failed is not None:
            return
        if msg.dst != self.node_id:
            log.warning("%s: dropping raft message addressed to %s: %s", self.node_id, msg.dst, msg.describe())
            return
        try:
            core.step(msg)
        except (ValueError, RaftError) as exc:
            log.info("%s: core rejected %s: %s", self.node_id, msg.describe(), exc)
            return
        self._wake.set()

    # -- loops ----------------------------------------------------------------------------------

    async def _ticker(self) -> None:
        interval_s = self.tick_interval_ms / 1000
        next_t = CLOCK.monotonic() + interval_s
        while True:
            await asyncio.sleep(max(0.0, next_t - CLOCK.monotonic()))
            core = self._core
            if core is None:
                return
            core.tick()
            self._wake.set()
            if self._pending:
                self._expire_proposals()
            next_t += interval_s
            now = CLOCK.monotonic()
            if next_t < now - interval_s:  # the loop stalled: do not burst the missed ticks
                next_t = now + interval_s

    def _expire_proposals(self) -> None:
        now = CLOCK.monotonic()
        expired = [i for i, p in self._pending.items() if p.deadline <= now or p.future.done()]
        for index in expired:
            p = self._pending.pop(index)
            if not p.future.done():
                p.future.set_exception(RaftTimeout(
                    f"{self.node_id}: entry {index} (term {p.term}) not applied within {p.timeout_s}s; "
                    f"commit={self.commit_index} applied={self._applied} leader={self.leader_id}; outcome unknown"
                ))

    async def _ready_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            core = self._core
            while core is not None and core.has_ready():
                try:
                    await self._handle_ready(core, core.ready())
                    await self._maybe_snapshot(core)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.exception("%s: ready loop failed at term %d, applied %d", self.node_id, core.term,
                                  self._applied)
                    self._halt(f"{exc.__class__.__name__}: {exc}")
                    return

    async def _handle_ready(self, core: RaftCore, rd: Ready) -> None:
        self.readies += 1
        # 1. persist (the failpoints fire only for Readies that write something)
        if rd.snapshot is not None or rd.entries or (rd.must_sync and rd.hard_state is not None) or (
            rd.hard_state is not None and CLOCK.monotonic() - self._hs_written_at >= COMMIT_PERSIST_INTERVAL_S
        ):
            await ahit(BEFORE_PERSIST)
            self._persist_task = asyncio.ensure_future(asyncio.to_thread(self._persist, rd))
            try:
                await asyncio.shield(self._persist_task)
            finally:
                if self._persist_task.done():
                    self._persist_task = None
            await ahit(AFTER_PERSIST)
        if rd.hard_state is not None:
            self._latest_hs = rd.hard_state
        # 2. send
        if rd.messages:
            self.transport.send(rd.messages)
        # 3. apply
        if rd.soft_state is not None:
            self._on_soft_state(core)
        if rd.snapshot is not None:
            self._restore(rd)
        if rd.committed_entries:
            await ahit(BEFORE_APPLY)
            self._apply(rd)
        for rs in rd.read_states:
            if rs.context in self._reads:
                self._read_waits.append((rs.index, rs.context))
        if self._read_waits:
            self._release_reads()
        # 4. advance
        core.advance(rd)

    def _persist(self, rd: Ready) -> None:
        """Runs in a worker thread (touches only the storage)."""
        st = self.storage
        if rd.snapshot is not None:
            st.save_snapshot(rd.snapshot)
        if rd.entries:
            st.append(rd.entries)
        if rd.entries or rd.must_sync:
            st.sync()
            self.fsyncs += 1
        hs = rd.hard_state
        if hs is not None and hs != self._persisted_hs:
            vote_changed = (hs.term, hs.vote) != (self._persisted_hs.term, self._persisted_hs.vote)
            if vote_changed or CLOCK.monotonic() - self._hs_written_at >= COMMIT_PERSIST_INTERVAL_S:
                st.save_hard_state(hs, sync=vote_changed)
                self._persisted_hs = hs
                self._hs_written_at = CLOCK.monotonic()

    def _on_soft_state(self, core: RaftCore) -> None:
        self._leader_changed.set()
        leader = core.role == Role.LEADER
        if leader == self._was_leader:
            return
        self._was_leader = leader
        log.info("%s: %s at term %d", self.node_id, "became leader" if leader else "no longer leader", core.term)
        if not leader:
            for fut in self._reads.values():
                if not fut.done():
                    fut.set_exception(ProposalDropped(f"{self.node_id} lost leadership", core.leader))
        for cb in list(self.on_role_change):
            try:
                cb(leader, core.term)
            except Exception:
                log.exception("%s: on_role_change callback failed", self.node_id)

    def _restore(self, rd: Ready) -> None:
        snap = rd.snapshot
        assert snap is not None
        if snap.index <= self._applied:
            return
        log.info("%s: restoring %s (applied was %d)", self.node_id, snap.describe(), self._applied)
        self.state_machine.restore(snap.data, snap.index)
        self._applied = self._snapshot_index = snap.index
        for index in [i for i in self._pending if i <= snap.index]:
            p = self._pending.pop(index)
            if not p.future.done():
                p.future.set_exception(RaftError(f"{self.node_id}: entry {index} was covered by a snapshot from "
                                                 f"the leader before it was applied here; outcome unknown"))

    def _apply(self, rd: Ready) -> None:
        sm = self.state_machine
        pending = self._pending
        for e in rd.committed_entries:
            if e.index <= self._applied:
                continue
            if e.index != self._applied + 1:
                raise RaftError(f"{self.node_id}: committed entry {e.describe()} does not follow applied index "
                                f"{self._applied} (core bug)")
            result = sm.apply(e.index, e.data) if e.kind == EntryKind.NORMAL else None
            self._applied = e.index
            p = pending.pop(e.index, None) if pending else None
            if p is not None and not p.future.done():
                if p.term == e.term:
                    p.future.set_result((e.index, result))
                else:
                    p.future.set_exception(ProposalDropped(
                        f"{self.node_id}: index {e.index} was committed with term {e.term}, not the proposal's "
                        f"term {p.term}", self.leader_id))

    def _release_reads(self) -> None:
        keep = []
        for index, ctx in self._read_waits:
            fut = self._reads.get(ctx)
            if fut is None or fut.done():
                continue
            if index <= self._applied:
                fut.set_result(None)
            else:
                keep.append((index, ctx))
        self._read_waits = keep

    async def _maybe_snapshot(self, core: RaftCore) -> None:
        if self._applied - self._snapshot_index < self.snapshot_every_entries:
            return
        index = self._applied
        snap = core.compact(index, self.state_machine.snapshot())

        def persist() -> None:
            self.storage.save_snapshot(snap)
            self.storage.compact(snap.index)

        self._persist_task = asyncio.ensure_future(asyncio.to_thread(persist))
        try:
            await asyncio.shield(self._persist_task)
        finally:
            if self._persist_task.done():
                self._persist_task = None
        self._snapshot_index = index
        log.info("%s: snapshot at %s; %d segments left", self.node_id, snap.describe(), self.storage.segment_count)
