"""Durable Raft storage: hard state, log segments and the snapshot file, all in one directory.

Words:

* **record** -- one framed payload on disk: a 12-byte header ``length (u32 BE) | crc32(length
  bytes) (u32) | crc32(payload) (u32)`` followed by ``length`` payload bytes.  The header carries
  its own check so a flipped length byte is reported as corruption rather than mistaken for a
  torn write that runs past the end of the file.
* **segment** -- an append-only file ``log/<first index, 20 digits>.seg`` of records, one msgpack
  ``[term, index, kind, data]`` entry each, contiguous indexes.  A new segment starts once the
  current one reaches ``segment_bytes``.
* **torn tail** -- the last record of the last segment is incomplete or fails its CRC (or the file
  ends in zeros): a write that was never fsynced, so never acknowledged.  :meth:`RaftStorage.load`
  truncates it with a log line.  A bad record anywhere else raises :class:`StorageCorruption`
  naming the file and the byte offset: the node must stop rather than forget acknowledged data.
* **hard state** / **snapshot** -- single-record files ``hardstate`` and ``snapshot`` written
  atomically: temp file, fsync, rename, fsync the directory.

Duties of the caller (the node shell, see node.py):

1. call :meth:`RaftStorage.load` once before anything else;
2. per Ready: :meth:`save_snapshot` (if any), :meth:`append` the entries, :meth:`sync` when
   ``must_sync``, then :meth:`save_hard_state` -- entries reach the disk before a hard state whose
   commit index could refer to them;
3. after the state machine snapshot is durable (:meth:`save_snapshot`), :meth:`compact` removes
   whole segments below it.

Not thread-safe: one caller at a time (the node runs it in one worker thread at a time).
"""

from __future__ import annotations

import itertools
import logging
import os
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import msgpack

from system_under_test.raft.types import Entry, EntryKind, HardState, Snapshot, StorageCorruption
from system_under_test.storage_util import atomic_write_bytes, fsync_dir

log = logging.getLogger("splitbrain.raft.storage")

HEADER = struct.Struct(">III")
DEFAULT_SEGMENT_BYTES = 8 * 1024 * 1024
SEGMENT_SUFFIX = ".seg"
HARD_STATE_FILE = "hardstate"
SNAPSHOT_FILE = "snapshot"


# ---------------------------------------------------------------------------------------------
# Pure codec: no files, tested directly.
# ---------------------------------------------------------------------------------------------


def encode_record(payload: bytes) -> bytes:
    """Frame ``payload`` (non-empty) as one record."""
    if not payload:
        raise ValueError("a record payload must be non-empty")
    length = len(payload).to_bytes(4, "big")
    return HEADER.pack(len(payload), zlib.crc32(length), zlib.crc32(payload)) + payload


@dataclass(frozen=True)
class ScanResult:
    """Outcome of :func:`scan_records`.

    Attributes:
        records: (byte offset, payload) of every good record, in order.
        valid_end: byte length of the good prefix (where the next record would go).
        torn: why the bytes after ``valid_end`` were rejected, or None if there are none.
    """

    records: list[tuple[int, bytes]]
    valid_end: int
    torn: str | None = None


def scan_records(buf: bytes, *, where: str, allow_torn_tail: bool = True) -> ScanResult:
    """Split ``buf`` into records.

    Args:
        buf: the whole file.
        where: the file name, for error messages.
        allow_torn_tail: True for the last segment, where a bad final record is a torn write.

    Raises:
        StorageCorruption: a bad record followed by more data (or any bad record when
            ``allow_torn_tail`` is False), naming ``where`` and the byte offset.
    """
    records: list[tuple[int, bytes]] = []
    pos, size = 0, len(buf)
    view = memoryview(buf)

    def bad(reason: str, *, at_end: bool) -> ScanResult:
        zeros = not any(view[pos:])
        if allow_torn_tail and (at_end or zeros):
            return ScanResult(records, pos, f"{reason} at byte offset {pos} of {where} ({size - pos} bytes dropped)")
        raise StorageCorruption(
            f"{where}: {reason} at byte offset {pos} (file size {size}, {len(records)} good records before it); "
            "this is not a torn tail: acknowledged data is damaged. Restore this node from a peer "
            "(wipe its raft directory) instead of starting it."
        )

    while pos < size:
        if size - pos < HEADER.size:
            return bad(f"partial record header ({size - pos} of {HEADER.size} bytes)", at_end=True)
        length, len_crc, crc = HEADER.unpack_from(buf, pos)
        if len_crc != zlib.crc32(view[pos : pos + 4]) or length == 0:
            return bad(f"bad record header (length={length})", at_end=False)
        end = pos + HEADER.size + length
        if end > size:
            return bad(f"record of {length} bytes cut short ({size - pos - HEADER.size} present)", at_end=True)
        payload = bytes(view[pos + HEADER.size : end])
        if zlib.crc32(payload) != crc:
            return bad(f"CRC mismatch in a record of {length} bytes", at_end=end == size)
        records.append((pos, payload))
        pos = end
    return ScanResult(records, pos)


