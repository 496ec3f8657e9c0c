"""Torn tail or lost durable records: what the store's recovery tells apart, records and keeps.

A cut at or above what was durable (the checkpoint's flushed offset, the synced offset published
before the restart) is a torn tail: nothing anyone was told is durable is gone.  A cut below it -- a
damaged disk, the ``corrupt-file`` nemesis under ``flush: sync`` -- lost durable, possibly
acknowledged, records: the store still opens, but says so (``durable_loss``) until the broker clears it,
across restarts, and a legitimate truncation never looks like one.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from system_under_test.broker.store import (
    CommitLog,
    FlushPolicy,
    MessageStore,
    Record,
    StoreConfig,
    load_checkpoint,
)
from system_under_test.broker.store import commitlog as commitlog_mod
from system_under_test.broker.store.commitlog import LOST_FILE, SYNCED_FILE, read_synced_file
from systems.splitbrain import store_tool as disk

SYNC = StoreConfig(segment_bytes=4096, max_message_bytes=2048, flush_policy=FlushPolicy.SYNC, background_flush=False)
ASYNC = StoreConfig(segment_bytes=4096, max_message_bytes=2048, flush_policy=FlushPolicy.ASYNC, background_flush=False)


@pytest.fixture
def d() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as tmp:
        yield os.path.join(tmp, "store")


def msgs(n: int, start: int = 0) -> list[Record]:
    return [Record("t", 0, f"m{i}".encode() * 20, key=f"k{i}") for i in range(start, start + n)]


def last_segment(d: str) -> Path:
    return sorted((Path(d) / "commitlog").iterdir())[-1]


def test_a_torn_tail_above_the_durable_offset_is_no_loss(d: str) -> None:
    s = MessageStore.open(d, ASYNC, "c1")
    s.put(msgs(5))
    durable = s.flush()
    res = s.put(msgs(3, start=5))  # written, never fsynced: nobody was told these are durable
    s.close(clean=False)
    seg = last_segment(d)
    os.truncate(seg, res[-1].phys_offset + 9 - int(seg.name))  # a torn last record
    s = MessageStore.open(d, ASYNC, "c1")
    assert s.recovery.truncated_at == res[-1].phys_offset and s.max_phys_offset > durable
    assert s.recovery.lost_durable_bytes == 0 and s.durable_loss is None
    assert not (Path(d) / LOST_FILE).exists()
    s.close()


@pytest.mark.parametrize("mode", ["truncate-tail", "bitflip-tail"])
def test_under_sync_the_nemesis_tail_damage_is_a_durable_loss_kept_until_cleared(d: str, mode: str) -> None:
    """corrupt-file's repairable modes on a SYNC store: the last record was fsynced before its put
    returned, so cutting it loses a durable record -- found by the published synced offset alone (no
    checkpoint was ever written), kept across reopens, forgotten only by ``clear_durable_loss``."""
    s = MessageStore.open(d, SYNC, "c1")
    res = s.put(msgs(10))
    end = s.max_phys_offset
    s.close(clean=False)
    assert load_checkpoint(d) is None and read_synced_file(d) == end
    disk.corrupt_store(d, mode, seed=3)

    s = MessageStore.open(d, SYNC, "c1")
    assert s.max_phys_offset == res[-1].phys_offset  # opened, cut at the damaged record
    assert s.recovery.durable_offset == end and s.recovery.lost_durable_bytes == end - s.max_phys_offset
    loss = s.durable_loss
    assert loss is not None and (loss.durable_offset, loss.end) == (end, s.max_phys_offset)
    assert "LOST" in s.recovery.describe()
    s.put(msgs(1, start=10))
    s.flush()  # the claims now match the log again: only the marker remembers the loss
    s.close(clean=False)

    s = MessageStore.open(d, SYNC, "c1")
    assert s.recovery.lost_durable_bytes == 0
    assert s.durable_loss is not None and s.durable_loss.durable_offset == end, "the loss outlives a restart"
    s.clear_durable_loss()
    assert s.durable_loss is None and not (Path(d) / LOST_FILE).exists()
    s.close(clean=False)
    assert MessageStore.open(d, SYNC, "c1").durable_loss is None


def test_the_checkpoint_alone_also_knows_what_was_durable(d: str) -> None:
    s = MessageStore.open(d, SYNC, "c1")
    res = s.put(msgs(8))
    flushed = s.flush()
    s.close(clean=False)
    os.unlink(Path(d) / SYNCED_FILE)  # e.g. never published, or lost with the machine
    seg = last_segment(d)
    os.truncate(seg, res[3].phys_offset - int(seg.name))  # a cut on a record boundary: no torn tail at all
    s = MessageStore.open(d, SYNC, "c1")
    assert s.recovery.truncated_bytes == 0 and s.max_phys_offset == res[3].phys_offset
    assert s.durable_loss is not None and s.durable_loss.durable_offset == flushed
    s.close()


def test_a_damaged_marker_still_counts_as_a_loss(d: str) -> None:
    s = MessageStore.open(d, SYNC, "c1")
    s.put(msgs(2))
    s.close()
    (Path(d) / LOST_FILE).write_bytes(b"durable_offset=12\ncrc=1\n")
    s = MessageStore.open(d, SYNC, "c1")
    assert s.durable_loss is not None and s.durable_loss.durable_offset is None
    assert "unknown" in s.durable_loss.describe()
    s.close()


def test_a_slave_truncation_lowers_every_claim_before_it_cuts(d: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A slave truncating to the consistent point is not a loss, even if it dies in the middle of the cut:
    the checkpoint and the published synced offset are lowered first."""
    s = MessageStore.open(d, SYNC, "c1")
    res = s.put(msgs(10))
    s.flush()
    cut = res[4].phys_offset

    def crash(fd: int, length: int) -> None:
        raise OSError(5, "simulated crash before the cut")

    monkeypatch.setattr(commitlog_mod.os, "ftruncate", crash)
    with pytest.raises(OSError, match="simulated crash"):
        s.truncate(cut)
    cp = load_checkpoint(d)
    assert cp is not None and cp.commitlog_flushed_offset <= cut and (read_synced_file(d) or 0) <= cut
    monkeypatch.undo()
    s.close(clean=False)
    s = MessageStore.open(d, SYNC, "c1")  # the log still holds everything: more than any claim
    assert s.durable_loss is None
    s.truncate(cut)  # and a truncation that completes
    s.close(clean=False)
    s = MessageStore.open(d, SYNC, "c1")
    assert s.max_phys_offset == cut and s.durable_loss is None
    s.close()


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 30), claim_at=st.integers(0, 40), cut_at=st.integers(0, 40), torn=st.integers(0, 30))
def test_loss_is_reported_exactly_when_the_log_ends_below_the_claim(n: int, claim_at: int, cut_at: int,
                                                                     torn: int) -> None:
    """Records 0..n-1; the published synced offset claims the first ``claim_at`` records durable (clamped to
    the log); the file is cut ``torn`` bytes into record ``cut_at`` (a torn record) or at the end.  The
    recovered log ends at the last whole record, and a loss is reported iff that end is below the claim."""
    with tempfile.TemporaryDirectory() as d:
        log = CommitLog.open(d, SYNC)
        log.recover(0)
        locs = log.append(msgs(n))
        log.close()
        bounds = [off for off, _ in locs] + [locs[-1][0] + locs[-1][1]]
        claim = bounds[min(claim_at, n)]
        (Path(d) / SYNCED_FILE).write_bytes(b"%020d\n" % claim)
        k = min(cut_at, n)
        size = locs[k][1] if k < n else 0
        os.truncate(last_segment(d), bounds[k] + min(torn, max(size - 1, 0)))
        log = CommitLog.open(d, SYNC)
        report = log.recover(0)
        assert report.end == bounds[k]
        assert (log.durable_loss is not None) == (bounds[k] < claim) == (report.lost_durable_bytes > 0)
        if log.durable_loss is not None:
            assert (log.durable_loss.durable_offset, log.durable_loss.end) == (claim, bounds[k])
        log.close()


