"""The commit log: segmented, append-only files of record frames (shell).

Words:

* **physical offset** -- a byte position in the concatenation of all segments (as in RocketMQ);
  every record has one, and offsets of consecutive records are contiguous.
* **segment** -- ``<dir>/commitlog/<20-digit start offset>``.  A segment rolls over when the next
  record would push it past ``segment_bytes``; records never span segments.  Segment sizes vary,
  so a slave's segment boundaries may differ from its master's while offsets agree.
* **min / max offset** -- start of the first segment / end of the last byte written.
* **synced offset** -- every byte below it has been fsynced; bytes above it may vanish in a
  power cut.  After every fsync (and truncation) it is published, before anyone is told the bytes
  are durable, to ``<store>/commitlog.synced`` (20 digits, written but never fsynced: it only has
  to survive the death of the process, not of the machine).  The lose-unfsynced-writes nemesis
  kills the process, reads that file and cuts the log there -- dropping only bytes no caller was
  ever told were durable.
* **durable loss** -- recovery found the log shorter than its *durable offset* (the larger of the
  store checkpoint's flushed offset and the synced offset published before the restart): a cut
  through a record the store had fsynced -- and, under SYNC, possibly acknowledged -- is not a torn
  tail but lost data.  The log still opens (cut at the damage, as a torn tail is), but before
  anything is cut the loss is recorded durably in ``<store>/commitlog.lost``; the marker stays
  across restarts until :meth:`CommitLog.clear_durable_loss` (the broker calls it once replication
  has refilled the log, see ``broker/ha/role.py``).  Every claim only ever names bytes that were
  fsynced: a truncation lowers the published synced offset *before* it cuts.

Duties of the caller (the :class:`MessageStore`):

1. call :meth:`recover` once after :meth:`open`, before any other use;
2. pass only whole frames to :meth:`append_raw`, at exactly ``max_offset``;
3. truncate only at record boundaries (:meth:`truncate` checks and refuses otherwise).

Failpoints: ``store.write`` (before bytes are written; ``error`` -> :class:`StoreFullError`,
``error(5)`` -> :class:`StoreIOError` EIO), ``store.before_fsync`` (before each fsync; ``delay``
slows it and shows in :meth:`CommitLog.fsync_stats`, ``error`` -> :class:`StoreIOError`) and
``store.read`` (before commit-log bytes are read; ``error`` -> :class:`StoreIOError` EIO).
A failed write or a failed fsync in SYNC mode rolls the log back to where the call began, so the
log never holds bytes the caller was told failed.

Thread-safe, with two locks so that a read never waits for an fsync: ``_lock`` guards the
in-memory state (segments, sizes, dirty set) and is held only briefly; ``io_lock`` serialises
everything that writes, fsyncs, truncates or closes -- its holder owns the file descriptors, so an
fsync runs holding ``io_lock`` alone.  Lock order: ``io_lock`` before ``_lock``.  Readers can
therefore see bytes that are written but not yet fsynced (up to :attr:`max_offset`); whoever must
only hand out durable bytes bounds its reads by :attr:`synced_offset`.
"""

from __future__ import annotations

import bisect
import errno
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NoReturn

from system_under_test.broker.store import _fileio
from system_under_test.broker.store._kv import encode_kv, parse_kv
from system_under_test.broker.store.config import FlushPolicy, StoreConfig
from system_under_test.broker.store.durability import plan_sync, rollback_point, synced_after
from system_under_test.broker.store.errors import (
    OffsetError,
    StoreClosed,
    StoreCorruption,
    StoreFullError,
    StoreIOError,
)
from system_under_test.broker.store.record import (
    FRAME_PREFIX,
    HEADER_BYTES,
    MAGIC,
    Decoded,
    Record,
    decode_many,
    encode,
    find_next_valid,
    frame_length_at,
)
from system_under_test.broker.store.recovery import DurableLoss, durable_loss_after
from system_under_test.failpoints import FailpointError, declare, hit

