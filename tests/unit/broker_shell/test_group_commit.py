"""GroupCommit: concurrent SYNC sends share a put, yet each gets its own results and failures."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from system_under_test import failpoints
from system_under_test.broker.group_commit import GroupCommit
from system_under_test.broker.store import (
    FlushPolicy,
    MessageStore,
    OffsetError,
    PutResult,
    Record,
    StoreConfig,
    StoreIOError,
)

SYNC = StoreConfig(segment_bytes=1 << 20, max_message_bytes=2048, flush_policy=FlushPolicy.SYNC,
                   background_flush=False)


def _records(send: int, n: int, size: int = 16) -> list[Record]:
    return [Record("t", 0, bytes([send % 256]) * size, key=f"{send}.{i}") for i in range(n)]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    st = MessageStore.open(str(tmp_path), SYNC, "c")
    yield st
    st.close()


async def _send_all(gc: GroupCommit, sends: Sequence[list[Record]]) -> list[list[PutResult] | BaseException]:
    return list(await asyncio.gather(*(gc.put(r) for r in sends), return_exceptions=True))


@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=20))
def test_each_send_gets_contiguous_results_in_submit_order(tmp_path_factory: pytest.TempPathFactory,
                                                           sizes: list[int]) -> None:
    store = MessageStore.open(str(tmp_path_factory.mktemp("gc")), SYNC, "c")
    try:
        gc = GroupCommit(store.put, max_records=8)
        out = asyncio.run(_send_all(gc, [_records(i, n) for i, n in enumerate(sizes)]))
        expected_qo = 0
        for n, res in zip(sizes, out, strict=True):
            assert isinstance(res, list)
            assert [r.queue_offset for r in res] == list(range(expected_qo, expected_qo + n))
            expected_qo += n
        assert gc.sends == len(sizes) and gc.puts <= len(sizes)
        assert store.commitlog.synced_offset == store.max_phys_offset  # every ack was durable
    finally:
        store.close()


def test_waiting_sends_are_merged_into_one_put(store: MessageStore) -> None:
    gc = GroupCommit(store.put)
    asyncio.run(_send_all(gc, [_records(i, 2) for i in range(10)]))
    assert gc.sends == 10 and gc.puts < 10


def test_an_oversized_record_fails_only_its_own_send(store: MessageStore) -> None:
    gc = GroupCommit(store.put)
    sends = [_records(0, 2), _records(1, 1, size=4096), _records(2, 3)]
    out = asyncio.run(_send_all(gc, sends))
    assert isinstance(out[1], OffsetError)
    assert [len(r) for r in out if isinstance(r, list)] == [2, 3]
    assert [[r.queue_offset for r in res] for res in out if isinstance(res, list)] == [[0, 1], [2, 3, 4]]
    store.set_confirm_offset(store.max_phys_offset)
    assert store.queue_bounds("t", 0) == (0, 5)


def test_a_failed_fsync_fails_every_send_of_the_put_and_appends_none(store: MessageStore) -> None:
    gc = GroupCommit(store.put)
    failpoints.arm("store.before_fsync", "1*error(5)")
    try:
        out = asyncio.run(_send_all(gc, [_records(i, 2) for i in range(4)]))
    finally:
        failpoints.disarm("store.before_fsync")
    failed = [r for r in out if isinstance(r, StoreIOError)]
    assert failed, out
    kept = sum(len(r) for r in out if isinstance(r, list))
    store.set_confirm_offset(store.max_phys_offset)
    assert store.queue_bounds("t", 0)[1] == kept  # a failed send left nothing behind


def test_max_records_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_records"):
        GroupCommit(lambda records: [], max_records=0)
