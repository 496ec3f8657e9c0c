"""Commit log shell: segments, whole-record reads, raw appends, truncation, flush policy, failpoints,
torn-tail recovery and middle-corruption detection (commitlog.py), on real files."""

from __future__ import annotations

import errno
import itertools
import os
import tempfile
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from system_under_test import failpoints
from system_under_test.broker.store import (
    FP_BEFORE_FSYNC,
    FP_WRITE,
    CommitLog,
    FlushPolicy,
    OffsetError,
    Record,
    StoreConfig,
    StoreCorruption,
    StoreFullError,
    StoreIOError,
    decode_many,
)

SYNC = StoreConfig(segment_bytes=4096, max_message_bytes=2048, flush_policy=FlushPolicy.SYNC, background_flush=False)
ASYNC = StoreConfig(segment_bytes=4096, max_message_bytes=2048, flush_policy=FlushPolicy.ASYNC, background_flush=False)


def recs(n: int, size: int = 100, start: int = 0) -> list[Record]:
    return [Record("t", i % 3, bytes([i % 256]) * size, key=f"k{i}", queue_offset=i) for i in range(start, start + n)]


@pytest.fixture
def store_dir() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as d:
        yield d


def opened(d: str, cfg: StoreConfig = SYNC) -> CommitLog:
    log = CommitLog.open(d, cfg)
    log.recover(log.min_offset)
    return log


def test_append_rolls_segments_with_contiguous_offsets(store_dir: str) -> None:
    log = opened(store_dir)
    locs = log.append(recs(100))
    assert locs[0][0] == 0
    assert all(a[0] + a[1] == b[0] for a, b in itertools.pairwise(locs))
    segs = log.segments()
    assert len(segs) > 1
    assert all(size <= 4096 for _, _, size in segs)
    assert [os.path.basename(p) for _, p, _ in segs] == [f"{s:020d}" for s, _, _ in segs]
    assert all(a[0] + a[2] == b[0] for a, b in itertools.pairwise(segs))
    assert log.max_offset == locs[-1][0] + locs[-1][1]
    log.close()


