"""The lazy file system's core: each file's writes that were not fsynced yet, kept apart from its durable bytes
(pure).

Why: a killed process keeps the page cache, so killing a broker never loses a byte it wrote, fsynced or not; and
cutting its log where the store *says* it fsynced trusts the very fsync a test should doubt.  The lazy file
system (:mod:`nemesis.lazyfs.fs`) sits between the broker and the disk and holds every write in memory until the
file is fsynced; a *crash* then throws away whatever was never fsynced -- what a power cut does to a page cache.

Per file, :class:`PendingFile` is the ordered list of data operations since the file's last fsync (``write`` at an
offset, ``truncate`` to a length) over the durable bytes, which live elsewhere (the backing file; a bytearray in
tests) and are reached only through two callables: ``fetch(offset, n)`` reads them, a :class:`Sink` changes them.

* a read merges: the durable bytes of the range, then every pending operation in order over them (a truncate
  zeroes what lies at or beyond its length, so a later extension reads zeros, as POSIX says);
* ``fsync`` / ``fdatasync`` (:meth:`PendingFile.flush`) apply the operations to the sink in order and clear them;
* a crash (:meth:`PendingFile.crash`) drops them all; a *torn* crash keeps a prefix of them, counted in *units*
  (a byte of written data is one unit, a truncate is one unit), so it can end inside a write.  The number of
  units kept comes from the caller's rng (seeded), so a torn crash is replayable.

Two rules keep the list short (a commit log is one operation per fsync interval, a file rewritten in place --
the store's ``commitlog.synced``, never fsynced -- one operation for good), so memory and reads stay cheap:

* an append that continues the previous write is merged into it -- this changes neither what a read returns nor
  what a torn prefix of *n* units keeps;
* a write that wholly covers the previous pending write replaces it -- reads are unchanged, and a torn crash can
  no longer keep the old version alone (a disk may well have written only the newer one).

Known simplifications (as in Jepsen's LazyFS, which treats metadata specially too): metadata operations --
create, mkdir, unlink, rmdir, rename, chmod, utimes -- are durable at once; a crash never undoes them, and a file
created but never fsynced survives a crash empty.  Torn crashes keep a *prefix* of each file's pending
operations; a real disk may also reorder pages.  Nothing is shared between files: each file's fsync makes only
that file's pending operations durable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["Cache", "CrashReport", "PendingFile", "Sink", "Truncate", "Write", "apply_ops"]


class Sink(Protocol):
    """Where durable bytes change (the backing file, or a bytearray in tests)."""

    def pwrite(self, offset: int, data: bytes) -> None: ...

    def truncate(self, size: int) -> None: ...


class Rng(Protocol):
    def randint(self, a: int, b: int) -> int: ...


@dataclass
class Write:
    offset: int
    data: bytearray

    @property
    def end(self) -> int:
        return self.offset + len(self.data)


@dataclass(frozen=True)
class Truncate:
    size: int


Op = Write | Truncate


def _units(op: Op) -> int:
    return len(op.data) if isinstance(op, Write) else 1


def apply_ops(sink: Sink, ops: Iterable[Op], limit: int | None = None) -> int:
    """Apply ``ops`` in order to ``sink``, at most ``limit`` units (None: all); returns the units applied."""
    done = 0
    for op in ops:
        if limit is not None and done >= limit:
            break
        if isinstance(op, Truncate):
            sink.truncate(op.size)
            done += 1
            continue
        n = len(op.data) if limit is None else min(len(op.data), limit - done)
        if n:
            sink.pwrite(op.offset, bytes(op.data[:n]))
        done += n
    return done


@dataclass
class PendingFile:
    """One file's data operations since its last fsync (module docstring)."""

    ops: list[Op] = field(default_factory=list)

    def write(self, offset: int, data: bytes) -> None:
        if offset < 0:
            raise ValueError(f"write at negative offset {offset}")
        if not data:
            return
        while self.ops and isinstance(self.ops[-1], Write) and offset <= self.ops[-1].offset \
                and self.ops[-1].end <= offset + len(data):
            self.ops.pop()  # wholly overwritten: nobody can read it any more
        last = self.ops[-1] if self.ops else None
        if isinstance(last, Write) and last.end == offset:
            last.data += data
        else:
            self.ops.append(Write(offset, bytearray(data)))

    def truncate(self, size: int) -> None:
        if size < 0:
            raise ValueError(f"truncate to negative length {size}")
        self.ops.append(Truncate(size))

    def size(self, durable_size: int) -> int:
        """The file's length as readers see it, over a durable file of ``durable_size`` bytes."""
        size = durable_size
        for op in self.ops:
            size = max(size, op.end) if isinstance(op, Write) else op.size
        return size

    def read(self, offset: int, n: int, durable_size: int, fetch: Callable[[int, int], bytes]) -> bytes:
        """Up to ``n`` bytes at ``offset`` as readers see them: ``fetch(offset, n)`` gives durable bytes."""
        end = min(offset + max(n, 0), self.size(durable_size))
        if end <= offset:
            return b""
        buf = bytearray()
        if offset < durable_size:
            want = min(end, durable_size) - offset
            buf += fetch(offset, want)[:want]
        buf += bytes(end - offset - len(buf))
        for op in self.ops:
            if isinstance(op, Truncate):
                if op.size < end:
                    lo = max(op.size, offset) - offset
                    buf[lo:] = bytes(len(buf) - lo)
                continue
            lo, hi = max(op.offset, offset), min(op.end, end)
            if lo < hi:
                buf[lo - offset : hi - offset] = op.data[lo - op.offset : hi - op.offset]
        return bytes(buf)

    @property
    def units(self) -> int:
        return sum(_units(op) for op in self.ops)

    @property
    def pending_bytes(self) -> int:
        """Bytes of written data not yet durable (what a crash would drop)."""
        return sum(len(op.data) for op in self.ops if isinstance(op, Write))

    def flush(self, sink: Sink) -> int:
        """fsync: make every pending operation durable, in order; returns the bytes written."""
        written = self.pending_bytes
        apply_ops(sink, self.ops)
        self.ops.clear()
        return written

    def crash(self, sink: Sink, rng: Rng | None = None) -> tuple[int, int]:
        """Lose the pending operations; with ``rng`` (a torn crash) first apply a prefix of ``rng.randint(0,
        units)`` units.  Returns ``(bytes dropped, bytes kept)``."""
        total, kept = self.pending_bytes, 0
        if rng is not None and self.ops:
            kept = _bytes_within(self.ops, apply_ops(sink, self.ops, rng.randint(0, self.units)))
        self.ops.clear()
        return total - kept, kept


