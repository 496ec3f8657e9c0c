"""When the commit log may call bytes durable (``broker/store/durability.py``): fsync, then publish; roll back a
failed append.  The main property drives the rules as the commit log and the simulated store do, against a model
disk that keeps through a power cut only what an fsync made durable: no power cut ever leaves the log below the
synced offset the store published."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from system_under_test.broker.store.durability import (
    SyncPlan,
    plan_sync,
    rollback_point,
    stable_offset,
    synced_after,
)

offsets = st.integers(min_value=0, max_value=10**9)


@given(synced=offsets, max_offset=offsets, dirty=st.booleans())
def test_a_plan_that_raises_the_synced_offset_fsyncs_first(synced: int, max_offset: int, dirty: bool) -> None:
    plan = plan_sync(synced, max_offset, dirty)
    if plan is None:
        assert not dirty and synced == max_offset, "only a clean, fully synced log needs no attempt"
        return
    assert plan.target == max_offset
    assert plan.fsync, "no synced offset is ever published for bytes no fsync covered"


@given(target=offsets, synced=offsets, fsync=st.booleans())
def test_a_failed_fsync_publishes_nothing_new(target: int, synced: int, fsync: bool) -> None:
    plan = SyncPlan(fsync, target)
    assert synced_after(plan, synced, fsync_ok=False) == synced
    assert synced_after(plan, synced, fsync_ok=True) == target


@given(begin=offsets, grown=offsets)
def test_a_failed_append_is_cut_back_to_where_it_began(begin: int, grown: int) -> None:
    assert rollback_point(begin, begin + grown) == (begin if grown else None)


@given(synced=offsets, max_offset=offsets)
def test_the_stable_offset_is_the_synced_offset_under_sync_only(synced: int, max_offset: int) -> None:
    assert stable_offset(synced, max_offset, sync=True) == min(synced, max_offset)
    assert stable_offset(synced, max_offset, sync=False) == max_offset


def test_negative_offsets_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="synced=-1"):
        plan_sync(-1, 0, True)


@dataclass
class _Disk:
    """A commit log on a disk that keeps, through a power cut, what an fsync covered (and nothing else)."""

    written: int = 0
    durable: int = 0
    synced: int = 0  # the published claim

    def sync(self, ok: bool) -> bool:
        plan = plan_sync(self.synced, self.written, self.written > self.durable)
        if plan is None:
            return True
        if plan.fsync and ok:
            self.durable = plan.target
        self.synced = synced_after(plan, self.synced, fsync_ok=ok)
        return ok

    def append(self, n: int, fsync_ok: bool) -> None:
        begin = self.written
        self.written += n
        if not self.sync(fsync_ok):
            point = rollback_point(begin, self.written)
            if point is not None:
                self.written = point
                self.synced = min(self.synced, point)
                self.durable = min(self.durable, point)

    def power_cut(self) -> None:
        self.written = self.durable


ops = st.lists(st.tuples(st.sampled_from(("append", "flush", "cut")), st.integers(1, 500), st.booleans()),
               max_size=60)


@given(ops=ops)
def test_no_power_cut_takes_the_log_below_its_published_synced_offset(ops: list[tuple[str, int, bool]]) -> None:
    disk = _Disk()
    acknowledged = 0  # the end of the last append whose fsync succeeded: its send may have been acknowledged
    for op, n, ok in ops:
        if op == "append":
            disk.append(n, ok)
            if ok:
                acknowledged = disk.written
        elif op == "flush":
            disk.sync(ok)
        else:
            disk.power_cut()
            assert disk.written >= disk.synced, "the store published a synced offset its disk did not hold"
            assert disk.written >= acknowledged, "an acknowledged append did not survive the power cut"
        assert disk.synced <= disk.durable, "the published synced offset names bytes no fsync covered"
