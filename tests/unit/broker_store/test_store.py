"""MessageStore façade on real files: put/get, confirm-offset visibility, recovery (clean/dirty),
consume-queue rebuild, truncation, replication bytes, signatures, background flush, config."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator

import pytest

import system_under_test.broker.store as store_pkg
from system_under_test import failpoints
from system_under_test.broker.store import (
    FP_BEFORE_FSYNC,
    FP_WRITE,
    Checkpoint,
    EpochEntry,
    FlushPolicy,
    InconsistentClusterId,
    MessageStore,
    OffsetError,
    Record,
    StoreConfig,
    StoreCorruption,
    StoreFullError,
    StoreIOError,
    StoreState,
    cut_files_offline,
    decode_pulled,
    inspect_store,
    load_checkpoint,
    save_checkpoint,
)

CFG = StoreConfig(segment_bytes=4096, max_message_bytes=2048, flush_policy=FlushPolicy.SYNC, background_flush=False)


@pytest.fixture
def d() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as tmp:
        yield os.path.join(tmp, "store")


def msgs(n: int, topic: str = "t", queues: int = 1, tag: str = "") -> list[Record]:
    props = {"TAGS": tag} if tag else {}
    return [Record(topic, i % queues, f"m{i}".encode() * 20, key=f"k{i}", properties=props) for i in range(n)]


def keys(store: MessageStore, topic: str = "t", queue_id: int = 0, offset: int = 0) -> list[str]:
    return [r.record.key for r in store.get(topic, queue_id, offset, 10_000).records]


def test_put_assigns_queue_offsets_and_get_respects_confirm(d: str) -> None:
    s = MessageStore.open(d, CFG, "c1")
    res = s.put(msgs(10, queues=2))
    assert [r.queue_offset for r in res] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert [r.queue_id for r in res] == [0, 1] * 5
    assert keys(s) == [] and s.queue_bounds("t", 0) == (0, 0)
    s.set_confirm_offset(res[4].phys_offset + res[4].size)
    assert keys(s) == ["k0", "k2", "k4"]
    assert keys(s, queue_id=1) == ["k1", "k3"]
    s.set_confirm_offset(s.max_phys_offset)
    got = s.get("t", 0, 1, 2)
    assert [r.record.key for r in got.records] == ["k2", "k4"] and got.next_offset == 3
    assert (got.min_offset, got.max_offset) == (0, 5)
    assert all(r.record.store_timestamp_ms > 0 for r in got.records)
    with pytest.raises(OffsetError, match="outside the commit log"):
        s.set_confirm_offset(s.max_phys_offset + 1)
    s.close()


def test_lowering_confirm_withdraws_entries(d: str) -> None:
    s = MessageStore.open(d, CFG, "c1")
    res = s.put(msgs(30))
    s.set_confirm_offset(s.max_phys_offset)
    s.set_confirm_offset(res[10].phys_offset + 3)  # not on a boundary: record 10 is not fully confirmed
    assert keys(s) == [f"k{i}" for i in range(10)]
    s.set_confirm_offset(s.max_phys_offset)
    assert len(keys(s)) == 30
    s.close()


def test_build_consume_queue_not_exceed_confirm_offset(d: str) -> None:
    """Reference AutoSwitchHATest.BuildConsumeQueueNotExceedConfirmOffset."""
    s = MessageStore.open(d, CFG, "c1")
    res = s.put(msgs(10))
    s.set_confirm_offset(s.max_phys_offset)
    assert len(keys(s)) == 10
    s.close()
    cp = load_checkpoint(d)
    assert cp is not None and cp.confirm_offset == res[-1].phys_offset + res[-1].size
    save_checkpoint(d, Checkpoint(cp.commitlog_flushed_offset, cp.dispatched_offset, res[4].phys_offset + res[4].size))
    s = MessageStore.open(d, CFG, "c1")
    assert keys(s) == [f"k{i}" for i in range(5)]
    assert s.next_queue_offset("t", 0) == 10
    s.set_confirm_offset(s.max_phys_offset)
    assert len(keys(s)) == 10
    s.close()


def test_recovery_clamps_confirm_to_recovered_end(d: str) -> None:
    s = MessageStore.open(d, CFG, "c1")
    res = s.put(msgs(10))
    s.set_confirm_offset(s.max_phys_offset)
    s.flush()
    s.close(clean=False)
    seg = sorted(os.listdir(os.path.join(d, "commitlog")))[-1]
    path = os.path.join(d, "commitlog", seg)
    cut = res[6].phys_offset + 7 - int(seg)
    os.truncate(path, cut)  # lose records 6.. (a torn tail)
    s = MessageStore.open(d, CFG, "c1")
    assert s.state_on_open is StoreState.DIRTY
    assert s.max_phys_offset == res[6].phys_offset == s.confirm_offset
    assert s.recovery.truncated_at == res[6].phys_offset
    assert keys(s) == [f"k{i}" for i in range(6)]
    assert s.put(msgs(1))[0].queue_offset == 6
    s.close()


@pytest.mark.parametrize("damage", ["delete-file", "delete-dir", "shorten", "extend", "overwrite"])
def test_consume_queue_rebuilt_from_commit_log(d: str, damage: str) -> None:
    s = MessageStore.open(d, CFG, "c1")
    s.put(msgs(40, queues=2, tag="red"))
    s.set_confirm_offset(s.max_phys_offset)
    before = [s.get("t", q, 0, 100) for q in (0, 1)]
    s.close()
    cq = os.path.join(d, "consumequeue", "t", "0")
    if damage == "delete-file":
        os.unlink(cq)
    elif damage == "delete-dir":
        for q in ("0", "1"):
            os.unlink(os.path.join(d, "consumequeue", "t", q))
        os.rmdir(os.path.join(d, "consumequeue", "t"))
    elif damage == "shorten":
        os.truncate(cq, 20 * 7)
    elif damage == "extend":
        with open(cq, "ab") as f:
            f.write(b"\x01" * 20 * 3)
    else:
        with open(cq, "r+b") as f:
            f.seek(20 * 3)
            f.write(b"\x00\x00\x00\x00\x00\x00\x00\x05" + b"\x00" * 12)
    s = MessageStore.open(d, CFG, "c1")
    after = [s.get("t", q, 0, 100) for q in (0, 1)]
    assert [[r.record for r in g.records] for g in after] == [[r.record for r in g.records] for g in before]
    assert os.path.getsize(cq) == 20 * 20
    s.close()


def test_truncate_cuts_log_queues_and_epochs(d: str) -> None:
    s = MessageStore.open(d, CFG, "c1")
    s.epochs.start_epoch(1, 0)
    res = s.put(msgs(20))
    s.epochs.start_epoch(2, s.max_phys_offset)
    res += s.put(msgs(20))
    s.set_confirm_offset(s.max_phys_offset)
    cut = res[15].phys_offset
    s.truncate(cut)
    assert s.max_phys_offset == cut and s.confirm_offset == cut
    assert s.epochs.entries == (EpochEntry(1, 0),)
    assert keys(s) == [f"k{i}" for i in range(15)]
    assert s.next_queue_offset("t", 0) == 15
    assert s.put(msgs(1))[0].queue_offset == 15
    with pytest.raises(OffsetError, match=r"not the start of a record|not a record boundary"):
        s.truncate(cut + 1)
    s.truncate(0)
    assert s.next_queue_offset("t", 0) == 0 and keys(s) == []
    s.close()


def test_replication_bytes_give_identical_slave(d: str) -> None:
    master = MessageStore.open(d, CFG, "c1")
    master.epochs.start_epoch(1, 0)
    master.put(msgs(60, queues=3))
    with tempfile.TemporaryDirectory() as sd:
        slave = MessageStore.open(sd, CFG, "c1")
        pos = 0
        while pos < master.max_phys_offset:
            chunk = master.read_raw(pos, 700)
            pos = slave.append_raw(pos, chunk)
        assert slave.max_phys_offset == master.max_phys_offset
        assert slave.read_raw(0, 10**7) == master.read_raw(0, 10**7)
        for q in range(3):
            assert slave.next_queue_offset("t", q) == master.next_queue_offset("t", q) == 20
        slave.set_confirm_offset(slave.max_phys_offset)
        assert keys(slave, queue_id=2) == [f"k{i}" for i in range(2, 60, 3)]
        # a record whose queue offset does not continue its queue is refused and undone
        bad = master.read_raw(0, 1)
        end = slave.max_phys_offset
        with pytest.raises(OffsetError, match="expected 20"):
            slave.append_raw(end, bad)
        assert slave.max_phys_offset == end
        slave.close()
    master.close()


def test_put_disk_full_changes_nothing(d: str) -> None:
    s = MessageStore.open(d, CFG, "c1")
    s.put(msgs(3))
    before = s.max_phys_offset
    failpoints.arm(FP_WRITE, "1*error")
    try:
        with pytest.raises(StoreFullError):
            s.put(msgs(3))
    finally:
        failpoints.disarm(FP_WRITE)
    assert s.max_phys_offset == before and s.next_queue_offset("t", 0) == 3
    s.close()


def test_signature_mismatch_names_both_ids(d: str) -> None:
    s = MessageStore.open(d, CFG, "cluster-a")
    s.put(msgs(1))
    s.close()
    with pytest.raises(InconsistentClusterId, match=r"cluster-a.*cluster-b|cluster-b.*cluster-a") as info:
        MessageStore.open(d, CFG, "cluster-b")
    assert (info.value.expected, info.value.found) == ("cluster-b", "cluster-a")
    os.unlink(os.path.join(d, "cluster.sig"))
    with pytest.raises(StoreCorruption, match=r"no cluster\.sig"):
        MessageStore.open(d, CFG, "cluster-a")


def test_clean_and_dirty_open(d: str) -> None:
    assert inspect_store(d).state is StoreState.EMPTY
    s = MessageStore.open(d, CFG, "c1")
    assert s.state_on_open is StoreState.EMPTY
    s.epochs.start_epoch(3, 0)
    s.put(msgs(5))
    s.close()
    insp = inspect_store(d)
    assert insp.state is StoreState.CLEAN and insp.initial is not None and insp.initial.cluster_id == "c1"
    assert insp.final is not None and (insp.final.last_epoch, insp.final.max_offset) == (3, s.max_phys_offset)
    s = MessageStore.open(d, CFG, "c1")
    assert s.state_on_open is StoreState.CLEAN and s.previous_final == insp.final
    assert not os.path.exists(os.path.join(d, "clean.sig")), "the marker is removed on open"
    assert inspect_store(d).state is StoreState.DIRTY
    s.close(clean=False)
    s = MessageStore.open(d, CFG, "c1")
    assert s.state_on_open is StoreState.DIRTY and s.previous_final is None
    assert s.recovery.verified_from == 0 and s.recovery.records_verified == 5
    s.close()


def test_recovery_drops_epochs_beyond_the_log(d: str) -> None:
    s = MessageStore.open(d, CFG, "c1")
    s.epochs.start_epoch(1, 0)
    s.put(msgs(5))
    end = s.max_phys_offset
    s.epochs.start_epoch(2, end)
    s.put(msgs(5))
    s.epochs.start_epoch(3, s.max_phys_offset)  # a master epoch that has not written yet
    s.close(clean=False)
    s = MessageStore.open(d, CFG, "c1")
    assert s.epochs.last_epoch == 3, "an epoch starting exactly at the max offset survives"
    s.truncate(end)
    s.close(clean=False)
    s = MessageStore.open(d, CFG, "c1")
    assert s.epochs.entries == (EpochEntry(1, 0),)
    s.close()


def test_background_flusher_syncs_and_checkpoints(d: str) -> None:
    cfg = StoreConfig(segment_bytes=4096, max_message_bytes=2048, flush_policy=FlushPolicy.ASYNC, flush_interval_ms=20)
    s = MessageStore.open(d, cfg, "c1")
    s.put(msgs(5))
    s.set_confirm_offset(s.max_phys_offset)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and s.synced_offset < s.max_phys_offset:
        time.sleep(0.01)
    assert s.synced_offset == s.max_phys_offset
    while time.monotonic() < deadline:
        cp = load_checkpoint(d)
        if cp is not None and cp.confirm_offset == s.max_phys_offset:
            break
        time.sleep(0.01)
    assert cp is not None and cp.commitlog_flushed_offset == s.max_phys_offset
    s.close()


@pytest.mark.parametrize(
    "kwargs,field",
    [
        (dict(segment_bytes=100), "segment_bytes"),
        (dict(flush_interval_ms=0), "flush_interval_ms"),
        (dict(max_message_bytes=10), "max_message_bytes"),
        (dict(segment_bytes=4096, max_message_bytes=8192), "max_message_bytes"),
        (dict(flush_policy="sync"), "flush_policy"),
    ],
    ids=["tiny-segment", "zero-interval", "tiny-message", "message-over-segment", "policy-str"],
)
def test_config_validation_names_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=f"StoreConfig.{field}"):
        StoreConfig(**kwargs)


def test_public_surface_exists() -> None:
    for name in store_pkg.__all__:
        assert hasattr(store_pkg, name), name



def _open_files_under(d: str) -> list[str]:
    """The files below ``d`` this process holds open (descriptors elsewhere are none of this test's business)."""
    root = os.path.realpath(d) + os.sep
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed between the listing and the readlink
        if target.startswith(root):
            held.append(target)
    return sorted(held)


def test_open_refuses_middle_corruption_and_releases_files(d: str) -> None:
    s = MessageStore.open(d, CFG, "c1")
    res = s.put(msgs(30))
    s.close()
    path, pos = s.commitlog.file_for_offset(res[3].phys_offset)
    with open(path, "r+b") as f:
        f.seek(pos + HEADER_BYTES_PLUS)
        b = f.read(1)
        f.seek(pos + HEADER_BYTES_PLUS)
        f.write(bytes([b[0] ^ 0x55]))
    assert _open_files_under(d) == []
    for _ in range(2):  # the failed open left the store dirty: the second open verifies everything again
        with pytest.raises(StoreCorruption) as info:
            MessageStore.open(d, CFG, "c1")
        assert info.value.path == path and info.value.offset == res[3].phys_offset
        assert f"offset {res[3].phys_offset}" in str(info.value)
    assert _open_files_under(d) == []  # only this store's files count: other threads' descriptors may come and go
    assert inspect_store(d).state is StoreState.DIRTY


HEADER_BYTES_PLUS = 60


def test_lose_unfsynced_writes(d: str) -> None:
    """ASYNC store: what was fsynced survives a cut at synced_offset; later records, their queue offsets,
    consume-queue entries and epochs are gone, and the store accepts new writes consistently."""
    cfg = StoreConfig(
        segment_bytes=4096, max_message_bytes=2048, flush_policy=FlushPolicy.ASYNC, background_flush=False
    )
    s = MessageStore.open(d, cfg, "c1")
    s.epochs.start_epoch(1, 0)
    s.put(msgs(12, queues=2))
    s.set_confirm_offset(s.max_phys_offset)
    synced = s.flush()
    s.epochs.start_epoch(2, s.max_phys_offset)
    res = s.put(msgs(12, queues=2))
    s.set_confirm_offset(s.max_phys_offset)
    s.flush()  # the checkpoint and epoch file now claim more than the cut will leave
    s.close(clean=False)
    assert cut_files_offline(d, synced + 5) > 0  # a partial record survives the cut: a torn tail
    s = MessageStore.open(d, cfg, "c1")
    assert s.max_phys_offset == synced == res[0].phys_offset
    assert s.confirm_offset == synced
    assert s.epochs.last_epoch == 2, "epoch 2 starts exactly at the recovered end and survives"
    assert keys(s) == [f"k{i}" for i in range(0, 12, 2)]
    assert s.next_queue_offset("t", 0) == 6
    assert s.put(msgs(1))[0].queue_offset == 6
    s.close()


def test_close_with_failing_fsync_leaves_store_dirty(d: str) -> None:
    cfg = StoreConfig(
        segment_bytes=4096, max_message_bytes=2048, flush_policy=FlushPolicy.ASYNC, background_flush=False
    )
    s = MessageStore.open(d, cfg, "c1")
    s.put(msgs(3))
    failpoints.arm(FP_BEFORE_FSYNC, "1*error")
    try:
        with pytest.raises(StoreIOError):
            s.close()
    finally:
        failpoints.disarm(FP_BEFORE_FSYNC)
    s.close()  # idempotent after a failed close
    assert inspect_store(d).state is StoreState.DIRTY
    again = MessageStore.open(d, cfg, "c1")
    assert again.state_on_open is StoreState.DIRTY and again.max_phys_offset == s.max_phys_offset
    again.close()


def test_get_raw_frames_decode_to_what_get_returns(d: str) -> None:
    s = MessageStore.open(d, CFG, "c1")
    s.put(msgs(30, queues=3, tag="x"))  # interleaved queues: runs of one frame, gaps between them
    s.put(msgs(6, queues=1))  # adjacent frames of one queue: one run
    half = s.max_phys_offset
    s.put(msgs(4, queues=1))
    s.set_confirm_offset(half)
    for qid in range(3):
        want = s.get("t", qid, 1, 100)
        raw = s.get_raw("t", qid, 1, 100)
        got = decode_pulled(raw.data, raw.spans, "t", qid, 1, raw.next_offset, tuple)
        assert [(g[0], g[1], g[2], g[3]) for g in got] == [
            (r.record.queue_offset, r.offset, r.record.body, r.record.key) for r in want.records]
        assert (raw.count, raw.next_offset, raw.min_offset, raw.max_offset) == (
            len(want.records), want.next_offset, want.min_offset, want.max_offset)
    assert len(s.get_raw("t", 0, 10, 100).spans) == 1  # the 6 adjacent records of queue 0 below the confirm offset
    s.close()


def test_get_raw_refuses_a_frame_that_is_not_the_indexed_record(d: str) -> None:
    s = MessageStore.open(d, CFG, "c1")
    res = s.put(msgs(4, queues=2))
    s.set_confirm_offset(s.max_phys_offset)
    # point queue 0's entry 1 at queue 1's record: the index and the log disagree
    s.cqs.truncate_phys(res[2].phys_offset)
    s.cqs.dispatch("t", 0, 1, res[3].phys_offset, res[3].size, 0)
    with pytest.raises(StoreCorruption, match=r"t/0@1 points at .*holds t/1@1"):
        s.get_raw("t", 0, 0, 10)
    s.close()


def test_failed_fsync_undoes_the_put_while_readers_go_on(d: str) -> None:
    s = MessageStore.open(d, CFG, "c1")
    s.put(msgs(3))
    before, stable = s.max_phys_offset, s.stable_offset
    assert before == stable
    failpoints.arm(FP_BEFORE_FSYNC, "1*error")
    try:
        with pytest.raises(StoreIOError):
            s.put(msgs(3))
    finally:
        failpoints.disarm(FP_BEFORE_FSYNC)
    assert (s.max_phys_offset, s.stable_offset, s.next_queue_offset("t", 0)) == (before, stable, 3)
    res = s.put(msgs(1))
    assert res[0].queue_offset == 3 and res[0].phys_offset == before and s.stable_offset == s.max_phys_offset
    s.close()


def test_records_from_counts_pending_and_dispatched_records(d: str) -> None:
    """records_from (a slave's lag in records) counts undispatched records from memory and older ones from
    the log, and gives up (None) past its scan budget or outside the log."""
    s = MessageStore.open(d, CFG, "c1")
    res = s.put(msgs(10, queues=2))
    ends = [r.phys_offset + r.size for r in res]
    assert s.records_from(s.max_phys_offset) == 0
    assert [s.records_from(r.phys_offset) for r in res] == list(range(10, 0, -1))
    s.set_confirm_offset(ends[5])  # six dispatched, four pending
    assert [s.records_from(r.phys_offset) for r in res] == list(range(10, 0, -1))
    assert s.records_from(res[0].phys_offset, max_scan_bytes=res[1].phys_offset) is None
    assert s.records_from(s.max_phys_offset + 1) is None
    s.close()
