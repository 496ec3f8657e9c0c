"""Stateful property test of MessageStore against a list model: random puts, confirm-offset moves
(up and down, on and off record boundaries), truncations, flushes and clean/dirty reopens.  After
every step each queue shows exactly the model's records whose end is <= the confirm offset."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from system_under_test.broker.store import FlushPolicy, MessageStore, Record, StoreConfig

CFG = StoreConfig(segment_bytes=4096, max_message_bytes=2048, flush_policy=FlushPolicy.SYNC, background_flush=False)
QUEUES = 3


@dataclass
class Rec:
    key: str
    queue_id: int
    phys: int
    size: int

    @property
    def end(self) -> int:
        return self.phys + self.size


class StoreModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp()
        self.store = MessageStore.open(self.dir, CFG, "c1")
        self.model: list[Rec] = []
        self.confirm = 0
        self.persisted_confirm = 0
        self.serial = 0

    def end(self) -> int:
        return self.model[-1].end if self.model else 0

    @rule(n=st.integers(1, 12), size=st.integers(0, 400))
    def put(self, n: int, size: int) -> None:
        batch = []
        for _ in range(n):
            self.serial += 1
            batch.append(Record("t", self.serial % QUEUES, b"b" * size, key=f"k{self.serial}"))
        res = self.store.put(batch)
        for r, p in zip(batch, res):
            assert p.phys_offset == self.end()
            assert p.queue_offset == sum(1 for m in self.model if m.queue_id == r.queue_id)
            self.model.append(Rec(r.key, r.queue_id, p.phys_offset, p.size))

    @rule(data=st.data())
    def confirm_anywhere(self, data: st.DataObject) -> None:
        self.confirm = data.draw(st.integers(0, self.end()))
        self.store.set_confirm_offset(self.confirm)

    @rule()
    def confirm_all(self) -> None:
        self.confirm = self.end()
        self.store.set_confirm_offset(self.confirm)

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        idx = data.draw(st.integers(0, len(self.model)))
        cut = self.model[idx].phys if idx < len(self.model) else self.end()
        self.store.truncate(cut)
        del self.model[idx:]
        self.confirm = min(self.confirm, cut)
        self.persisted_confirm = self.confirm  # truncate writes the checkpoint

    @rule()
    def flush(self) -> None:
        self.store.flush()
        self.persisted_confirm = self.confirm

    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        self.store.close(clean=clean)
        if clean:
            self.persisted_confirm = self.confirm
        self.store = MessageStore.open(self.dir, CFG, "c1")
        self.confirm = min(self.persisted_confirm, self.end())
        assert self.store.confirm_offset == self.confirm

    @invariant()
    def visible_records_match_model(self) -> None:
        assert self.store.max_phys_offset == self.end()
        assert self.store.confirm_offset == self.confirm
        for q in range(QUEUES):
            want = [m for m in self.model if m.queue_id == q]
            got = self.store.get("t", q, 0, 10_000)
            assert [(d.record.key, d.offset) for d in got.records] == [
                (m.key, m.phys) for m in want if m.end <= self.confirm
            ]
            assert self.store.next_queue_offset("t", q) == len(want)

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)


StoreModel.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
TestStoreModel = StoreModel.TestCase
