"""Batch selection on the master and the slave's reaction to TRANSFER headers (reference 2.3)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from system_under_test.broker.ha.transfer import (
    AppendBytes,
    AppendEpoch,
    Batch,
    DropConnection,
    SendAck,
    SetConfirmOffset,
    SlaveLog,
    TransferError,
    TransferHeader,
    epoch_at,
    next_batch,
    on_transfer_header,
    replication_batch,
)

EPOCHS = [(1, 0), (2, 300), (3, 500)]

BATCHES = [
    ("inside-first-epoch", 0, 1000, 100, Batch(0, 100, 1, 0)),
    ("stops-at-epoch-boundary", 250, 1000, 100, Batch(250, 300, 1, 0)),
    ("boundary-belongs-to-next-epoch", 300, 1000, 100, Batch(300, 400, 2, 300)),
    ("stops-at-master-max", 950, 1000, 100, Batch(950, 1000, 3, 500)),
    ("heartbeat-at-max", 1000, 1000, 100, Batch(1000, 1000, 3, 500)),
    ("last-epoch-big-batch", 500, 800, 32768, Batch(500, 800, 3, 500)),
]


@pytest.mark.parametrize(("name", "start", "mx", "size", "want"), BATCHES, ids=[b[0] for b in BATCHES])
def test_next_batch(name: str, start: int, mx: int, size: int, want: Batch) -> None:
    assert next_batch(start, EPOCHS, mx, size) == want


@given(start=st.integers(0, 2000), stable=st.integers(0, 2000), unstable=st.integers(0, 2000),
       size=st.integers(1, 5000))
def test_a_replication_batch_never_reaches_beyond_the_stable_offset(start: int, stable: int, unstable: int,
                                                                    size: int) -> None:
    mx = stable + unstable
    if start > stable:
        with pytest.raises(TransferError):
            replication_batch(start, EPOCHS, stable_offset=stable, max_offset=mx, batch_bytes=size)
        return
    batch, bound = replication_batch(start, EPOCHS, stable_offset=stable, max_offset=mx, batch_bytes=size)
    assert bound == stable
    assert batch.start == start and batch.end <= stable
    assert batch.epoch_start_offset <= start


def test_appends_still_being_fsynced_are_not_replicated_nor_their_epoch_entry() -> None:
    # the log ends at 800, but the appends from 450 are still being fsynced: a slave at 450 gets an empty batch
    # of epoch 2 (epoch 3, which starts at 500, is not announced yet); the bytes once the appends finished
    batch, bound = replication_batch(450, EPOCHS, stable_offset=450, max_offset=800, batch_bytes=1000)
    assert (batch, bound) == (Batch(450, 450, 2, 300), 450)
    batch, bound = replication_batch(450, EPOCHS, stable_offset=800, max_offset=800, batch_bytes=1000)
    assert (batch, bound) == (Batch(450, 500, 2, 300), 800)
    with pytest.raises(TransferError, match="stable offset"):
        replication_batch(0, EPOCHS, stable_offset=900, max_offset=800, batch_bytes=10)


def test_empty_epochs_sharing_a_start_are_skipped() -> None:
    # Epoch 2 wrote nothing (3 starts where 2 did): offset 300 belongs to epoch 3.
    assert epoch_at([(1, 0), (2, 300), (3, 300)], 300) == (3, 300, None)
    assert next_batch(200, [(1, 0), (2, 300), (3, 300)], 400, 1000) == Batch(200, 300, 1, 0)


@pytest.mark.parametrize(
    ("start", "epochs", "mx", "size", "match"),
    [
        (0, EPOCHS, 1000, 0, "batch_bytes"),
        (1001, EPOCHS, 1000, 10, "beyond master max"),
        (50, [(1, 100)], 1000, 10, "before the first epoch"),
        (0, [(2, 0), (1, 10)], 1000, 10, "strictly increasing"),
        (0, [(1, 10), (2, 5)], 1000, 10, "non-decreasing"),
        (0, [(1, 0), (2, 2000)], 1000, 10, "beyond master max offset"),
    ],
)
def test_next_batch_rejects_bad_input(
    start: int, epochs: list[tuple[int, int]], mx: int, size: int, match: str
) -> None:
    with pytest.raises(TransferError, match=match):
        next_batch(start, epochs, mx, size)


@st.composite
def master_logs(draw: st.DrawFn) -> tuple[list[tuple[int, int]], int]:
    n = draw(st.integers(1, 6))
    epochs_nums = sorted(draw(st.sets(st.integers(1, 50), min_size=n, max_size=n)))
    first = draw(st.integers(0, 2000))
    starts = [first]
    for _ in range(n - 1):
        starts.append(starts[-1] + draw(st.integers(0, 500)))
    mx = starts[-1] + draw(st.integers(0, 500))
    return list(zip(epochs_nums, starts)), mx


@settings(max_examples=300, deadline=None)
@given(master_logs(), st.integers(1, 700), st.data())
def test_batches_never_cross_an_epoch_and_cover_the_log(
    log: tuple[list[tuple[int, int]], int], size: int, data: st.DataObject
) -> None:
    epochs, mx = log
    pos = start_pos = data.draw(st.integers(epochs[0][1], mx))
    slave = SlaveLog(max_offset=0, last_epoch=None, empty=True)
    slave_epochs: list[tuple[int, int]] = []
    for _ in range(10_000):
        b = next_batch(pos, epochs, mx, size)
        e, s, end = epoch_at(epochs, b.start)
        assert (b.epoch, b.epoch_start_offset) == (e, s)
        assert b.end <= (mx if end is None else end) and b.size <= size
        slave, actions = on_transfer_header(slave, TransferHeader(b.start, b.epoch, b.epoch_start_offset, 0, b.size))
        assert not any(isinstance(a, DropConnection) for a in actions)
        slave_epochs += [(a.epoch, a.start_offset) for a in actions if isinstance(a, AppendEpoch)]
        if b.size == 0:
            break
        pos = b.end
    assert pos == mx or b.start == mx
    assert slave.max_offset == mx
    # The slave's epoch entries are exactly the master's entries in effect at its start offset and at every
    # later epoch start up to the master max (empty epochs sharing a start are skipped), in order.
    expected: list[tuple[int, int]] = []
    for x in [start_pos, *sorted({s for _, s in epochs if start_pos < s <= mx})]:
        e, s, _ = epoch_at(epochs, x)
        if not expected or expected[-1] != (e, s):
            expected.append((e, s))
    assert slave_epochs == expected


HEADERS = [
    (
        "append-same-epoch",
        SlaveLog(100, 2, 50),
        TransferHeader(100, 2, 80, 120, 40),
        SlaveLog(140, 2, 120),
        [AppendBytes(100, 40), SetConfirmOffset(120), SendAck(140)],
    ),
    (
        "epoch-change-appends-entry",
        SlaveLog(100, 2, 50),
        TransferHeader(100, 3, 100, 100, 10),
        SlaveLog(110, 3, 100),
        [AppendEpoch(3, 100), AppendBytes(100, 10), SetConfirmOffset(100), SendAck(110)],
    ),
    (
        "confirm-clamped-to-own-max",
        SlaveLog(100, 2, 50),
        TransferHeader(100, 2, 0, 900, 20),
        SlaveLog(120, 2, 120),
        [AppendBytes(100, 20), SetConfirmOffset(120), SendAck(120)],
    ),
    (
        "heartbeat",
        SlaveLog(100, 2, 50),
        TransferHeader(100, 2, 0, 100, 0),
        SlaveLog(100, 2, 100),
        [SetConfirmOffset(100), SendAck(100)],
    ),
    (
        "empty-store-starts-at-master-min-offset-1700",
        SlaveLog(0, None, 0, empty=True),
        TransferHeader(1700, 4, 1500, 1700, 100),
        SlaveLog(1800, 4, 1700),
        [AppendEpoch(4, 1500), AppendBytes(1700, 100), SetConfirmOffset(1700), SendAck(1800)],
    ),
]


@pytest.mark.parametrize(("name", "local", "header", "after", "actions"), HEADERS, ids=[h[0] for h in HEADERS])
def test_on_transfer_header(
    name: str, local: SlaveLog, header: TransferHeader, after: SlaveLog, actions: list[object]
) -> None:
    assert on_transfer_header(local, header) == (after, actions)


@pytest.mark.parametrize(
    ("local", "header", "match"),
    [
        (SlaveLog(100, 2), TransferHeader(90, 2, 0, 0, 10), "max offset is 100"),
        (SlaveLog(100, 2), TransferHeader(110, 2, 0, 0, 10), "max offset is 100"),
        (SlaveLog(100, 3), TransferHeader(100, 2, 0, 0, 10), "stale master"),
    ],
)
def test_mismatch_drops_connection_and_keeps_state(local: SlaveLog, header: TransferHeader, match: str) -> None:
    after, actions = on_transfer_header(local, header)
    assert after == local
    assert len(actions) == 1 and isinstance(actions[0], DropConnection) and match in actions[0].reason


def test_batch_validation() -> None:
    with pytest.raises(TransferError):
        Batch(10, 5, 1, 0)
    with pytest.raises(TransferError):
        Batch(10, 20, 1, 11)
    with pytest.raises(TransferError):
        TransferHeader(-1, 1, 0, 0, 0)
