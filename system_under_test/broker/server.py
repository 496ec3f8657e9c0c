"""The broker's request handlers: the data path (send, pull, offsets) and replication.

The token check and the admin RPCs are the ones every node serves (:mod:`system_under_test.admin_handlers`).

Wire formats (headers are in ``protocol/schemas.py``; bodies are defined here):

* SEND_MESSAGE body: a list of records, each ``[body: bytes, key: str, properties: map str->str]``
  (``key`` and ``properties`` may be omitted).  All records of one request go to the request's
  queue in one append.  Reply header: ``queue_offset`` and ``phys_offset`` of the first record,
  ``count``, ``master_epoch``, ``broker_id``.
* PULL_MESSAGE reply body: the records' commit-log frames back to back (bytes, layout in
  ``store/record.py``); header ``spans`` = ``[[phys_offset, size], ...]``, the runs of adjacent frames
  the body holds, in queue order, plus ``next_offset``, ``min_offset``, ``max_offset``.  The broker
  checks each frame's length and identity against its consume queue; the consumer decodes the frames
  and verifies their CRCs (``decode_pulled``), so the broker does no per-record decoding.  Only records
  below the confirm offset are ever returned (they were dispatched to the consume queue).

SEND_MESSAGE, in order: refuse unless master (NOT_MASTER), unfenced (BROKER_FENCED) and the set is
large enough (IN_SYNC_REPLICAS_NOT_ENOUGH); append; failpoint
``broker.master.after_append_before_replication``; wait for the acks the config asks for
(FLUSH_SLAVE_TIMEOUT on timeout: stored here, replication unknown); reply.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any

from system_under_test import failpoints
from system_under_test.admin_handlers import ADMIN_CODES, handle_admin, unauthorized
from system_under_test.broker.broker_state import BrokerState
from system_under_test.broker.config import FlushMode
from system_under_test.broker.group_commit import GroupCommit
from system_under_test.broker.ha import check_min_in_sync
from system_under_test.broker.roles import Role
from system_under_test.broker.store import (
    MessageStore,
    OffsetError,
    Record,
    StoreError,
    StoreFullError,
    StoreIOError,
    trusted_record,
    trusted_records,
)
from system_under_test.clock import CLOCK
from system_under_test.protocol import Connection, Frame, Kind, Reply, RequestCode, ResponseCode

log = logging.getLogger("splitbrain.broker.server")

FP_AFTER_APPEND = failpoints.declare(
    "broker.master.after_append_before_replication",
    "the master appended a SEND_MESSAGE batch to its log, no slave has it yet (crash = unreplicated tail)",
)

MAX_PULL = 1024
_SAFE_KEY_CHARS = 0xFFFF // 4  # a key this short is within Record's 65535 utf-8 bytes whatever its characters


def decode_send_body(topic: str, queue_id: int, body: Any, born_ms: int) -> list[Record]:
    """Records of a SEND_MESSAGE body.  Raises ValueError naming the bad entry."""
    if not isinstance(body, list) or not body:
        raise ValueError(f"SEND_MESSAGE body must be a non-empty list of [body, key, properties], got {body!r:.80}")
    Record(topic, queue_id, b"", born_timestamp_ms=born_ms)  # validates what every record shares, once
    if all(type(it) is list and len(it) == 3 and type(it[0]) is bytes and type(it[1]) is str
           and len(it[1]) <= _SAFE_KEY_CHARS and type(it[2]) is dict and not it[2] for it in body):
        # what Producer sends: [body, key, {}] -- nothing left to validate per record
        return trusted_records(topic, queue_id, born_ms, [it[0] for it in body], [it[1] for it in body])
    out = []
    for i, item in enumerate(body):
        if isinstance(item, bytes | bytearray):
            item = [item]
        if not isinstance(item, list | tuple) or not 1 <= len(item) <= 3:
            raise ValueError(f"SEND_MESSAGE record {i} must be [body, key?, properties?], got {item!r:.80}")
        payload = item[0]
        key = item[1] if len(item) > 1 else ""
        props = item[2] if len(item) > 2 else {}
        if not isinstance(payload, bytes | bytearray) or not isinstance(key, str) or not isinstance(props, dict):
            raise ValueError(f"SEND_MESSAGE record {i}: body must be bytes, key str, properties map")
        if props or len(key) > _SAFE_KEY_CHARS:  # anything left to validate: the full constructor does it
            out.append(Record(topic, queue_id, bytes(payload), key, props, born_timestamp_ms=born_ms))
        else:
            out.append(trusted_record(topic, queue_id, bytes(payload), key, {}, born_ms, 0, 0))
    return out


class DataPlane:
    """Handles every request a broker serves; state lives in the :class:`~.lifecycle.Broker`."""

    def __init__(self, broker: BrokerState) -> None:
        self.b = broker
        self._commits: tuple[MessageStore, GroupCommit] | None = None

    def _group_commit(self, store: MessageStore) -> GroupCommit:
        """The group committer of ``store`` (a new one when the broker reopened its store)."""
        if self._commits is None or self._commits[0] is not store:
            self._commits = (store, GroupCommit(store.put))
        return self._commits[1]

    def handle(self, frame: Frame, conn: Connection) -> Reply | Awaitable[Reply | None] | None:
        """Answer a request: at once (a Reply or None) when nothing needs waiting for, else an awaitable --
        a SEND_MESSAGE (group commit, SyncStateSet acks) or an offset commit (a file write off the loop).
        Not ``async def``: a coroutine per request cost the connection a task per request, pulls included
        (the rpc module's Handler)."""
        code = frame.code
        refused = unauthorized(frame, self.b.cfg.token)
        if refused is not None:
            return refused
        if code in ADMIN_CODES:  # served before the store is open too
            return handle_admin(frame, self.b.runtime_info, lambda _header: self.b.request_shutdown())
        if self.b.store is None:
            if frame.kind != Kind.REQUEST:
                return None
            if code == RequestCode.GET_BROKER_RUNTIME_INFO:
                return Reply(header=self.b.runtime_info())
            return Reply.error(ResponseCode.NOT_READY, "the broker is still opening its store")
        if code == RequestCode.SEND_MESSAGE:
            return self.send(frame)
        if code == RequestCode.PULL_MESSAGE:
            return self.pull(frame)
        if code == RequestCode.HA_ACK:
            if self.b.ha_master is not None:
                self.b.ha_master.handle_ack(frame, conn)
            return None
        if code == RequestCode.HA_HANDSHAKE:
            assert self.b.ha_master is not None
            return self.b.ha_master.handle_handshake(frame, conn)
        if code == RequestCode.GET_BROKER_RUNTIME_INFO:
            return Reply(header=self.b.runtime_info())
        if code in (RequestCode.GET_MAX_OFFSET, RequestCode.GET_MIN_OFFSET):
            lo, hi = self.b.store.queue_bounds(str(frame.header["topic"]), int(frame.header["queue_id"]))
            return Reply(header={"offset": hi if code == RequestCode.GET_MAX_OFFSET else lo, "min_offset": lo,
                                 "max_offset": hi})
        if code == RequestCode.QUERY_CONSUMER_OFFSET:
            assert self.b.offsets is not None
            h = frame.header
            return Reply(header={"offset": self.b.offsets.get(h["group"], h["topic"], h["queue_id"])})
        if code == RequestCode.UPDATE_CONSUMER_OFFSET:
            return self._commit_offset(frame)
        if frame.kind == Kind.REQUEST:
            return Reply.error(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"a broker does not serve code {code}")
        return None

    async def _commit_offset(self, frame: Frame) -> Reply:
        assert self.b.offsets is not None
        h = frame.header
        try:
            await asyncio.to_thread(self.b.offsets.commit, h["group"], h["topic"], h["queue_id"], h["offset"])
        except ValueError as exc:
            return Reply.error(ResponseCode.MALFORMED_REQUEST, str(exc))
        return Reply()

    def _not_master(self) -> Reply:
        b = self.b
        return Reply.error(ResponseCode.NOT_MASTER, f"broker {b.cfg.broker_name}/{b.broker_id} is {b.role.value}"
                           f"{' (shutting down)' if b.shutting_down else ''}; the master is {b.master_id} at "
                           f"{b.master_addr} (epoch {b.master_epoch})", master_id=b.master_id,
                           master_addr=b.master_addr, master_epoch=b.master_epoch)

    async def send(self, frame: Frame) -> Reply:
        b = self.b
        store, ha = b.store, b.ha_master
        assert store is not None and ha is not None
        if b.role is not Role.MASTER or b.shutting_down or not ha.active:
            return self._not_master()
        if not b.lease_valid():
            return Reply.error(ResponseCode.BROKER_FENCED, f"broker {b.cfg.broker_name}/{b.broker_id} is fenced "
                               f"(no live lease from the controller); retry after refreshing routing")
        refused = check_min_in_sync(ha.in_sync_replicas_nums(), b.cfg.min_in_sync_replicas)
        if refused is not None:
            return Reply.error(refused, f"SyncStateSet {sorted(ha.view.members)} has fewer than "
                               f"{b.cfg.min_in_sync_replicas} members")
        h = frame.header
        try:
            records = decode_send_body(str(h["topic"]), int(h["queue_id"]), frame.body, CLOCK.wall_ms())
        except ValueError as exc:
            return Reply.error(ResponseCode.MALFORMED_REQUEST, str(exc))
        epoch = b.master_epoch
        try:
            if b.cfg.flush is FlushMode.SYNC:
                results = await self._group_commit(store).put(records)
            else:
                results = store.put(records)
        except StoreFullError as exc:
            return Reply.error(ResponseCode.DISK_FULL, str(exc))
        except OffsetError as exc:
            return Reply.error(ResponseCode.MALFORMED_REQUEST, str(exc))
        except (StoreIOError, StoreError) as exc:
            return Reply.error(ResponseCode.STORE_ERROR, str(exc))
        await failpoints.ahit(FP_AFTER_APPEND)
        ha.on_appended()
        last = results[-1]
        if not b.cfg.has_bug("ack-before-replication"):
            err = await ha.wait_replicated(last.phys_offset + last.size)
            if err is not None:
                return Reply.error(err, f"appended at {results[0].phys_offset} in epoch {epoch} but not acknowledged "
                                   f"by the SyncStateSet in time; the outcome is unknown")
        first = results[0]
        return Reply(header={"queue_offset": first.queue_offset, "phys_offset": first.phys_offset,
                             "count": len(results), "master_epoch": epoch, "broker_id": b.broker_id})

    def pull(self, frame: Frame) -> Reply:
        b = self.b
        assert b.store is not None
        h = frame.header
        topic, queue_id, offset = str(h["topic"]), int(h["queue_id"]), int(h["queue_offset"])
        count = max(0, min(int(h["max_count"]), MAX_PULL))
        if not b.lease_valid():
            return Reply.error(ResponseCode.BROKER_FENCED, f"broker {b.cfg.broker_name}/{b.broker_id} is fenced (no "
                               f"live lease); read from another broker of the set")
        lo, hi = b.store.queue_bounds(topic, queue_id)
        if offset < lo or offset > hi:
            return Reply.error(ResponseCode.OFFSET_OUT_OF_RANGE, f"{topic}/{queue_id}: offset {offset} outside "
                               f"[{lo}, {hi}]", min_offset=lo, max_offset=hi)
        try:
            res = b.store.get_raw(topic, queue_id, offset, count)
        except StoreError as exc:
            return Reply.error(ResponseCode.STORE_ERROR, str(exc))
        return Reply(header={"next_offset": res.next_offset, "min_offset": res.min_offset,
                             "max_offset": res.max_offset, "spans": [list(sp) for sp in res.spans],
                             "role": b.role.value, "broker_id": b.broker_id}, body=res.data)
