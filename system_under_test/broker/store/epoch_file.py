"""The epoch file: which master epoch wrote which range of the commit log.

Words (RIP-44 "Election Truncation Algorithm"):

* **master epoch** -- the version number the controller gives each elected master; unique and
  increasing, so for one (epoch, offset) there was exactly one writer.
* **epoch entry** -- ``(epoch, start_offset)``: the master of ``epoch`` wrote the log from
  ``start_offset`` (its max offset when it became master).
* **end offset** -- the start offset of the next entry; the last entry has no end (it runs to the
  log's max offset, or is unbounded).  End offsets are derived, never stored.

Rules enforced here: an appended entry must have a strictly larger epoch **and** a strictly
larger start offset than the last entry (appending an identical last entry again is a no-op).
A master starting an epoch at the offset where an earlier epoch also starts (that epoch wrote
nothing) first drops the empty entry: :meth:`EpochFileCache.start_epoch` does both steps.

File format (``<store>/epochFileCheckpoint``)::

    <count>
    <CRC32 of the entry lines, each with its trailing newline, decimal>
    <epoch>-<startOffset>
    ...

Every update is written atomically twice: first the previous content to ``<file>.bak``, then the
new content to the file.  Loading falls back to ``.bak`` (with a warning) when the file is
missing, unparseable or fails its CRC; when both are bad it raises :class:`EpochFileError`.

:class:`EpochHistory` is the pure core (immutable, no I/O); :class:`EpochFileCache` wraps it with
the file.
"""

from __future__ import annotations

import bisect
import logging
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from system_under_test.broker.store import _fileio
from system_under_test.broker.store.errors import EpochFileError

log = logging.getLogger("splitbrain.broker.store.epoch")

EPOCH_FILE_NAME = "epochFileCheckpoint"


@dataclass(frozen=True, order=True)
class EpochEntry:
    """``epoch`` started writing the log at ``start_offset``."""

    epoch: int
    start_offset: int

    def __post_init__(self) -> None:
        if not isinstance(self.epoch, int) or self.epoch < 0:
            raise EpochFileError(f"EpochEntry.epoch must be an int >= 0, got {self.epoch!r}")
        if not isinstance(self.start_offset, int) or self.start_offset < 0:
            raise EpochFileError(f"EpochEntry.start_offset must be an int >= 0, got {self.start_offset!r}")

    def describe(self) -> str:
        return f"{self.epoch}-{self.start_offset}"


@dataclass(frozen=True)
class EpochRange:
    """An entry with its derived end: the epoch owns ``[start_offset, end_offset)``.

    ``end_offset`` is None for an unbounded last entry."""

    epoch: int
    start_offset: int
    end_offset: int | None

    def contains(self, offset: int) -> bool:
        return self.start_offset <= offset and (self.end_offset is None or offset < self.end_offset)

    def describe(self) -> str:
        end = "inf" if self.end_offset is None else str(self.end_offset)
        return f"epoch {self.epoch} [{self.start_offset},{end})"


def ranges_of(entries: Sequence[EpochEntry], last_end: int | None = None) -> list[EpochRange]:
    """Entries with end offsets; the last one ends at ``last_end`` (None = unbounded)."""
    out = []
    for i, e in enumerate(entries):
        end = entries[i + 1].start_offset if i + 1 < len(entries) else last_end
        out.append(EpochRange(e.epoch, e.start_offset, end))
    return out


