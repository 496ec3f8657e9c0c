"""The store's side of the disk nemesis: errno-carrying failpoints, the published synced offset,
fsync latency, and the nemesis's pure corruption planner -- damage the CRCs always catch."""

from __future__ import annotations

import errno
import json
import os
import random
import tempfile
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nemesis.disk_kinds import REPAIRABLE_MODES, TAIL_BYTES
from system_under_test import failpoints
from system_under_test.broker.store import (
    FP_BEFORE_FSYNC,
    FP_WRITE,
    CommitLog,
    FlushPolicy,
    Record,
    StoreConfig,
    StoreCorruption,
    StoreFullError,
    StoreIOError,
    decode_many,
)
from system_under_test.broker.store.commitlog import FP_READ, read_synced_file
from systems.splitbrain import store_tool as disk

SYNC = StoreConfig(segment_bytes=4096, max_message_bytes=2048, flush_policy=FlushPolicy.SYNC, background_flush=False)
ASYNC = StoreConfig(segment_bytes=4096, max_message_bytes=2048, flush_policy=FlushPolicy.ASYNC, background_flush=False)


def recs(n: int, size: int = 60) -> list[Record]:
    return [Record("t", 0, bytes([i % 251]) * size, queue_offset=i) for i in range(n)]


@pytest.fixture
def store_dir() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as d:
        yield d
    for name in (FP_WRITE, FP_BEFORE_FSYNC, FP_READ):
        failpoints.disarm(name)


def opened(d: str, cfg: StoreConfig = SYNC) -> CommitLog:
    log = CommitLog.open(d, cfg)
    log.recover(0)
    return log


def test_error_failpoint_carries_an_errno_and_the_grammar_checks_it() -> None:
    assert failpoints.parse_action("error(5)") == failpoints.Action("error", 5.0, None)
    assert failpoints.parse_action("2*error(28)").describe() == "2*error(28)"  # type: ignore[union-attr]
    for bad in ("error(0)", "error(2.5)", "pause(3)", "error(99999)"):
        with pytest.raises(failpoints.FailpointSpecError, match=r"argument|errno"):
            failpoints.parse_action(bad)


def test_write_failpoint_enospc_or_eio_appends_nothing(store_dir: str) -> None:
    log = opened(store_dir)
    log.append(recs(3))
    end = log.max_offset
    failpoints.arm(FP_WRITE, "1*error")
    with pytest.raises(StoreFullError, match="no space left"):
        log.append(recs(1))
    failpoints.arm(FP_WRITE, "1*error(5)")
    with pytest.raises(StoreIOError) as eio:
        log.append(recs(1))
    assert eio.value.errno == errno.EIO and "Input/output error" in str(eio.value)
    assert log.max_offset == end
    log.append(recs(1))
    log.close()
    assert opened(store_dir).recover(0).truncated_bytes == 0


def test_read_failpoint_fails_reads_with_eio(store_dir: str) -> None:
    log = opened(store_dir)
    log.append(recs(2))
    failpoints.arm(FP_READ, "error(5)")
    with pytest.raises(StoreIOError) as exc:
        log.read(0, 4096)
    assert exc.value.errno == errno.EIO
    with pytest.raises(StoreIOError):
        log.read_span(0, 10)
    failpoints.disarm(FP_READ)
    assert len(log.read(0, 4096)) == log.max_offset
    log.close()


def test_synced_offset_is_published_after_each_fsync_and_truncation(store_dir: str) -> None:
    log = opened(store_dir, ASYNC)
    assert read_synced_file(store_dir) == 0
    log.append(recs(5))
    assert log.synced_offset == 0 and read_synced_file(store_dir) == 0  # written, not yet durable
    log.flush()
    assert read_synced_file(store_dir) == log.max_offset == log.synced_offset
    boundary = log.append(recs(5))[0][0]
    log.flush()
    log.truncate(boundary)
    assert read_synced_file(store_dir) == boundary
    log.close(sync=False)