def encode_entry(e: Entry) -> bytes:
    return msgpack.packb([e.term, e.index, int(e.kind), e.data], use_bin_type=True)


def decode_entry(payload: bytes) -> Entry:
    """Raises ValueError on a payload that is not an entry."""
    try:
        term, index, kind, data = msgpack.unpackb(payload, raw=False)
        return Entry(term=int(term), index=int(index), kind=EntryKind(kind), data=bytes(data))
    except Exception as exc:
        raise ValueError(f"not an entry record: {exc.__class__.__name__}: {exc}") from exc


def encode_hard_state(hs: HardState) -> bytes:
    return msgpack.packb([hs.term, hs.vote, hs.commit], use_bin_type=True)


def decode_hard_state(payload: bytes) -> HardState:
    try:
        term, vote, commit = msgpack.unpackb(payload, raw=False)
        return HardState(term=int(term), vote=None if vote is None else str(vote), commit=int(commit))
    except Exception as exc:
        raise ValueError(f"not a hard state record: {exc.__class__.__name__}: {exc}") from exc


def encode_snapshot(s: Snapshot) -> bytes:
    return msgpack.packb([s.index, s.term, list(s.voters), s.data], use_bin_type=True)


def decode_snapshot(payload: bytes) -> Snapshot:
    try:
        index, term, voters, data = msgpack.unpackb(payload, raw=False)
        return Snapshot(index=int(index), term=int(term), voters=tuple(str(v) for v in voters), data=bytes(data))
    except Exception as exc:
        raise ValueError(f"not a snapshot record: {exc.__class__.__name__}: {exc}") from exc


def segment_name(first_index: int) -> str:
    return f"{first_index:020d}{SEGMENT_SUFFIX}"