def test_the_loss_records_the_epoch_of_the_last_durable_record_before_the_epoch_file_is_cut(d: str) -> None:
    """The marker names the master epoch the lost tail was written in, read before the recovery cuts the epoch
    file back -- here the whole of epoch 2 is lost, so the epoch file afterwards ends in epoch 1 -- and keeps
    it across reopens (the controller compares it with other replicas' last epochs: docs/broker.md)."""
    s = MessageStore.open(d, SYNC, "c1")
    s.epochs.start_epoch(1, 0)
    first = s.put(msgs(4))
    start2 = s.max_phys_offset
    s.epochs.start_epoch(2, start2)
    s.put(msgs(3, start=4))
    end = s.max_phys_offset
    s.close(clean=False)
    os.truncate(last_segment(d), first[2].phys_offset - int(last_segment(d).name))  # back into epoch 1

    s = MessageStore.open(d, SYNC, "c1")
    loss = s.durable_loss
    assert loss is not None and (loss.durable_offset, loss.end, loss.epoch) == (end, first[2].phys_offset, 2)
    assert s.epochs.last_epoch == 1 and "(epoch 2)" in loss.describe()
    s.close(clean=False)
    os.truncate(last_segment(d), first[1].phys_offset - int(last_segment(d).name))  # damaged again, further
    s = MessageStore.open(d, SYNC, "c1")
    again = s.durable_loss
    assert again is not None and (again.durable_offset, again.end, again.epoch) == (end, first[1].phys_offset, 2)
    s.close()


def test_a_marker_without_an_epoch_reads_as_an_unknown_epoch(d: str) -> None:
    """Markers written before the epoch was recorded still stand as a loss; the epoch is unknown (None)."""
    s = MessageStore.open(d, SYNC, "c1")
    s.put(msgs(2))
    s.close()
    (Path(d) / LOST_FILE).write_bytes(commitlog_mod.encode_kv({"durable_offset": 900, "end": 12}))
    s = MessageStore.open(d, SYNC, "c1")
    assert s.durable_loss is not None and (s.durable_loss.durable_offset, s.durable_loss.epoch) == (900, None)
    s.close()
