"""What a store trusts when it opens (pure): the recovered confirm offset, and whether durable records were lost.

The file shells (``commitlog.py``'s recovery, ``store.py``'s open) read the disk and cut a torn tail; the rules
that decide what the recovered log means live here, so that the simulated store (``sim/store.py``) runs the same
rules on its in-memory disk:

* :func:`recovered_confirm_offset` -- the checkpoint's confirm offset, clamped to the recovered log.  The
  checkpoint was written before the crash; the log may have come back shorter (a torn tail, a lost or
  damaged tail).  A confirm offset above the recovered end would claim bytes the log does not hold: the
  records that replication later puts there would count as confirmed -- visible to consumers, reported to the
  controller -- before any SyncStateSet acknowledged them.
* :func:`durable_loss_after` -- a log that ends below its durable offset lost records it had fsynced (and,
  under SYNC, maybe acknowledged); :class:`DurableLoss` is what the store records until replication refills the
  log (``broker/ha/role.py`` keeps such a broker out of mastership meanwhile).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["DurableLoss", "durable_loss_after", "recovered_confirm_offset"]


@dataclass(frozen=True)
class DurableLoss:
    """The commit log lost records it had made durable (``<store>/commitlog.lost``; ``commitlog.py``).

    Attributes:
        durable_offset: the log had been fsynced up to here; None if the marker file is damaged.
        end: where the log ended after the recovery that found the loss.
        epoch: the master epoch of the last durable record (the one ending at ``durable_offset``), read from the
            epoch file before the recovery cut it back; None if unknown (no entry covers it, a marker written
            before the field existed, or a damaged marker).  A replica whose log ends in this epoch at or beyond
            ``durable_offset`` holds everything this one had made durable (docs/broker.md, Lost durable records).
    """

    durable_offset: int | None
    end: int
    epoch: int | None = None

    def describe(self) -> str:
        was = "unknown (damaged marker)" if self.durable_offset is None else str(self.durable_offset)
        in_epoch = "" if self.epoch is None else f" (epoch {self.epoch})"
        return f"commit log lost durable records: durable up to {was}{in_epoch}, recovered to {self.end}"


def durable_loss_after(known: DurableLoss | None, end: int, durable_offset: int,
                       epoch_at: Callable[[int], int | None] | None) -> DurableLoss | None:
    """The loss to record when the recovered log ends at ``end`` and was durable up to ``durable_offset``;
    None when it lost nothing durable (a loss ``known`` from an earlier open then stands as it is).

    A loss recorded earlier and not cleared keeps its claim if that claim is the larger (its epoch with it): the
    epoch file has been cut back since, so only the first recovery could read the epoch.  ``epoch_at(offset)``
    reads the epoch file as it was before this recovery."""
    if end >= durable_offset:
        return None
    if known is not None and (known.durable_offset is None or known.durable_offset >= durable_offset):
        return DurableLoss(known.durable_offset, end, known.epoch)
    return DurableLoss(durable_offset, end, epoch_at(durable_offset - 1) if epoch_at is not None else None)


def recovered_confirm_offset(stored_confirm: int | None, lo: int, hi: int) -> int:
    """The confirm offset a store opens with: the checkpoint's (``stored_confirm``; None: no checkpoint, nothing
    confirmed beyond the log start) clamped to the recovered log ``[lo, hi]`` (module docstring)."""
    if stored_confirm is None:
        stored_confirm = lo
    confirm = min(max(stored_confirm, lo), hi)
    return confirm