# ---------------------------------------------------------------------------------------------
# File shell.
# ---------------------------------------------------------------------------------------------


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: temp file, fsync, rename, fsync the directory."""
    atomic_write_bytes(path, data)


def _read_single_record(path: Path) -> bytes | None:
    if not path.exists():
        return None
    buf = path.read_bytes()
    scan = scan_records(buf, where=str(path), allow_torn_tail=False)
    if len(scan.records) != 1:
        raise StorageCorruption(f"{path}: expected exactly one record, found {len(scan.records)} ({len(buf)} bytes)")
    return scan.records[0][1]


@dataclass
class _Segment:
    first_index: int
    path: Path
    offsets: list[int] = field(default_factory=list)  # byte offset of entry first_index + k
    size: int = 0

    @property
    def last_index(self) -> int:
        return self.first_index + len(self.offsets) - 1


class RaftStorage:
    """One node's durable Raft state in directory ``dir`` (created if missing).

    Args:
        dir: the node's raft directory.
        segment_bytes: roll to a new segment once the current one reaches this size.
    """

    def __init__(self, dir: Path, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> None:
        if segment_bytes < 1:
            raise ValueError(f"segment_bytes must be >= 1, got {segment_bytes}")
        self.dir = Path(dir)
        self.log_dir = self.dir / "log"
        self.segment_bytes = segment_bytes
        self._segments: list[_Segment] = []
        self._file: BinaryIO | None = None  # open handle of the last segment
        self._file_dirty = False  # the open segment was written since the last sync
        self._dir_dirty = False
        self._snapshot_index = 0
        self._snapshot_term = 0
        self._hard_state = HardState()
        self._loaded = False

    # -- reading --------------------------------------------------------------------------------

    def load(self) -> tuple[HardState, Snapshot | None, list[Entry]]:
        """Read everything back after a (re)start; truncates a torn tail.

        Returns:
            (hard state, snapshot or None, entries after the snapshot index in order).

        Raises:
            StorageCorruption: a damaged record that is not a torn tail, or a gap in the log.
        """
        self.close()
        self._segments, self._file_dirty, self._dir_dirty = [], False, False
        self._snapshot_index = self._snapshot_term = 0
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(exist_ok=True)
        for stale in self.dir.glob("*.tmp"):
            stale.unlink()
        hs_payload = _read_single_record(self.dir / HARD_STATE_FILE)
        snap_payload = _read_single_record(self.dir / SNAPSHOT_FILE)
        try:
            hs = HardState() if hs_payload is None else decode_hard_state(hs_payload)
            snap = None if snap_payload is None else decode_snapshot(snap_payload)
        except ValueError as exc:
            raise StorageCorruption(f"{self.dir}: {exc}") from exc
        if snap is not None:
            self._snapshot_index, self._snapshot_term = snap.index, snap.term
            if hs.commit < snap.index:  # a snapshot only ever holds committed state
                hs = HardState(hs.term, hs.vote, snap.index)
        self._hard_state = hs
        entries = self._load_segments()
        if snap is not None:
            at = [e for e in entries if e.index == snap.index]
            if at and at[0].term != snap.term:
                # A snapshot install whose log reset was interrupted: finish it (Raft fig. 13).
                log.warning("%s: log entry %s conflicts with %s; discarding the log", self.dir, at[0].describe(),
                            snap.describe())
                self._reset_log(snap.index + 1)
                entries = []
            entries = [e for e in entries if e.index > snap.index]
        expected_first = self._snapshot_index + 1
        if entries and entries[0].index != expected_first:
            raise StorageCorruption(
                f"{self.log_dir}: log resumes at index {entries[0].index} but the snapshot covers up to "
                f"{self._snapshot_index}; expected the log to start at or before {expected_first}"
            )
        if not self._segments:
            self._new_segment(expected_first)
        self._loaded = True
        return hs, snap, entries

    def _load_segments(self) -> list[Entry]:
        paths = sorted(self.log_dir.glob("*" + SEGMENT_SUFFIX))
        entries: list[Entry] = []
        for n, path in enumerate(paths):
            last = n == len(paths) - 1
            buf = path.read_bytes()
            scan = scan_records(buf, where=str(path), allow_torn_tail=last)
            try:
                first = int(path.name[: -len(SEGMENT_SUFFIX)])
            except ValueError as exc:
                raise StorageCorruption(f"{path}: segment name is not <first index>{SEGMENT_SUFFIX}") from exc
            seg = _Segment(first, path, size=scan.valid_end)
            for k, (offset, payload) in enumerate(scan.records):
                try:
                    e = decode_entry(payload)
                except ValueError as exc:
                    raise StorageCorruption(f"{path}: record at byte offset {offset}: {exc}") from exc
                if e.index != first + k:
                    raise StorageCorruption(
                        f"{path}: record at byte offset {offset} holds index {e.index}, expected {first + k}"
                    )
                seg.offsets.append(offset)
                entries.append(e)
            if entries and self._segments and first != self._segments[-1].last_index + 1:
                raise StorageCorruption(
                    f"{path}: segment starts at index {first} but the previous one ends at "
                    f"{self._segments[-1].last_index}"
                )
            if scan.torn is not None:
                log.warning("raft log torn tail truncated: %s", scan.torn)
                with open(path, "r+b") as f:
                    f.truncate(scan.valid_end)
                    f.flush()
                    os.fsync(f.fileno())
            self._segments.append(seg)
        if self._segments:
            self._file = open(self._segments[-1].path, "r+b")  # noqa: SIM115 - kept open for appends
            self._file.seek(self._segments[-1].size)
        return entries

    # -- properties -----------------------------------------------------------------------------

    @property
    def last_index(self) -> int:
        """Index of the last entry on disk, or the snapshot index if the log is empty."""
        for seg in reversed(self._segments):
            if seg.offsets:
                return max(seg.last_index, self._snapshot_index)
        return self._snapshot_index

    @property
    def snapshot_index(self) -> int:
        return self._snapshot_index

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    def describe(self) -> str:
        return (
            f"raft storage {self.dir}: {len(self._segments)} segments, snapshot@{self._snapshot_term}/"
            f"{self._snapshot_index}, last index {self.last_index}, {self._hard_state.describe()}"
        )

    # -- writing --------------------------------------------------------------------------------

    def _require_loaded(self) -> None:
        if not self._loaded:
            raise RuntimeError(f"RaftStorage({self.dir}).load() must be called before writing")

    def _new_segment(self, first_index: int) -> None:
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
        self._file_dirty = False
        seg = _Segment(first_index, self.log_dir / segment_name(first_index))
        self._file = open(seg.path, "w+b")  # noqa: SIM115 - kept open for appends
        self._segments.append(seg)
        self._dir_dirty = True

    def _reset_log(self, first_index: int) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        for seg in self._segments:
            seg.path.unlink(missing_ok=True)
        self._segments = []
        self._file_dirty = False
        self._new_segment(first_index)

    def _truncate_from(self, index: int) -> None:
        """Drop entries >= index (the caller overwrites a conflicting suffix)."""
        assert self._file is not None
        while len(self._segments) > 1 and self._segments[-1].first_index > index:
            seg = self._segments.pop()
            self._file.close()
            seg.path.unlink()
            self._dir_dirty = True
            self._file = open(self._segments[-1].path, "r+b")  # noqa: SIM115
        seg = self._segments[-1]
        keep = index - seg.first_index
        if keep < 0:
            raise ValueError(f"cannot overwrite from index {index}: log on disk starts at {seg.first_index}")
        if keep < len(seg.offsets):
            seg.size = seg.offsets[keep]
            del seg.offsets[keep:]
            self._file.flush()
            self._file.truncate(seg.size)
            self._file_dirty = True
        self._file.seek(seg.size)

    def append(self, entries: Sequence[Entry]) -> None:
        """Write ``entries`` (contiguous), replacing any existing entries from ``entries[0].index`` on.

        Not durable until :meth:`sync`.

        Raises:
            ValueError: entries not contiguous, or leaving a gap after the last index, or reaching
                below the snapshot.
        """
        self._require_loaded()
        if not entries:
            return
        first = entries[0].index
        for a, b in itertools.pairwise(entries):
            if b.index != a.index + 1:
                raise ValueError(f"append needs contiguous entries, got {a.index} then {b.index}")
        if first <= self._snapshot_index:
            raise ValueError(f"append from index {first} reaches below the snapshot at {self._snapshot_index}")
        if first > self.last_index + 1:
            raise ValueError(f"append from index {first} leaves a gap after the last index {self.last_index}")
        if first <= self.last_index:
            self._truncate_from(first)
        assert self._file is not None
        seg = self._segments[-1]
        chunks: list[bytes] = []
        for e in entries:
            if seg.size >= self.segment_bytes and seg.offsets:
                if chunks:
                    self._file.write(b"".join(chunks))
                    chunks = []
                self._new_segment(e.index)
                seg = self._segments[-1]
            rec = encode_record(encode_entry(e))
            seg.offsets.append(seg.size)
            seg.size += len(rec)
            chunks.append(rec)
        if chunks:
            self._file.write(b"".join(chunks))
        self._file_dirty = True

    def sync(self) -> None:
        """Make every append and truncation so far durable (fsync the segment, then the directory)."""
        self._require_loaded()
        if self._file is not None and self._file_dirty:
            self._file.flush()
            os.fsync(self._file.fileno())
        self._file_dirty = False
        if self._dir_dirty:
            fsync_dir(self.log_dir)
            self._dir_dirty = False

    def save_hard_state(self, hs: HardState, *, sync: bool = True) -> None:
        """Atomically replace the hard state.

        With ``sync=False`` (only the commit index moved) the file is replaced without fsync: the
        commit index can always be recomputed, so losing it to a crash is safe.
        """
        self._require_loaded()
        data = encode_record(encode_hard_state(hs))
        path = self.dir / HARD_STATE_FILE
        if sync:
            write_atomic(path, data)
        else:
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        self._hard_state = hs

    def save_snapshot(self, snap: Snapshot) -> None:
        """Durably replace the snapshot file; then apply Raft fig. 13 to the log.

        If the log holds an entry at ``snap.index`` with ``snap.term`` the entries after it are
        kept; otherwise the whole log is discarded and restarts at ``snap.index + 1``.  Entries at
        or below the snapshot are removed by :meth:`compact` (whole segments only).
        """
        self._require_loaded()
        if snap.index < self._snapshot_index:
            raise ValueError(f"snapshot at {snap.index} is older than the one on disk at {self._snapshot_index}")
        write_atomic(self.dir / SNAPSHOT_FILE, encode_record(encode_snapshot(snap)))
        keep = self._term_at(snap.index) == snap.term
        self._snapshot_index, self._snapshot_term = snap.index, snap.term
        if not keep:
            self._reset_log(snap.index + 1)
            self.sync()

    def _term_at(self, index: int) -> int | None:
        for seg in self._segments:
            if seg.offsets and seg.first_index <= index <= seg.last_index:
                if self._file is not None:
                    self._file.flush()
                with open(seg.path, "rb") as f:
                    f.seek(seg.offsets[index - seg.first_index])
                    header = f.read(HEADER.size)
                    length = HEADER.unpack(header)[0]
                    return decode_entry(f.read(length)).term
        return None

    def compact(self, index: int) -> int:
        """Delete whole segments whose entries are all <= ``index`` (never the last segment).

        Call only once a snapshot covering ``index`` is durable.  Returns how many were removed.
        """
        self._require_loaded()
        if index > self._snapshot_index:
            raise ValueError(f"compact({index}) beyond the durable snapshot at {self._snapshot_index}")
        removed = 0
        while len(self._segments) > 1 and self._segments[1].first_index <= index + 1:
            self._segments.pop(0).path.unlink()
            removed += 1
        if removed:
            fsync_dir(self.log_dir)
        return removed

    def close(self) -> None:
        """Close the open segment (no sync: call :meth:`sync` first for durability)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def status(self) -> dict[str, Any]:
        return {
            "dir": str(self.dir),
            "segments": len(self._segments),
            "snapshot_index": self._snapshot_index,
            "last_index": self.last_index,
        }
