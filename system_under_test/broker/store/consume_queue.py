"""Consume queues: per (topic, queue id), an index from logical offset to commit-log position.

Words:

* **logical (queue) offset** -- the record's number within its queue: 0, 1, 2, ...  It is
  assigned by the master at append time and stored in the record itself, so a consume queue is
  fully derivable from the commit log.
* **entry** -- 20 bytes at ``logical * 20`` in ``<dir>/consumequeue/<topic>/<queue_id>``:
  physical offset (u64), frame size (u32), tag hash (u64).  An all-zero entry is a **hole**: a
  logical offset this store never held (a slave that began copying mid-log).
* **dispatch** -- adding the entry of a record.  The store dispatches a record only once its
  end is at or below the confirm offset, so consumers never see data that may be truncated.

Files are derived data: the store re-derives every queue from the commit log on open
(:meth:`ConsumeQueues.reconcile`), rebuilding missing or short files and truncating long ones.
The index math (:func:`entry_position`, :func:`encode_entry`, :func:`decode_entries`,
:func:`first_at_or_after`) is pure; the classes are the file shell.
"""

from __future__ import annotations

import bisect
import logging
import os
import shutil
import struct
import threading
from collections.abc import Iterable
from typing import NamedTuple

from system_under_test.broker.store import _fileio
from system_under_test.broker.store.errors import StoreClosed

log = logging.getLogger("splitbrain.broker.store.consumequeue")

CONSUMEQUEUE_DIR = "consumequeue"
_ENTRY = struct.Struct(">QIQ")
ENTRY_BYTES = _ENTRY.size  # 20
_HOLE = bytes(ENTRY_BYTES)


class CqEntry(NamedTuple):
    """Where the record with some logical offset lives; ``size == 0`` marks a hole."""

    phys_offset: int
    size: int
    tag_hash: int

    @property
    def is_hole(self) -> bool:
        return self.size == 0

    @property
    def end(self) -> int:
        return self.phys_offset + self.size


def entry_position(logical_offset: int) -> int:
    """Byte position of an entry in its file."""
    return logical_offset * ENTRY_BYTES


def encode_entry(phys_offset: int, size: int, tag_hash: int) -> bytes:
    return _ENTRY.pack(phys_offset, size, tag_hash)


def decode_entries(buf: bytes) -> list[CqEntry]:
    """Entries in ``buf`` (a trailing partial entry is ignored)."""
    whole = len(buf) - len(buf) % ENTRY_BYTES
    return list(map(CqEntry._make, _ENTRY.iter_unpack(buf[:whole])))


def first_at_or_after(entries: list[CqEntry], phys_offset: int) -> int:
    """Index of the first non-hole entry whose physical offset is >= ``phys_offset`` (entries are
    ordered by physical offset; holes only precede real entries); ``len(entries)`` if none."""
    keys = [-1 if e.is_hole else e.phys_offset for e in entries]
    return bisect.bisect_left(keys, phys_offset)


