"""The in-memory view of one node's Raft log: snapshot boundary, stable and unstable entries.

Words:

* **snapshot boundary** -- ``(snapshot_index, snapshot_term)``: every entry up to
  ``snapshot_index`` is compacted into a snapshot; only its term is remembered (it is needed
  for the consistency check of the APPEND that follows it).  ``first_index`` is
  ``snapshot_index + 1``.
* **stable** -- entries up to ``stable_index`` are on disk (the shell persisted a Ready that
  carried them and called advance()); later entries are **unstable** and are handed to the
  shell by the next Ready.
* **committed / applied** -- ``applied <= committed <= last_index``.
* **pending snapshot** -- a snapshot received from the leader that replaced the whole log and
  that the shell has not persisted yet.

Rules of this file: indexes are 1-based and contiguous; a broken invariant raises
:class:`LogInvariantError` at once with the numbers and a guess at the cause (etcd ``log.go``).
"""

from __future__ import annotations

from collections.abc import Sequence

from system_under_test.raft.types import Entry, Snapshot

__all__ = ["LogInvariantError", "RaftLog"]


class LogInvariantError(AssertionError):
    """The log was asked to do something that would break a Raft invariant (a bug, or a corrupted disk)."""


class RaftLog:
    __slots__ = ("_entries", "applied", "committed", "pending_snapshot", "snapshot_index", "snapshot_term",
                 "stable_index")

    def __init__(self, *, snapshot: Snapshot | None = None, entries: Sequence[Entry] = (), committed: int = 0,
                 applied: int | None = None) -> None:
        self.snapshot_index = snapshot.index if snapshot is not None else 0
        self.snapshot_term = snapshot.term if snapshot is not None else 0
        ents = [e for e in entries if e.index > self.snapshot_index]
        prev_index, prev_term = self.snapshot_index, self.snapshot_term
        for e in ents:
            if e.index != prev_index + 1 or e.term < prev_term:
                raise LogInvariantError(
                    f"stored log is not contiguous: entry {e.term}/{e.index} follows {prev_term}/{prev_index} "
                    f"(snapshot at {self.snapshot_term}/{self.snapshot_index}). Was the raft log corrupted or "
                    f"partially truncated?"
                )
            prev_index, prev_term = e.index, e.term
        self._entries: list[Entry] = ents
        self.stable_index = self.last_index
        # A snapshot holds only committed state, so its index is committed even if the hard state on disk
        # lags (a commit-only hard state write is not fsynced and may be lost on a crash).
        committed = max(committed, self.snapshot_index)
        if not self.snapshot_index <= committed <= self.last_index:
            raise LogInvariantError(
                f"committed index {committed} is out of range [snapshot {self.snapshot_index}, last {self.last_index}]"
                f". Was the raft log corrupted, truncated, or lost?"
            )
        self.committed = committed
        self.applied = self.snapshot_index if applied is None else applied
        if not self.snapshot_index <= self.applied <= committed:
            raise LogInvariantError(
                f"applied index {self.applied} is out of range [snapshot {self.snapshot_index}, committed {committed}]"
            )
        self.pending_snapshot: Snapshot | None = None

    # ------------------------------------------------------------------ queries
    @property
    def first_index(self) -> int:
        return self.snapshot_index + 1

    @property
    def last_index(self) -> int:
        return self.snapshot_index + len(self._entries)

    @property
    def last_term(self) -> int:
        return self._entries[-1].term if self._entries else self.snapshot_term

    def term(self, index: int) -> int | None:
        """Term of the entry at ``index``; None if it is compacted (< snapshot_index) or beyond the log."""
        off = index - self.snapshot_index
        if off == 0:
            return self.snapshot_term
        if off < 0 or off > len(self._entries):
            return None
        return self._entries[off - 1].term

    def match_term(self, index: int, term: int) -> bool:
        t = self.term(index)
        return t is not None and t == term

    def is_up_to_date(self, last_term: int, last_index: int) -> bool:
        """Raft §5.4.1: is a log ending at (last_term, last_index) at least as up to date as ours?"""
        my_term = self.last_term
        return last_term > my_term or (last_term == my_term and last_index >= self.last_index)

    def slice(self, lo: int, hi: int) -> list[Entry]:
        """Entries with index in ``[lo, hi)``."""
        if lo < self.first_index or hi > self.last_index + 1 or lo > hi:
            raise LogInvariantError(
                f"slice [{lo}, {hi}) out of bounds [{self.first_index}, {self.last_index + 1}); "
                f"the caller did not check for compaction"
            )
        base = self.snapshot_index + 1
        return self._entries[lo - base:hi - base]

    def entry(self, index: int) -> Entry:
        return self.slice(index, index + 1)[0]

    def unstable_entries(self) -> list[Entry]:
        return self._entries[self.stable_index - self.snapshot_index:]

    def has_unstable(self) -> bool:
        return self.stable_index < self.last_index

    def next_committed_entries(self) -> list[Entry]:
        lo = max(self.applied, self.snapshot_index) + 1
        if lo > self.committed:
            return []
        return self.slice(lo, self.committed + 1)

    def has_next_committed(self) -> bool:
        return max(self.applied, self.snapshot_index) < self.committed

    def find_conflict(self, entries: Sequence[Entry]) -> int:
        """Index of the first entry of ``entries`` whose term differs from ours (or that we lack); 0 if none."""
        for e in entries:
            if not self.match_term(e.index, e.term):
                return e.index
        return 0

    def find_conflict_by_term(self, index: int, term: int) -> tuple[int, int]:
        """The largest ``i <= index`` whose term is <= ``term`` (fast backoff, etcd ``findConflictByTerm``).

        Returns (i, term_at_i); term 0 when the search reached the compacted prefix.
        """
        index = min(index, self.last_index)
        while True:
            t = self.term(index)
            if t is None:
                return index, 0
            if t <= term:
                return index, t
            index -= 1

    # ------------------------------------------------------------------ mutations
    def append(self, entries: Sequence[Entry]) -> int:
        """Append ``entries``, truncating any conflicting suffix; returns the new last index."""
        if not entries:
            return self.last_index
        first = entries[0].index
        if first <= self.committed:
            raise LogInvariantError(
                f"append at index {first} (term {entries[0].term}) would overwrite committed index {self.committed}; "
                f"a leader sent a log that conflicts with a committed entry (election safety broken?)"
            )
        if first > self.last_index + 1:
            raise LogInvariantError(f"append at index {first} leaves a gap after last index {self.last_index}")
        del self._entries[first - self.snapshot_index - 1:]
        self._entries.extend(entries)
        self.stable_index = min(self.stable_index, first - 1)
        return self.last_index

    def maybe_append(self, prev_index: int, prev_term: int, commit: int, entries: Sequence[Entry]) -> int | None:
        """Follower side of APPEND (Raft §5.3): None if (prev_term, prev_index) does not match, else the
        index of the last entry the message covers."""
        if not self.match_term(prev_index, prev_term):
            return None
        last_new = prev_index + len(entries)
        ci = self.find_conflict(entries)
        if ci:
            if ci <= self.committed:
                raise LogInvariantError(
                    f"entry {ci} conflicts with committed entry (committed={self.committed}, our term there "
                    f"{self.term(ci)}, leader's {entries[ci - prev_index - 1].term}); two leaders committed "
                    f"different entries?"
                )
            self.append(entries[ci - prev_index - 1:])
        self.commit_to(min(commit, last_new))
        return last_new

    def commit_to(self, index: int) -> None:
        if index > self.committed:
            if index > self.last_index:
                raise LogInvariantError(
                    f"tocommit({index}) is out of range [last index {self.last_index}]. Was the raft log corrupted, "
                    f"truncated, or lost?"
                )
            self.committed = index

    def maybe_commit(self, index: int, term: int) -> bool:
        """Leader: commit ``index`` only if its entry is from ``term`` (Raft §5.4.2)."""
        if index > self.committed and self.term(index) == term:
            self.commit_to(index)
            return True
        return False

    def applied_to(self, index: int) -> None:
        if index < self.applied or index > self.committed:
            raise LogInvariantError(f"applied({index}) is out of range [prev applied {self.applied}, committed "
                                    f"{self.committed}]")
        self.applied = index

    def stable_to(self, index: int, term: int) -> None:
        """The shell persisted entries up to ``index``; ignored if the entry there was since replaced."""
        if index > self.stable_index and self.match_term(index, term):
            self.stable_index = index

    def compact(self, index: int) -> int:
        """Drop entries <= ``index`` (already applied and stable); returns the term of ``index``."""
        if index <= self.snapshot_index:
            raise LogInvariantError(f"compact({index}) is not after the current snapshot index {self.snapshot_index}")
        if index > self.applied or index > self.stable_index:
            raise LogInvariantError(
                f"compact({index}) beyond applied {self.applied} / stable {self.stable_index}; only applied, "
                f"persisted entries may be compacted"
            )
        term = self.term(index)
        assert term is not None
        del self._entries[:index - self.snapshot_index]
        self.snapshot_index, self.snapshot_term = index, term
        return term

    def restore(self, snapshot: Snapshot) -> None:
        """Replace the whole log by ``snapshot`` (received from the leader; newer than our commit)."""
        if snapshot.index <= self.committed:
            raise LogInvariantError(f"restore of snapshot {snapshot.index} not past committed {self.committed}")
        self._entries = []
        self.snapshot_index, self.snapshot_term = snapshot.index, snapshot.term
        self.committed = snapshot.index
        self.stable_index = snapshot.index
        self.pending_snapshot = snapshot

    def describe(self) -> str:
        return (f"log[snap={self.snapshot_term}/{self.snapshot_index} last={self.last_term}/{self.last_index} "
                f"stable={self.stable_index} commit={self.committed} applied={self.applied}]")