@dataclass(frozen=True)
class EpochHistory:
    """Immutable list of epoch entries, strictly increasing in epoch and start offset (pure core)."""

    entries: tuple[EpochEntry, ...] = ()

    def __post_init__(self) -> None:
        for prev, cur in zip(self.entries, self.entries[1:]):
            if not (cur.epoch > prev.epoch and cur.start_offset > prev.start_offset):
                raise EpochFileError(
                    f"epoch entries must strictly increase in epoch and start offset; "
                    f"found {prev.describe()} followed by {cur.describe()}"
                )

    @property
    def last(self) -> EpochEntry | None:
        return self.entries[-1] if self.entries else None

    @property
    def last_epoch(self) -> int:
        """The newest epoch, 0 when there is none (controller epochs start at 1)."""
        return self.entries[-1].epoch if self.entries else 0

    def appended(self, epoch: int, start_offset: int) -> EpochHistory:
        """This history plus ``(epoch, start_offset)``.

        Raises:
            EpochFileError: epoch or start offset does not strictly increase (unless the entry is
                identical to the last one, which is a no-op).
        """
        entry = EpochEntry(epoch, start_offset)
        last = self.last
        if last is not None:
            if entry == last:
                return self
            if not (epoch > last.epoch and start_offset > last.start_offset):
                raise EpochFileError(
                    f"cannot append epoch entry {entry.describe()} after {last.describe()}: both the epoch and "
                    f"the start offset must strictly increase (drop empty epochs with truncate_suffix_by_offset "
                    f"first, or use start_epoch)"
                )
        return EpochHistory((*self.entries, entry))

    def suffix_truncated(self, offset: int) -> EpochHistory:
        """Without the entries whose start offset is >= ``offset`` (their data is gone)."""
        return EpochHistory(tuple(e for e in self.entries if e.start_offset < offset))

    def beyond_removed(self, max_offset: int) -> EpochHistory:
        """Without the entries that start strictly after ``max_offset`` (recovery correction: an
        entry starting exactly at the max offset is a master epoch that has not written yet)."""
        return EpochHistory(tuple(e for e in self.entries if e.start_offset <= max_offset))

    def prefix_truncated(self, offset: int) -> EpochHistory:
        """Without the entries whose end offset is <= ``offset`` (the last entry never ends)."""
        keep = [r for r in ranges_of(self.entries) if r.end_offset is None or r.end_offset > offset]
        return EpochHistory(tuple(EpochEntry(r.epoch, r.start_offset) for r in keep))

    def ranges(self, last_end: int | None = None) -> list[EpochRange]:
        return ranges_of(self.entries, last_end)

    def find_by_offset(self, offset: int) -> EpochRange | None:
        """The range containing ``offset`` (the last entry is unbounded), or None before the first."""
        starts = [e.start_offset for e in self.entries]
        i = bisect.bisect_right(starts, offset) - 1
        if i < 0:
            return None
        return ranges_of(self.entries)[i]

    def find_epoch(self, epoch: int, last_end: int | None = None) -> EpochRange | None:
        """The range of ``epoch``, or None if this history has no entry for it."""
        for r in ranges_of(self.entries, last_end):
            if r.epoch == epoch:
                return r
        return None

    def describe(self) -> str:
        return "[" + ", ".join(e.describe() for e in self.entries) + "]"


def encode_epoch_text(entries: Sequence[EpochEntry]) -> str:
    """The file content for ``entries`` (see the module docstring)."""
    body = "".join(f"{e.epoch}-{e.start_offset}\n" for e in entries)
    return f"{len(entries)}\n{zlib.crc32(body.encode())}\n{body}"


