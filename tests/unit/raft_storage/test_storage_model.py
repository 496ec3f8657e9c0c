"""Stateful property test: RaftStorage on real files against a plain-list model.

Random appends (including overwrites of any suffix), snapshots, compactions and restarts; after
every restart the loaded log must equal the model's entries after the snapshot.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from system_under_test.raft.storage import RaftStorage
from system_under_test.raft.types import Entry, HardState, Snapshot

VOTERS = ("n1", "n2", "n3")


class StorageModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="raft-storage-model-"))
        self.segment_bytes = 40
        self.st = RaftStorage(self.dir, segment_bytes=self.segment_bytes)
        self.st.load()
        self.log: list[Entry] = []  # every entry after snap_index, in order
        self.snap_index = 0
        self.snap_term = 0
        self.term = 1
        self.hs = HardState()

    def teardown(self) -> None:
        self.st.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def last_index(self) -> int:
        return self.log[-1].index if self.log else self.snap_index

    @rule(data=st.data(), n=st.integers(1, 6), bump=st.booleans())
    def append(self, data: st.DataObject, n: int, bump: bool) -> None:
        first = data.draw(st.integers(self.snap_index + 1, self.last_index + 1), label="first")
        if bump:
            self.term += 1
        new = [Entry(self.term, first + k, f"{self.term}/{first + k}".encode()) for k in range(n)]
        self.st.append(new)
        self.log = [e for e in self.log if e.index < first] + new

    @rule()
    def sync(self) -> None:
        self.st.sync()

    @rule(commit=st.integers(0, 50))
    def hard_state(self, commit: int) -> None:
        self.hs = HardState(self.term, "n2", max(commit, self.snap_index))
        self.st.save_hard_state(self.hs)

    @precondition(lambda self: bool(self.log))
    @rule(data=st.data())
    def snapshot_and_compact(self, data: st.DataObject) -> None:
        idx = data.draw(st.integers(self.log[0].index, self.last_index), label="snapshot index")
        term = next(e.term for e in self.log if e.index == idx)
        self.st.save_snapshot(Snapshot(idx, term, f"state@{idx}".encode(), VOTERS))
        self.st.compact(idx)
        self.log = [e for e in self.log if e.index > idx]
        self.snap_index, self.snap_term = idx, term
        self.hs = HardState(self.hs.term, self.hs.vote, max(self.hs.commit, idx))

    @rule(ahead=st.integers(1, 20))
    def install_foreign_snapshot(self, ahead: int) -> None:
        # a leader's snapshot beyond our log, with a term we never had: the log is discarded
        self.term += 1
        idx = self.last_index + ahead
        self.st.save_snapshot(Snapshot(idx, self.term, b"foreign", VOTERS))
        self.log = []
        self.snap_index, self.snap_term = idx, self.term
        self.hs = HardState(self.hs.term, self.hs.vote, max(self.hs.commit, idx))

    @rule()
    def restart(self) -> None:
        self.st.sync()
        self.st.close()
        self.st = RaftStorage(self.dir, segment_bytes=self.segment_bytes)
        hs, snap, entries = self.st.load()
        assert entries == self.log
        assert (snap.index, snap.term) == (self.snap_index, self.snap_term) if snap else self.snap_index == 0
        assert hs == self.hs

    @invariant()
    def last_index_matches(self) -> None:
        assert self.st.last_index == self.last_index


StorageModel.TestCase.settings = settings(max_examples=30, stateful_step_count=20, deadline=None)
TestStorageModel = StorageModel.TestCase
