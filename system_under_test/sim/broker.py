"""A simulated broker: registration, heartbeats and lease, role changes, replication and the data path.

:class:`SimBroker` follows ``broker/lifecycle.py`` step by step on simulated time.  Production code it runs
unchanged: the registration state machine (:func:`~system_under_test.broker.registration.state_machine.next_action`,
``apply_event``, ``restart_event``, ``make_register_code``) with the meta records' encoding and CRC check
(``meta_record``), the broker's own lease (:mod:`system_under_test.broker.lease`: renewal from the send time,
expiry, a clock that went back), the role decision (with a store's durable loss) and the ordered role-change steps
(:mod:`system_under_test.broker.ha.role`, with ``may_lead_again``),
the HA cores (:mod:`system_under_test.sim.ha`), ``check_min_in_sync``, the response-code table's ``definite``
flags, and the store's frame encoding and recovery decoding (:mod:`system_under_test.sim.store`).

What is the shell's and re-stated here (docs/simulation.md): the order of the life cycle (register, then
heartbeat every controller, poll GetReplicaInfo, follow pushes), the heartbeat reply handling (when to renew the
lease, adopt ``fenced``, deactivate a master on a higher master epoch, register again on a stale broker epoch), when
the lease is checked (on every request), the heartbeat's ``want_fence`` and durable-loss claim, clearing a refilled
store's loss before a heartbeat round, the role lock (one replica-info at a time), the step executor
of ``role_change.py``, the send/pull handlers of ``server.py`` (with a put's write, fsync and rollback on a disk
under the ``fsync`` fault, in the order ``GroupCommit`` and ``MessageStore.put`` give them; the rules are
``store/durability.py``'s), and the registration driver's retry loop.

Deliberate bugs run here as in the real broker: ``ack-before-replication`` (a send is answered once appended)
and ``non-atomic-meta`` (``.broker.meta`` is written in place in two halves without fsync, so a crash between
them tears it and the next start refuses with MetaCorruptError).

Crash points: :meth:`SimBroker.arm_crash` arms a crash at one of the registration driver's failpoints
(``FAILPOINTS``), as the ``registration-crash`` nemesis does in a real run.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from system_under_test.broker.ha import (
    RoleDecisionKind,
    change_to_master_steps,
    change_to_slave_steps,
    check_min_in_sync,
    decide_role_change,
    may_lead_again,
)
from system_under_test.broker.ha.role import (
    AcceptWrites,
    AppendEpochEntry,
    DropSlaveConnections,
    RecomputeConfirmOffset,
    RegisterRouting,
    RoleError,
    RoleStep,
    StartHaClient,
    StopAcceptingWrites,
    StopHaClient,
)
from system_under_test.broker.lease import check_lease, renewed_at
from system_under_test.broker.registration.driver import (
    COMMIT_META,
    DELETE_TEMP,
    FP_APPLY_AFTER,
    FP_APPLY_BEFORE,
    FP_NEXT_ID_AFTER,
    FP_NEXT_ID_BEFORE,
    FP_REGISTER_AFTER,
    FP_REGISTER_BEFORE,
    FP_TEMP_AFTER,
    FP_TEMP_BEFORE,
    PREPARE_META,
    PROMOTE_STEPS,
    TRANSIENT_CODES,
)
from system_under_test.broker.registration.errors import MetaCorruptError
from system_under_test.broker.registration.meta_record import (
    MetaRecord,
    TempMetaRecord,
    decode_meta,
    decode_temp_meta,
    encode_meta,
    encode_temp_meta,
)
from system_under_test.broker.registration.state_machine import (
    INITIAL_STATE,
    ApplyBrokerId,
    ApplyOk,
    ApplyRejected,
    DeleteTemp,
    Done,
    GetNextBrokerId,
    GotNextId,
    MetaWritten,
    PromoteTempToMeta,
    Refuse,
    RegisterBroker,
    RegisterFailed,
    RegisterOk,
    RegistrationState,
    RestartFoundMeta,
    TempDeleted,
    TempWritten,
    WriteTempMeta,
    apply_event,
    make_register_code,
    next_action,
    restart_event,
)
from system_under_test.broker.roles import Role
from system_under_test.broker.shutdown import (
    SHUTDOWN_WAIT_MS,
    Shutdown,
    begin_shutdown,
    shutdown_reply,
    shutdown_timed_out,
)
from system_under_test.broker.store.durability import SyncPlan
from system_under_test.lease_timing import DEFAULT_LEASE_TIMEOUT_MS, heartbeat_interval_for
from system_under_test.protocol.codes import RequestCode, ResponseCode, is_definite
from system_under_test.sim.controller import CLUSTER_ID
from system_under_test.sim.ctlclient import ControllerClient
from system_under_test.sim.ha import HaClose, HaMaster, HaSlave, HaTransfer
from system_under_test.sim.network import Network, Reply, Request, SimNode, request_key
from system_under_test.sim.store import Item, SimStore
from system_under_test.sim.world import NS_PER_MS, World

__all__ = ["BrokerOptions", "SimBroker", "TORN_META"]

META, TEMP = ".broker.meta", ".broker.meta.temp"
TORN_META = "restart-refused"
_SUCCESS = int(ResponseCode.SUCCESS)


@dataclass(frozen=True)
class BrokerOptions:
    """The broker options the simulation uses (names and defaults of ``broker/config.py``'s BrokerConfig)."""

    cluster_name: str = "splitbrain"
    broker_name: str = "broker-0"
    all_ack_in_sync_state_set: bool = True
    in_sync_replicas: int = 1
    min_in_sync_replicas: int = 1
    sync_flush: bool = True
    flush_interval_ms: int = 200
    flush_slave_timeout_ms: int = 3000
    ha_max_time_slave_not_catchup_ms: int = 3000
    heartbeat_interval_ms: int = heartbeat_interval_for(DEFAULT_LEASE_TIMEOUT_MS)
    lease_timeout_ms: int = DEFAULT_LEASE_TIMEOUT_MS
    replica_info_interval_ms: int = 1000
    ha_transfer_batch_bytes: int = 256 * 1024
    election_priority: int = 0
    bugs: frozenset[str] = frozenset()


class _Disk:
    """The broker's files besides the store: the meta files, each ``(bytes, durable)``."""

    def __init__(self) -> None:
        self.files: dict[str, tuple[bytes, bool]] = {}

    def crash(self) -> None:
        """A process crash keeps what the process wrote (the page cache survives it), fsynced or not: a file a
        non-atomic writer had half written stays half written -- torn."""


class SimBroker(SimNode):
    """One broker process of a broker set (module docstring)."""

    def __init__(self, name: str, world: World, net: Network, controllers: tuple[str, ...],
                 opts: BrokerOptions) -> None:
        super().__init__(name, world, net)
        self.opts = opts
        self.controllers = controllers
        self.store = SimStore(sync=opts.sync_flush)
        self.disk = _Disk()
        self.ctl = ControllerClient(self, controllers)
        self.ha = HaMaster(self)
        self.ha_slave: HaSlave | None = None
        self.ha_sessions = 0
        self.crash_at: str | None = None
        self.disks_replaced = 0
        self.refused: str | None = None
        self.on_crash_point: Callable[[SimBroker, str], None] | None = None
        self._reset_memory()

    def _reset_memory(self) -> None:
        self.incarnation_id = ""
        self.broker_id = 0
        self.broker_epoch = -1
        self.fenced = True
        self.last_renew_ms = 0
        self._last_lease_check_ms = 0
        self.role = Role.NONE
        self.master_epoch = 0
        self.master_id: int | None = None
        self.master_node: str | None = None
        self.reg: RegistrationState = INITIAL_STATE
        self.registering = False
        self.registered = False
        self.reg_reply: dict[str, Any] = {}
        self.reg_attempt = 0
        self.hb_inflight: set[str] = set()
        self.role_busy = False
        self.role_queue: list[tuple[dict[str, Any], str]] = []
        self.poll_requested = False
        self.hb_started = False
        self.shutdown = Shutdown()
        self.fsync_busy = False  # an append's fsync is in flight (the fsync fault): other puts wait
        self.put_queue: deque[Request] = deque()
        self.after_put: list[Callable[[], None]] = []  # flushes and a clean close waiting for that append

    # -- life cycle ------------------------------------------------------------------------------
    def on_start(self) -> None:
        self._reset_memory()
        self.ha = HaMaster(self)
        self.ha_slave = None
        self.incarnation_id = f"{self.world.rng.getrandbits(64):016x}"
        self.store.open()
        self.ctl = ControllerClient(self, self.controllers)
        try:
            self.reg = self._resume_state()
        except MetaCorruptError as exc:
            self.refused = str(exc)
            self.world.node_event(self.identity, TORN_META, broker_name=self.opts.broker_name, reason=str(exc))
            self.crash()  # the process exits (exit 3 in the real broker) and stays down
            return
        self.refused = None
        self._register()
        self.timer(self.opts.flush_interval_ms, self._flush_loop)

    def on_crash(self) -> None:
        if self.ha.active:
            for s in self.ha.slaves.values():  # the kernel closes the process's connections
                self.send(s.node, HaClose(s.session, "master process died"), "ha")
        slave = self.ha_slave
        if slave is not None and slave.state in ("HANDSHAKE", "TRANSFER"):
            self.send(slave.master_node, HaClose(slave.session, "slave process died"), "ha")
        unsynced = self.store.unsynced
        self.store.crash(self.world.rng.randint(0, unsynced) if unsynced else 0)
        self.disk.crash()
        self.ha = HaMaster(self)
        self.ha_slave = None

    @property
    def identity(self) -> str:
        """Who this broker is in its node events: the node, and after a replaced disk a new broker (it registers
        under a new id), ``<node>/disk<N>``."""
        return self.name if not self.disks_replaced else f"{self.name}/disk{self.disks_replaced}"

    def wipe(self) -> None:
        """A replaced disk: an empty store and no meta files (the broker registers as a new broker id)."""
        self.store = SimStore(sync=self.opts.sync_flush)
        self.disk = _Disk()
        self.disks_replaced += 1
        self.refused = None

    def arm_crash(self, point: str) -> None:
        """Crash when registration reaches failpoint ``point`` (one of the driver's ``FAILPOINTS``)."""
        self.crash_at = point

    def _point(self, name: str) -> bool:
        """A failpoint: crash here if armed; True if the process died."""
        if self.crash_at == name:
            self.crash_at = None
            if self.on_crash_point is not None:
                self.on_crash_point(self, name)
            self.crash()
            return True
        return False

    def _flush_loop(self) -> None:
        self._when_store_free(self.store.flush)
        self.timer(self.opts.flush_interval_ms, self._flush_loop)

    def _when_store_free(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` now, or -- while an append's fsync is in flight (the ``fsync`` fault) -- once that append has
        finished or been rolled back: the real flusher and close wait for the store's writer lock, which the put
        holds across its fsync and rollback.  (A flush that ran in between would fsync and publish the bytes of an
        append about to fail, and the master would replicate them.)"""
        if self.fsync_busy:
            self.after_put.append(fn)
        else:
            fn()

    def poll_now(self) -> None:
        if not self.poll_requested:
            self.poll_requested = True
            self.timer(1, self._poll)

    # -- registration (registration/driver.py) --------------------------------------------------
    def _resume_state(self) -> RegistrationState:
        files = self.disk.files
        meta_raw, temp_raw = files.get(META), files.get(TEMP)
        meta = decode_meta(meta_raw[0]) if meta_raw is not None else None
        if meta is not None:
            event = restart_event(self.opts.cluster_name, self.opts.broker_name, meta, None)
            if isinstance(event, RestartFoundMeta) and temp_raw is not None:
                event = RestartFoundMeta(meta, temp_present=True)
        else:
            temp = decode_temp_meta(temp_raw[0]) if temp_raw is not None else None
            event = restart_event(self.opts.cluster_name, self.opts.broker_name, None, temp)
        return INITIAL_STATE if event is None else apply_event(INITIAL_STATE, event)

    def _register(self) -> None:
        if self.registering:
            return
        self.registering = True
        self.reg_attempt = 0
        if self.reg.phase.value == "REGISTERED":  # registering again (stale epoch): RegisterBroker only
            self.reg = apply_event(INITIAL_STATE, RestartFoundMeta(MetaRecord(
                self.opts.cluster_name, self.opts.broker_name, self.broker_id)))
        self._reg_step()

    def _reg_step(self) -> None:
        action = next_action(self.reg)
        o = self.opts
        if isinstance(action, Done):
            self._registered(action.broker_id)
            return
        if isinstance(action, Refuse):
            self.refused = action.reason
            self.world.node_event(self.identity, "registration-refused", broker_name=o.broker_name,
                                  reason=action.reason)
            return
        if isinstance(action, GetNextBrokerId):
            if self._point(FP_NEXT_ID_BEFORE):
                return

            def got(rep: Reply | None) -> None:
                if self._transient(rep):
                    return
                assert rep is not None
                if rep.code != _SUCCESS or self._point(FP_NEXT_ID_AFTER):
                    return
                code = make_register_code(self.name, self.now_ms(), self.world.rng)
                self._advance(GotNextId(int(rep.header["next_broker_id"]), code))

            self.ctl.call(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
                          {"cluster_name": o.cluster_name, "broker_name": o.broker_name}, got)
        elif isinstance(action, WriteTempMeta):
            if self._point(FP_TEMP_BEFORE):
                return
            rec = TempMetaRecord(o.cluster_name, o.broker_name, action.broker_id, action.register_code)
            self.disk.files[TEMP] = (encode_temp_meta(rec), True)
            self._after_disk(FP_TEMP_AFTER, TempWritten(action.broker_id, action.register_code))
        elif isinstance(action, ApplyBrokerId):
            if self._point(FP_APPLY_BEFORE):
                return

            def applied(rep: Reply | None) -> None:
                if rep is not None and rep.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID:
                    if not self._point(FP_APPLY_AFTER):
                        self._advance(ApplyRejected())
                    return
                if self._transient(rep):
                    return
                assert rep is not None
                if rep.code == _SUCCESS:
                    # the controller applied the claim: this store must keep the id (checker.invariants'
                    # broker-id-leaked relates it to the id the broker comes back with)
                    self.world.node_event(self.identity, "own-id-applied", broker_name=o.broker_name,
                                          broker_id=action.broker_id, register_code=action.register_code)
                    if not self._point(FP_APPLY_AFTER):
                        self._advance(ApplyOk())

            self.ctl.call(RequestCode.CONTROLLER_APPLY_BROKER_ID, {
                "cluster_name": o.cluster_name, "broker_name": o.broker_name, "broker_id": action.broker_id,
                "register_code": action.register_code, "broker_addr": self.name}, applied)
        elif isinstance(action, PromoteTempToMeta):
            data = encode_meta(MetaRecord(o.cluster_name, o.broker_name, action.broker_id))
            for step in PROMOTE_STEPS:  # the driver's order (its one table)
                if step == PREPARE_META:
                    if "non-atomic-meta" in o.bugs:
                        self.disk.files[META] = (data[: len(data) // 2], False)  # BUG: in place, first half, no fsync
                elif step == COMMIT_META:
                    self.disk.files[META] = (data, "non-atomic-meta" not in o.bugs)
                elif step == DELETE_TEMP:
                    self.disk.files.pop(TEMP, None)
                elif self._point(step):
                    return
            self._after_disk(None, MetaWritten())
        elif isinstance(action, DeleteTemp):
            self.disk.files.pop(TEMP, None)
            self._after_disk(None, TempDeleted())
        elif isinstance(action, RegisterBroker):
            if self._point(FP_REGISTER_BEFORE):
                return

            def registered(rep: Reply | None) -> None:
                if rep is None or rep.code in TRANSIENT_CODES or not is_definite(rep.code):
                    self.reg = apply_event(self.reg, RegisterFailed("transient"))
                    self._transient(None)
                    return
                if rep.code == ResponseCode.DUPLICATE_BROKER_REGISTRATION:
                    wait = int(rep.header.get("retry_after_ms") or 0) + 100 + self.world.rng.randrange(200)
                    self.timer(wait, self._reg_step)
                    return
                if rep.code != _SUCCESS:
                    self.refused = f"RegisterBroker refused: {ResponseCode(rep.code).name}"
                    self.world.node_event(self.identity, "registration-refused", broker_name=o.broker_name,
                                          reason=self.refused)
                    return
                if self._point(FP_REGISTER_AFTER):
                    return
                self.reg_reply = dict(rep.header)
                self._advance(RegisterOk())

            self.ctl.call(RequestCode.CONTROLLER_REGISTER_BROKER, {
                "cluster_name": o.cluster_name, "broker_name": o.broker_name, "broker_id": action.broker_id,
                "broker_addr": self.name, "incarnation_id": self.incarnation_id, "cluster_id": CLUSTER_ID},
                registered)

    def _after_disk(self, point: str | None, event: Any) -> None:
        """A durable file step takes a little time (an fsync), then the outcome is fed back."""
        self.timer(self.world.rng.randint(1, 4), self._disk_done, point, event)

    def _disk_done(self, point: str | None, event: Any) -> None:
        if point is not None and self._point(point):
            return
        self._advance(event)

    def _advance(self, event: Any) -> None:
        self.reg_attempt = 0
        self.reg = apply_event(self.reg, event)
        self._reg_step()

    def _transient(self, rep: Reply | None) -> bool:
        """Retry the same step after a backoff if ``rep`` is a transient failure (None: no answer)."""
        if rep is not None and rep.code not in TRANSIENT_CODES and is_definite(rep.code):
            return False
        if rep is not None and rep.code == _SUCCESS:
            return False
        self.reg_attempt += 1
        cap = min(2000, 50 * (2 ** min(self.reg_attempt - 1, 20)))
        self.timer(cap // 2 + self.world.rng.randrange(cap - cap // 2 + 1), self._reg_step)
        return True

    def _registered(self, broker_id: int) -> None:
        self.registering = False
        self.registered = True
        h = self.reg_reply
        self.broker_id = broker_id
        epoch = h.get("broker_epoch")
        self.broker_epoch = epoch if type(epoch) is int else 0
        self.fenced = bool(h.get("fenced", True))
        self.world.node_event(self.identity, "broker-id", broker_name=self.opts.broker_name, broker_id=broker_id)
        self.world.node_event(self.identity, "broker-epoch", broker_name=self.opts.broker_name, broker_id=broker_id,
                              broker_epoch=self.broker_epoch)
        if not self.hb_started:
            self.hb_started = True
            self.timer(1, self._heartbeat_loop)
            self.timer(self.opts.replica_info_interval_ms, self._poll_loop)
        self._on_replica_info(dict(h), "register")

    # -- heartbeats and lease (lifecycle.py) -----------------------------------------------------
    def heartbeat_header(self) -> dict[str, Any]:
        s, o = self.store, self.opts
        loss = s.durable_loss if o.sync_flush else None  # lifecycle.py: the claim bounds nothing under ASYNC
        return {"cluster_name": o.cluster_name, "broker_name": o.broker_name, "broker_id": self.broker_id,
                "broker_addr": self.name, "broker_epoch": self.broker_epoch, "master_epoch": s.epochs.last_epoch,
                "max_offset": s.max_offset, "confirm_offset": s.confirm, "election_priority": o.election_priority,
                "heartbeat_timeout_ms": o.lease_timeout_ms, "want_shutdown": self.shutdown.shutting_down,
                "want_fence": s.durable_loss is not None,
                "lost_durable_offset": None if loss is None else loss.durable_offset,
                "lost_durable_epoch": None if loss is None else loss.epoch}

    def _clear_durable_loss_if_refilled(self) -> None:
        """A store that lost durable records is made good once the log reaches the confirm offset of the master
        it follows (:func:`~system_under_test.broker.ha.may_lead_again`)."""
        slave = self.ha_slave
        if self.store.durable_loss is not None and slave is not None and may_lead_again(
                slave.master_confirm_offset, self.store.max_offset):
            self.store.clear_durable_loss()
            self.world.node_event(self.identity, "durable-loss-cleared", broker_name=self.opts.broker_name,
                                  max_offset=self.store.max_offset)

    def _heartbeat_loop(self) -> None:
        self.timer(self.opts.heartbeat_interval_ms, self._heartbeat_loop)
        if self.broker_id == 0:
            return
        self._clear_durable_loss_if_refilled()
        sent, sent_world = self.now_ms(), self.world.now_ms
        header = self.heartbeat_header()
        timeout = max(200, self.opts.heartbeat_interval_ms * 2)
        for c in self.controllers:
            if c in self.hb_inflight:
                continue
            self.hb_inflight.add(c)

            def done(rep: Reply | None, c: str = c) -> None:
                self.hb_inflight.discard(c)
                if rep is not None:
                    self._on_heartbeat_result(rep, sent, sent_world, c)

            self.call(c, RequestCode.BROKER_HEARTBEAT, header, done, timeout_ms=timeout)

    def _on_heartbeat_result(self, res: Reply, sent_ms: int, sent_world_ms: int, controller: str) -> None:
        stale = False
        if res.code == _SUCCESS:
            epoch = res.header.get("broker_epoch")
            if epoch == self.broker_epoch:
                self._on_heartbeat_reply(res.header, sent_ms, sent_world_ms, request_key(self.name, res.req_id),
                                         controller)
                return
            stale = type(epoch) is int and epoch > self.broker_epoch
            if not stale:
                return
        if (stale or res.code in (ResponseCode.STALE_BROKER_EPOCH, ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                                  ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST)) and not self.registering:
            self.fenced = True
            self._register()

    def _on_heartbeat_reply(self, h: dict[str, Any], sent_ms: int, sent_world_ms: int, heartbeat: str,
                            controller: str) -> None:
        renewed = renewed_at(self.last_renew_ms, sent_ms, self.now_ms())
        if renewed is None:
            return
        if renewed > self.last_renew_ms:
            self._log_renewal(renewed, sent_world_ms, heartbeat, controller)
        self.last_renew_ms = renewed
        fenced = bool(h.get("fenced"))
        if fenced != self.fenced:
            self.world.node_event(self.identity, "fenced" if fenced else "unfenced", broker_name=self.opts.broker_name)
        self.fenced = fenced
        self._on_shutdown_reply(h)
        epoch = h.get("master_epoch")
        if type(epoch) is int and epoch > self.master_epoch and self.role is Role.MASTER:
            self.ha.deactivate(f"controller reports master epoch {epoch} > ours {self.master_epoch}")
        if (type(epoch) is int and epoch > self.master_epoch) or h.get("master_id") is None:
            self.poll_now()

    def _log_renewal(self, renewed: int, sent_world_ms: int, heartbeat: str, controller: str) -> None:
        """The lease moved: log when it now counts from, on the run's time axis (``lease_from``, ns), for the
        ``lease-outlives-controller`` invariant.  Only when this clock kept one rate from the heartbeat's send to its
        reply: across a skew or a reset the broker's readings of that time do not map to one moment (a clock set back
        reads the same again later), and the design makes no promise about drift (docs/anomalies.md); the event
        then carries no ``lease_from`` and is not judged."""
        where = self.world_ms_at(renewed) if self.clock_since <= sent_world_ms else None
        fields = {} if where is None else {"lease_from": int(where * NS_PER_MS)}
        self.world.node_event(self.identity, "lease-renewed", broker_name=self.opts.broker_name,
                              broker_id=self.broker_id, heartbeat=heartbeat, controller=controller, **fields)

    def lease_valid(self) -> bool:
        now = self.now_ms()
        check = check_lease(self.fenced, self.last_renew_ms, self._last_lease_check_ms, now,
                            self.opts.lease_timeout_ms)
        if check.fenced_because is not None:
            self.world.node_event(self.identity, "fenced", broker_name=self.opts.broker_name)
        self.fenced, self.last_renew_ms, self._last_lease_check_ms = check.fenced, check.last_renew_ms, now
        return not self.fenced

    # -- role changes ----------------------------------------------------------------------------
    def _poll_loop(self) -> None:
        self.timer(self.opts.replica_info_interval_ms, self._poll_loop)
        self._poll()

    def _poll(self) -> None:
        self.poll_requested = False

        def got(rep: Reply | None) -> None:
            if rep is not None and rep.code == _SUCCESS:
                self._on_replica_info(dict(rep.header), "poll")

        self.ctl.call(RequestCode.CONTROLLER_GET_REPLICA_INFO, {"broker_name": self.opts.broker_name}, got)

    def _on_replica_info(self, info: dict[str, Any], source: str) -> None:
        """One replica info at a time (the role lock); an election request holds it until its reply."""
        if self.role_busy:
            self.role_queue.append((info, source))
            return
        self._apply_replica_info(info, source)
        while self.role_queue and not self.role_busy:
            info, source = self.role_queue.pop(0)
            self._apply_replica_info(info, source)

    def _apply_replica_info(self, info: dict[str, Any], source: str) -> None:
        if self.broker_id == 0:
            return
        master_id, master_epoch = info.get("master_id"), info.get("master_epoch")
        if type(master_epoch) is not int:
            return
        if master_epoch > self.master_epoch and self.role is Role.MASTER:
            self.ha.deactivate(f"controller ({source}) has master epoch {master_epoch} > {self.master_epoch}")
        members = frozenset(int(i) for i in info.get("sync_state_set") or [])
        set_epoch = int(info.get("sync_state_set_epoch") or 0)
        decision = decide_role_change(self.master_epoch, master_epoch, None if master_id is None else int(master_id),
                                      self.broker_id, lost_durable_records=self.store.durable_loss is not None)
        kind = decision.kind
        if kind is RoleDecisionKind.REFUSE_TO_LEAD:
            return
        if kind is RoleDecisionKind.NO_MASTER:
            if source != "elect":
                self._ask_to_be_elected()
        elif kind is RoleDecisionKind.BECOME_MASTER:
            if "sync_state_set" not in info:
                self.poll_now()
                return
            self._become_master(master_epoch, members, set_epoch)
        elif kind is RoleDecisionKind.BECOME_SLAVE:
            addr = info.get("master_addr")
            if isinstance(addr, str) and addr and decision.master_id is not None:
                self._run_steps(change_to_slave_steps(decision.master_id, addr, master_epoch, self.broker_id),
                                frozenset(), 0)
        elif self.role is Role.MASTER and master_epoch == self.master_epoch and "sync_state_set" in info:
            self.ha.adopt_controller_set(members, set_epoch)

    def _ask_to_be_elected(self) -> None:
        if self.fenced or self.shutdown.shutting_down:
            return
        self.role_busy = True
        o = self.opts

        def done(rep: Reply | None) -> None:
            self.role_busy = False
            if rep is not None and rep.code in (_SUCCESS, ResponseCode.CONTROLLER_MASTER_STILL_EXIST):
                self._apply_replica_info(dict(rep.header), "elect")
            self._on_replica_info_queue()

        self.ctl.call(RequestCode.CONTROLLER_ELECT_MASTER, {
            "cluster_name": o.cluster_name, "broker_name": o.broker_name, "broker_id": self.broker_id,
            "designate": False, "broker_epoch": self.broker_epoch}, done)

    def _on_replica_info_queue(self) -> None:
        while self.role_queue and not self.role_busy:
            info, source = self.role_queue.pop(0)
            self._apply_replica_info(info, source)

    def _become_master(self, epoch: int, members: frozenset[int], set_epoch: int) -> None:
        for _ in range(2):  # at most: stop the HA client, then the steps computed from the log it left
            try:
                steps = change_to_master_steps(epoch, [(e.epoch, e.start_offset) for e in self.store.epochs.entries],
                                               self.store.max_offset, ha_client_running=self.ha_slave is not None)
            except RoleError as exc:
                self.world.node_event(self.identity, "role-refused", broker_name=self.opts.broker_name, reason=str(exc))
                return
            self._run_steps(steps, members, set_epoch)
            if self.role is Role.MASTER and self.master_epoch == epoch:
                return

    def _run_steps(self, steps: list[RoleStep], members: frozenset[int], set_epoch: int) -> None:
        """Execute exactly the steps a core returned, in order (``role_change.run_role_steps``)."""
        for step in steps:
            if isinstance(step, StopHaClient):
                if self.ha_slave is not None:
                    self.ha_slave.stop()
                    self.ha_slave = None
            elif isinstance(step, DropSlaveConnections):
                self.ha.deactivate("role change")
            elif isinstance(step, StopAcceptingWrites):
                self.role = Role.SLAVE
            elif isinstance(step, AppendEpochEntry):
                self.store.epochs.start_epoch(step.epoch, step.start_offset)
            elif isinstance(step, RegisterRouting):
                pass  # routing is not simulated: clients find the master through the controller
            elif isinstance(step, AcceptWrites):
                self.role, self.master_epoch = Role.MASTER, step.master_epoch
                self.master_id, self.master_node = self.broker_id, self.name
                self.ha.activate(self.broker_id, step.master_epoch, members, set_epoch)
                self.world.node_event(self.identity, "became-master", broker_name=self.opts.broker_name,
                                      master_epoch=step.master_epoch, broker_id=self.broker_id)
            elif isinstance(step, RecomputeConfirmOffset):
                self.ha.recompute_confirm()
            elif isinstance(step, StartHaClient):
                self.master_epoch, self.master_id, self.master_node = step.master_epoch, step.master_id, \
                    step.master_addr
                self.ha_slave = HaSlave(self, step.master_id, step.master_addr, step.master_epoch)
                self.ha_slave.start()
            else:  # pragma: no cover - the step union is closed
                raise AssertionError(f"unknown role step {step!r}")

    # -- requests (server.py) --------------------------------------------------------------------
    def on_message(self, src: str, msg: Any) -> None:
        if isinstance(msg, HaTransfer):
            if self.ha_slave is not None:
                self.ha_slave.handle_transfer(msg)
            return
        if isinstance(msg, HaClose):
            self.ha.handle_close(msg, src)
            if self.ha_slave is not None and src == self.ha_slave.master_node:
                self.ha_slave.handle_close(msg)
            return
        if not isinstance(msg, Request):
            return
        code = msg.code
        if code == RequestCode.SEND_MESSAGE:
            self._send(msg)
        elif code == RequestCode.PULL_MESSAGE:
            self._pull(msg)
        elif code == RequestCode.HA_HANDSHAKE:
            self.ha.handle_handshake(src, msg)
        elif code == RequestCode.HA_ACK:
            self.ha.handle_ack(src, msg.header)
        elif code == RequestCode.NOTIFY_BROKER_ROLE_CHANGED:
            epoch = msg.header.get("broker_epoch")
            if epoch is None or epoch == self.broker_epoch:
                self._on_replica_info(dict(msg.header), "notify")
        else:
            self.reply(msg, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, {"message": f"code {code}"})

    def _not_master(self, req: Request) -> None:
        self.reply(req, ResponseCode.NOT_MASTER, {"message": f"{self.name} is {self.role.value}",
                                                  "master_id": self.master_id, "master_addr": self.master_node,
                                                  "master_epoch": self.master_epoch})

    def _send(self, req: Request) -> None:
        ha = self.ha
        if self.role is not Role.MASTER or self.shutdown.shutting_down or not ha.active:
            self._not_master(req)
            return
        if not self.lease_valid():
            self.reply(req, ResponseCode.BROKER_FENCED, {"message": f"{self.name} is fenced"})
            return
        refused = check_min_in_sync(ha.in_sync_replicas_nums(), self.opts.min_in_sync_replicas)
        if refused is not None:
            self.reply(req, refused, {"message": "SyncStateSet too small"})
            return
        if self.fsync_busy:  # an append's fsync is in flight: wait for the writer lock
            self.put_queue.append(req)
            return
        if self.store.fsync_fault is not None and self.store.sync:
            self._send_on_faulty_disk(req)
            return
        h = req.header
        items = self.store.put(str(h["topic"]), int(h["queue_id"]), list(req.body), self.now_ms())
        self._appended(req, items, self.master_epoch)

    def _send_on_faulty_disk(self, req: Request) -> None:
        """A put under SYNC while the ``fsync`` fault slows or fails this disk: the group commit's order, one
        append at a time (the others wait for the store's writer lock, as the real ``GroupCommit`` queues them, and
        are handled from the top when their turn comes).  The records are written at once -- from then until the
        fsync finishes they lie above the stable offset -- and the fsync takes the fault's time; if it fails (EIO)
        the append is rolled back (``durability.rollback_point``) and the send answered STORE_ERROR, as
        ``server.py`` answers a put that raised StoreIOError."""
        store = self.store
        assert store.fsync_fault is not None
        h = req.header
        begin = store.max_offset
        items = store.write_put(str(h["topic"]), int(h["queue_id"]), list(req.body), self.now_ms())
        plan = store.sync_plan()
        mode, delay_ms = store.fsync_fault
        self.fsync_busy = True
        self.timer(delay_ms, self._fsync_finished, req, items, begin, plan, mode == "eio-fsync", self.master_epoch)

    def _fsync_finished(self, req: Request, items: list[Item], begin: int, plan: SyncPlan | None, failed: bool,
                        epoch: int) -> None:
        self.fsync_busy = False
        store = self.store
        if plan is not None:
            store.finish_sync(plan, ok=not failed)
        if failed:
            if store.item_at(begin) is items[0]:  # still this append's bytes (the store's writer lock held them)
                store.rollback(begin)
            self.reply(req, ResponseCode.STORE_ERROR,
                       {"message": f"commit log: fsync failed (EIO); the append at {begin} was rolled back"})
        else:
            self._appended(req, items, epoch)
        waiting, self.after_put = self.after_put, []
        for fn in waiting:
            fn()
            if not self.up:  # a clean close ended the process
                return
        while self.put_queue and not self.fsync_busy:
            self._send(self.put_queue.popleft())

    def _appended(self, req: Request, items: list[Item], epoch: int) -> None:
        """The rest of a send once its append finished: pump the slaves, then answer when replicated."""
        ha = self.ha
        self.world.node_event(self.identity, "accepted-write", broker_name=self.opts.broker_name, master_epoch=epoch)
        ha.on_appended()
        first, last = items[0], items[-1]
        ok = {"queue_offset": first.queue_offset, "phys_offset": first.phys, "count": len(items),
              "master_epoch": epoch, "broker_id": self.broker_id}
        if "ack-before-replication" in self.opts.bugs:
            self.reply(req, _SUCCESS, ok)
            return
        incarnation = self.incarnation

        def replicated(err: ResponseCode | None) -> None:
            if incarnation != self.incarnation:
                return
            if err is not None:
                self.reply(req, err, {"message": f"appended at {first.phys} in epoch {epoch} but not acknowledged"})
            else:
                self.reply(req, _SUCCESS, ok)

        ha.wait_replicated(last.end, replicated)

    def _pull(self, req: Request) -> None:
        h = req.header
        if not self.lease_valid():
            self.reply(req, ResponseCode.BROKER_FENCED, {"message": f"{self.name} is fenced"})
            return
        topic, queue_id, offset = str(h["topic"]), int(h["queue_id"]), int(h["queue_offset"])
        lo, hi = self.store.queue_bounds(topic, queue_id)
        if offset < lo or offset > hi:
            self.reply(req, ResponseCode.OFFSET_OUT_OF_RANGE, {"min_offset": lo, "max_offset": hi})
            return
        items = self.store.get(topic, queue_id, offset, int(h["max_count"]))
        self.reply(req, _SUCCESS, {"next_offset": offset + len(items), "min_offset": lo, "max_offset": hi,
                                   "broker_id": self.broker_id, "role": self.role.value},
                   [[it.queue_offset, it.value] for it in items])

    # -- controlled shutdown (lifecycle.py shutdown; when to close: broker/shutdown.py) --------------
    def request_shutdown(self) -> None:
        """SIGTERM: begin a controlled shutdown.  From now on writes are refused, no election is asked for and
        heartbeats carry ``want_shutdown``; the store is closed cleanly and the process exits once the core says
        it may close (at once when unregistered, on ``should_shutdown``, or after ``SHUTDOWN_WAIT_MS``)."""
        if not self.up or self.shutdown.shutting_down:
            return
        self.shutdown = begin_shutdown(self.shutdown, registered=bool(self.broker_id))
        if self.shutdown.may_close:
            self.timer(0, self._stop_clean)
        else:
            self.timer(SHUTDOWN_WAIT_MS, self._shutdown_wait_over)

    def _on_shutdown_reply(self, h: dict[str, Any]) -> None:
        was = self.shutdown.may_close
        self.shutdown = shutdown_reply(self.shutdown, h)
        if self.shutdown.may_close and not was:
            self.timer(0, self._stop_clean)  # the shutdown task resumes after this reply's handler

    def _shutdown_wait_over(self) -> None:
        if not self.shutdown.may_close:
            self.shutdown = shutdown_timed_out(self.shutdown)
            self._stop_clean()

    def _stop_clean(self) -> None:
        """The clean close (``Broker.stop(clean=True)``): everything appended is made durable first, so the exit
        loses nothing; then the process is gone (its connections close as at a crash).  An append whose fsync is in
        flight finishes (or is rolled back) first, as the real close waits for the store's writer lock."""
        if self.fsync_busy:
            self.after_put.append(self._stop_clean)
            return
        self.store.flush()
        self.crash()