def _bytes_within(ops: list[Op], units: int) -> int:
    """Data bytes among the first ``units`` units of ``ops``."""
    out = 0
    for op in ops:
        if units <= 0:
            break
        u = min(_units(op), units)
        if isinstance(op, Write):
            out += u
        units -= u
    return out


@dataclass(frozen=True)
class CrashReport:
    """What one crash dropped: data bytes per file (files with nothing pending are left out) and kept (torn)."""

    dropped: dict[str, int]
    kept: dict[str, int]

    @property
    def dropped_bytes(self) -> int:
        return sum(self.dropped.values())

    def as_json(self) -> dict[str, object]:
        return {"dropped": self.dropped_bytes, "files": dict(sorted(self.dropped.items())),
                "kept": sum(self.kept.values()), "kept_files": dict(sorted(self.kept.items()))}


@dataclass
class Cache:
    """Every file's pending operations, keyed by whatever names a file for the caller (an inode number)."""

    files: dict[int, PendingFile] = field(default_factory=dict)

    def of(self, key: int) -> PendingFile:
        f = self.files.get(key)
        if f is None:
            f = self.files[key] = PendingFile()
        return f

    def get(self, key: int) -> PendingFile | None:
        return self.files.get(key)

    def forget(self, key: int) -> int:
        """The file is gone (unlinked): drop its pending operations; returns the data bytes dropped."""
        f = self.files.pop(key, None)
        return f.pending_bytes if f else 0

    def flush(self, key: int, sink: Sink) -> int:
        f = self.files.pop(key, None)
        return f.flush(sink) if f else 0

    def pending(self) -> dict[int, int]:
        return {k: f.pending_bytes for k, f in self.files.items() if f.ops}

    def crash(self, sink_of: Callable[[int], Sink], name_of: Callable[[int], str],
              rng: Rng | None = None) -> CrashReport:
        """Drop every file's pending operations (a torn crash: keep a prefix of each, in key order)."""
        dropped: dict[str, int] = {}
        kept: dict[str, int] = {}
        for key in sorted(self.files):
            f = self.files[key]
            if not f.ops:
                continue
            d, k = f.crash(sink_of(key), rng) if rng is not None else f.crash(_NoSink(), None)
            dropped[name_of(key)] = d
            if k:
                kept[name_of(key)] = k
        self.files.clear()
        return CrashReport(dropped, kept)


class _NoSink:
    def pwrite(self, offset: int, data: bytes) -> None:  # pragma: no cover - never called without an rng
        raise AssertionError("a crash without an rng writes nothing")

    def truncate(self, size: int) -> None:  # pragma: no cover
        raise AssertionError("a crash without an rng writes nothing")