def test_slow_fsync_shows_in_measured_latency(store_dir: str) -> None:
    log = opened(store_dir)
    log.append(recs(1))
    fast = log.fsync_stats()
    failpoints.arm(FP_BEFORE_FSYNC, "delay(60)")
    log.append(recs(1))
    slow = log.fsync_stats()
    assert slow["fsyncs"] == fast["fsyncs"] + 1
    assert slow["fsync_last_ms"] >= 60 and slow["fsync_max_ms"] >= 60
    assert slow["fsync_mean_ms"] > fast["fsync_mean_ms"]
    log.close()


def test_lose_unfsynced_cuts_exactly_at_the_published_offset(store_dir: str) -> None:
    log = opened(store_dir, ASYNC)
    log.append(recs(10))
    log.flush()
    synced = log.synced_offset
    log.append(recs(7))
    end = log.max_offset
    log.close(sync=False)  # the process dies: the page cache keeps everything, the nemesis cuts
    report = disk.lose_unfsynced(store_dir)
    assert report == {"synced_offset": synced, "max_offset": end, "dropped": end - synced}
    assert sum(size for _, size in disk.commitlog_segments(store_dir)) == synced
    again = opened(store_dir, ASYNC)
    assert again.max_offset == synced and again.recover(0).truncated_bytes == 0
    again.close()


def test_node_tool_prints_one_json_object_and_rejects_bad_input(store_dir: str, capsys: pytest.CaptureFixture[str]
                                                                ) -> None:
    log = opened(store_dir)
    log.append(recs(20))
    log.close()
    assert disk.main(["--store", store_dir, "corrupt", "--mode", "truncate-tail", "--seed", "4"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mode"] == "truncate-tail" and out["size_after"] == out["offset"] < out["size_before"]
    assert disk.main(["--store", os.path.join(store_dir, "nope"), "lose-unfsynced"]) == 2
    assert "--store" in capsys.readouterr().err
    empty = tempfile.mkdtemp()
    assert disk.main(["--store", empty, "corrupt", "--mode", "bitflip"]) == 1
    assert "empty" in capsys.readouterr().err


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 40), size=st.integers(1, 300), mode=st.sampled_from(disk.CORRUPT_MODES),
       seed=st.integers(0, 2**32))
def test_every_corruption_is_detected_never_silently_read(n: int, size: int, mode: str, seed: int) -> None:
    """CRC32 catches every damage the nemesis does: recovery either cuts a torn tail no later than
    the damage or refuses naming the file -- and never returns a record that differs from what was
    written.  The tail modes damage exactly the last record, which recovery cuts."""
    with tempfile.TemporaryDirectory() as d:
        log = opened(d)
        written = recs(n, size)
        log.append(written)
        log.close()
        before_total = sum(s for _, s in disk.commitlog_segments(d))
        report = disk.corrupt_store(d, mode, seed)
        if not report["changed"]:
            return  # copy-chunk over identical bytes: nothing to detect
        log = CommitLog.open(d, SYNC)
        seg_start = int(os.path.basename(report["file"]))
        try:
            recovery = log.recover(0)
        except StoreCorruption as exc:
            assert mode not in REPAIRABLE_MODES
            assert report["file"].split("/")[1] in str(exc)
            log.close(sync=False)
            return
        assert recovery.truncated_at is not None or log.max_offset < before_total
        assert log.max_offset <= seg_start + report["first_changed"]
        body = log.read(0, 1 << 20) if log.max_offset else b""
        got = [r.record.body for r in decode_many(body, 0).records]
        assert got == [r.body for r in written[: len(got)]]
        if mode in REPAIRABLE_MODES:
            assert len(got) == n - 1  # exactly the damaged last record is gone
        log.close(sync=False)


def test_tail_modes_stay_inside_the_last_bytes() -> None:
    segs = [("commitlog/00000000000000000000", 4000), ("commitlog/00000000000000004000", 900)]
    for seed in range(50):
        for mode in REPAIRABLE_MODES:
            c = disk.plan_corruption(segs, mode, random.Random(seed))
            assert c.file.endswith("4000") and 900 - TAIL_BYTES <= c.offset < 900
    with pytest.raises(ValueError, match="unknown mode"):
        disk.plan_corruption(segs, "melt", random.Random(0))
    with pytest.raises(ValueError, match="empty"):
        disk.plan_corruption([("commitlog/00000000000000000000", 0)], "bitflip", random.Random(0))