class ConsumeQueue:
    """One queue file.  Not thread-safe alone; :class:`ConsumeQueues` holds the lock."""

    def __init__(self, path: str) -> None:
        self.path = path
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        size = os.fstat(self._fd).st_size
        if size % ENTRY_BYTES:
            log.warning("consume queue %s: dropping %d-byte partial entry", path, size % ENTRY_BYTES)
            os.ftruncate(self._fd, size - size % ENTRY_BYTES)
        self.count = size // ENTRY_BYTES
        self.dirty = False
        self._min: int | None = None

    @property
    def max_offset(self) -> int:
        """Next logical offset to be dispatched (= number of entries, holes included)."""
        return self.count

    @property
    def min_offset(self) -> int:
        """First logical offset that is not a hole (``count`` when the queue is empty)."""
        if self._min is None:
            self._min = self.count
            for i, e in enumerate(self.read(0, self.count)):
                if not e.is_hole:
                    self._min = i
                    break
        return self._min

    def read(self, logical_offset: int, max_count: int) -> list[CqEntry]:
        if logical_offset >= self.count or max_count <= 0:
            return []
        n = min(max_count, self.count - logical_offset)
        return decode_entries(os.pread(self._fd, n * ENTRY_BYTES, entry_position(logical_offset)))

    def read_rows(self, logical_offset: int, max_count: int) -> list[tuple[int, int, int]]:
        """As :meth:`read`, as plain ``(phys_offset, size, tag_hash)`` tuples (cheaper, for hot paths)."""
        if logical_offset >= self.count or max_count <= 0:
            return []
        n = min(max_count, self.count - logical_offset)
        buf = os.pread(self._fd, n * ENTRY_BYTES, entry_position(logical_offset))
        return list(_ENTRY.iter_unpack(buf[: len(buf) - len(buf) % ENTRY_BYTES]))

    def put(self, logical_offset: int, phys_offset: int, size: int, tag_hash: int) -> None:
        """Write the entry at ``logical_offset`` (filling holes before it if needed)."""
        self.put_run(logical_offset, encode_entry(phys_offset, size, tag_hash))

    def put_run(self, logical_offset: int, raw: bytes | bytearray) -> None:
        """Write encoded entries for consecutive offsets from ``logical_offset`` with one pwrite
        (filling holes before them if needed)."""
        if logical_offset > self.count:
            raw = _HOLE * (logical_offset - self.count) + raw
            pos = entry_position(self.count)
        else:
            pos = entry_position(logical_offset)
        os.pwrite(self._fd, raw, pos)
        self.count = max(self.count, logical_offset + len(raw) // ENTRY_BYTES)
        self.dirty = True
        if self._min is not None and logical_offset < self._min:
            self._min = logical_offset

    def truncate_entries(self, count: int) -> None:
        """Keep only the first ``count`` entries."""
        if count < self.count:
            os.ftruncate(self._fd, entry_position(count))
            self.count = count
            self.dirty = True
            self._min = None

    def replace_all(self, raw: bytes) -> None:
        os.ftruncate(self._fd, 0)
        if raw:
            os.pwrite(self._fd, raw, 0)
        self.count = len(raw) // ENTRY_BYTES
        self.dirty = True
        self._min = None

    def read_all_raw(self) -> bytes:
        return os.pread(self._fd, self.count * ENTRY_BYTES, 0)

    def flush(self) -> None:
        if self.dirty:
            os.fsync(self._fd)
            self.dirty = False

    def fsync(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        os.close(self._fd)


class ConsumeQueues:
    """All consume queues of a store (thread-safe)."""

    def __init__(self, store_dir: str) -> None:
        self.directory = os.path.join(store_dir, CONSUMEQUEUE_DIR)
        os.makedirs(self.directory, exist_ok=True)
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._lock = threading.RLock()
        self._closed = False

    def _path(self, topic: str, queue_id: int) -> str:
        return os.path.join(self.directory, topic, str(queue_id))

    def _get(self, topic: str, queue_id: int, create: bool) -> ConsumeQueue | None:
        if self._closed:
            raise StoreClosed(f"consume queues {self.directory} are closed")
        q = self._queues.get((topic, queue_id))
        if q is None and (create or os.path.exists(self._path(topic, queue_id))):
            q = ConsumeQueue(self._path(topic, queue_id))
            self._queues[(topic, queue_id)] = q
        return q

    def on_disk(self) -> list[tuple[str, int]]:
        """(topic, queue id) of every queue file present."""
        out = []
        for topic in sorted(os.listdir(self.directory)):
            tdir = os.path.join(self.directory, topic)
            if os.path.isdir(tdir):
                out += [(topic, int(n)) for n in sorted(os.listdir(tdir)) if n.isdigit()]
        return out

    def queues(self) -> list[tuple[str, int]]:
        with self._lock:
            return sorted(set(self._queues) | set(self.on_disk()))

    def dispatch(self, topic: str, queue_id: int, queue_offset: int, phys_offset: int, size: int, tag: int) -> None:
        with self._lock:
            q = self._get(topic, queue_id, True)
            assert q is not None
            q.put(queue_offset, phys_offset, size, tag)

    def dispatch_many(self, items: Iterable[tuple[str, int, int, int, int, int]]) -> None:
        """Dispatch ``(topic, queue_id, queue_offset, phys_offset, size, tag)`` entries in log order;
        each queue's run of consecutive queue offsets is written with one pwrite."""
        runs: dict[tuple[str, int], tuple[int, bytearray]] = {}
        nexts: dict[tuple[str, int], int] = {}  # the queue offset that continues each open run
        pack = _ENTRY.pack
        with self._lock:
            for topic, queue_id, queue_offset, phys_offset, size, tag in items:
                key = (topic, queue_id)
                if nexts.get(key) == queue_offset:
                    runs[key][1].extend(pack(phys_offset, size, tag))
                else:
                    if key in runs:
                        self._put_run(key, *runs[key])
                    runs[key] = (queue_offset, bytearray(pack(phys_offset, size, tag)))
                nexts[key] = queue_offset + 1
            for key, run in runs.items():
                self._put_run(key, *run)

    def _put_run(self, key: tuple[str, int], first: int, raw: bytearray) -> None:
        q = self._get(key[0], key[1], True)
        assert q is not None
        q.put_run(first, raw)

    def read(self, topic: str, queue_id: int, logical_offset: int, max_count: int) -> list[CqEntry]:
        with self._lock:
            q = self._get(topic, queue_id, False)
            return [] if q is None else q.read(logical_offset, max_count)

    def read_rows(self, topic: str, queue_id: int, logical_offset: int, max_count: int) -> list[tuple[int, int, int]]:
        """:meth:`read` as plain ``(phys_offset, size, tag_hash)`` tuples."""
        with self._lock:
            q = self._get(topic, queue_id, False)
            return [] if q is None else q.read_rows(logical_offset, max_count)

    def bounds(self, topic: str, queue_id: int) -> tuple[int, int]:
        """(min, max) logical offsets visible in the queue; (0, 0) for an unknown queue."""
        with self._lock:
            q = self._get(topic, queue_id, False)
            return (0, 0) if q is None else (q.min_offset, q.max_offset)

    def truncate_phys(self, phys_offset: int) -> None:
        """Drop the entries of records at or beyond ``phys_offset`` in every queue."""
        with self._lock:
            for key in self.queues():
                q = self._get(*key, False)
                if q is None:
                    continue
                entries = q.read(0, q.count)
                keep = first_at_or_after(entries, phys_offset)
                if keep < q.count:
                    q.truncate_entries(keep)

    def reconcile(self, expected: dict[tuple[str, int], bytearray]) -> list[str]:
        """Make the files equal ``expected`` (raw entry bytes per queue); returns what was fixed."""
        fixed: list[str] = []
        with self._lock:
            for key in sorted(set(self.queues()) | set(expected)):
                want = bytes(expected.get(key, b""))
                q = self._get(*key, bool(want))
                if q is None:
                    continue
                have = q.read_all_raw()
                if have == want:
                    continue
                counts = f"{len(have) // ENTRY_BYTES} -> {len(want) // ENTRY_BYTES} entries"
                if have.startswith(want):
                    q.truncate_entries(len(want) // ENTRY_BYTES)
                    fixed.append(f"{key[0]}/{key[1]}: truncated {counts}")
                else:
                    q.replace_all(want)
                    fixed.append(f"{key[0]}/{key[1]}: rebuilt {counts}")
            for topic in os.listdir(self.directory):
                tdir = os.path.join(self.directory, topic)
                if os.path.isdir(tdir) and not os.listdir(tdir):
                    shutil.rmtree(tdir, ignore_errors=True)
        return fixed

    def flush(self) -> None:
        """fsync every queue written since its last flush.  The fsyncs run without the lock, so
        dispatch goes on meanwhile (the store serialises flush with close, which closes the files)."""
        with self._lock:
            dirty = [q for q in self._queues.values() if q.dirty]
            for q in dirty:
                q.dirty = False
        for i, q in enumerate(dirty):
            try:
                q.fsync()
            except OSError:
                with self._lock:
                    for left in dirty[i:]:
                        left.dirty = True
                raise

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            for q in self._queues.values():
                q.flush()
                q.close()
            self._queues.clear()
            self._closed = True
            _fileio.fsync_dir(self.directory)

    @staticmethod
    def expected_entries(items: Iterable[tuple[str, int, int, int, int, int]]) -> dict[tuple[str, int], bytearray]:
        """Raw expected queue contents from (topic, queue id, queue offset, phys, size, tag) in log order.

        Raises:
            ValueError: a queue offset repeats or goes backwards (naming the queue and offsets).
        """
        out: dict[tuple[str, int], bytearray] = {}
        for topic, queue_id, queue_offset, phys, size, tag in items:
            buf = out.setdefault((topic, queue_id), bytearray())
            count = len(buf) // ENTRY_BYTES
            if queue_offset < count:
                raise ValueError(
                    f"queue {topic}/{queue_id}: record at {phys} has queue offset {queue_offset}, "
                    f"but offsets up to {count - 1} were already seen earlier in the log"
                )
            if queue_offset > count:
                buf += _HOLE * (queue_offset - count)
            buf += encode_entry(phys, size, tag)
        return out
