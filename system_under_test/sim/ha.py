"""Master-to-slave replication of a simulated broker, on the production HA cores.

Production code run unchanged: :func:`~system_under_test.broker.ha.replication_batch` (epoch-bounded batches below
the stable offset, through ``next_batch``),
:func:`~system_under_test.broker.ha.on_transfer_header` (the slave's reaction to a batch),
:func:`~system_under_test.broker.store.truncation.explain_consistent_point` (truncation to the consistent point),
the catch-up tracking and SyncStateSet rules (``new_tracking``, ``on_transfer``, ``on_ack``, ``on_disconnect``,
``maybe_shrink``, ``maybe_expand``, ``propose``, ``apply_controller_set``, ``abandon_proposal``,
``effective_set``, ``in_sync_replicas_nums``), :func:`~system_under_test.broker.ha.compute_confirm_offset` and
:func:`~system_under_test.broker.ha.ack_satisfied`.

What is the shells' (``broker/ha_master.py``, ``broker/ha_slave.py``) and re-stated here, in the same order of
steps (docs/simulation.md): the handshake reply, starting a transfer at the first ack, the order of work on an
ack (tracking, expansion, confirm offset, waiting puts), the idle heartbeat every second and the 500-ms
housekeeping shrink, the AlterSyncStateSet outcome handling (definite refusal abandons the proposal, an unknown
outcome keeps the union for a grace period), the 8-MB transfer window, the empty-store rule of the slave's
handshake and its 4-s idle timeout.

A replication *session* stands for one TCP connection: it has an id; ``ha`` channel messages are delivered in
order; either side closing it sends a ``close`` that the other side sees unless the link is cut (then the slave
notices through its idle timeout, and the master only through the catch-up time of the shrink rule, as with a
real connection whose packets are dropped).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from system_under_test.broker.ha import (
    SlaveLog,
    SlaveTracking,
    SyncStateSetView,
    TransferError,
    TransferHeader,
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
    on_transfer_header,
    propose,
    replication_batch,
)
from system_under_test.broker.ha.transfer import AppendBytes, AppendEpoch, DropConnection, SendAck, SetConfirmOffset
from system_under_test.broker.store.epoch_file import EpochEntry
from system_under_test.broker.store.truncation import explain_consistent_point
from system_under_test.protocol.codes import RequestCode, ResponseCode, is_definite
from system_under_test.sim.ctlclient import ControllerClient
from system_under_test.sim.network import Reply, Request
from system_under_test.sim.store import SimStore
from system_under_test.sim.world import World

__all__ = ["Broker", "HaClose", "HaMaster", "HaSlave", "HaTransfer"]


class _Options(Protocol):
    @property
    def cluster_name(self) -> str: ...
    @property
    def broker_name(self) -> str: ...
    @property
    def all_ack_in_sync_state_set(self) -> bool: ...
    @property
    def in_sync_replicas(self) -> int: ...
    @property
    def flush_slave_timeout_ms(self) -> int: ...
    @property
    def ha_max_time_slave_not_catchup_ms(self) -> int: ...
    @property
    def ha_transfer_batch_bytes(self) -> int: ...


class Broker(Protocol):
    """What replication needs of its broker (``SimBroker`` is one)."""

    name: str
    world: World
    store: SimStore
    ctl: ControllerClient
    broker_id: int
    broker_epoch: int
    master_epoch: int
    incarnation: int
    ha_sessions: int
    ha_slave: HaSlave | None

    @property
    def opts(self) -> _Options: ...
    def now_ms(self) -> int: ...
    def poll_now(self) -> None: ...
    def timer(self, delay_ms: int, fn: Callable[..., None], *args: Any) -> None: ...
    def send(self, dst: str, msg: Any, channel: str = "rpc") -> None: ...
    def reply(self, req: Request, code: int, header: dict[str, Any] | None = None, body: Any = None,
              channel: str = "rpc") -> None: ...
    def call(self, dst: str, code: int, header: dict[str, Any], on_reply: Callable[[Reply | None], None], *,
             timeout_ms: int, body: Any = None, channel: str = "rpc") -> int: ...

IDLE_HEARTBEAT_MS = 1000
HOUSEKEEPING_MS = 500
WINDOW_BYTES = 8 * 1024 * 1024
UNCERTAIN_GRACE_MS = 3000
SLAVE_IDLE_TIMEOUT_MS = 4000
SLAVE_RETRY_MS = 300


@dataclass(slots=True)
class HaTransfer:
    """HA_TRANSFER on session ``session``: header fields and the raw frames."""

    session: int
    offset: int
    epoch: int
    epoch_start_offset: int
    confirm_offset: int
    data: bytes


@dataclass(slots=True)
class HaClose:
    """The session's connection closed (``why``)."""

    session: int
    why: str


