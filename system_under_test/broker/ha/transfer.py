"""Log transfer between master and slave (pure): batch selection and the slave's reaction to a header.

Vocabulary: an *epoch entry* ``(epoch, start_offset)`` says that master epoch ``epoch`` wrote the log
from ``start_offset`` up to the next entry's start (the last entry runs to the master's max offset).
A *batch* is a byte range ``[start, end)`` of the master's commit log sent in one TRANSFER message
with a header ``(offset=start, epoch, epoch_start_offset, confirm_offset)``.

Rules this file enforces (reference 2.3):

* A batch never crosses an epoch boundary, so the slave can attribute every byte to one epoch and
  append an epoch entry exactly when the header epoch changes.
* An empty batch (start == end) is a heartbeat; it still carries the current epoch and confirm offset.
* The slave drops the connection when a batch does not start at its max offset (unless its store is
  empty: then the first batch fixes where its log starts), and clamps the confirm offset it adopts to
  its own max offset.

Offsets are byte offsets; the shell may shrink ``end`` to a record boundary before sending.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

EpochEntries = Sequence[tuple[int, int]]
"""Epoch entries ``(epoch, start_offset)``, oldest first."""


class TransferError(ValueError):
    """Inputs that break an invariant of the transfer protocol (names the values and the likely cause)."""


def check_epoch_entries(entries: EpochEntries, *, where: str) -> None:
    """Epochs strictly increase and start offsets never decrease.

    Raises:
        TransferError: naming ``where``, the index and the offending entries.
    """
    for i in range(1, len(entries)):
        (e0, s0), (e1, s1) = entries[i - 1], entries[i]
        if e1 <= e0 or s1 < s0:
            raise TransferError(
                f"{where}: epoch entries must have strictly increasing epochs and non-decreasing start offsets; "
                f"entry {i - 1}=({e0}, {s0}) then entry {i}=({e1}, {s1}). Is the epoch file corrupt?"
            )


def epoch_at(entries: EpochEntries, offset: int) -> tuple[int, int, int | None]:
    """The epoch that wrote ``offset``: ``(epoch, start_offset, end_offset or None for the last entry)``.

    When several entries share a start offset, the newest wins (older ones are empty).

    Raises:
        TransferError: ``offset`` lies before the first entry (the log prefix is gone).
    """
    if not entries or offset < entries[0][1]:
        first = entries[0][1] if entries else None
        raise TransferError(
            f"offset {offset} is before the first epoch entry (start {first}); the slave must restart from the "
            f"master's min offset"
        )
    lo, hi = 0, len(entries) - 1
    while lo < hi:  # last index with start <= offset
        mid = (lo + hi + 1) // 2
        if entries[mid][1] <= offset:
            lo = mid
        else:
            hi = mid - 1
    epoch, start = entries[lo]
    end = entries[lo + 1][1] if lo + 1 < len(entries) else None
    return epoch, start, end


@dataclass(frozen=True)
class Batch:
    """One TRANSFER message's range and header fields (``start == end`` is a heartbeat)."""

    start: int
    end: int
    epoch: int
    epoch_start_offset: int

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.end:
            raise TransferError(f"batch range must satisfy 0 <= start <= end, got [{self.start}, {self.end})")
        if self.epoch_start_offset > self.start:
            raise TransferError(
                f"batch [{self.start}, {self.end}) of epoch {self.epoch} starts before its epoch start "
                f"{self.epoch_start_offset}"
            )

    @property
    def size(self) -> int:
        return self.end - self.start

    def describe(self) -> str:
        return f"batch[{self.start},{self.end}) epoch={self.epoch}@{self.epoch_start_offset}"


def next_batch(transfer_from: int, master_epochs: EpochEntries, master_max_offset: int, batch_bytes: int) -> Batch:
    """The next batch the master sends a slave whose next wanted offset is ``transfer_from``.

    Args:
        transfer_from: the slave's max offset (first byte it lacks).
        master_epochs: the master's epoch entries, oldest first (validated).
        master_max_offset: end of the master's log.
        batch_bytes: maximum batch size (``ha_transfer_batch_bytes``, > 0).

    Returns:
        ``Batch(start=transfer_from, end, epoch, epoch_start_offset)`` with ``end`` the smallest of
        ``transfer_from + batch_bytes``, the end of the epoch holding ``transfer_from`` and the master max.

    Raises:
        TransferError: bad sizes, ``transfer_from`` outside [first epoch start, master max], or epoch
            entries that are not ordered or start beyond the master max.
    """
    if batch_bytes <= 0:
        raise TransferError(f"batch_bytes must be > 0, got {batch_bytes}")
    check_epoch_entries(master_epochs, where="master epoch entries")
    if master_epochs and master_epochs[-1][1] > master_max_offset:
        raise TransferError(
            f"last master epoch entry {master_epochs[-1]} starts beyond master max offset {master_max_offset}"
        )
    if transfer_from > master_max_offset:
        raise TransferError(
            f"slave wants offset {transfer_from} beyond master max offset {master_max_offset}; the slave is ahead "
            f"and must truncate (handshake) first"
        )
    epoch, start, end = epoch_at(master_epochs, transfer_from)
    limit = master_max_offset if end is None else min(end, master_max_offset)
    return Batch(transfer_from, min(transfer_from + batch_bytes, limit), epoch, start)


