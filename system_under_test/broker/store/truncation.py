"""Where a slave must cut its commit log to agree with its master (pure).

RIP-44 "Election Truncation Algorithm": every (epoch, offset) was written by exactly one master,
so two logs agree up to the end of any epoch that both hold with the *same start offset*.  The
slave walks its own epochs from newest to oldest; the first epoch that the master also has,
starting at the same offset, gives the consistent point ``min(local end, master end)``, where
each side's last epoch ends at that side's max offset.  When no epoch matches (for example the
master already deleted the old files), there is no consistent point: -1, and an operator must
step in.  An empty local epoch history also gives -1; the replication client treats an empty
store as "copy from scratch" before calling this.

Cases, from the seed's "Truncation example analysis" (tests build each one):

* the old master has more of its epoch than the new master copied -> cut at the new master's
  start of the next epoch (the data past it was never committed);
* a node lost its unflushed tail -> the point is its own (shorter) end, nothing is cut;
* a slave that already has everything -> the point is its max offset;
* a slave holding an epoch the master never saw -> that epoch is skipped, and the cut is at the
  end of the newest shared epoch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from system_under_test.broker.store.epoch_file import EpochEntry, EpochHistory, ranges_of


@dataclass(frozen=True)
class ConsistentPoint:
    """The result with its reason, for logs: ``offset`` (-1 if none) and the epoch that matched."""

    offset: int
    epoch: int | None
    reason: str


def explain_consistent_point(
    local_entries: Sequence[EpochEntry],
    local_max_offset: int,
    master_entries: Sequence[EpochEntry],
    master_max_offset: int,
) -> ConsistentPoint:
    """:func:`find_consistent_point` with the matched epoch and a one-line reason."""
    EpochHistory(tuple(local_entries))  # validates ordering
    EpochHistory(tuple(master_entries))
    if local_max_offset < 0 or master_max_offset < 0:
        raise ValueError(f"max offsets must be >= 0, got local={local_max_offset} master={master_max_offset}")
    master = {r.epoch: r for r in ranges_of(master_entries, master_max_offset)}
    for mine in reversed(ranges_of(local_entries, local_max_offset)):
        theirs = master.get(mine.epoch)
        if theirs is None or theirs.start_offset != mine.start_offset:
            continue
        assert mine.end_offset is not None and theirs.end_offset is not None
        point = min(mine.end_offset, theirs.end_offset)
        return ConsistentPoint(
            point,
            mine.epoch,
            f"epoch {mine.epoch} starts at {mine.start_offset} on both; local end {mine.end_offset}, "
            f"master end {theirs.end_offset} -> {point}",
        )
    return ConsistentPoint(
        -1,
        None,
        f"no epoch with the same start offset on both sides (local "
        f"{[e.describe() for e in local_entries]}, master {[e.describe() for e in master_entries]})",
    )


def find_consistent_point(
    local_entries: Sequence[EpochEntry],
    local_max_offset: int,
    master_entries: Sequence[EpochEntry],
    master_max_offset: int,
) -> int:
    """The offset up to which the slave's log equals the master's, or -1 if none can be proven.

    Args:
        local_entries: the slave's epoch entries, oldest first.
        local_max_offset: the slave's commit-log max offset (end of its last epoch).
        master_entries: the master's epoch entries, oldest first.
        master_max_offset: the master's max offset (end of its last epoch).

    Raises:
        EpochFileError: an entry list that does not strictly increase.
        ValueError: a negative max offset.
    """
    return explain_consistent_point(local_entries, local_max_offset, master_entries, master_max_offset).offset
