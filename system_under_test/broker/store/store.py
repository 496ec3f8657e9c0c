"""MessageStore: the broker's store façade (commit log + consume queues + epoch file + checkpoint
+ signatures), the only store object the broker and the HA code use.

Layout of a store directory::

    cluster.sig              initial signature (cluster id), written at creation, never changed
    clean.sig                final signature, present only between an orderly close and the next open
    checkpoint               flushed offset, dispatched offset, confirm offset
    epochFileCheckpoint(.bak) master epochs and their start offsets
    commitlog/<20 digits>    record frames
    consumequeue/<topic>/<queue id>   20-byte index entries

Open (:meth:`MessageStore.open`) does, in order:

1. check/write the initial signature (another cluster id -> :class:`InconsistentClusterId`);
2. read and remove the clean marker: present -> CLEAN, else DIRTY (or EMPTY for a new store);
3. recover the commit log: CRCs are re-verified from the checkpoint's flushed offset on a clean
   open, from the log start on a dirty one; a torn tail is cut, damage in the middle raises
   :class:`StoreCorruption`; a log that ends below what was durable (the checkpoint's flushed
   offset or the synced offset published before the restart) has lost durable records, which is
   recorded durably and reported by :attr:`MessageStore.durable_loss` until
   :meth:`MessageStore.clear_durable_loss` (the broker then must not lead: ``broker/ha/role.py``);
4. drop epoch entries that start beyond the recovered end;
5. clamp the checkpoint's confirm offset to ``[min offset, recovered end]`` (``recovery.py``);
6. re-derive every consume queue from the commit log up to the confirm offset (rebuilding missing
   or short files, truncating long ones) and the next queue offset of every queue from the whole log.

Visibility rule (RIP-44 confirmOffset): a record is dispatched to its consume queue -- and so
visible to :meth:`get` -- only once its end is <= the confirm offset.  The master raises the
confirm offset as its sync-state set acknowledges; a slave takes ``min(master's, own max)``.

Thread-safe, with two locks so that readers never wait for a disk flush: ``_write_lock``
serialises everything that changes the files (put, append_raw, truncate, reset_start, flush,
close); ``_lock`` guards the in-memory state and is held only briefly -- not across an fsync.  A put
under SYNC writes and publishes its records under ``_lock``, then fsyncs holding ``_write_lock``
alone, and undoes everything if the fsync fails.  Until then its bytes are above
:attr:`stable_offset`: the master neither replicates nor confirms them, so nobody can see a record
that is then undone.  Lock order: ``_write_lock``, ``_lock``, then the commit log's locks.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import threading
import uuid
from collections.abc import Sequence

from system_under_test.broker.store import durability
from system_under_test.broker.store.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from system_under_test.broker.store.commitlog import CommitLog, RecoveryReport
from system_under_test.broker.store.config import FlushPolicy, StoreConfig
from system_under_test.broker.store.consume_queue import ConsumeQueues
from system_under_test.broker.store.epoch_file import EPOCH_FILE_NAME, EpochFileCache
from system_under_test.broker.store.errors import OffsetError, StoreClosed, StoreCorruption, StoreError
from system_under_test.broker.store.record import (
    FRAME_HEAD,
    HEADER_BYTES,
    MAGIC,
    Decoded,
    DecodeStop,
    Record,
    check_identity,
    decode_at,
    encode_stamped,
    frame_facts,
    frame_header,
    tag_hash,
)
from system_under_test.broker.store.recovery import DurableLoss, recovered_confirm_offset
from system_under_test.broker.store.results import GetResult, PutResult, QueueItem, RawGetResult
from system_under_test.broker.store.signature import (
    FinalSignature,
    StoreState,
    bind_cluster,
    has_data,
    take_clean,
    write_clean,
)
from system_under_test.clock import CLOCK, Clock

log = logging.getLogger("splitbrain.broker.store")

_SCAN_CHUNK = 4 * 1024 * 1024
_READ_GAP = 16 * 1024  # get(): max bytes skipped between records fetched by one read
_READ_SPAN = 1024 * 1024  # get(): max bytes of one read


class MessageStore:
    """See the module docstring.  Construct with :meth:`open`; finish with :meth:`close`."""

    def __init__(self) -> None:  # use open()
        raise TypeError("use MessageStore.open(directory, config, cluster_id)")

    @classmethod
    def open(cls, directory: str, config: StoreConfig, cluster_id: str, *, clock: Clock | None = None) -> MessageStore:
        """Open or create the store in ``directory``, recovering it.

        Raises:
            InconsistentClusterId: the store belongs to another cluster.
            StoreCorruption: damage in the middle of the commit log or an unreadable signature.
            EpochFileError: the epoch file and its backup are both unreadable.
        """
        self = object.__new__(cls)
        try:
            self._init(directory, config, cluster_id, clock or CLOCK)
        except BaseException:
            self._abort_open()
            raise
        return self

    def _abort_open(self) -> None:
        """Release whatever a failed open had opened (the store stays dirty)."""
        for name in ("commitlog", "cqs"):
            part = self.__dict__.get(name)
            if part is not None:
                try:
                    part.close(sync=False) if name == "commitlog" else part.close()
                except (OSError, StoreError) as exc:
                    log.warning("store %s: closing %s after a failed open: %s", self.directory, name, exc)

    def _init(self, directory: str, config: StoreConfig, cluster_id: str, clock: Clock) -> None:
        self.directory = directory
        self.config = config
        self.cluster_id = cluster_id
        self._clock = clock
        self._lock = threading.RLock()
        self._write_lock = threading.RLock()
        self._closed = False
        os.makedirs(directory, exist_ok=True)
        existed = has_data(directory)
        bind_cluster(directory, cluster_id, clock.wall_ms())
        self.previous_final: FinalSignature | None = take_clean(directory)
        self.state_on_open = (
            StoreState.CLEAN if self.previous_final is not None else StoreState.DIRTY if existed else StoreState.EMPTY
        )
        cp = load_checkpoint(directory)
        self._last_checkpoint: Checkpoint | None = cp
        self.commitlog = CommitLog.open(directory, config)
        clean = self.state_on_open is StoreState.CLEAN and cp is not None
        verify_from = cp.commitlog_flushed_offset if clean and cp is not None else self.commitlog.min_offset
        # The epoch file is read before the recovery: a durable loss records the epoch of the last durable byte,
        # which the cut back below removes when a whole epoch was lost.
        self.epochs = EpochFileCache.load(os.path.join(directory, EPOCH_FILE_NAME))

        def epoch_at(offset: int) -> int | None:
            found = self.epochs.find_entry_by_offset(offset)
            return None if found is None else found.epoch

        self.recovery: RecoveryReport = self.commitlog.recover(
            verify_from, cp.commitlog_flushed_offset if cp is not None else 0, epoch_at)
        lo, hi = self.commitlog.min_offset, self.commitlog.max_offset
        self.epochs.remove_beyond(hi)
        stored_confirm = cp.confirm_offset if cp is not None else lo
        self._confirm = recovered_confirm_offset(stored_confirm, lo, hi)
        if self._confirm != stored_confirm:
            log.info(
                "store %s: confirm offset %d clamped to %d (log [%d,%d])",
                directory,
                stored_confirm,
                self._confirm,
                lo,
                hi,
            )
        self._next_qo: dict[tuple[str, int], int] = {}
        self._pending: collections.deque[QueueItem] = collections.deque()
        items = self._scan(lo, hi)
        dispatched = lo
        visible = []
        for it in items:
            self._next_qo[(it.topic, it.queue_id)] = it.queue_offset + 1
            if it.end <= self._confirm:
                visible.append(it.row())
                dispatched = it.end
            else:
                self._pending.append(it)
        self._dispatched = dispatched
        self.cqs = ConsumeQueues(directory)
        try:
            expected = ConsumeQueues.expected_entries(visible)
        except ValueError as exc:
            raise StoreCorruption(f"store {directory}: {exc}", path=self.commitlog.directory) from exc
        for fix in self.cqs.reconcile(expected):
            log.warning("store %s: consume queue %s", directory, fix)
        log.info(
            "store %s opened %s: %s; %s", directory, self.state_on_open.value, self.recovery.describe(), self.describe()
        )
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        if config.background_flush:
            self._flusher = threading.Thread(target=self._flush_loop, name=f"store-flush:{directory}", daemon=True)
            self._flusher.start()

    # -- reading the log -----------------------------------------------------------------------
    def _scan(self, start: int, end: int) -> list[QueueItem]:
        """Consume-queue facts of every record in ``[start, end)`` (``start`` on a boundary)."""
        out: list[QueueItem] = []
        pos = start
        while pos < end:
            buf = self.commitlog.read(pos, min(_SCAN_CHUNK, end - pos))
            if not buf:
                break
            p = 0
            while p < len(buf):
                total, qid, qo, topic, tags = frame_header(buf, p)
                out.append(QueueItem(topic, qid, qo, pos + p, total, tag_hash(tags)))
                p += total
            pos += len(buf)
        return out

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed(f"store {self.directory} is closed")

    # -- offsets -------------------------------------------------------------------------------
    @property
    def min_phys_offset(self) -> int:
        return self.commitlog.min_offset

    @property
    def max_phys_offset(self) -> int:
        return self.commitlog.max_offset

    @property
    def stable_offset(self) -> int:
        """End of the bytes whose append has finished: under SYNC the synced offset (an append is done
        when fsynced), else the max offset.  A master replicates and confirms only below it."""
        return durability.stable_offset(self.commitlog.synced_offset, self.commitlog.max_offset,
                                        sync=self.config.flush_policy is FlushPolicy.SYNC)

    @property
    def synced_offset(self) -> int:
        """Commit-log bytes below this are known durable (for the lose-unfsynced-writes nemesis)."""
        return self.commitlog.synced_offset

    def fsync_stats(self) -> dict[str, float]:
        """Commit-log fsync count and latency (see :meth:`CommitLog.fsync_stats`)."""
        return self.commitlog.fsync_stats()

    @property
    def durable_loss(self) -> DurableLoss | None:
        """Set while the commit log lacks records it had made durable (step 3 of the module docstring):
        found at this open or an earlier one, kept across restarts until :meth:`clear_durable_loss`."""
        return self.commitlog.durable_loss

    def clear_durable_loss(self) -> None:
        """Forget the durable loss, durably: replication has refilled the log (the broker decides when)."""
        with self._write_lock:
            self._check_open()
            self.commitlog.clear_durable_loss()

    @property
    def confirm_offset(self) -> int:
        return self._confirm

    def records_from(self, start: int, *, max_scan_bytes: int = 1 << 18) -> int | None:
        """How many records lie in ``[start, max offset)`` (``start`` on a record boundary, e.g. a slave's
        acked offset): what a slave acked at ``start`` is behind by, in records.  Records not yet dispatched are
        counted from memory; older ones by scanning the log, only up to ``max_scan_bytes`` (the harness asks
        this twice a second, and a scan is Python work on the master's event loop: about 4,000 small records per
        256 KiB; a far-behind slave is reported as None rather than paid for).  None also
        for a ``start`` outside the log."""
        with self._lock:
            self._check_open()
            if not self.min_phys_offset <= start <= self.max_phys_offset:
                return None
            pending = self._pending
            if start >= self._dispatched:
                n = 0
                for it in reversed(pending):
                    if it[3] < start:  # .phys_offset
                        break
                    n += 1
                return n
            if self._dispatched - start > max_scan_bytes:
                return None
            return len(pending) + len(self._scan(start, self._dispatched))

    @property
    def dispatched_offset(self) -> int:
        """End of the last record dispatched to a consume queue (<= confirm offset)."""
        return self._dispatched

    def next_queue_offset(self, topic: str, queue_id: int) -> int:
        """The queue offset the next record of this queue will get (counting unconfirmed records)."""
        with self._lock:
            return self._next_qo.get((topic, queue_id), 0)

    def queue_bounds(self, topic: str, queue_id: int) -> tuple[int, int]:
        """(min, max) visible logical offsets of a queue."""
        with self._lock:
            self._check_open()
            return self.cqs.bounds(topic, queue_id)

    def queues(self) -> list[tuple[str, int]]:
        """Every (topic, queue id) with records in the log or a consume-queue file."""
        with self._lock:
            return sorted(set(self._next_qo) | set(self.cqs.queues()))

    # -- writing -------------------------------------------------------------------------------
    def put(self, records: Sequence[Record]) -> list[PutResult]:
        """Append records as master: assigns each its queue offset and store timestamp.

        All records of one call are written with one write (and, under SYNC, one fsync).
        They become visible to :meth:`get` only when the confirm offset passes their end.
        Records are encoded and fsynced without holding the read lock (see the module docstring).

        Raises:
            StoreFullError: disk full; nothing was appended.
            StoreIOError: write/fsync failure; nothing was appended.
            OffsetError: a record larger than ``max_message_bytes``.
        """
        with self._write_lock:
            self._check_open()
            now = self._clock.wall_ms()
            next_qo = dict(self._next_qo)  # only writers change it, and we are the writer
            offsets = []
            for r in records:
                key = (r.topic, r.queue_id)
                qo = next_qo.get(key, 0)
                next_qo[key] = qo + 1
                offsets.append(qo)
            data, sizes = encode_stamped(records, offsets, now)
            with self._lock:
                self._check_open()
                begin = self.commitlog.max_offset
                locs = self.commitlog.write_run(data, sizes)
                previous_qo, self._next_qo = self._next_qo, next_qo
                items = [QueueItem(r.topic, r.queue_id, qo, phys, size, tag_hash(r.tags) if r.properties else 0)
                         for r, qo, (phys, size) in zip(records, offsets, locs)]
                self._pending.extend(items)
            self._sync_or_undo(begin, previous_qo)
            return [PutResult(*it[:5]) for it in items]

    def _sync_or_undo(self, begin: int, previous_qo: dict[tuple[str, int], int]) -> None:
        """Finish an append begun at ``begin`` (fsync under SYNC); if that fails, drop what it
        published and restore the queue offsets.  Caller holds ``_write_lock``."""
        try:
            self.commitlog.sync_written(begin)  # rolls the commit log back itself on failure
        except BaseException:
            with self._lock:
                self._next_qo = previous_qo
                while self._pending and self._pending[-1].phys_offset >= begin:
                    self._pending.pop()
            raise

    def append_raw(self, phys_offset: int, data: bytes) -> int:
        """Append replicated bytes (whole frames) at ``phys_offset`` == max offset; returns the new max.

        Each record keeps the queue offset the master gave it; a queue offset that does not
        continue its queue is refused (nothing is appended).  Frames are CRC-checked and fsynced
        (under SYNC) without holding the read lock.

        Raises:
            OffsetError: ``phys_offset`` is not the max offset, or a queue offset does not continue.
            StoreCorruption: ``data`` is not whole valid frames.
            StoreFullError, StoreIOError: as for :meth:`put`.
        """
        try:
            items = [QueueItem(topic, qid, qo, off, size, tag_hash(tags))
                     for off, size, topic, qid, qo, tags in frame_facts(data, phys_offset)]
        except ValueError as exc:
            raise StoreCorruption(f"replicated data at {phys_offset} ({len(data)}B) is not whole valid records: {exc}",
                                  path="<replication>", offset=phys_offset) from exc
        with self._write_lock:
            self._check_open()
            if phys_offset != self.commitlog.max_offset:
                raise OffsetError(
                    f"append_raw at {phys_offset} but the commit log ends at {self.commitlog.max_offset}; "
                    f"replication must resume from the slave's max offset"
                )
            next_qo = dict(self._next_qo)
            for it in items:
                key = (it.topic, it.queue_id)
                want = next_qo.get(key)
                if want is not None and it.queue_offset != want:
                    raise OffsetError(
                        f"replicated record at {it.phys_offset} for {key[0]}/{key[1]} has queue offset "
                        f"{it.queue_offset}, expected {want}; nothing appended (master and slave disagree)"
                    )
                next_qo[key] = it.queue_offset + 1
            with self._lock:
                self._check_open()
                self.commitlog.write_run(data, [it.size for it in items])
                previous_qo, self._next_qo = self._next_qo, next_qo
                self._pending.extend(items)
            self._sync_or_undo(phys_offset, previous_qo)
            return phys_offset + len(data)

    def read_raw(self, phys_offset: int, max_bytes: int) -> bytes:
        """Whole frames from ``phys_offset`` (for replication); see :meth:`CommitLog.read`."""
        with self._lock:
            self._check_open()
            return self.commitlog.read(phys_offset, max_bytes)

    def reset_start(self, phys_offset: int) -> None:
        """Let an empty store begin at ``phys_offset`` (a slave copying from the master's min offset)."""
        with self._write_lock, self._lock:
            self._check_open()
            self.commitlog.reset_start(phys_offset)
            self._confirm = self._dispatched = phys_offset
            self._pending.clear()

    # -- reading -------------------------------------------------------------------------------
    def get(self, topic: str, queue_id: int, logical_offset: int, max_count: int) -> GetResult:
        """Up to ``max_count`` visible records of a queue from ``logical_offset``.

        Raises:
            StoreCorruption: a record fails its CRC or is not the record the index promised.
        """
        if logical_offset < 0 or max_count < 0:
            raise OffsetError(f"get needs logical_offset >= 0 and max_count >= 0, got {logical_offset}, {max_count}")
        with self._lock:
            self._check_open()
            lo, hi = self.cqs.bounds(topic, queue_id)
            entries = self.cqs.read(topic, queue_id, logical_offset, max_count)
            out: list[Decoded] = []
            i = 0
            while i < len(entries):
                if entries[i].is_hole:
                    i += 1
                    continue
                # one read for a run of entries whose records lie close together in the log (records of
                # interleaved queues sit a few records apart); the bytes in between are skipped
                j = i + 1
                while (
                    j < len(entries)
                    and not entries[j].is_hole
                    and entries[j - 1].end <= entries[j].phys_offset <= entries[j - 1].end + _READ_GAP
                    and entries[j].end - entries[i].phys_offset <= _READ_SPAN
                ):
                    j += 1
                start = entries[i].phys_offset
                buf = self.commitlog.read_span(start, entries[j - 1].end - start)
                for k in range(i, j):
                    e = entries[k]
                    got = decode_at(buf, e.phys_offset - start, start)
                    if isinstance(got, DecodeStop) or got.size != e.size:
                        path, pos = self.commitlog.file_for_offset(e.phys_offset)
                        why = got.detail if isinstance(got, DecodeStop) else f"size {got.size} != index {e.size}"
                        raise StoreCorruption(
                            f"record at offset {e.phys_offset} ({path} +{pos}): {why}", path=path, offset=e.phys_offset
                        )
                    r = got.record
                    if (r.topic, r.queue_id, r.queue_offset) != (topic, queue_id, logical_offset + k):
                        raise StoreCorruption(
                            f"consume queue {topic}/{queue_id}@{logical_offset + k} points at {e.phys_offset}, which "
                            f"holds {r.topic}/{r.queue_id}@{r.queue_offset}",
                            path=self.cqs.directory,
                            offset=e.phys_offset,
                        )
                    out.append(got)
                i = j
            return GetResult(out, logical_offset + len(entries), lo, hi)

    def get_raw(self, topic: str, queue_id: int, logical_offset: int, max_count: int) -> RawGetResult:
        """Like :meth:`get`, but the records stay frames: one bytes blob plus the spans it covers.

        Each frame's length and identity (topic, queue id, queue offset) are checked against the
        index here; its CRC is not -- the reader verifies it (``record.decode_pulled``), so a
        consumer still never accepts a damaged record while the broker skips decoding.

        Raises:
            StoreCorruption: a frame is not the record the index promised.
        """
        if logical_offset < 0 or max_count < 0:
            raise OffsetError(f"get needs logical_offset >= 0 and max_count >= 0, got {logical_offset}, {max_count}")
        topic_b = topic.encode()
        with self._lock:
            self._check_open()
            lo, hi = self.cqs.bounds(topic, queue_id)
            entries = self.cqs.read_rows(topic, queue_id, logical_offset, max_count)
            # runs of adjacent frames (holes end a run); a read covers runs close together in the log
            runs: list[list[int]] = []  # [first index, phys start, phys end, last index]
            for k, (phys, size, _) in enumerate(entries):
                if not size:
                    continue
                if runs and runs[-1][2] == phys and runs[-1][3] == k - 1:
                    runs[-1][2] = phys + size
                    runs[-1][3] = k
                else:
                    runs.append([k, phys, phys + size, k])
            parts: list[memoryview] = []
            spans: list[tuple[int, int]] = []
            count = 0
            head = FRAME_HEAD
            r = 0
            while r < len(runs):
                q = r + 1
                while (q < len(runs) and runs[q][1] - runs[q - 1][2] <= _READ_GAP
                       and runs[q][2] - runs[r][1] <= _READ_SPAN):
                    q += 1
                start = runs[r][1]
                buf = memoryview(self.commitlog.read_span(start, runs[q - 1][2] - start))
                for first, a, b, _ in runs[r:q]:
                    k, pos = first, a - start
                    while pos < b - start:
                        phys, size, _ = entries[k]
                        if size >= HEADER_BYTES:  # inline check_identity: the common case costs one unpack
                            (total, magic, _, qid, qo, _, _, tlen, _, _, _) = head.unpack_from(buf, pos)
                            p = pos + HEADER_BYTES
                        if (size < HEADER_BYTES or total != size or magic != MAGIC or qid != queue_id
                                or qo != logical_offset + k or buf[p : p + tlen] != topic_b):
                            why = check_identity(buf, pos, size, topic_b, queue_id, logical_offset + k)
                            path, fpos = self.commitlog.file_for_offset(phys)
                            raise StoreCorruption(f"consume queue {topic}/{queue_id}@{logical_offset + k} points at "
                                                  f"{phys} ({path} +{fpos}): {why}", path=path, offset=phys)
                        pos += size
                        k += 1
                    parts.append(buf[a - start : b - start])
                    spans.append((a, b - a))
                    count += k - first
                r = q
            return RawGetResult(b"".join(parts), spans, count, logical_offset + len(entries), lo, hi)

    # -- confirm offset ------------------------------------------------------------------------
    def set_confirm_offset(self, offset: int) -> None:
        """Set the confirm offset and dispatch (or withdraw) consume-queue entries accordingly.

        Raises:
            OffsetError: outside ``[min offset, max offset]``.
        """
        with self._lock:
            self._check_open()
            if not self.min_phys_offset <= offset <= self.max_phys_offset:
                raise OffsetError(
                    f"confirm offset {offset} outside the commit log [{self.min_phys_offset}, {self.max_phys_offset}]"
                )
            if offset < self._dispatched:
                _, pos = self.commitlog.file_for_offset(offset)
                redo = [it for it in self._scan(offset - pos, self._dispatched) if it.end > offset]
                if redo:
                    self.cqs.truncate_phys(redo[0].phys_offset)
                    self._pending.extendleft(reversed(redo))
                    self._dispatched = redo[0].phys_offset
                log.info("store %s: confirm offset lowered %d -> %d", self.directory, self._confirm, offset)
            self._confirm = offset
            pending, batch = self._pending, []
            while pending and pending[0][3] + pending[0][4] <= offset:  # .end, without a property call per record
                batch.append(pending.popleft())
            if batch:
                self.cqs.dispatch_many(batch)
                self._dispatched = batch[-1].end

    # -- truncation ----------------------------------------------------------------------------
    def truncate(self, phys_offset: int) -> None:
        """Drop the log suffix from ``phys_offset`` (a record boundary): commit log, consume queues,
        queue offsets, epoch entries starting at or after it; confirm offset capped.  Durable.

        Raises:
            OffsetError: outside the log or not a record boundary.
        """
        with self._write_lock, self._lock:
            self._check_open()
            if phys_offset > self.max_phys_offset or phys_offset < self.min_phys_offset:
                raise OffsetError(
                    f"truncate at {phys_offset} outside the commit log [{self.min_phys_offset}, {self.max_phys_offset}]"
                )
            removed = self._scan(phys_offset, self.max_phys_offset)
            last = self._last_checkpoint
            if last is not None and last.commitlog_flushed_offset > phys_offset:
                # as the commit log lowers its published synced offset: never leave a durable claim above the
                # end of the log, or a crash right after the cut would look like lost durable records
                self._save_checkpoint(dataclasses.replace(last, commitlog_flushed_offset=phys_offset))
            self.commitlog.truncate(phys_offset)
            first_removed: dict[tuple[str, int], int] = {}
            for it in removed:
                first_removed.setdefault((it.topic, it.queue_id), it.queue_offset)
            for key, qo in first_removed.items():
                if qo == 0:
                    self._next_qo.pop(key, None)
                else:
                    self._next_qo[key] = qo
            self._pending = collections.deque(it for it in self._pending if it.phys_offset < phys_offset)
            self.cqs.truncate_phys(phys_offset)
            self._dispatched = min(self._dispatched, phys_offset)
            self._confirm = min(self._confirm, phys_offset)
            self.epochs.truncate_suffix_by_offset(phys_offset)
            self.cqs.flush()
            self._save_checkpoint()
            if removed:
                log.warning(
                    "store %s: truncated %d records at %d; epochs now %s",
                    self.directory,
                    len(removed),
                    phys_offset,
                    self.epochs.describe(),
                )

    # -- durability ----------------------------------------------------------------------------
    def flush(self) -> int:
        """fsync the commit log and consume queues, then write the checkpoint; returns the synced offset.

        Raises:
            StoreIOError: an fsync failed (the checkpoint is not written).
        """
        with self._write_lock:  # not _lock: readers and dispatch go on during the fsyncs
            self._check_open()
            synced = self.commitlog.flush()
            with self._lock:
                dispatched = self._dispatched
            self.cqs.flush()  # every entry below ``dispatched`` is durable from here on
            with self._lock:
                cp = Checkpoint(self.commitlog.synced_offset, dispatched, self._confirm)
            self._save_checkpoint(cp)
            return synced

    def _save_checkpoint(self, cp: Checkpoint | None = None) -> None:
        """Write the checkpoint (default: the current offsets) unless unchanged; caller holds ``_write_lock``."""
        if cp is None:
            cp = Checkpoint(self.commitlog.synced_offset, self._dispatched, self._confirm)
        if cp != self._last_checkpoint:  # an idle store does no checkpoint I/O
            save_checkpoint(self.directory, cp)
            self._last_checkpoint = cp

    def _flush_loop(self) -> None:
        interval_s = self.config.flush_interval_ms / 1000
        while not self._stop.wait(interval_s):
            try:
                self.flush()
            except StoreClosed:
                return
            except (StoreError, OSError) as exc:
                log.error("store %s: background flush failed: %s", self.directory, exc)

    def close(self, clean: bool = True) -> None:
        """Stop the flusher and close the files.

        ``clean=True`` (orderly shutdown): flush, write the checkpoint and the clean marker (final
        signature).  ``clean=False``: close without flushing or marking -- the next open is a dirty
        recovery, as after a crash.  Idempotent.
        """
        self._stop.set()
        if self._flusher is not None and self._flusher is not threading.current_thread():
            self._flusher.join(timeout=30)
        with self._write_lock, self._lock:
            if self._closed:
                return
            error: BaseException | None = None
            final: FinalSignature | None = None
            if clean:
                try:
                    self.flush()
                    final = FinalSignature(
                        self.cluster_id, self.epochs.last_epoch, self.max_phys_offset, uuid.uuid4().hex
                    )
                except (StoreError, OSError) as exc:
                    error = exc
            self._closed = True
            sync = clean and error is None
            for closer in (lambda: self.commitlog.close(sync=sync), self.cqs.close):
                try:
                    closer()
                except (StoreError, OSError) as exc:
                    error = error or exc
            if error is not None:
                log.error("store %s: close failed, the store stays dirty: %s", self.directory, error)
                raise error
            if final is not None:
                write_clean(self.directory, final)
                log.info("store %s closed clean: %s", self.directory, final.describe())

    def final_signature(self) -> FinalSignature:
        """The final signature this store would write if closed cleanly now."""
        with self._lock:
            return FinalSignature(self.cluster_id, self.epochs.last_epoch, self.max_phys_offset, "")

    def describe(self) -> str:
        return (
            f"store {self.directory}: log [{self.min_phys_offset},{self.max_phys_offset}) synced={self.synced_offset} "
            f"confirm={self._confirm} dispatched={self._dispatched} pending={len(self._pending)} "
            f"epochs={self.epochs.describe()} queues={len(self._next_qo)}"
        )
