"""The broker process's life cycle: store, registration, heartbeats, fencing, role changes, shutdown.

:class:`Broker` is the shell that ties the pure cores together.  Its duties, in order:

1. Listen on ``cfg.listen`` (requests are answered from the start; SEND_MESSAGE gets BROKER_FENCED
   until the controller unfences us).
2. Learn the cluster id from any controller (CONTROLLER_GET_METADATA_INFO) and open the store with it
   (a store of another cluster refuses to open).
3. Register (:func:`~.registration.register_broker`): persistent broker id, a random incarnation id
   per process, broker epoch from the reply.  DUPLICATE_BROKER_REGISTRATION (our previous process
   still holds a lease) is waited out for ``retry_after_ms``; no reachable controller is retried.
4. Heartbeat every controller every ``heartbeat_interval_ms`` with (broker epoch, last epoch in the
   epoch file, max offset, confirm offset, priority, lease).  The leader's reply says whether we are
   fenced; STALE_BROKER_EPOCH / unknown broker -> register again.  A watchdog fences us when no
   heartbeat was acknowledged for ``lease_timeout_ms`` (counted from when it was sent; the rules are
   :mod:`.lease`'s).
5. Follow the controller's view of the set: poll GetReplicaInfo every ``replica_info_interval_ms``
   and act on NOTIFY_BROKER_ROLE_CHANGED pushes (a push for another broker epoch is rejected,
   KIP-380).  :func:`~.ha.decide_role_change` says what to do: a master is adopted only with a
   higher master epoch; a set without a master (NO_MASTER) makes us ask CONTROLLER_ELECT_MASTER for
   ourselves.  :mod:`.role_change` then runs the steps of :func:`~.ha.change_to_master_steps` or
   :func:`~.ha.change_to_slave_steps`.
6. On SIGTERM (controlled shutdown, KIP-631): refuse writes, heartbeat with ``want_shutdown`` until
   the reply says ``should_shutdown`` (mastership moved away), then close the store cleanly.  When it may
   close is the pure core :mod:`.shutdown` (the simulated broker runs it too).

A store that lost durable records (``MessageStore.durable_loss``: its recovery found the commit log
shorter than what it had fsynced) keeps the broker out of mastership (``broker/ha/role.py``): heartbeats
carry ``want_fence`` so the controller keeps it fenced and unelectable, and a role decision that would
adopt mastership or ask for an election is REFUSE_TO_LEAD.  It follows other masters as a slave; once its
log reaches its master's confirm offset (:func:`~.ha.may_lead_again`) the loss is cleared and the next
heartbeat lets the controller unfence it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from pathlib import Path
from typing import Any

from system_under_test import node_events
from system_under_test.broker.config import BrokerConfig, FlushMode
from system_under_test.broker.consumer_offsets import ConsumerOffsets
from system_under_test.broker.ha import RoleDecisionKind, decide_role_change, may_lead_again
from system_under_test.broker.ha_master import HaMaster
from system_under_test.broker.ha_slave import HaSlave
from system_under_test.broker.lease import check_lease, renewed_at
from system_under_test.broker.registration import (
    RESTART_ERRORS,
    RegistrationConfig,
    RegistrationError,
    register_broker,
)
from system_under_test.broker.role_change import SyncStateSet, become_master, become_slave
from system_under_test.broker.roles import Role
from system_under_test.broker.server import DataPlane
from system_under_test.broker.shutdown import (
    SHUTDOWN_WAIT_MS,
    Shutdown,
    begin_shutdown,
    shutdown_reply,
    shutdown_timed_out,
)
from system_under_test.broker.store import FlushPolicy, MessageStore, StoreConfig
from system_under_test.client.controller_client import ControllerClient, NoControllerAvailable
from system_under_test.clock import CLOCK, make_rng
from system_under_test.protocol import (
    Connection,
    Frame,
    Reply,
    RequestCode,
    ResponseCode,
    RpcError,
    RpcServer,
    split_addr,
)

log = logging.getLogger("splitbrain.broker")


class Broker:
    """One broker process.  ``await start()``, later ``await shutdown()``; ``wait_stopped()`` in between."""

    def __init__(self, cfg: BrokerConfig, *, seed: int | None = None) -> None:
        self.cfg = cfg
        self.rng = make_rng(seed)
        # Never from the seeded RNG: a replayed seed (SPLITBRAIN_SEED) must still give every process start its
        # own incarnation, or the controller would take a restart for the same process (KIP-631).
        self.incarnation_id = secrets.token_hex(8)
        self.controller = ControllerClient(list(cfg.controllers), token=cfg.token, timeout_s=1.0,
                                           handler=self._on_controller_frame)
        self.data = DataPlane(self)
        self.server = RpcServer(self.data.handle, name=f"broker {cfg.broker_name}@{cfg.listen}")
        self.store: MessageStore | None = None
        self.offsets: ConsumerOffsets | None = None
        self.ha_master: HaMaster | None = None
        self.ha_slave: HaSlave | None = None
        self.cluster_id: str | None = None
        self.role = Role.NONE
        self.broker_id = 0
        self.routing_broker_id = 0
        self.broker_epoch = -1
        self.master_epoch = 0
        self.master_id: int | None = None
        self.master_addr: str | None = None
        self.fenced = True
        self.last_renew_ms = 0
        self._shutdown = Shutdown()
        self._shutdown_ok = asyncio.Event()
        self._stopped = asyncio.Event()
        self._closed = asyncio.Event()
        self._shutdown_task: asyncio.Task[None] | None = None
        self._poll_now = asyncio.Event()
        self._role_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._hb_inflight: set[str] = set()
        self._last_lease_check_ms = 0
        self._registering = False
        self._refused_lead_epoch: int | None = None  # last master epoch a REFUSE_TO_LEAD was logged for

    # -- start ---------------------------------------------------------------------------------
    async def start(self) -> None:
        host, port = split_addr(self.cfg.listen)
        await self.server.start(host, port)
        log.info("listening on %s: %s", self.cfg.listen, self.cfg.describe())
        self.cluster_id = await self._cluster_id()
        store_cfg = StoreConfig(
            segment_bytes=self.cfg.segment_bytes,
            flush_policy=FlushPolicy.SYNC if self.cfg.flush is FlushMode.SYNC else FlushPolicy.ASYNC,
            flush_interval_ms=self.cfg.flush_interval_ms,
            max_message_bytes=min(4 * 1024 * 1024, self.cfg.segment_bytes),
        )
        Path(self.cfg.store_dir).mkdir(parents=True, exist_ok=True)
        self.store = await asyncio.to_thread(MessageStore.open, self.cfg.store_dir, store_cfg, self.cluster_id)
        if self.store.durable_loss is not None:
            log.warning("%s: staying fenced, and out of mastership, until replication from another master "
                        "refills the log", self.store.durable_loss.describe())
        self.offsets = ConsumerOffsets(self.cfg.store_dir)
        self.ha_master = HaMaster(self.store, self.cfg, self._alter_sync_state_set, CLOCK.monotonic_ms,
                                  self._poll_now.set)
        await self._register()
        self._spawn(self._heartbeat_loop())
        self._spawn(self._poll_loop())
        self._spawn(self._lease_watchdog())

    async def _cluster_id(self) -> str:
        deadline = CLOCK.monotonic() + 120
        last = "no answer"
        while CLOCK.monotonic() < deadline:
            for addr in self.cfg.controllers:
                try:
                    md = await self.controller.get_metadata(addr)
                except Exception as exc:
                    last = f"{addr}: {exc}"
                    continue
                cid = md.get("cluster_id")
                if isinstance(cid, str) and cid:
                    return cid
                last = f"{addr}: quorum still forming (no cluster id)"
            await asyncio.sleep(0.3)
        raise RegistrationError(f"no controller told us the cluster id within 120s ({last})")

    async def _register(self) -> None:
        assert self.store is not None
        if self._registering:
            return
        self._registering = True
        try:
            await self._register_once()
        finally:
            self._registering = False

    async def _register_once(self) -> None:
        rcfg = RegistrationConfig(cluster=self.cfg.cluster_name, broker_name=self.cfg.broker_name,
                                  broker_addr=self.cfg.listen, incarnation_id=self.incarnation_id,
                                  cluster_id=self.cluster_id, bug_non_atomic_meta=self.cfg.has_bug("non-atomic-meta"))
        for attempt in range(10_000):  # bounded: each round sleeps >= 100 ms
            try:
                outcome = await register_broker(self.controller, Path(self.cfg.store_dir), rcfg, rng=self.rng,
                                                now_ms=CLOCK.wall_ms)
                break
            except (*RESTART_ERRORS, NoControllerAvailable) as exc:
                # no controller reachable, or a failpoint's simulated crash: "restart" the driver
                log.warning("registration attempt %d failed: %s; retrying", attempt + 1, exc)
                await asyncio.sleep(0.5)
            except RegistrationError as exc:
                cause = exc.__cause__
                if not (isinstance(cause, RpcError) and cause.code == ResponseCode.DUPLICATE_BROKER_REGISTRATION):
                    raise  # refused definitively, torn meta file, names differ: never invent a new id
                wait_ms = int(cause.header.get("retry_after_ms") or 0) + 100 + self.rng.randrange(200)
                log.info("our previous incarnation still holds the lease; registering again in %d ms", wait_ms)
                await asyncio.sleep(wait_ms / 1000)
        else:
            raise RegistrationError("registration did not succeed after 10000 attempts")
        self.broker_id = outcome.broker_id
        self.broker_epoch = outcome.broker_epoch if outcome.broker_epoch is not None else 0
        self.fenced = bool(outcome.reply.get("fenced", True))
        if self.role is not Role.MASTER:
            self.routing_broker_id = self.broker_id
        node_events.record("registered", broker_name=self.cfg.broker_name, broker_id=self.broker_id,
                           broker_epoch=self.broker_epoch, fenced=self.fenced)
        log.info("registered: broker %s/%d epoch %d incarnation %s fenced=%s master=%s@%s", self.cfg.broker_name,
                 self.broker_id, self.broker_epoch, self.incarnation_id, self.fenced, outcome.master_id,
                 outcome.master_epoch)
        self._spawn(self._on_replica_info(dict(outcome.reply), "register"))

    # -- heartbeats and lease ------------------------------------------------------------------
    def heartbeat_header(self) -> dict[str, Any]:
        """The BROKER_HEARTBEAT header.  A store that lost durable records asks to stay fenced and, under
        ``--flush sync``, tells how far its log had been durable and in which epoch: the controller may then elect
        a replica whose log reaches that far in that epoch (``controller/elect_policy.py``,
        ``elect_complete_replica``).  Under ``--flush async`` an acknowledged record may lie above the durable
        offset, so the offset bounds nothing and is not sent."""
        assert self.store is not None
        loss = self.store.durable_loss if self.cfg.flush is FlushMode.SYNC else None
        return {
            "cluster_name": self.cfg.cluster_name, "broker_name": self.cfg.broker_name, "broker_id": self.broker_id,
            "broker_addr": self.cfg.listen, "broker_epoch": self.broker_epoch,
            "master_epoch": self.store.epochs.last_epoch, "max_offset": self.store.max_phys_offset,
            "confirm_offset": self.store.confirm_offset, "election_priority": self.cfg.election_priority,
            "heartbeat_timeout_ms": self.cfg.lease_timeout_ms, "want_shutdown": self.shutting_down,
            "want_fence": self.store.durable_loss is not None,
            "lost_durable_offset": None if loss is None else loss.durable_offset,
            "lost_durable_epoch": None if loss is None else loss.epoch,
        }

    async def _clear_durable_loss_if_refilled(self) -> None:
        """A store that lost durable records is made good once our log reaches the confirm offset of the
        master we follow (:func:`~.ha.may_lead_again`): forget the loss; the next heartbeat unfences us."""
        store, slave = self.store, self.ha_slave
        if store is None or store.durable_loss is None or slave is None:
            return
        if may_lead_again(slave.master_confirm_offset, store.max_phys_offset):
            await asyncio.to_thread(store.clear_durable_loss)
            log.warning("log refilled to %d from master %d (its confirm offset %s): the durable loss is made good; "
                        "asking to be unfenced", store.max_phys_offset, slave.master_id, slave.master_confirm_offset)

    async def heartbeat_once(self) -> None:
        """One heartbeat to every controller; each reply is handled as soon as it arrives (a blackholed
        controller must not delay the leader's renewal).  A controller whose previous heartbeat is still
        pending is skipped this round."""
        await self._clear_durable_loss_if_refilled()
        sent = CLOCK.monotonic_ms()
        header = self.heartbeat_header()
        timeout_s = max(0.2, self.cfg.heartbeat_interval_ms * 2 / 1000)

        async def one(addr: str) -> None:
            try:
                res = await self.controller.call_one(addr, RequestCode.BROKER_HEARTBEAT, header, timeout_s=timeout_s,
                                                     check=False)
                await self._on_heartbeat_result(res, sent)
            except Exception as exc:
                log.debug("heartbeat to %s failed: %s", addr, exc)
            finally:
                self._hb_inflight.discard(addr)

        tasks = []
        for addr in list(self.controller.addrs):
            if addr not in self._hb_inflight:
                self._hb_inflight.add(addr)
                tasks.append(asyncio.get_running_loop().create_task(one(addr)))
                self._tasks.add(tasks[-1])
                tasks[-1].add_done_callback(self._tasks.discard)
        if tasks:
            await asyncio.wait(tasks, timeout=self.cfg.heartbeat_interval_ms / 1000)

    async def _on_heartbeat_result(self, res: Frame, sent_ms: int) -> None:
        stale = False
        if res.code == ResponseCode.SUCCESS:
            epoch = res.header.get("broker_epoch")
            if epoch == self.broker_epoch:
                self._on_heartbeat_reply(res.header, sent_ms)
                return
            # a reply for an older epoch is a late answer from before our last registration: ignore it; a newer
            # one means the controller holds a registration we never saw: register again to learn it
            stale = type(epoch) is int and epoch > self.broker_epoch
            if not stale:
                return
        if (stale or res.code in (ResponseCode.STALE_BROKER_EPOCH, ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                                  ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST)) and not self._registering:
            log.warning("heartbeat refused or for another broker epoch (%s: %s, epoch %s, ours %d); registering again",
                        ResponseCode(res.code).name, res.header.get("message"), res.header.get("broker_epoch"),
                        self.broker_epoch)
            self.fenced = True
            try:
                await self._register()
            except RegistrationError as exc:
                log.error("re-registration refused: %s; staying fenced", exc)

    def _on_heartbeat_reply(self, h: dict[str, Any], sent_ms: int) -> None:
        renewed = renewed_at(self.last_renew_ms, sent_ms, CLOCK.monotonic_ms())
        if renewed is None:
            return  # sent before the clock went back: it proves nothing about the lease now
        self.last_renew_ms = renewed
        fenced = bool(h.get("fenced"))
        if fenced != self.fenced:
            log.info("controller says fenced=%s (broker epoch %d)", fenced, self.broker_epoch)
            node_events.record("fenced" if fenced else "unfenced", broker_epoch=self.broker_epoch, via="controller")
        self.fenced = fenced
        self._shutdown = shutdown_reply(self._shutdown, h)
        if self._shutdown.may_close:
            self._shutdown_ok.set()
        epoch = h.get("master_epoch")
        if type(epoch) is int and epoch > self.master_epoch and self.role is Role.MASTER and self.ha_master:
            # A newer master epoch exists: stop taking writes *now*, before this reply's unfencing can let a
            # deposed master acknowledge anything; the poll below settles the new role.
            self.ha_master.deactivate(f"controller reports master epoch {epoch} > ours {self.master_epoch}")
        if (type(epoch) is int and epoch > self.master_epoch) or h.get("master_id") is None:
            self._poll_now.set()

    async def _heartbeat_loop(self) -> None:
        interval = self.cfg.heartbeat_interval_ms / 1000
        while not self._stopped.is_set():
            start = CLOCK.monotonic()
            try:
                await self.heartbeat_once()
            except Exception:
                log.exception("heartbeat round failed")
            await asyncio.sleep(max(0.01, interval - (CLOCK.monotonic() - start)))

    def lease_valid(self) -> bool:
        """Unfenced and the lease renewed within ``lease_timeout_ms``; fences the broker if it expired.

        Checked inline on every client request as well as by the watchdog: after a pause (SIGSTOP, GC)
        queued requests are handled before any timer runs, so the watchdog alone would be too late.
        """
        now = CLOCK.monotonic_ms()
        check = check_lease(self.fenced, self.last_renew_ms, self._last_lease_check_ms, now, self.cfg.lease_timeout_ms)
        if check.fenced_because == "clock-went-back":
            log.warning("clock went back %d ms: fencing myself until the next heartbeat",
                        self._last_lease_check_ms - now)
        elif check.fenced_because == "lease-expired":
            log.warning("no heartbeat acknowledged for %d ms: fencing myself (broker epoch %d)",
                        now - check.last_renew_ms, self.broker_epoch)
        if check.fenced_because is not None:
            node_events.record("fenced", broker_epoch=self.broker_epoch, via=check.fenced_because)
        self.fenced, self.last_renew_ms, self._last_lease_check_ms = check.fenced, check.last_renew_ms, now
        if check.fenced_because == "lease-expired" and self.ha_master is not None and self.ha_master.active:
            failed = self.ha_master.fail_waiting_puts()
            if failed:
                log.info("lease expired: %d put(s) waiting for acks answered FLUSH_SLAVE_TIMEOUT", failed)
        return not self.fenced

    async def _lease_watchdog(self) -> None:
        while not self._stopped.is_set():
            await asyncio.sleep(0.05)
            self.lease_valid()

    # -- role changes --------------------------------------------------------------------------
    async def _poll_loop(self) -> None:
        interval = self.cfg.replica_info_interval_ms / 1000
        while not self._stopped.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._poll_now.wait(), interval)
            self._poll_now.clear()
            try:
                info = await self.controller.get_replica_info(self.cfg.broker_name)
            except Exception as exc:
                log.debug("GetReplicaInfo failed: %s", exc)
                continue
            await self._on_replica_info(info, "poll")

    async def _on_controller_frame(self, frame: Frame, conn: Connection) -> Reply | None:
        """A frame a controller sent us (the connection drops the reply to a one-way push)."""
        if frame.code != RequestCode.NOTIFY_BROKER_ROLE_CHANGED:
            return Reply.error(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "brokers accept only role-change pushes")
        epoch = frame.header.get("broker_epoch")
        if epoch is not None and epoch != self.broker_epoch:
            log.warning("%s: ignoring a role-change push for broker epoch %s (ours is %d)",
                        ResponseCode.STALE_BROKER_EPOCH.name, epoch, self.broker_epoch)
            return Reply.error(ResponseCode.STALE_BROKER_EPOCH,
                               f"broker epoch {epoch} is not ours ({self.broker_epoch})")
        self._spawn(self._on_replica_info(dict(frame.header), "notify"))
        return Reply()

    async def _on_replica_info(self, info: dict[str, Any], source: str) -> None:
        async with self._role_lock:
            for _ in range(2):  # at most: ask for an election, then act on its result
                nxt = await self._apply_replica_info(info, source)
                if nxt is None:
                    return
                info, source = nxt, "elect"

    async def _apply_replica_info(self, info: dict[str, Any], source: str) -> dict[str, Any] | None:
        """Act on one replica info (register reply, poll, push or election reply); returns an election
        reply to act on next, if we asked for one."""
        if self.broker_id == 0 or self._stopped.is_set():
            return None
        master_id, master_epoch = info.get("master_id"), info.get("master_epoch")
        if type(master_epoch) is not int:
            return None
        if master_epoch > self.master_epoch and self.role is Role.MASTER and self.ha_master is not None:
            self.ha_master.deactivate(f"controller ({source}) has master epoch {master_epoch} > {self.master_epoch}")
        sync_set = SyncStateSet(frozenset(int(i) for i in info.get("sync_state_set") or []),
                                int(info.get("sync_state_set_epoch") or 0))
        lost = self.store is not None and self.store.durable_loss is not None
        decision = decide_role_change(self.master_epoch, master_epoch, None if master_id is None else int(master_id),
                                      self.broker_id, lost_durable_records=lost)
        if decision.kind is RoleDecisionKind.REFUSE_TO_LEAD:
            if self._refused_lead_epoch != master_epoch:
                self._refused_lead_epoch = master_epoch
                log.warning("not leading (via %s): %s", source, decision.reason)
            return None
        if decision.kind is RoleDecisionKind.NO_MASTER:
            return await self._ask_to_be_elected(master_epoch, source)
        if decision.kind is RoleDecisionKind.BECOME_MASTER:
            if "sync_state_set" not in info:
                self._poll_now.set()  # need the set: fetch full replica info
                return None
            await become_master(self, master_epoch, sync_set, source)
        elif decision.kind is RoleDecisionKind.BECOME_SLAVE:
            addr = info.get("master_addr")
            if isinstance(addr, str) and addr and decision.master_id is not None:
                await become_slave(self, decision.master_id, addr, master_epoch, source)
        elif self.role is Role.MASTER and master_epoch == self.master_epoch and "sync_state_set" in info:
            assert self.ha_master is not None
            self.ha_master.adopt_controller_set(sync_set.members, sync_set.set_epoch)
        return None

    async def _ask_to_be_elected(self, master_epoch: int, source: str) -> dict[str, Any] | None:
        """ElectMaster by broker trigger for a set without a master (not while fenced, shutting down or a
        learner); returns the reply's replica info to act on, if any."""
        if self.fenced or self.shutting_down or self.cfg.async_learner:
            return None
        log.info("broker set %s has no master (epoch %d, via %s): asking to be elected", self.cfg.broker_name,
                 master_epoch, source)
        try:
            resp = await self.controller.call(RequestCode.CONTROLLER_ELECT_MASTER, {
                "cluster_name": self.cfg.cluster_name, "broker_name": self.cfg.broker_name,
                "broker_id": self.broker_id, "designate": False, "broker_epoch": self.broker_epoch})
            return dict(resp.header)
        except RpcError as exc:
            log.info("election not won: %s", exc)
            return dict(exc.header) if exc.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST else None
        except Exception as exc:
            log.info("election request failed: %s", exc)
            return None

    async def _alter_sync_state_set(self, members: frozenset[int], set_epoch: int) -> tuple[frozenset[int], int]:
        resp = await self.controller.call(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, {
            "cluster_name": self.cfg.cluster_name, "broker_name": self.cfg.broker_name, "master_id": self.broker_id,
            "master_epoch": self.master_epoch, "sync_state_set": sorted(members), "sync_state_set_epoch": set_epoch,
            "broker_epoch": self.broker_epoch})
        body = resp.body if isinstance(resp.body, dict) else {}
        return frozenset(body.get("sync_state_set", members)), int(resp.header["new_sync_state_set_epoch"])

    # -- introspection -------------------------------------------------------------------------
    def runtime_info(self) -> dict[str, Any]:
        store = self.store
        info: dict[str, Any] = {
            "cluster_name": self.cfg.cluster_name, "broker_name": self.cfg.broker_name, "listen": self.cfg.listen,
            "role": self.role.value, "broker_id": self.broker_id, "routing_broker_id": self.routing_broker_id,
            "broker_epoch": self.broker_epoch, "master_epoch": self.master_epoch, "master_id": self.master_id,
            "master_addr": self.master_addr, "fenced": self.fenced, "shutting_down": self.shutting_down,
            "incarnation_id": self.incarnation_id, "cluster_id": self.cluster_id,
        }
        if store is not None:
            info.update({"max_offset": store.max_phys_offset, "min_offset": store.min_phys_offset,
                         "confirm_offset": store.confirm_offset, "synced_offset": store.synced_offset,
                         "durable_loss": None if store.durable_loss is None else store.durable_loss.describe(),
                         "disk": store.fsync_stats(),
                         "epochs": [[e.epoch, e.start_offset] for e in store.epochs.entries]})
        ha = self.ha_master
        if self.role is Role.MASTER and ha is not None:
            info.update(ha.describe())
        else:
            info.update({"sync_state_set": None, "sync_state_set_epoch": None})
        if self.ha_slave is not None:
            info["replication"] = self.ha_slave.describe()
        return info

    # -- shutdown ------------------------------------------------------------------------------
    @property
    def shutting_down(self) -> bool:
        """A controlled shutdown has begun (:mod:`.shutdown`): writes refused, no election asked for."""
        return self._shutdown.shutting_down

    def request_shutdown(self) -> None:
        """ADMIN_SHUTDOWN: start a controlled shutdown in the background (same as SIGTERM)."""
        if not self.shutting_down and self._shutdown_task is None:
            self._shutdown_task = asyncio.get_running_loop().create_task(self.shutdown())

    async def shutdown(self) -> None:
        """Controlled shutdown (KIP-631), then a clean close of the store."""
        if self.shutting_down:
            return
        self._shutdown = begin_shutdown(self._shutdown, registered=bool(self.broker_id))
        log.info("controlled shutdown: asking the controller to move mastership away")
        if not self._shutdown.may_close:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._shutdown_ok.wait(), SHUTDOWN_WAIT_MS / 1000)
            if not self._shutdown.may_close:
                self._shutdown = shutdown_timed_out(self._shutdown)
                log.warning("controlled shutdown: %s", self._shutdown.reason)
        await self.stop(clean=True)

    async def stop(self, *, clean: bool) -> None:
        """Stop every task and close the store (``clean``: checkpoint + clean marker).  Idempotent."""
        if self._stopped.is_set():
            await self._closed.wait()
            return
        self._stopped.set()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        if self.ha_slave is not None:
            await self.ha_slave.stop()
        if self.ha_master is not None:
            await self.ha_master.close()
        await self.server.stop()
        await self.controller.close()
        if self.store is not None:
            await asyncio.to_thread(self.store.close, clean)
        log.info("broker %s/%d stopped (clean=%s)", self.cfg.broker_name, self.broker_id, clean)
        self._closed.set()

    async def wait_stopped(self) -> None:
        """Return once :meth:`stop` has finished (the store is closed)."""
        await self._closed.wait()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