def test_read_returns_whole_records_only(store_dir: str) -> None:
    log = opened(store_dir)
    locs = log.append(recs(50))
    size = locs[0][1]
    data = log.read(0, size * 3 + size // 2)
    assert len(data) == size * 3
    assert len(decode_many(data).records) == 3
    # a first record larger than max_bytes comes back whole
    assert len(log.read(locs[5][0], 10)) == size
    # reading everything crosses segment boundaries
    everything = b""
    pos = 0
    while pos < log.max_offset:
        chunk = log.read(pos, 1000)
        everything += chunk
        pos += len(chunk)
    assert [d.record for d in decode_many(everything).records] == recs(50)
    assert log.read(log.max_offset, 100) == b""
    with pytest.raises(OffsetError, match="outside the commit log"):
        log.read(log.max_offset + 1, 100)
    with pytest.raises(OffsetError, match="not the start of a record"):
        log.read(3, 10)
    log.close()


def test_append_raw_checks_offset_and_framing(store_dir: str) -> None:
    master = opened(store_dir)
    master.append(recs(10))
    data = master.read(0, 10**6)
    with tempfile.TemporaryDirectory() as other:
        slave = opened(other)
        with pytest.raises(OffsetError, match="append_raw at 5 but the commit log ends at 0"):
            slave.append_raw(5, data)
        with pytest.raises(StoreCorruption, match="not whole valid records"):
            slave.append_raw(0, data[:-3])
        assert slave.max_offset == 0
        got = slave.append_raw(0, data)
        assert [d.record for d in got] == recs(10)
        assert slave.read(0, 10**6) == data
        slave.close()
    master.close()


def test_truncate_at_boundaries_only(store_dir: str) -> None:
    log = opened(store_dir)
    locs = log.append(recs(100))
    nsegs = len(log.segments())
    with pytest.raises(OffsetError, match="not a record boundary"):
        log.truncate(locs[40][0] + 1)
    log.truncate(locs[40][0])
    assert log.max_offset == locs[40][0]
    assert len(log.segments()) < nsegs
    assert log.synced_offset == locs[40][0]
    assert sorted(os.listdir(os.path.join(store_dir, "commitlog"))) == [
        os.path.basename(p) for _, p, _ in log.segments()
    ]
    # appending after truncation continues at the cut
    assert log.append(recs(1))[0][0] == locs[40][0]
    log.truncate(0)
    assert (log.min_offset, log.max_offset) == (0, 0)
    log.close()


def test_sync_vs_async_synced_offset(store_dir: str) -> None:
    log = opened(store_dir, SYNC)
    log.append(recs(5))
    assert log.synced_offset == log.max_offset
    log.close()
    with tempfile.TemporaryDirectory() as d2:
        alog = opened(d2, ASYNC)
        alog.append(recs(5))
        assert alog.synced_offset == 0 < alog.max_offset
        assert alog.flush() == alog.max_offset == alog.synced_offset
        alog.close()


def test_write_failpoint_is_disk_full_and_changes_nothing(store_dir: str) -> None:
    log = opened(store_dir)
    log.append(recs(3))
    before = log.max_offset
    failpoints.arm(FP_WRITE, "1*error")
    try:
        with pytest.raises(StoreFullError) as info:
            log.append(recs(3))
        assert info.value.errno == errno.ENOSPC and isinstance(info.value, OSError)
    finally:
        failpoints.disarm(FP_WRITE)
    assert log.max_offset == before
    assert log.append(recs(1))[0][0] == before
    log.close()


def test_fsync_failpoint_in_sync_mode_rolls_back(store_dir: str) -> None:
    log = opened(store_dir, SYNC)
    log.append(recs(3))
    before = log.max_offset
    failpoints.arm(FP_BEFORE_FSYNC, "1*error")
    try:
        with pytest.raises(StoreIOError, match="fsync failed"):
            log.append(recs(40))  # spans a segment roll
    finally:
        failpoints.disarm(FP_BEFORE_FSYNC)
    assert log.max_offset == before == log.synced_offset
    assert len(decode_many(log.read(0, 10**6)).records) == 3
    log.close()


def test_fsync_failpoint_in_async_flush_keeps_synced_offset(store_dir: str) -> None:
    log = opened(store_dir, ASYNC)
    log.append(recs(3))
    failpoints.arm(FP_BEFORE_FSYNC, "1*error")
    try:
        with pytest.raises(StoreIOError):
            log.flush()
    finally:
        failpoints.disarm(FP_BEFORE_FSYNC)
    assert log.synced_offset == 0
    assert log.flush() == log.max_offset
    log.close()


def test_reset_start_only_when_empty(store_dir: str) -> None:
    log = opened(store_dir)
    log.reset_start(5000)
    assert (log.min_offset, log.max_offset) == (5000, 5000)
    assert log.append(recs(1))[0][0] == 5000
    with pytest.raises(OffsetError, match="needs an empty commit log"):
        log.reset_start(0)
    log.close()
    again = opened(store_dir)
    assert again.min_offset == 5000
    again.close()


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), data=st.data())
def test_torn_tail_is_truncated_at_the_last_whole_record(n: int, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as d:
        log = opened(d)
        locs = log.append(recs(n, size=data.draw(st.integers(0, 300))))
        log.close()
        _, path, size = log.segments()[-1]
        start = log.segments()[-1][0]
        mode = data.draw(st.sampled_from(["cut", "zeros", "garbage"]))
        if mode == "cut":
            cut = data.draw(st.integers(0, size))
            with open(path, "r+b") as f:
                f.truncate(cut)
        else:
            cut = size
            with open(path, "ab") as f:
                f.write(bytes(data.draw(st.integers(1, 200))) if mode == "zeros" else b"\x07" * 37)
        again = CommitLog.open(d, SYNC)
        report = again.recover(0)
        ends = [0] + [p + s for p, s in locs]
        expected = max(e for e in ends if e <= start + cut)
        assert again.max_offset == expected
        assert report.truncated_at == (None if expected == start + cut and mode == "cut" else expected)
        whole = [i for i, (p, s) in enumerate(locs) if p + s <= expected]
        got = decode_many(again.read(0, 10**7)).records if again.max_offset else []
        assert [r.record.key for r in got] == [f"k{i}" for i in whole]
        again.close()


@pytest.mark.parametrize("where", ["same-segment", "earlier-segment"])
def test_middle_corruption_names_file_and_offset(store_dir: str, where: str) -> None:
    log = opened(store_dir)
    locs = log.append(recs(100))
    log.close()
    segs = log.segments()
    # same-segment: the second record of the last segment (more records follow it there)
    victim = next(p for p, _ in locs if p > segs[-1][0]) if where == "same-segment" else locs[2][0]
    start, path, _ = next(s for s in segs if s[0] <= victim < s[0] + s[2])
    with open(path, "r+b") as f:
        f.seek(victim - start + 60)
        b = f.read(1)
        f.seek(victim - start + 60)
        f.write(bytes([b[0] ^ 0xFF]))
    again = CommitLog.open(store_dir, SYNC)
    with pytest.raises(StoreCorruption) as info:
        again.recover(0)
    assert info.value.path == path and info.value.offset == victim
    assert path in str(info.value) and f"offset {victim}" in str(info.value)
    assert again.max_offset == locs[-1][0] + locs[-1][1], "nothing may be dropped"
    again.close()


def test_recover_from_flush_point_skips_earlier_segments(store_dir: str) -> None:
    log = opened(store_dir)
    locs = log.append(recs(100))
    log.close()
    _, first_path, _ = log.segments()[0]
    with open(first_path, "r+b") as f:  # damage the first segment only
        f.seek(70)
        b = f.read(1)
        f.seek(70)
        f.write(bytes([b[0] ^ 0xFF]))
    again = CommitLog.open(store_dir, SYNC)
    report = again.recover(locs[-1][0])
    assert report.verified_from == again.segments()[-1][0] and report.truncated_bytes == 0
    again.close()
    again = CommitLog.open(store_dir, SYNC)
    with pytest.raises(StoreCorruption):
        again.recover(0)
    again.close()