@dataclass(eq=False)
class _Slave:
    slave_id: int
    node: str
    session: int
    transfer_from: int | None = None
    sent_confirm: int = -1


@dataclass
class HaMaster:
    """The master side (``broker/ha_master.py``) of one simulated broker."""

    b: Broker
    active: bool = False
    self_id: int = 0
    master_epoch: int = 0
    view: SyncStateSetView = field(default_factory=lambda: SyncStateSetView(frozenset(), 0))
    trackings: dict[int, SlaveTracking] = field(default_factory=dict)
    slaves: dict[int, _Slave] = field(default_factory=dict)
    waiters: deque[tuple[int, Callable[[ResponseCode | None], None]]] = field(default_factory=deque)
    alter_in_flight: bool = False
    uncertain_since_ms: int | None = None
    generation: int = 0

    # -- life cycle ------------------------------------------------------------------------------
    def activate(self, self_id: int, master_epoch: int, members: frozenset[int], set_epoch: int) -> None:
        self.deactivate("re-activation")
        self.active = True
        self.generation += 1
        self.self_id, self.master_epoch = self_id, master_epoch
        self.uncertain_since_ms = None
        self.view = SyncStateSetView(frozenset(members) | {self_id}, set_epoch)
        self.b.timer(HOUSEKEEPING_MS, self._housekeeping, self.generation)

    def deactivate(self, reason: str) -> None:
        if not self.active:
            return
        self.active = False
        self.generation += 1
        for s in self.slaves.values():
            self.b.send(s.node, HaClose(s.session, f"master no longer active: {reason}"), "ha")
        self.slaves.clear()
        self.trackings.clear()
        waiters, self.waiters = self.waiters, deque()
        for _, cb in waiters:
            cb(ResponseCode.FLUSH_SLAVE_TIMEOUT)

    # -- sync-state set --------------------------------------------------------------------------
    def in_sync_replicas_nums(self) -> int:
        return in_sync_replicas_nums(self.view)

    def adopt_controller_set(self, members: frozenset[int], set_epoch: int) -> None:
        new = apply_controller_set(self.view, members, set_epoch)
        now = self.b.now_ms()
        settled = self.uncertain_since_ms is None or now - self.uncertain_since_ms > UNCERTAIN_GRACE_MS
        if (new is self.view and set_epoch == self.view.epoch and self.view.synchronizing and not self.alter_in_flight
                and settled):
            self.view = abandon_proposal(self.view)
            return
        if new is not self.view:
            self.uncertain_since_ms = None
            self.view = new
            self.recompute_confirm()
            self._release_waiters()

    def _propose(self, members: frozenset[int]) -> None:
        view = propose(self.view, members)
        if view is None:
            return
        self.view = view
        self.alter_in_flight = True
        generation, epoch_at_start = self.generation, self.master_epoch
        b = self.b
        header = {"cluster_name": b.opts.cluster_name, "broker_name": b.opts.broker_name, "master_id": b.broker_id,
                  "master_epoch": b.master_epoch, "sync_state_set": sorted(members),
                  "sync_state_set_epoch": view.epoch, "broker_epoch": b.broker_epoch}

        def done(rep: Reply | None) -> None:
            self.alter_in_flight = False
            if not (self.active and self.generation == generation and self.master_epoch == epoch_at_start):
                return
            if rep is None or rep.code != ResponseCode.SUCCESS:
                definite = rep is None or is_definite(rep.code)  # None: no controller reachable (definite)
                if definite:
                    self.view = abandon_proposal(self.view)
                else:
                    self.uncertain_since_ms = self.b.now_ms()
                    self.b.poll_now()
                return
            body = rep.body if isinstance(rep.body, dict) else {}
            accepted = frozenset(body.get("sync_state_set", members))
            self.view = apply_controller_set(self.view, accepted, int(rep.header["new_sync_state_set_epoch"]))
            self.uncertain_since_ms = None
            self.recompute_confirm()
            self._release_waiters()

        b.ctl.call(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, header, done)

    def _housekeeping(self, generation: int) -> None:
        if not self.active or generation != self.generation:
            return
        self.b.timer(HOUSEKEEPING_MS, self._housekeeping, generation)
        if self.view.synchronizing:
            return
        shrunk = maybe_shrink(self.view.members, self.self_id, self.trackings, self.b.now_ms(),
                              ha_max_time_slave_not_catchup_ms=self.b.opts.ha_max_time_slave_not_catchup_ms)
        if shrunk is not None:
            self._propose(shrunk)

    # -- confirm offset and waiting puts ---------------------------------------------------------
    def _acks(self) -> dict[int, int]:
        return {sid: t.ack_offset for sid, t in self.trackings.items() if t.connected}

    def recompute_confirm(self) -> None:
        if not self.active:
            return
        store = self.b.store
        previous = store.confirm
        new = compute_confirm_offset(store.stable_offset, effective_set(self.view), self.self_id, self._acks(),
                                     previous, all_ack_in_sync_state_set=self.b.opts.all_ack_in_sync_state_set)
        if new > previous:
            store.set_confirm_offset(new)
            for s in list(self.slaves.values()):
                self._pump(s)

    def _satisfied(self, end_offset: int, members: frozenset[int], acks: dict[int, int]) -> bool:
        o = self.b.opts
        return ack_satisfied(end_offset, members, self.self_id, acks,
                             all_ack_in_sync_state_set=o.all_ack_in_sync_state_set, in_sync_replicas=o.in_sync_replicas)

    def _release_waiters(self) -> None:
        if not self.waiters:
            return
        members, acks = effective_set(self.view), self._acks()
        while self.waiters and self._satisfied(self.waiters[0][0], members, acks):
            _, cb = self.waiters.popleft()
            cb(None)

    def on_appended(self) -> None:
        self.recompute_confirm()
        for s in list(self.slaves.values()):
            self._pump(s)

    def wait_replicated(self, end_offset: int, cb: Callable[[ResponseCode | None], None]) -> None:
        """``cb(None)`` once a put ending at ``end_offset`` may be acknowledged, else ``cb(error code)``."""
        if not self.active:
            cb(ResponseCode.FLUSH_SLAVE_TIMEOUT)
            return
        if self._satisfied(end_offset, effective_set(self.view), self._acks()):
            cb(None)
            return
        done = [False]

        def once(code: ResponseCode | None) -> None:
            if not done[0]:
                done[0] = True
                cb(code)

        self.waiters.append((end_offset, once))
        self.b.timer(self.b.opts.flush_slave_timeout_ms, once, ResponseCode.FLUSH_SLAVE_TIMEOUT)

    # -- slave connections -----------------------------------------------------------------------
    def handle_handshake(self, src: str, req: Request) -> None:
        h = req.header
        b = self.b
        if not self.active:
            b.reply(req, ResponseCode.NOT_MASTER, {"message": "not a master"}, channel="ha")
            return
        if h["master_epoch"] > self.master_epoch:
            b.reply(req, ResponseCode.NOT_MASTER, {"message": "stale master"}, channel="ha")
            return
        sid = int(h["broker_id"])
        old = self.slaves.pop(sid, None)
        if old is not None:
            b.send(old.node, HaClose(old.session, "replaced by a new connection"), "ha")
        self.slaves[sid] = _Slave(sid, src, int(h["session"]))
        self.trackings[sid] = new_tracking(sid, b.now_ms(), is_async_learner=bool(h["async_learner"]))
        store = b.store
        b.reply(req, ResponseCode.SUCCESS, {"master_epoch": self.master_epoch, "broker_id": self.self_id,
                                            "max_offset": store.max_offset, "min_offset": 0,
                                            "confirm_offset": store.confirm},
                [[e.epoch, e.start_offset] for e in store.epochs.entries], channel="ha")

    def handle_ack(self, src: str, header: dict[str, Any]) -> None:
        sid = int(header["broker_id"])
        s = self.slaves.get(sid)
        if s is None or s.session != header.get("session") or not self.active:
            return
        store = self.b.store
        ack = int(header["max_offset"])
        t = on_ack(self.trackings[sid], ack, store.stable_offset, self.b.now_ms())
        self.trackings[sid] = t
        if s.transfer_from is None:
            if ack > store.max_offset:
                self._close(s, f"slave {sid} is at {ack}, beyond master max {store.max_offset}: it did not truncate")
                return
            s.transfer_from = ack
            self.b.timer(IDLE_HEARTBEAT_MS, self._idle, s, self.generation)
        if not self.view.synchronizing:
            last = store.epochs.last_entry
            grown = maybe_expand(self.view.members, sid, ack, store.confirm,
                                 last.start_offset if last is not None else 0, t.is_async_learner)
            if grown is not None:
                self._propose(grown)
        self.recompute_confirm()
        self._release_waiters()
        self._pump(s)

    def handle_close(self, msg: HaClose, src: str) -> None:
        """The connection of session ``msg.session`` from node ``src`` closed.  A session is one TCP connection:
        matched by its number *and* its peer, since each slave numbers its sessions itself and two slaves' numbers
        can be equal (a close from one must not drop the other's tracking)."""
        for sid, s in list(self.slaves.items()):
            if s.session == msg.session and s.node == src:
                del self.slaves[sid]
                t = self.trackings.get(sid)
                if t is not None:
                    self.trackings[sid] = on_disconnect(t)

    def _close(self, s: _Slave, why: str) -> None:
        self.b.send(s.node, HaClose(s.session, why), "ha")
        self.handle_close(HaClose(s.session, why), s.node)

    def _send_batch(self, s: _Slave) -> None:
        store = self.b.store
        assert s.transfer_from is not None
        batch, mx = replication_batch(s.transfer_from, [(e.epoch, e.start_offset) for e in store.epochs.entries],
                                      stable_offset=store.stable_offset, max_offset=store.max_offset,
                                      batch_bytes=self.b.opts.ha_transfer_batch_bytes)
        data = store.read_raw(batch.start, batch.size) if batch.size else b""
        confirm = store.confirm
        self.b.send(s.node, HaTransfer(s.session, batch.start, batch.epoch, batch.epoch_start_offset, confirm, data),
                    "ha")
        s.transfer_from += len(data)
        s.sent_confirm = confirm
        t = self.trackings.get(s.slave_id)
        if t is not None:
            self.trackings[s.slave_id] = on_transfer(t, mx, self.b.now_ms())

    def _pump(self, s: _Slave) -> None:
        """Send what the slave lacks (within the window), or the new confirm offset."""
        if not self.active or self.slaves.get(s.slave_id) is not s or s.transfer_from is None:
            return
        store = self.b.store
        try:
            while True:
                t = self.trackings.get(s.slave_id)
                acked = max(t.ack_offset, 0) if t is not None else 0
                if s.transfer_from < store.stable_offset and s.transfer_from - acked < WINDOW_BYTES:
                    self._send_batch(s)
                    continue
                if s.sent_confirm != store.confirm:
                    self._send_batch(s)
                return
        except TransferError as exc:
            self._close(s, f"transfer failed: {exc}")

    def _idle(self, s: _Slave, generation: int) -> None:
        if not self.active or generation != self.generation or self.slaves.get(s.slave_id) is not s:
            return
        try:
            self._send_batch(s)  # the idle heartbeat (an empty batch when nothing is pending)
        except TransferError as exc:
            self._close(s, f"transfer failed: {exc}")
            return
        self._pump(s)
        self.b.timer(IDLE_HEARTBEAT_MS, self._idle, s, generation)