log = logging.getLogger("splitbrain.broker.store.commitlog")

FP_WRITE = declare("store.write", "before commit-log bytes are written (error -> StoreFullError, DISK_FULL)")
FP_BEFORE_FSYNC = declare("store.before_fsync", "before the commit log is fsynced (delay = slow disk, error = EIO)")
FP_READ = declare("store.read", "before commit-log bytes are read (error = EIO)")

COMMITLOG_DIR = "commitlog"
SYNCED_FILE = "commitlog.synced"
LOST_FILE = "commitlog.lost"


def read_synced_file(store_dir: str) -> int | None:
    """The synced offset the (possibly dead) store last published, or None if it never did."""
    try:
        with open(os.path.join(store_dir, SYNCED_FILE), "rb") as f:
            text = f.read(64).strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None


def segment_name(start_offset: int) -> str:
    return f"{start_offset:020d}"


@dataclass
class _Segment:
    start: int
    path: str
    fd: int
    size: int

    @property
    def end(self) -> int:
        return self.start + self.size


@dataclass(frozen=True)
class RecoveryReport:
    """What :meth:`CommitLog.recover` did.

    ``durable_offset`` is what the log was known durable up to before this open (the module
    docstring's *durable loss*); ``end`` below it means records that had been fsynced are gone.
    """

    verified_from: int
    end: int
    records_verified: int
    truncated_bytes: int
    truncated_at: int | None
    durable_offset: int = 0

    @property
    def lost_durable_bytes(self) -> int:
        """Bytes below the durable offset that the log no longer holds (0: only a torn tail, if anything)."""
        return max(0, self.durable_offset - self.end)

    def describe(self) -> str:
        cut = f", truncated {self.truncated_bytes}B torn tail at {self.truncated_at}" if self.truncated_bytes else ""
        lost = (f"; LOST {self.lost_durable_bytes}B of durable records (durable to {self.durable_offset})"
                if self.lost_durable_bytes else "")
        return f"verified {self.records_verified} records from {self.verified_from} to {self.end}{cut}{lost}"


def read_lost_file(store_dir: str) -> DurableLoss | None:
    """The durable loss a store recorded and has not cleared, or None.  A damaged marker still counts."""
    path = os.path.join(store_dir, LOST_FILE)
    raw = _fileio.read_or_none(path)
    if raw is None:
        return None
    try:
        fields = parse_kv(raw, path, ("durable_offset", "end"))
        epoch = fields.get("epoch")  # absent in markers written before the field existed
        return DurableLoss(int(fields["durable_offset"]), int(fields["end"]), None if epoch is None else int(epoch))
    except ValueError as exc:
        log.warning("durable-loss marker damaged (%s); the loss still stands", exc)
        return DurableLoss(None, 0)


