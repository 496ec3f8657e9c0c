"""When the commit log may call bytes durable (pure): fsync, then publish; roll back a failed append.

The commit log (``commitlog.py``, a file shell) and the simulated store (``sim/store.py``) both run these rules, so
that a mistake here is a mistake in both:

* :func:`plan_sync` -- what one fsync attempt must do: fsync the written bytes, and only then publish the synced
  offset it reaches.  The published synced offset is a promise -- the master replicates and confirms only below it
  under SYNC (:func:`stable_offset`), the lose-unfsynced nemesis cuts a dead store's log there, and recovery takes
  a log that ends below it for lost durable records -- so it may name only bytes an fsync has made durable.
* :func:`synced_after` -- the synced offset to publish after the attempt: the plan's target after a successful
  fsync, the old one after a failed fsync (nothing became more durable).
* :func:`rollback_point` -- where an append whose write or, under SYNC, whose fsync failed cuts the log back to: its
  beginning, so the log never holds bytes whose caller was told they failed (the send is answered STORE_ERROR; if
  the bytes stayed, a later record could be written after them and they would be served).
* :func:`stable_offset` -- the end of the appends that have finished: under SYNC the synced offset (an append is
  finished when its fsync is), else the max offset.  Bytes above it belong to an append still being fsynced -- or
  about to be rolled back.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SyncPlan", "plan_sync", "rollback_point", "stable_offset", "synced_after"]


@dataclass(frozen=True)
class SyncPlan:
    """One fsync attempt of the commit log.

    Attributes:
        fsync: the written bytes must be fsynced before ``target`` is published.
        target: the synced offset to publish once that fsync succeeded (the max offset when it began).
    """

    fsync: bool
    target: int


def plan_sync(synced: int, max_offset: int, dirty: bool) -> SyncPlan | None:
    """What an fsync attempt does when the log is synced to ``synced``, ends at ``max_offset`` and ``dirty`` says
    whether bytes were written since the last fsync; None when there is nothing to do.

    Raises:
        ValueError: ``synced`` or ``max_offset`` negative.
    """
    if synced < 0 or max_offset < 0:
        raise ValueError(f"offsets must be >= 0, got synced={synced} max_offset={max_offset}")
    if not dirty and synced == max_offset:
        return None
    return SyncPlan(fsync=True, target=max_offset)


def synced_after(plan: SyncPlan, synced: int, *, fsync_ok: bool) -> int:
    """The synced offset to publish after ``plan``'s attempt: its target if the fsync succeeded, else ``synced``."""
    return plan.target if fsync_ok else synced


def rollback_point(begin: int, max_offset: int) -> int | None:
    """Where a failed append that began at ``begin`` cuts the log back to (None: it wrote nothing to undo)."""
    return begin if max_offset > begin else None


def stable_offset(synced: int, max_offset: int, *, sync: bool) -> int:
    """End of the finished appends (module docstring): under SYNC the synced offset (never above the max), else
    the max offset."""
    return min(synced, max_offset) if sync else max_offset