def replication_batch(transfer_from: int, master_epochs: EpochEntries, *, stable_offset: int, max_offset: int,
                      batch_bytes: int) -> tuple[Batch, int]:
    """The next batch for a slave, bounded by what the master may replicate yet; also that bound.

    A master replicates only bytes whose append has finished, those below its store's ``stable_offset`` (under
    SYNC the fsynced end; bytes between it and ``max_offset`` belong to appends still being fsynced, and a failed
    fsync undoes them).  Streaming them early would let a slave hold -- and, after a failover, serve -- a record
    whose send the master then answered with a definite failure.  Epoch entries that start beyond the bound are
    not sent yet.  The bound is returned too: the catch-up tracking compares the slave's acks with it
    (:func:`~.sync_state.on_transfer`).

    Raises:
        TransferError: as :func:`next_batch`, or ``stable_offset`` beyond ``max_offset``.
    """
    if not 0 <= stable_offset <= max_offset:
        raise TransferError(f"stable offset {stable_offset} must lie in [0, max offset {max_offset}]")
    mx = stable_offset  # only finished (under SYNC: fsynced) appends are replicated
    entries = [(e, s) for e, s in master_epochs if s <= mx]
    return next_batch(transfer_from, entries, mx, batch_bytes), mx


# ---------------------------------------------------------------------------------------------
# Slave side


@dataclass(frozen=True)
class TransferHeader:
    """A TRANSFER header as received by the slave."""

    offset: int
    epoch: int
    epoch_start_offset: int
    confirm_offset: int
    body_size: int

    def __post_init__(self) -> None:
        for name in ("offset", "epoch_start_offset", "confirm_offset", "body_size"):
            if getattr(self, name) < 0:
                raise TransferError(f"TransferHeader.{name} must be >= 0, got {getattr(self, name)}")


@dataclass(frozen=True)
class SlaveLog:
    """What the slave's transfer logic needs to know about its own store.

    Attributes:
        max_offset: end of the local commit log.
        last_epoch: epoch of the last local epoch entry (None if the epoch file is empty).
        confirm_offset: the confirm offset the slave last adopted.
        empty: True if the store holds no data yet (the first batch decides where the log starts).
    """

    max_offset: int
    last_epoch: int | None
    confirm_offset: int = 0
    empty: bool = False


@dataclass(frozen=True)
class DropConnection:
    reason: str


@dataclass(frozen=True)
class AppendEpoch:
    epoch: int
    start_offset: int


@dataclass(frozen=True)
class AppendBytes:
    offset: int
    size: int


@dataclass(frozen=True)
class SetConfirmOffset:
    confirm_offset: int


@dataclass(frozen=True)
class SendAck:
    max_offset: int


SlaveAction = DropConnection | AppendEpoch | AppendBytes | SetConfirmOffset | SendAck


def on_transfer_header(local: SlaveLog, header: TransferHeader) -> tuple[SlaveLog, list[SlaveAction]]:
    """The slave's reaction to one TRANSFER header (its body is ``header.body_size`` bytes).

    Returns:
        The slave log state after the actions are carried out, and the actions in order: append an
        epoch entry if the epoch changed, append the bytes, adopt ``min(header confirm, new max)``, ack.
        On a mismatch the only action is :class:`DropConnection` and the state is unchanged.
    """
    if not local.empty and header.offset != local.max_offset:
        return local, [
            DropConnection(
                f"batch starts at offset {header.offset} but the slave's max offset is {local.max_offset}; "
                f"reconnect and handshake again"
            )
        ]
    if local.last_epoch is not None and header.epoch < local.last_epoch:
        return local, [
            DropConnection(
                f"batch epoch {header.epoch} is older than the slave's last epoch {local.last_epoch}; the sender is "
                f"a stale master"
            )
        ]
    actions: list[SlaveAction] = []
    last_epoch = local.last_epoch
    if header.epoch != local.last_epoch:
        actions.append(AppendEpoch(header.epoch, header.epoch_start_offset))
        last_epoch = header.epoch
    if header.body_size:
        actions.append(AppendBytes(header.offset, header.body_size))
    new_max = header.offset + header.body_size
    confirm = min(header.confirm_offset, new_max)
    actions.append(SetConfirmOffset(confirm))
    actions.append(SendAck(new_max))
    return SlaveLog(new_max, last_epoch, confirm, empty=False), actions