class CommitLog:
    """See the module docstring.  Construct with :meth:`open`."""

    def __init__(self, directory: str, config: StoreConfig, segments: list[_Segment], synced_path: str,
                 published_synced: int | None = None) -> None:
        self.directory = directory
        self.config = config
        self._store_dir = os.path.dirname(synced_path)
        self._published_before_open = published_synced  # read before the line below overwrites it
        self.durable_loss: DurableLoss | None = read_lost_file(self._store_dir)
        self._segs = segments
        self._starts = [s.start for s in segments]
        self._lock = threading.RLock()
        self.io_lock = threading.RLock()  # see the module docstring
        self._dirty: set[int] = set()
        self._synced_fd = os.open(synced_path, os.O_RDWR | os.O_CREAT, 0o644)
        self._synced = -1
        self._set_synced(segments[-1].end)
        self._closed = False
        self._fsyncs = 0
        self._fsync_total_s = 0.0
        self._fsync_max_s = 0.0
        self._fsync_last_s = 0.0

    # -- lifecycle -----------------------------------------------------------------------------
    @classmethod
    def open(cls, store_dir: str, config: StoreConfig) -> CommitLog:
        """Open (creating if needed) ``<store_dir>/commitlog``.  Call :meth:`recover` next."""
        directory = os.path.join(store_dir, COMMITLOG_DIR)
        os.makedirs(directory, exist_ok=True)
        segs: list[_Segment] = []
        for name in sorted(os.listdir(directory)):
            if len(name) != 20 or not name.isdigit():
                log.warning("ignoring stray file %s in %s", name, directory)
                continue
            path = os.path.join(directory, name)
            fd = os.open(path, os.O_RDWR)
            os.fsync(fd)  # whatever the last incarnation left in the page cache is durable from here on
            segs.append(_Segment(int(name), path, fd, os.fstat(fd).st_size))
        if not segs:
            segs.append(cls._create_segment(directory, 0))
        return cls(directory, config, segs, os.path.join(store_dir, SYNCED_FILE), read_synced_file(store_dir))

    @staticmethod
    def _create_segment(directory: str, start: int) -> _Segment:
        path = os.path.join(directory, segment_name(start))
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        _fileio.fsync_dir(directory)
        return _Segment(start, path, fd, os.fstat(fd).st_size)

    def close(self, sync: bool = True) -> None:
        """fsync (unless ``sync`` is False: a simulated crash) and close every segment.  Idempotent."""
        with self.io_lock, self._lock:
            if self._closed:
                return
            try:
                if sync:
                    self._fsync_io_locked()
            finally:
                self._closed = True
                for s in self._segs:
                    os.close(s.fd)
                os.close(self._synced_fd)

    # -- offsets -------------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        return self._segs[0].start

    @property
    def max_offset(self) -> int:
        return self._segs[-1].end

    @property
    def synced_offset(self) -> int:
        """Every byte below this offset is known durable."""
        return self._synced

    def _set_synced(self, offset: int) -> None:
        """Publish ``offset`` to the synced file, then adopt it (see the module docstring)."""
        if offset != self._synced:
            os.pwrite(self._synced_fd, b"%020d\n" % offset, 0)
        self._synced = offset

    def fsync_stats(self) -> dict[str, float]:
        """How the disk has behaved: fsync count and latency (ms; the ``store.before_fsync``
        failpoint's delay counts, as a slow device would)."""
        n = self._fsyncs
        return {"fsyncs": n, "fsync_last_ms": round(self._fsync_last_s * 1000, 3),
                "fsync_max_ms": round(self._fsync_max_s * 1000, 3),
                "fsync_mean_ms": round(self._fsync_total_s * 1000 / n, 3) if n else 0.0}

    def segments(self) -> list[tuple[int, str, int]]:
        """(start offset, path, size) of every segment, oldest first."""
        with self._lock:
            return [(s.start, s.path, s.size) for s in self._segs]

    def file_for_offset(self, phys_offset: int) -> tuple[str, int]:
        """(segment path, position within it) holding ``phys_offset``."""
        with self._lock:
            seg = self._segs[self._index_of(phys_offset)]
            return seg.path, phys_offset - seg.start

    def _index_of(self, phys_offset: int) -> int:
        return max(0, bisect.bisect_right(self._starts, phys_offset) - 1)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed(f"commit log {self.directory} is closed")

    # -- appending -----------------------------------------------------------------------------
    def append(self, records: Sequence[Record]) -> list[tuple[int, int]]:
        """Encode and append ``records``; returns (physical offset, size) per record.

        Raises:
            StoreFullError: no space (or the ``store.write`` failpoint); nothing was appended.
            StoreIOError: another write error, or in SYNC mode a failed fsync; nothing was appended.
        """
        frames = [encode(r) for r in records]
        with self.io_lock:
            begin = self.max_offset
            locs = self.write(frames)
            self.sync_written(begin)
            return locs

    def append_raw(self, phys_offset: int, data: bytes) -> list[Decoded]:
        """Append replicated bytes at ``phys_offset`` (which must equal :attr:`max_offset`).

        Returns the decoded records (the store builds consume-queue entries from them).

        Raises:
            OffsetError: ``phys_offset`` is not the current max offset.
            StoreCorruption: ``data`` is not a sequence of whole, CRC-valid frames.
            StoreFullError, StoreIOError: as for :meth:`append`.
        """
        result = decode_many(data, phys_offset)
        if result.stop is not None:
            raise StoreCorruption(
                f"replicated data at {phys_offset} ({len(data)}B) is not whole valid records: "
                f"{result.stop.kind.value} at offset {result.stop.offset}: {result.stop.detail}",
                path="<replication>",
                offset=result.stop.offset,
            )
        with self.io_lock:
            if phys_offset != self.max_offset:
                raise OffsetError(
                    f"append_raw at {phys_offset} but the commit log ends at {self.max_offset}; "
                    f"replication must resume from the slave's max offset"
                )
            mv = memoryview(data)
            self.write([mv[d.offset - phys_offset : d.end - phys_offset] for d in result.records])
            self.sync_written(phys_offset)
        return result.records

    def write(self, frames: Sequence[bytes | memoryview]) -> list[tuple[int, int]]:
        """Write whole ``frames`` at the max offset *without* fsyncing; returns (offset, size) per frame.

        The first half of an append: the caller makes sure nothing else writes between this call
        and :meth:`sync_written` (:meth:`append` holds :attr:`io_lock`; ``MessageStore`` holds its
        writer lock) and does its own bookkeeping in between, without making readers wait for the
        fsync.

        Raises:
            OffsetError: a frame larger than ``max_message_bytes``; nothing was written.
            StoreFullError, StoreIOError: the write failed; nothing was appended.
        """
        with self.io_lock, self._lock:
            return self._append_frames_locked(frames)

    def write_run(self, data: bytes | memoryview, sizes: Sequence[int]) -> list[tuple[int, int]]:
        """:meth:`write` for frames of ``sizes`` that lie back to back in ``data`` (one write when no
        segment rolls over; replicated batches come this way)."""
        if sum(sizes) != len(data):
            raise OffsetError(f"frame sizes add up to {sum(sizes)}, the data holds {len(data)} bytes")
        with self.io_lock, self._lock:
            return self._append_frames_locked((), data, sizes)

    def sync_written(self, begin: int) -> None:
        """The second half of an append begun at ``begin``: under SYNC, fsync what was written; if that
        fails, roll the log back to ``begin`` (nothing of the append stays) and raise.  Under ASYNC a
        no-op (the background flush makes it durable later).

        Raises:
            StoreIOError: the fsync failed (or the ``store.before_fsync`` failpoint).
        """
        if self.config.flush_policy is not FlushPolicy.SYNC:
            return
        with self.io_lock:
            try:
                self._fsync_io_locked()
            except OSError as exc:
                with self._lock:
                    self._rollback_locked(begin, exc)
                raise

    def _append_frames_locked(self, frames: Sequence[bytes | memoryview], data: bytes | memoryview | None = None,
                              sizes: Sequence[int] | None = None) -> list[tuple[int, int]]:
        """Write ``frames`` -- or ``data`` holding frames of ``sizes`` back to back -- at the max offset."""
        self._check_open()
        if sizes is None:
            sizes = [len(f) for f in frames]
        if not sizes:
            return []
        if max(sizes) > self.config.max_message_bytes:
            raise OffsetError(f"record of {max(sizes)}B exceeds max_message_bytes={self.config.max_message_bytes}")
        begin = self.max_offset
        seg = self._segs[-1]
        total = sum(sizes)
        if seg.size + total <= self.config.segment_bytes:  # the common case: no roll, one write
            try:
                hit(FP_WRITE)
            except FailpointError as exc:
                self._raise_write_failpoint(exc, begin)
            try:
                self._write_locked([data if data is not None else b"".join(frames)])
            except OSError as exc:
                self._fail_write_locked(exc, begin)
            starts = list(itertools.accumulate(sizes, initial=begin))
            return list(zip(starts, sizes))
        if data is not None:
            mv = memoryview(data)
            starts = list(itertools.accumulate(sizes, initial=0))
            frames = [mv[a:b] for a, b in itertools.pairwise(starts)]
        try:
            hit(FP_WRITE)
        except FailpointError as exc:
            self._raise_write_failpoint(exc, begin)
        out: list[tuple[int, int]] = []
        try:
            chunk: list[bytes | memoryview] = []
            chunk_bytes = 0
            for f in frames:
                seg = self._segs[-1]
                if seg.size + chunk_bytes > 0 and seg.size + chunk_bytes + len(f) > self.config.segment_bytes:
                    self._write_locked(chunk)
                    chunk, chunk_bytes = [], 0
                    self._roll_locked()
                out.append((self.max_offset + chunk_bytes, len(f)))
                chunk.append(f)
                chunk_bytes += len(f)
            self._write_locked(chunk)
        except OSError as exc:
            self._fail_write_locked(exc, begin)
        return out

    def _raise_write_failpoint(self, exc: FailpointError, begin: int) -> NoReturn:
        if exc.errno in (None, errno.ENOSPC):
            raise StoreFullError(f"commit log {self.directory}: no space left on device (failpoint: {exc})") from exc
        raise StoreIOError(f"commit log {self.directory}: write failed at {begin}: {os.strerror(exc.errno)} "
                           f"(failpoint: {exc})", exc.errno) from exc

    def _fail_write_locked(self, exc: OSError, begin: int) -> NoReturn:
        """Roll back a failed write to ``begin`` and raise the store error for it."""
        self._rollback_locked(begin, exc)
        if isinstance(exc, StoreIOError | StoreFullError):
            raise exc
        if exc.errno == errno.ENOSPC:
            raise StoreFullError(f"commit log {self.directory}: no space left on device ({exc})") from exc
        raise StoreIOError(f"commit log {self.directory}: write failed at {begin}: {exc}", exc.errno or 5) from exc

    def _write_locked(self, chunk: list[bytes | memoryview]) -> None:
        if not chunk:
            return
        seg = self._segs[-1]
        data = memoryview(b"".join(chunk))
        pos = seg.size
        while data:
            n = os.pwrite(seg.fd, data, pos)
            data = data[n:]
            pos += n
        seg.size = pos
        self._dirty.add(seg.start)

    def _roll_locked(self) -> None:
        seg = self._create_segment(self.directory, self.max_offset)
        self._segs.append(seg)
        self._starts.append(seg.start)

    def _rollback_locked(self, begin: int, cause: BaseException) -> None:
        try:
            point = rollback_point(begin, self.max_offset)  # the rule: durability.py
            if point is not None:
                self._truncate_locked(point)
        except OSError as exc:  # pragma: no cover - a second disk failure
            log.error("commit log %s: rollback to %s after %s failed: %s", self.directory, begin, cause, exc)

    # -- flushing ------------------------------------------------------------------------------
    def flush(self) -> int:
        """fsync all written bytes; returns the new synced offset.

        Raises:
            StoreIOError: the fsync failed (or the ``store.before_fsync`` failpoint); nothing
                becomes more durable.
        """
        with self.io_lock:
            with self._lock:
                self._check_open()
            self._fsync_io_locked()
            return self._synced

    def _fsync_io_locked(self) -> None:
        """fsync the dirty segments holding :attr:`io_lock` only (readers go on meanwhile)."""
        with self._lock:
            self._check_open()
            plan = plan_sync(self._synced, self.max_offset, bool(self._dirty))  # the rule: durability.py
            if plan is None:
                return
            dirty = sorted(self._dirty)
            by_start = {s.start: s for s in self._segs}
            self._dirty.clear()
        t0 = time.monotonic()
        try:
            if plan.fsync:
                self._fsync_segments(dirty, by_start)
        except BaseException:
            with self._lock:
                self._dirty.update(dirty)
            raise
        took = time.monotonic() - t0
        with self._lock:
            self._fsyncs += 1
            self._fsync_total_s += took
            self._fsync_last_s = took
            self._fsync_max_s = max(self._fsync_max_s, took)
            self._set_synced(synced_after(plan, self._synced, fsync_ok=True))

    def _fsync_segments(self, dirty: list[int], by_start: dict[int, _Segment]) -> None:
        """fsync the segments starting at ``dirty`` (the ``store.before_fsync`` failpoint first), holding io_lock."""
        try:
            hit(FP_BEFORE_FSYNC)
        except FailpointError as exc:
            raise StoreIOError(f"commit log {self.directory}: fsync failed (failpoint: {exc})",
                               exc.errno or 5) from exc
        for start in dirty:
            seg = by_start.get(start)
            if seg is not None:  # the fd stays open: closing and truncating need io_lock
                try:
                    os.fsync(seg.fd)
                except OSError as exc:
                    raise StoreIOError(f"fsync of {seg.path} failed: {exc}", exc.errno or 5) from exc

    # -- reading -------------------------------------------------------------------------------
    def read(self, phys_offset: int, max_bytes: int) -> bytes:
        """Whole frames starting at ``phys_offset``, at most ``max_bytes`` of them -- except that a
        first frame larger than ``max_bytes`` is returned whole, so callers always progress.
        Returns b"" at the max offset.

        Raises:
            OffsetError: outside ``[min_offset, max_offset]`` or not on a record boundary.
        """
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be > 0, got {max_bytes}")
        with self._lock:
            self._check_open()
            if phys_offset == self.max_offset:
                return b""
            self._hit_read(phys_offset)
            self._check_range(phys_offset)
            out: list[bytes] = []
            unpack_prefix = FRAME_PREFIX.unpack_from
            pos, remaining = phys_offset, max_bytes
            while pos < self.max_offset and remaining > 0:
                seg = self._segs[self._index_of(pos)]
                buf = os.pread(seg.fd, min(seg.end - pos, remaining), pos - seg.start)
                cut, n = 0, len(buf)
                while cut + 8 <= n:  # frame_length_at, inlined: this walk visits every replicated record
                    total, magic = unpack_prefix(buf, cut)
                    if magic != MAGIC or total < HEADER_BYTES or cut + total > n:
                        break
                    cut += total
                if cut == 0:
                    total = frame_length_at(os.pread(seg.fd, 8, pos - seg.start), 0)
                    if total is None:
                        raise OffsetError(f"offset {pos} in {seg.path} is not the start of a record")
                    if out:
                        break
                    buf, cut = os.pread(seg.fd, total, pos - seg.start), total
                out.append(buf[:cut])
                pos += cut
                remaining -= cut
                if cut < len(buf):
                    break
            return b"".join(out)

    def read_span(self, phys_offset: int, size: int) -> bytes:
        """Exactly ``size`` bytes from ``phys_offset`` (may cross segments); for known record spans."""
        with self._lock:
            self._check_open()
            self._check_range(phys_offset)
            if phys_offset + size > self.max_offset:
                raise OffsetError(f"span [{phys_offset},{phys_offset + size}) passes the max offset {self.max_offset}")
            self._hit_read(phys_offset)
            parts: list[bytes] = []
            pos, end = phys_offset, phys_offset + size
            while pos < end:
                seg = self._segs[self._index_of(pos)]
                n = min(seg.end, end) - pos
                parts.append(os.pread(seg.fd, n, pos - seg.start))
                pos += n
            return b"".join(parts)

    def _hit_read(self, phys_offset: int) -> None:
        try:
            hit(FP_READ)
        except FailpointError as exc:
            code = exc.errno or errno.EIO
            raise StoreIOError(f"commit log {self.directory}: read at {phys_offset} failed: {os.strerror(code)} "
                               f"(failpoint: {exc})", code) from exc

    def _check_range(self, phys_offset: int) -> None:
        if not self.min_offset <= phys_offset <= self.max_offset:
            raise OffsetError(f"offset {phys_offset} outside the commit log [{self.min_offset}, {self.max_offset}]")

    # -- truncation and reset ------------------------------------------------------------------
    def truncate(self, phys_offset: int) -> None:
        """Drop every byte at or after ``phys_offset`` (a record boundary), durably.

        Raises:
            OffsetError: outside the log or not on a record boundary.
        """
        with self.io_lock, self._lock:
            self._check_open()
            if phys_offset == self.max_offset:
                return
            self._check_range(phys_offset)
            seg = self._segs[self._index_of(phys_offset)]
            pos = 0
            while seg.start + pos < phys_offset:
                total = frame_length_at(os.pread(seg.fd, 8, pos), 0)
                if total is None:
                    raise OffsetError(f"cannot truncate at {phys_offset}: walking {seg.path} hit a bad frame at {pos}")
                pos += total
            if seg.start + pos != phys_offset:
                raise OffsetError(
                    f"cannot truncate at {phys_offset}: not a record boundary (nearest {seg.start + pos}) in {seg.path}"
                )
            self._truncate_locked(phys_offset)

    def _truncate_locked(self, phys_offset: int) -> None:
        # Lower the published claim first: a crash mid-cut must not leave a claim above the log's end,
        # which the next open would take for lost durable records.
        self._set_synced(min(self._synced, phys_offset))
        removed = False
        while len(self._segs) > 1 and self._segs[-1].start >= phys_offset and self._segs[-1].start > self.min_offset:
            seg = self._segs.pop()
            self._starts.pop()
            os.close(seg.fd)
            os.unlink(seg.path)
            self._dirty.discard(seg.start)
            removed = True
        seg = self._segs[-1]
        os.ftruncate(seg.fd, phys_offset - seg.start)
        os.fsync(seg.fd)
        seg.size = phys_offset - seg.start
        if removed:
            _fileio.fsync_dir(self.directory)

    def reset_start(self, phys_offset: int) -> None:
        """Make an empty log begin at ``phys_offset`` (a slave that syncs from the master's min offset).

        Raises:
            OffsetError: the log is not empty.
        """
        with self.io_lock, self._lock:
            self._check_open()
            if self.max_offset != self.min_offset:
                raise OffsetError(
                    f"reset_start({phys_offset}) needs an empty commit log, it holds [{self.min_offset}, "
                    f"{self.max_offset})"
                )
            old = self._segs[0]
            new = self._create_segment(self.directory, phys_offset)
            if old.path != new.path:
                os.close(old.fd)
                os.unlink(old.path)
                _fileio.fsync_dir(self.directory)
            self._segs, self._starts = [new], [new.start]
            self._dirty.clear()
            self._set_synced(phys_offset)

    # -- recovery ------------------------------------------------------------------------------
    def recover(self, verify_from: int, durable_offset: int = 0,
                epoch_at: Callable[[int], int | None] | None = None) -> RecoveryReport:
        """Verify CRCs from the segment holding ``verify_from`` to the end; cut a torn tail.

        A frame that is incomplete or fails its checks is a *torn tail* if no valid frame follows
        it anywhere in the log: the log is truncated there (logged with file and offset).  If
        valid frames follow, the damage is in the middle and nothing is dropped.

        ``durable_offset`` is the store checkpoint's flushed offset; the synced offset published
        before this open counts too.  If the log ends -- or is about to be cut -- below the larger of
        the two, durable records are lost: :attr:`durable_loss` is set and recorded durably *before*
        anything is cut (module docstring), with the master epoch ``epoch_at`` gives for the last durable
        byte (the epoch file as it was before this recovery; None = unknown).

        Raises:
            StoreCorruption: damage followed by valid data, or overlapping segments (file + offset).
        """
        durable_offset = max(durable_offset, self._published_before_open or 0)
        with self.io_lock, self._lock:
            self._check_open()
            for a, b in zip(self._segs, self._segs[1:]):
                if a.end > b.start:
                    raise StoreCorruption(
                        f"segment {a.path} ends at {a.end}, past the start {b.start} of the next segment {b.path}",
                        path=a.path,
                        offset=b.start,
                    )
            verify_from = min(max(verify_from, self.min_offset), self.max_offset)
            first = self._index_of(verify_from)
            count = 0
            for i in range(first, len(self._segs)):
                seg = self._segs[i]
                buf = os.pread(seg.fd, seg.size, 0) if seg.size else b""
                result = decode_many(buf, seg.start)
                count += len(result.records)
                nxt = self._segs[i + 1] if i + 1 < len(self._segs) else None
                if result.stop is None and (nxt is None or seg.end == nxt.start):
                    continue
                bad = result.stop.offset if result.stop is not None else seg.end
                detail = result.stop.detail if result.stop is not None else f"{nxt.start - seg.end if nxt else 0}B hole"
                dropped = self._torn_or_corrupt_locked(i, buf, bad, detail, durable_offset, epoch_at)
                return RecoveryReport(self._segs[first].start, self.max_offset, count, dropped, bad, durable_offset)
            self._note_durable_loss_locked(self.max_offset, durable_offset, epoch_at)
            return RecoveryReport(self._segs[first].start, self.max_offset, count, 0, None, durable_offset)

    def _note_durable_loss_locked(self, end: int, durable_offset: int,
                                  epoch_at: Callable[[int], int | None] | None) -> None:
        """Record durably that the log ends at ``end`` below ``durable_offset`` (nothing if it does not); the rule,
        with how an earlier loss's claim is kept, is :func:`~.recovery.durable_loss_after`."""
        loss = durable_loss_after(self.durable_loss, end, durable_offset, epoch_at)
        if loss is None:
            return
        log.error("commit log %s: %s; this broker must not lead until replication refills it", self.directory,
                  loss.describe())
        fields: dict[str, object] = {"durable_offset": loss.durable_offset, "end": loss.end}
        if loss.epoch is not None:
            fields["epoch"] = loss.epoch
        if loss.durable_offset is not None:  # a damaged marker stays as it is: the loss still stands
            _fileio.atomic_write(os.path.join(self._store_dir, LOST_FILE), encode_kv(fields))
        self.durable_loss = loss

    def clear_durable_loss(self) -> None:
        """Forget a recorded durable loss (durably): replication has refilled the log."""
        with self.io_lock:
            _fileio.remove_durably(os.path.join(self._store_dir, LOST_FILE))
            self.durable_loss = None

    def _torn_or_corrupt_locked(self, i: int, buf: bytes, bad: int, detail: str, durable_offset: int,
                                epoch_at: Callable[[int], int | None] | None) -> int:
        seg = self._segs[i]
        later = self._segs[i + 1 :]
        nxt = find_next_valid(buf, bad - seg.start + 1) if bad - seg.start < len(buf) else None
        where = None if nxt is None else seg.start + nxt
        for other in later:
            if where is not None:
                break
            p = find_next_valid(os.pread(other.fd, other.size, 0), 0) if other.size else None
            if p is not None:
                where = other.start + p
        if where is not None:
            raise StoreCorruption(
                f"commit log corrupt in the middle: {seg.path} at offset {bad} (position {bad - seg.start}): "
                f"{detail}; valid records follow at offset {where}. Refusing to drop data: restore the store "
                f"from a replica or truncate it by hand with the admin tools",
                path=seg.path,
                offset=bad,
            )
        dropped = self.max_offset - bad
        self._note_durable_loss_locked(bad, durable_offset, epoch_at)
        log.warning(
            "commit log: truncating torn tail in %s at offset %d (position %d, %s): dropping %d bytes",
            seg.path,
            bad,
            bad - seg.start,
            detail,
            dropped,
        )
        self._truncate_locked(bad)
        return dropped
