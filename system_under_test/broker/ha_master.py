"""The master side of replication (asyncio shell around the pure cores in :mod:`.ha`).

While this broker is master of a broker set, :class:`HaMaster`:

1. answers HA_HANDSHAKE on the connection a slave opened: reply = master epoch, max/min offset and
   the epoch entries (body ``[[epoch, start_offset], ...]``); the slave truncates to the consistent
   point and sends a first HA_ACK with its max offset, which starts the transfer;
2. streams HA_TRANSFER one-ways on that connection, one task per slave, of bytes below the store's
   stable offset only (under SYNC: fsynced here, so a slave never holds a record whose append the
   master then undid, and an acknowledged record is durable on every member); each batch is chosen by
   :func:`~.ha.replication_batch` (that bound, then :func:`~.ha.next_batch`: never crosses an epoch)
   and cut to whole records by :meth:`MessageStore.read_raw`; an idle slave gets an empty batch
   (heartbeat) every second or whenever the confirm offset moved;
3. on every HA_ACK: updates the slave's catch-up tracking (:func:`~.ha.on_ack`), proposes an
   expansion of the SyncStateSet (:func:`~.ha.maybe_expand`), recomputes the confirm offset
   (:func:`~.ha.compute_confirm_offset`) and releases the puts whose acks are satisfied
   (:func:`~.ha.ack_satisfied`);
4. every 500 ms proposes a shrink (:func:`~.ha.maybe_shrink`); a proposal goes to the controller
   (AlterSyncStateSet) and is applied locally only once accepted; until then the union of the
   applied and proposed sets counts for acks (:func:`~.ha.effective_set`).

The confirm offset of a master never decreases.  Deactivation (role change, shutdown) closes every
slave connection and answers every waiting put FLUSH_SLAVE_TIMEOUT: its record is in the log but
its replication is unknown.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from system_under_test import failpoints, node_events
from system_under_test.broker.config import BrokerConfig
from system_under_test.broker.ha import (
    SlaveTracking,
    SyncStateSetView,
    TransferError,
    abandon_proposal,
    ack_satisfied,
    apply_controller_set,
    compute_confirm_offset,
    effective_set,
    in_sync_replicas_nums,
    maybe_expand,
    maybe_shrink,
    new_tracking,
    on_ack,
    on_disconnect,
    on_transfer,
    propose,
    replication_batch,
)
from system_under_test.broker.store import MessageStore, StoreError
from system_under_test.client.controller_client import NoControllerAvailable
from system_under_test.protocol import Connection, ConnectionLost, Frame, Reply, RequestCode, ResponseCode, RpcError

log = logging.getLogger("splitbrain.broker.ha.master")

FP_BEFORE_TRANSFER = failpoints.declare(
    "broker.master.before_transfer",
    "the master is about to send a batch of log data to a slave (pause = replication stalls, slaves stay connected)",
)

FP_ALTER_REPLY = failpoints.declare(
    "broker.alter_sync_state_set.after_reply",
    "the controller accepted the master's AlterSyncStateSet; the master has not applied the new set yet",
)
FP_ALTER_EXPAND_REPLY = failpoints.declare(
    "broker.alter_sync_state_set.expand.after_reply",
    "as broker.alter_sync_state_set.after_reply, but only when the accepted set adds a member (an expansion)",
)

IDLE_HEARTBEAT_S = 1.0
HOUSEKEEPING_S = 0.5
WINDOW_BYTES = 8 * 1024 * 1024
UNCERTAIN_GRACE_MS = 3000  # how long an AlterSyncStateSet of unknown outcome keeps the union in force

AlterFn = Callable[[frozenset[int], int], Awaitable[tuple[frozenset[int], int]]]
"""``alter(proposed_members, current_set_epoch) -> (members, new_set_epoch)``; raises on refusal."""


@dataclass(eq=False)
class _Slave:
    slave_id: int
    conn: Connection
    transfer_from: int | None = None
    sent_confirm: int = -1
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


class HaMaster:
    """Replication service of a master.  Inactive until :meth:`activate`."""

    def __init__(self, store: MessageStore, cfg: BrokerConfig, alter: AlterFn, now_ms: Callable[[], int],
                 refresh: Callable[[], None] = lambda: None) -> None:
        self.store = store
        self.cfg = cfg
        self.alter = alter
        self.now_ms = now_ms
        self.refresh = refresh  # asks the life cycle to poll GetReplicaInfo now
        self._alter_in_flight = False
        self._uncertain_since_ms: int | None = None
        self.active = False
        self.self_id = 0
        self.master_epoch = 0
        self.view = SyncStateSetView(frozenset(), 0)
        self.trackings: dict[int, SlaveTracking] = {}
        self.slaves: dict[int, _Slave] = {}
        self._waiters: collections.deque[tuple[int, asyncio.Future[ResponseCode | None]]] = collections.deque()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._housekeeper: asyncio.Task[None] | None = None

    # -- life cycle ----------------------------------------------------------------------------
    def activate(self, self_id: int, master_epoch: int, members: frozenset[int], set_epoch: int) -> None:
        """Start serving slaves as master of ``master_epoch`` with the controller's set; the role change
        recomputes the confirm offset next (:meth:`recompute_confirm`)."""
        self.deactivate("re-activation")
        self.active = True
        self.self_id = self_id
        self.master_epoch = master_epoch
        self._uncertain_since_ms = None
        self.view = SyncStateSetView(frozenset(members) | {self_id}, set_epoch)
        self._housekeeper = asyncio.get_running_loop().create_task(self._housekeeping())
        log.info("HA master active: broker %d epoch %d %s", self_id, master_epoch, self.view.describe())

    def deactivate(self, reason: str) -> None:
        """Stop: close slave connections, fail waiting puts with FLUSH_SLAVE_TIMEOUT (outcome unknown)."""
        if not self.active:
            return
        self.active = False
        log.info("HA master inactive (%s): closing %d slave connection(s), %d waiting put(s)", reason,
                 len(self.slaves), len(self._waiters))
        for s in list(self.slaves.values()):
            s.conn.close(f"master no longer active: {reason}")
            if s.task is not None:
                s.task.cancel()
        self.slaves.clear()
        self.trackings.clear()
        self.fail_waiting_puts()
        if self._housekeeper is not None:
            self._housekeeper.cancel()
            self._housekeeper = None

    def fail_waiting_puts(self) -> int:
        """Answer every put still waiting for acks with FLUSH_SLAVE_TIMEOUT (outcome unknown); how many.

        Called when the master is deposed and when it fences itself on an expired lease: from then on it
        refuses new sends, and a put left waiting would hold its client for the whole flush-slave timeout
        while a successor is already serving (bench/failover.py: with a 1-s lease, 0.87 s of a 1.96-s
        failover was producers waiting on the cut-off master)."""
        n = 0
        while self._waiters:
            _, fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(ResponseCode.FLUSH_SLAVE_TIMEOUT)
                n += 1
        return n

    # -- sync-state set ------------------------------------------------------------------------
    def in_sync_replicas_nums(self) -> int:
        return in_sync_replicas_nums(self.view)

    def adopt_controller_set(self, members: frozenset[int], set_epoch: int) -> None:
        """A set reported by the controller (GetReplicaInfo); only a higher set epoch is adopted."""
        new = apply_controller_set(self.view, members, set_epoch)
        settled = self._uncertain_since_ms is None or self.now_ms() - self._uncertain_since_ms > UNCERTAIN_GRACE_MS
        if (new is self.view and set_epoch == self.view.epoch and self.view.synchronizing and not self._alter_in_flight
                and settled):
            # An AlterSyncStateSet with an unknown outcome was not applied: the set epoch did not move (and a
            # late commit of it had UNCERTAIN_GRACE_MS to show up).
            log.info("controller still has %s@%d: proposal %s was not applied", sorted(members), set_epoch,
                     sorted(self.view.proposed or ()))
            self.view = abandon_proposal(self.view)
            return
        if new is not self.view:
            self._uncertain_since_ms = None
            log.info("adopting controller SyncStateSet %s (was %s)", sorted(members), self.view.describe())
            _record_set(self.view.members, new.members, "controller")
            self.view = new
            self.recompute_confirm()
            self._release_waiters()

    def _propose(self, members: frozenset[int]) -> None:
        view = propose(self.view, members)
        if view is None:
            return
        self.view = view
        log.info("proposing SyncStateSet %s (epoch %d)", sorted(members), view.epoch)
        epoch_at_start = self.master_epoch
        self._spawn(self._alter(members, view.epoch, epoch_at_start))

    async def _alter(self, members: frozenset[int], set_epoch: int, master_epoch: int) -> None:
        self._alter_in_flight = True
        try:
            accepted, new_epoch = await self.alter(members, set_epoch)
        except Exception as exc:
            definite = isinstance(exc, NoControllerAvailable) or (isinstance(exc, RpcError) and exc.definite)
            if not (self.active and self.master_epoch == master_epoch):
                return
            if definite:
                log.warning("AlterSyncStateSet %s refused: %s", sorted(members), exc)
                self.view = abandon_proposal(self.view)
            else:
                # Outcome unknown: the controller may have applied it (and could elect a new member), so
                # keep counting the union until GetReplicaInfo tells which set the controller has.
                log.warning("AlterSyncStateSet %s outcome unknown (%s); keeping the union until the controller's "
                            "set is known", sorted(members), exc)
                self._uncertain_since_ms = self.now_ms()
                self.refresh()
            return
        finally:
            self._alter_in_flight = False
        if not self.active or self.master_epoch != master_epoch:
            return
        await failpoints.ahit(FP_ALTER_REPLY)
        if accepted - self.view.members:
            await failpoints.ahit(FP_ALTER_EXPAND_REPLY)
        before = self.view.members
        self.view = apply_controller_set(self.view, accepted, new_epoch)
        _record_set(before, self.view.members, "alter")
        self._uncertain_since_ms = None
        log.info("SyncStateSet now %s", self.view.describe())
        self.recompute_confirm()
        self._release_waiters()

    async def _housekeeping(self) -> None:
        while self.active:
            await asyncio.sleep(HOUSEKEEPING_S)
            if not self.active or self.view.synchronizing:
                continue
            shrunk = maybe_shrink(self.view.members, self.self_id, self.trackings, self.now_ms(),
                                  ha_max_time_slave_not_catchup_ms=self.cfg.ha_max_time_slave_not_catchup_ms)
            if shrunk is not None:
                self._propose(shrunk)

    # -- confirm offset and waiting puts -------------------------------------------------------
    def _acks(self) -> dict[int, int]:
        return {sid: t.ack_offset for sid, t in self.trackings.items() if t.connected}

    def recompute_confirm(self) -> None:
        """Raise the confirm offset to what the sync-state set holds (never lowers it; inactive: nothing)."""
        if not self.active:
            return
        members = effective_set(self.view)
        previous = self.store.confirm_offset
        new = compute_confirm_offset(self.store.stable_offset, members, self.self_id, self._acks(), previous,
                                     all_ack_in_sync_state_set=self.cfg.all_ack_in_sync_state_set)
        if new > previous:
            self.store.set_confirm_offset(new)
            for s in self.slaves.values():
                s.wake.set()

    def _satisfied(self, end_offset: int) -> bool:
        return ack_satisfied(end_offset, effective_set(self.view), self.self_id, self._acks(),
                             all_ack_in_sync_state_set=self.cfg.all_ack_in_sync_state_set,
                             in_sync_replicas=self.cfg.in_sync_replicas)

    def _release_waiters(self) -> None:
        if not self._waiters:
            return
        members, acks = effective_set(self.view), self._acks()  # once per ack, not once per waiting put
        while self._waiters and ack_satisfied(self._waiters[0][0], members, self.self_id, acks,
                                              all_ack_in_sync_state_set=self.cfg.all_ack_in_sync_state_set,
                                              in_sync_replicas=self.cfg.in_sync_replicas):
            _, fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)

    def on_appended(self) -> None:
        """Call after every put: new data for the slaves, and a new confirm offset for a lone master."""
        self.recompute_confirm()
        for s in self.slaves.values():
            s.wake.set()

    async def wait_replicated(self, end_offset: int) -> ResponseCode | None:
        """Wait until a put ending at ``end_offset`` may be acknowledged; None = yes, else the error code."""
        if not self.active:  # deposed while appending: stored here, replication unknown
            return ResponseCode.FLUSH_SLAVE_TIMEOUT
        if self._satisfied(end_offset):
            return None
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[ResponseCode | None] = loop.create_future()
        self._waiters.append((end_offset, fut))
        # One timer per waiting put, not wait_for(shield(...)): those two cost a task-like wrapper and a
        # second future per send.  A timed-out future stays queued until released; done futures are skipped.
        timer = loop.call_later(self.cfg.flush_slave_timeout_ms / 1000, _time_out, fut)
        try:
            return await fut
        finally:
            timer.cancel()

    # -- slave connections ---------------------------------------------------------------------
    def handle_handshake(self, frame: Frame, conn: Connection) -> Reply:
        h = frame.header
        if not self.active:
            return Reply.error(ResponseCode.NOT_MASTER, "this broker is not a master; refresh the replica info")
        if h["master_epoch"] > self.master_epoch:
            return Reply.error(ResponseCode.NOT_MASTER, f"slave expects master epoch {h['master_epoch']} but this "
                               f"master holds epoch {self.master_epoch}: it is stale")
        sid = int(h["broker_id"])
        if sid == self.self_id:
            return Reply.error(ResponseCode.MALFORMED_REQUEST, f"broker {sid} cannot replicate from itself")
        old = self.slaves.pop(sid, None)
        if old is not None:
            old.conn.close("replaced by a new connection from the same slave")
            if old.task is not None:
                old.task.cancel()
        s = _Slave(sid, conn)
        self.slaves[sid] = s
        self.trackings[sid] = new_tracking(sid, self.now_ms(), is_async_learner=bool(h["async_learner"]))
        conn.attrs["ha_slave_id"] = sid
        self._spawn(self._watch_close(s))
        store = self.store
        log.info("slave %d handshake from %s: slave max %d, master max %d epochs %s", sid, conn.peer,
                 h["max_offset"], store.max_phys_offset, store.epochs.describe())
        return Reply(header={
            "master_epoch": self.master_epoch, "broker_id": self.self_id, "max_offset": store.max_phys_offset,
            "min_offset": store.min_phys_offset, "confirm_offset": store.confirm_offset,
        }, body=[[e.epoch, e.start_offset] for e in store.epochs.entries])

    def handle_ack(self, frame: Frame, conn: Connection) -> None:
        sid = conn.attrs.get("ha_slave_id")
        s = self.slaves.get(sid) if isinstance(sid, int) else None
        if s is None or s.conn is not conn or not self.active:
            return
        ack = int(frame.header["max_offset"])
        mx = self.store.stable_offset
        t = on_ack(self.trackings[s.slave_id], ack, mx, self.now_ms())
        self.trackings[s.slave_id] = t
        if s.transfer_from is None:
            if ack > self.store.max_phys_offset:
                conn.close(f"slave {s.slave_id} is at {ack}, beyond master max {self.store.max_phys_offset}: it did "
                           f"not truncate")
                return
            s.transfer_from = ack
            s.task = asyncio.get_running_loop().create_task(self._transfer(s))
        if not self.view.synchronizing:
            last = self.store.epochs.last_entry
            grown = maybe_expand(self.view.members, s.slave_id, ack, self.store.confirm_offset,
                                 last.start_offset if last is not None else 0, t.is_async_learner)
            if grown is not None:
                self._propose(grown)
        self.recompute_confirm()
        self._release_waiters()
        s.wake.set()

    async def _watch_close(self, s: _Slave) -> None:
        await s.conn.wait_closed()
        if self.slaves.get(s.slave_id) is s:
            del self.slaves[s.slave_id]
            t = self.trackings.get(s.slave_id)
            if t is not None:
                self.trackings[s.slave_id] = on_disconnect(t)
            log.info("slave %d disconnected: %s", s.slave_id, s.conn.close_reason)
        if s.task is not None:
            s.task.cancel()

    def _send_batch(self, s: _Slave) -> int:
        store = self.store
        assert s.transfer_from is not None
        batch, mx = replication_batch(s.transfer_from, [(e.epoch, e.start_offset) for e in store.epochs.entries],
                                      stable_offset=store.stable_offset, max_offset=store.max_phys_offset,
                                      batch_bytes=self.cfg.ha_transfer_batch_bytes)
        data = store.read_raw(batch.start, batch.size) if batch.size else b""
        confirm = store.confirm_offset
        s.conn.send_oneway(RequestCode.HA_TRANSFER, {
            "offset": batch.start, "epoch": batch.epoch, "epoch_start_offset": batch.epoch_start_offset,
            "confirm_offset": confirm}, data)
        s.transfer_from += len(data)
        s.sent_confirm = confirm
        t = self.trackings.get(s.slave_id)
        if t is not None:
            self.trackings[s.slave_id] = on_transfer(t, mx, self.now_ms())
        return len(data)

    async def _transfer(self, s: _Slave) -> None:
        try:
            while self.active and not s.conn.closed:
                assert s.transfer_from is not None
                t = self.trackings.get(s.slave_id)
                acked = max(t.ack_offset, 0) if t is not None else 0
                if s.transfer_from < self.store.stable_offset and s.transfer_from - acked < WINDOW_BYTES:
                    await failpoints.ahit(FP_BEFORE_TRANSFER)
                    if not self.active or s.conn.closed:
                        return
                    self._send_batch(s)
                    if s.conn.writer.transport.get_write_buffer_size() > 1 << 20:
                        await s.conn.drain()
                    else:
                        await asyncio.sleep(0)
                    continue
                if s.sent_confirm != self.store.confirm_offset:
                    self._send_batch(s)
                    continue
                s.wake.clear()
                try:
                    await asyncio.wait_for(s.wake.wait(), IDLE_HEARTBEAT_S)
                except TimeoutError:
                    self._send_batch(s)
        except asyncio.CancelledError:
            raise
        except ConnectionLost:
            return
        except (TransferError, StoreError, OSError, failpoints.FailpointError) as exc:
            log.error("transfer to slave %d stopped: %s", s.slave_id, exc)
            s.conn.close(f"transfer failed: {exc}")

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        self.deactivate("shutdown")
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    def describe(self) -> dict[str, Any]:
        return {
            "active": self.active,
            "sync_state_set": sorted(self.view.members),
            "sync_state_set_epoch": self.view.epoch,
            "proposed": sorted(self.view.proposed) if self.view.proposed is not None else None,
            "slaves": {str(sid): t.describe() for sid, t in self.trackings.items()},
            "slave_lag": self.slave_lag(),
            "waiting_puts": len(self._waiters),
        }

    def slave_lag(self) -> dict[str, dict[str, Any]]:
        """Per slave id: its acked offset, and the bytes and records it is behind this master's log (records
        None before its first ack or when counting them would mean a long scan); for the harness's
        replication-lag figures (``harness.lag``)."""
        top = self.store.max_phys_offset
        out: dict[str, dict[str, Any]] = {}
        for sid, t in self.trackings.items():
            ack = t.ack_offset
            known = ack >= 0
            records: int | None = None
            if known:
                try:
                    records = self.store.records_from(min(ack, top))
                except Exception:  # an ack off a record boundary, a closing store: runtime info must still answer
                    records = None
            out[str(sid)] = {"connected": t.connected, "ack_offset": ack,
                             "bytes_behind": max(0, top - ack) if known else None, "records_behind": records}
        return out


def _record_set(before: frozenset[int], after: frozenset[int], via: str) -> None:
    """A SyncStateSet change in the node's event log (``shrink``/``expand``/``replace``; nothing if unchanged)."""
    if before == after:
        return
    change = "shrink" if after < before else "expand" if after > before else "replace"
    node_events.record("sync-state-set", change=change, members=sorted(after), via=via)


def _time_out(fut: asyncio.Future[ResponseCode | None]) -> None:
    """A waiting put's flush_slave_timeout_ms passed before the SyncStateSet acknowledged it."""
    if not fut.done():
        fut.set_result(ResponseCode.FLUSH_SLAVE_TIMEOUT)
