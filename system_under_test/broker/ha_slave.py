"""The slave side of replication (asyncio shell around :func:`~.ha.on_transfer_header` and the store).

One :class:`HaSlave` follows one master (address and master epoch from the controller).  Each
session, in order:

1. READY: connect to the master's listen address (the same RPC port clients use).
2. HANDSHAKE: send HA_HANDSHAKE (broker id, async learner, max offset, the master epoch we expect).
   A reply from a master of an older epoch is stale: drop and retry.  An empty store (no records)
   forgets its epoch entries and starts at the master's min offset; otherwise the log is cut to
   :func:`~.store.find_consistent_point` -- or, if there is none, replication stops with an
   HA_NO_CONSISTENT_POINT error in the log (an operator must clear the store).
3. TRANSFER: send HA_ACK with our max offset; the master streams HA_TRANSFER one-ways.  For each,
   the core decides: append an epoch entry when the epoch changes, append the bytes
   (:meth:`MessageStore.append_raw`), adopt ``min(header confirm, own max)`` as confirm offset,
   ack.  A batch that does not start at our max offset closes the connection (back to 1).
   The core runs as each batch arrives; the appends run in order in a worker thread (the fsync of
   ``--flush sync`` must not stall the event loop), and batches that arrive meanwhile are appended
   together with one write and one fsync.  The confirm offset is adopted and the ack sent only
   after the append returned -- a slave acks only bytes it has durably appended.
4. No transfer for ``IDLE_TIMEOUT_S`` (the master sends a heartbeat every second): reconnect.

:attr:`HaSlave.master_confirm_offset` is the confirm offset of the last TRANSFER whose bytes are appended
(None until one is): a broker whose store lost durable records leads again only once its log reaches it
(:func:`~.ha.may_lead_again`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from system_under_test import node_events
from system_under_test.broker.config import BrokerConfig
from system_under_test.broker.ha import SlaveLog, TransferError, TransferHeader, on_transfer_header
from system_under_test.broker.ha.transfer import (
    AppendBytes,
    AppendEpoch,
    DropConnection,
    SendAck,
    SetConfirmOffset,
    SlaveAction,
)
from system_under_test.broker.store import EpochEntry, MessageStore, StoreError, explain_consistent_point
from system_under_test.protocol import (
    Connection,
    ConnectionLost,
    Frame,
    Kind,
    Reply,
    RequestCode,
    RequestTimeout,
    ResponseCode,
    RpcError,
    connect,
)

log = logging.getLogger("splitbrain.broker.ha.slave")

IDLE_TIMEOUT_S = 4.0
RETRY_S = 0.3


class NoConsistentPoint(Exception):
    """The slave's and master's epoch entries share no (epoch, start offset): replication stops."""


class HaSlave:
    """Replication client of a slave.  ``start()`` runs sessions until ``stop()``."""

    def __init__(self, store: MessageStore, cfg: BrokerConfig, broker_id: int, master_id: int, master_addr: str,
                 master_epoch: int, now_ms: Callable[[], int]) -> None:
        self.store = store
        self.cfg = cfg
        self.broker_id = broker_id
        self.master_id = master_id
        self.master_addr = master_addr
        self.master_epoch = master_epoch
        self.now_ms = now_ms
        self.state = "READY"
        self.error: str | None = None
        self.local = SlaveLog(store.max_phys_offset, None)
        self.master_confirm_offset: int | None = None  # of the last applied TRANSFER (module docstring)
        self._conn: Connection | None = None
        self._task: asyncio.Task[None] | None = None
        self._last_transfer_ms = 0
        self._stopped = False
        self._backlog: list[tuple[Connection, list[SlaveAction], bytes, int]] = []  # + the header's confirm offset
        self._applier: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        self._stopped = True
        self.state = "SHUTDOWN"
        if self._conn is not None:
            self._conn.close("slave stopping")
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        await self._quiesce()

    async def _quiesce(self) -> None:
        """Drop batches not yet appended and wait until no append runs (a worker thread cannot be
        cancelled): the next handshake, a role change or a close must see the final log."""
        self._backlog.clear()
        applier = self._applier
        if applier is not None and not applier.done():
            with contextlib.suppress(Exception):
                await asyncio.shield(applier)

    async def _run(self) -> None:
        while not self._stopped:
            try:
                await self._session()
            except asyncio.CancelledError:
                raise
            except NoConsistentPoint as exc:
                self.error = f"{ResponseCode.HA_NO_CONSISTENT_POINT.name}: {exc}"
                self.state = "SUSPEND"
                log.error("replication from master %d stopped: %s; clear this store (or CleanBrokerData) to "
                          "copy from scratch", self.master_id, self.error)
                return
            except (ConnectionLost, RequestTimeout, RpcError, TransferError, StoreError, OSError) as exc:
                self.error = str(exc)
                log.warning("replication session with master %d at %s ended: %s", self.master_id,
                            self.master_addr, exc)
            except Exception:
                log.exception("replication session with master %d failed", self.master_id)
            if self._stopped:
                # stop() closes the connection and cancels this task, but the close can end the session
                # first and asyncio.wait_for may then swallow the cancellation (CPython 3.11): without this
                # check every stop waited out RETRY_S, and with it every failover (bench/failover.py: a
                # 300-ms StopHaClient on both the new master and the other slave)
                return
            self.state = "READY"
            await asyncio.sleep(RETRY_S)

    async def _session(self) -> None:
        self.state = "READY"
        conn = await connect(self.master_addr, self._on_frame, timeout_s=2.0)
        self._conn = conn
        try:
            self.state = "HANDSHAKE"
            resp = await conn.request(RequestCode.HA_HANDSHAKE, {
                "token": self.cfg.token, "broker_id": self.broker_id, "async_learner": self.cfg.async_learner,
                "sync_from_last_file": False, "max_offset": self.store.max_phys_offset,
                "master_epoch": self.master_epoch}, timeout_s=5.0)
            h = resp.header
            if int(h["master_epoch"]) < self.master_epoch:
                raise TransferError(f"{self.master_addr} answered as master of epoch {h['master_epoch']}, older than "
                                    f"the expected {self.master_epoch}")
            self.master_confirm_offset = None  # until this session's first transfer is appended
            self._truncate(resp.body or [], int(h["max_offset"]), int(h["min_offset"]))
            last = self.store.epochs.last_entry
            self.local = SlaveLog(self.store.max_phys_offset, last.epoch if last is not None else None,
                                  self.store.confirm_offset)
            self.state = "TRANSFER"
            self._last_transfer_ms = self.now_ms()
            conn.send_oneway(RequestCode.HA_ACK, {"max_offset": self.store.max_phys_offset,
                                                  "broker_id": self.broker_id})
            while not conn.closed:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(conn.wait_closed(), 1.0)
                if self.now_ms() - self._last_transfer_ms > IDLE_TIMEOUT_S * 1000:
                    conn.close(f"no transfer from the master for {IDLE_TIMEOUT_S}s")
            raise ConnectionLost(f"connection to master closed: {conn.close_reason}")
        finally:
            conn.close("session over")
            self._conn = None
            await self._quiesce()

    def _truncate(self, raw_entries: list[list[int]], master_max: int, master_min: int) -> None:
        store = self.store
        if store.max_phys_offset == store.min_phys_offset:
            if store.epochs.entries:
                store.truncate(store.min_phys_offset)  # forget epochs that wrote nothing here
            if master_min > store.max_phys_offset:
                store.reset_start(master_min)
                log.info("empty store starts at the master's min offset %d", master_min)
            return
        master_entries = [EpochEntry(int(e), int(s)) for e, s in raw_entries]
        point = explain_consistent_point(store.epochs.entries, store.max_phys_offset, master_entries, master_max)
        if point.offset < 0:
            raise NoConsistentPoint(point.reason)
        if point.offset < store.max_phys_offset:
            log.warning("truncating the log from %d to the consistent point %d (%s)", store.max_phys_offset,
                        point.offset, point.reason)
            node_events.record("truncate", **{"from": store.max_phys_offset, "to": point.offset})
            store.truncate(point.offset)
        else:
            log.info("consistent point %d = our max offset (%s)", point.offset, point.reason)

    def _on_frame(self, frame: Frame, conn: Connection) -> Reply | None:
        """Answers at once (no task per frame): a transfer only runs the core and queues its actions."""
        if frame.code != RequestCode.HA_TRANSFER:
            if frame.kind == Kind.REQUEST:
                return Reply.error(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "a replication client serves nothing")
            return None
        try:
            self._apply_transfer(frame, conn)
        except (TransferError, StoreError, OSError, ValueError) as exc:
            log.error("cannot apply transfer at %s: %s", frame.header.get("offset"), exc)
            conn.close(f"transfer apply failed: {exc}")
        return None

    def _apply_transfer(self, frame: Frame, conn: Connection) -> None:
        """Run the core on one TRANSFER header now; queue its actions for :meth:`_apply_backlog`."""
        h = frame.header
        body = frame.body if isinstance(frame.body, bytes | bytearray) else b""
        header = TransferHeader(int(h["offset"]), int(h["epoch"]), int(h["epoch_start_offset"]),
                                int(h["confirm_offset"]), len(body))
        local, actions = on_transfer_header(self.local, header)
        for action in actions:
            if isinstance(action, DropConnection):
                log.warning("dropping the replication connection: %s", action.reason)
                conn.close(action.reason)
                return
        self.local = local  # the state once the queued actions are carried out (they run in order)
        self._last_transfer_ms = self.now_ms()
        self._backlog.append((conn, actions, bytes(body), header.confirm_offset))
        if self._applier is None or self._applier.done():
            self._applier = asyncio.get_running_loop().create_task(self._apply_backlog())

    async def _apply_backlog(self) -> None:
        """Carry out queued actions in order: epoch entries on the loop, bytes in a worker thread
        (adjacent batches merged into one append); then adopt the confirm offset and ack."""
        store = self.store
        while self._backlog:
            batch, self._backlog = self._backlog, []
            conn = batch[-1][0]
            if any(c is not conn for c, _, _, _ in batch) or conn.closed:
                return  # a session ended; the next handshake starts from the store's max offset
            confirm = ack = None
            pending: list[bytes] = []
            pending_at = 0
            try:
                for _, actions, body, _ in batch:
                    for action in actions:
                        if isinstance(action, AppendBytes):
                            if pending and pending_at + sum(map(len, pending)) != action.offset:
                                await self._append(pending_at, pending)
                                pending = []
                            if not pending:
                                pending_at = action.offset
                            pending.append(body)
                        elif isinstance(action, AppendEpoch):
                            if pending:
                                await self._append(pending_at, pending)
                                pending = []
                            store.epochs.start_epoch(action.epoch, action.start_offset)
                        elif isinstance(action, SetConfirmOffset):
                            confirm = action.confirm_offset
                        elif isinstance(action, SendAck):
                            ack = action.max_offset
                if pending:
                    await self._append(pending_at, pending)
                # never withdraw what consumers may have read
                if confirm is not None and confirm > store.confirm_offset:
                    store.set_confirm_offset(confirm)
                self.master_confirm_offset = batch[-1][3]
            except Exception as exc:  # whatever it is, the session must end rather than stall
                if isinstance(exc, TransferError | StoreError | OSError | ValueError):
                    log.error("cannot apply transfer at %s: %s", pending_at, exc)
                else:
                    log.exception("applying transfer at %s failed", pending_at)
                self._backlog.clear()
                conn.close(f"transfer apply failed: {exc}")
                return
            if ack is not None and not conn.closed:
                conn.send_oneway(RequestCode.HA_ACK, {"max_offset": ack, "broker_id": self.broker_id})

    async def _append(self, offset: int, bodies: list[bytes]) -> None:
        data = bodies[0] if len(bodies) == 1 else b"".join(bodies)
        await asyncio.to_thread(self.store.append_raw, offset, data)

    def describe(self) -> dict[str, object]:
        return {"master_id": self.master_id, "master_addr": self.master_addr, "master_epoch": self.master_epoch,
                "state": self.state, "error": self.error}