@dataclass
class HaSlave:
    """The slave side (``broker/ha_slave.py``): one master, sessions until stopped."""

    b: Broker
    master_id: int
    master_node: str
    master_epoch: int
    session: int = 0
    state: str = "READY"
    stopped: bool = False
    local: SlaveLog = field(default_factory=lambda: SlaveLog(0, None))
    last_transfer_ms: int = 0
    master_confirm_offset: int | None = None
    error: str | None = None

    def start(self) -> None:
        self._connect()

    def stop(self) -> None:
        if not self.stopped and self.state in ("HANDSHAKE", "TRANSFER"):
            self.b.send(self.master_node, HaClose(self.session, "slave stopping"), "ha")
        self.stopped = True
        self.state = "SHUTDOWN"

    def _new_session(self) -> int:
        self.b.ha_sessions += 1
        return self.b.ha_sessions * 16 + self.b.incarnation % 16

    def _connect(self) -> None:
        if self.stopped or self.b.ha_slave is not self:
            return
        b = self.b
        self.session = session = self._new_session()
        self.state = "HANDSHAKE"
        header = {"broker_id": b.broker_id, "async_learner": False, "max_offset": b.store.max_offset,
                  "master_epoch": self.master_epoch, "session": session}

        def done(rep: Reply | None) -> None:
            if self.stopped or self.session != session or b.ha_slave is not self:
                return
            if rep is None or rep.code != ResponseCode.SUCCESS or int(rep.header["master_epoch"]) < self.master_epoch:
                self.error = "handshake failed" if rep is None else str(rep.header.get("message"))
                self._retry()
                return
            if not self._truncate(rep.body or [], int(rep.header["max_offset"])):
                return
            store = b.store
            last = store.epochs.last_entry
            self.local = SlaveLog(store.max_offset, last.epoch if last is not None else None, store.confirm)
            self.master_confirm_offset = None
            self.state = "TRANSFER"
            self.last_transfer_ms = b.now_ms()
            b.send(self.master_node, Request(0, b.name, RequestCode.HA_ACK, {
                "max_offset": store.max_offset, "broker_id": b.broker_id, "session": session}, oneway=True), "ha")
            b.timer(1000, self._watch, session)

        b.call(self.master_node, RequestCode.HA_HANDSHAKE, header, done, timeout_ms=5000, channel="ha")

    def _retry(self) -> None:
        self.state = "READY"
        self.session = -1
        self.b.timer(SLAVE_RETRY_MS, self._connect)

    def _truncate(self, raw_entries: list[list[int]], master_max: int) -> bool:
        """The handshake's truncation: an empty store forgets its epochs; else cut to the consistent point."""
        store = self.b.store
        if store.max_offset == 0:
            if store.epochs.entries:
                store.truncate(0)
            return True
        master_entries = [EpochEntry(int(e), int(s)) for e, s in raw_entries]
        point = explain_consistent_point(store.epochs.entries, store.max_offset, master_entries, master_max)
        if point.offset < 0:
            self.error = f"{ResponseCode.HA_NO_CONSISTENT_POINT.name}: {point.reason}"
            self.state = "SUSPEND"
            self.b.world.node_event(self.b.name, "no-consistent-point", broker_name=self.b.opts.broker_name,
                                    reason=point.reason)
            return False
        if point.offset < store.max_offset:
            self.b.world.node_event(self.b.name, "truncate", broker_name=self.b.opts.broker_name,
                                    **{"from": store.max_offset, "to": point.offset})
            store.truncate(point.offset)
        return True

    def _watch(self, session: int) -> None:
        if self.stopped or self.session != session or self.state != "TRANSFER":
            return
        if self.b.now_ms() - self.last_transfer_ms > SLAVE_IDLE_TIMEOUT_MS:
            self.b.send(self.master_node, HaClose(session, "no transfer from the master"), "ha")
            self._retry()
            return
        self.b.timer(1000, self._watch, session)

    def handle_close(self, msg: HaClose) -> None:
        if msg.session == self.session and not self.stopped and self.state in ("HANDSHAKE", "TRANSFER"):
            self._retry()

    def handle_transfer(self, msg: HaTransfer) -> None:
        if self.stopped or msg.session != self.session or self.state != "TRANSFER":
            return
        b = self.b
        store = b.store
        header = TransferHeader(msg.offset, msg.epoch, msg.epoch_start_offset, msg.confirm_offset, len(msg.data))
        local, actions = on_transfer_header(self.local, header)
        ack = None
        for action in actions:
            if isinstance(action, DropConnection):
                b.send(self.master_node, HaClose(self.session, action.reason), "ha")
                self._retry()
                return
        try:
            for action in actions:
                if isinstance(action, AppendEpoch):
                    store.epochs.start_epoch(action.epoch, action.start_offset)
                elif isinstance(action, AppendBytes):
                    store.append_raw(action.offset, msg.data)
                elif isinstance(action, SetConfirmOffset):
                    if action.confirm_offset > store.confirm:  # never withdraw what consumers may have read
                        store.set_confirm_offset(action.confirm_offset)
                elif isinstance(action, SendAck):
                    ack = action.max_offset
        except ValueError as exc:
            self.error = str(exc)
            b.send(self.master_node, HaClose(self.session, f"transfer apply failed: {exc}"), "ha")
            self._retry()
            return
        self.local = local
        self.last_transfer_ms = b.now_ms()
        self.master_confirm_offset = msg.confirm_offset
        if ack is not None:
            b.send(self.master_node, Request(0, b.name, RequestCode.HA_ACK, {
                "max_offset": ack, "broker_id": b.broker_id, "session": self.session}, oneway=True), "ha")