def parse_epoch_text(text: str, where: str = "<epoch file>") -> EpochHistory:
    """Parse file content.

    Raises:
        EpochFileError: naming ``where``, the line and what was expected.
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        raise EpochFileError(f"{where}: expected a count line and a CRC line, found {len(lines)} lines")
    try:
        count = int(lines[0])
        crc = int(lines[1])
    except ValueError as exc:
        raise EpochFileError(f"{where}: count/CRC lines must be integers, found {lines[:2]!r}") from exc
    body_lines = lines[2:]
    if count != len(body_lines):
        raise EpochFileError(f"{where}: count line says {count} entries, found {len(body_lines)}")
    body = "".join(line + "\n" for line in body_lines)
    actual = zlib.crc32(body.encode())
    if actual != crc:
        raise EpochFileError(f"{where}: CRC mismatch, stored {crc}, computed {actual}")
    entries = []
    for n, line in enumerate(body_lines, start=3):
        epoch_s, sep, start_s = line.partition("-")
        if not sep:
            raise EpochFileError(f"{where}:{n}: expected '<epoch>-<startOffset>', found {line!r}")
        try:
            entries.append(EpochEntry(int(epoch_s), int(start_s)))
        except ValueError as exc:
            raise EpochFileError(f"{where}:{n}: expected '<epoch>-<startOffset>', found {line!r}") from exc
    try:
        return EpochHistory(tuple(entries))
    except EpochFileError as exc:
        raise EpochFileError(f"{where}: {exc}") from exc


class EpochFileCache:
    """The epoch history of one store, kept in memory and (when ``path`` is set) on disk.

    Every mutating method persists before returning.  Not thread-safe on its own; the
    :class:`~system_under_test.broker.store.store.MessageStore` serialises access.
    """

    def __init__(self, path: str | None = None, entries: Iterable[EpochEntry] = ()) -> None:
        self.path = path
        self._history = EpochHistory(tuple(entries))
        self._persisted: EpochHistory | None = None

    @classmethod
    def load(cls, path: str) -> EpochFileCache:
        """Load ``path`` (falling back to ``path + '.bak'``); a missing file gives an empty cache.

        Raises:
            EpochFileError: the file exists but neither it nor the backup is readable.
        """
        raw = _fileio.read_or_none(path)
        bak = _fileio.read_or_none(path + ".bak")
        if raw is None and bak is None:
            return cls(path)
        problem = "missing"
        if raw is not None:
            try:
                cache = cls(path, parse_epoch_text(raw.decode("utf-8", "replace"), path).entries)
                cache._persisted = cache._history
                return cache
            except EpochFileError as exc:
                problem = str(exc)
        if bak is not None:
            try:
                history = parse_epoch_text(bak.decode("utf-8", "replace"), path + ".bak")
            except EpochFileError as exc:
                raise EpochFileError(
                    f"epoch file unreadable ({problem}) and its backup too ({exc}); the epoch history is lost: "
                    f"repair or remove the store with the admin tools"
                ) from exc
            log.warning("epoch file %s unreadable (%s); using backup: %s", path, problem, history.describe())
            cache = cls(path, history.entries)
            cache._persisted = cache._history
            cache._persist()
            return cache
        raise EpochFileError(f"epoch file unreadable ({problem}) and there is no backup {path}.bak")

    # -- reading -------------------------------------------------------------------------------
    @property
    def history(self) -> EpochHistory:
        return self._history

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return self._history.entries

    @property
    def last_epoch(self) -> int:
        return self._history.last_epoch

    @property
    def last_entry(self) -> EpochEntry | None:
        return self._history.last

    def ranges(self, last_end: int | None = None) -> list[EpochRange]:
        """Entries with end offsets; the last one ends at ``last_end`` (None = unbounded)."""
        return self._history.ranges(last_end)

    def find_entry_by_offset(self, offset: int) -> EpochRange | None:
        return self._history.find_by_offset(offset)

    def find_epoch(self, epoch: int, last_end: int | None = None) -> EpochRange | None:
        return self._history.find_epoch(epoch, last_end)

    def describe(self) -> str:
        return self._history.describe()

    # -- updating ------------------------------------------------------------------------------
    def append(self, epoch: int, start_offset: int) -> None:
        """Append ``(epoch, start_offset)``; see :meth:`EpochHistory.appended` for the rules."""
        new = self._history.appended(epoch, start_offset)
        if new is not self._history:
            self._set(new)

    def start_epoch(self, epoch: int, start_offset: int) -> None:
        """Become master of ``epoch`` at ``start_offset``: drop entries starting at or after it
        (epochs that wrote nothing), then append.  Raises EpochFileError if ``epoch`` is not newer."""
        kept = self._history.suffix_truncated(start_offset)
        last = self._history.last
        if last is not None and last == EpochEntry(epoch, start_offset):
            return
        self._set(kept.appended(epoch, start_offset))

    def truncate_suffix_by_offset(self, offset: int) -> None:
        """Remove entries whose start offset is >= ``offset``."""
        self._set(self._history.suffix_truncated(offset))

    def truncate_prefix_by_offset(self, offset: int) -> None:
        """Remove entries whose end offset is <= ``offset`` (the last entry is never removed)."""
        self._set(self._history.prefix_truncated(offset))

    def remove_beyond(self, max_offset: int) -> None:
        """Remove entries starting strictly after ``max_offset`` (recovery correction)."""
        self._set(self._history.beyond_removed(max_offset))

    def _set(self, new: EpochHistory) -> None:
        unchanged = new == self._history
        if unchanged and (self._persisted == new or (self._persisted is None and not new.entries)):
            return
        self._history = new
        self._persist()

    def _persist(self) -> None:
        if self.path is None:
            return
        previous = self._persisted if self._persisted is not None else EpochHistory()
        _fileio.atomic_write(self.path + ".bak", encode_epoch_text(previous.entries).encode())
        _fileio.atomic_write(self.path, encode_epoch_text(self._history.entries).encode())
        self._persisted = self._history
