"""A broker's store in memory, with the disk semantics of the real one: what is fsynced survives a crash.

:class:`SimStore` models :class:`system_under_test.broker.store.MessageStore` (a file shell with threads) for
the simulator.  What it runs of the production code: record frames are built by ``store.record.encode_stamped``
and checked by ``store.record.decode_many`` (CRC per frame; recovery cuts the torn tail where decoding stops);
the epoch entries are a path-less ``store.epoch_file.EpochFileCache`` (the real class, in memory).  What it
re-states, because it lives in the file shell (``store/store.py``; listed in docs/simulation.md): queue offsets
assigned at put, the visibility rule (a record enters its consume queue only once its end is <= the confirm
offset, and leaves it again when the confirm offset is lowered), truncation of every part at a record
boundary, the stable offset (under SYNC the synced offset), and the order of recovery (torn tail cut, epoch
entries beyond the end dropped, consume queues re-derived).  What recovery decides runs the production rules of
``store/recovery.py``: the confirm offset (the checkpoint's, clamped to the recovered log:
``recovered_confirm_offset``) and whether the log lost durable records (``durable_loss_after``; the durable offset
is the synced mark, which only disk damage -- :meth:`SimStore.damage_tail`, the ``disk`` fault -- can cut below).

Disk model.  The commit log's bytes are written at once (page cache); ``durable`` marks how far the disk really
holds them through a power cut, ``synced`` is the synced offset the store published (the real
``commitlog.synced``).  When to fsync and what to publish after it are the production rules of
``store/durability.py`` (:func:`plan_sync`, :func:`synced_after`, :func:`rollback_point`, :func:`stable_offset`),
run with a simulated fsync: ``durable`` advances only when a planned fsync ran and succeeded, so a store whose
rule publishes without fsyncing says more than its disk holds.  Under SYNC every append is fsynced before it
returns (the real group commit) -- at once, or, while the ``fsync`` fault slows or fails this disk
(:attr:`SimStore.fsync_fault`), through :meth:`write_put` / :meth:`sync_plan` / :meth:`finish_sync` /
:meth:`rollback` on simulated time (``sim/broker.py``); under ASYNC :meth:`flush` runs every flush interval.
The checkpoint (synced offset, confirm offset) is written at each flush and truncation.  Epoch entries are written
atomically with fsync (as the real epoch file).  A crash (:meth:`crash`) keeps the durable bytes plus a random
prefix of the rest -- possibly ending inside a frame (a torn write) -- and forgets everything in memory.  Open does
not fsync what it recovered (the real one does): the store stays durable to where it was until its next fsync --
the same for a store that fsyncs as it should, harsher for one that skips its fsync.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass

from system_under_test.broker.store.durability import SyncPlan, plan_sync, rollback_point, stable_offset, synced_after
from system_under_test.broker.store.epoch_file import EpochFileCache
from system_under_test.broker.store.record import decode_many, encode_stamped, trusted_records
from system_under_test.broker.store.recovery import DurableLoss, durable_loss_after, recovered_confirm_offset

__all__ = ["Item", "SimStore"]


@dataclass(slots=True)
class Item:
    """One record of the commit log: where it is and which queue position it holds."""

    phys: int
    size: int
    topic: str
    queue_id: int
    queue_offset: int
    value: str

    @property
    def end(self) -> int:
        return self.phys + self.size


class SimStore:
    """See the module docstring.  ``sync`` selects FlushMode.SYNC (fsync every append)."""

    def __init__(self, *, sync: bool) -> None:
        self.sync = sync
        # the disk
        self.log = bytearray()
        self.synced = 0  # the published synced offset
        self.durable = 0  # what a power cut keeps for sure (advanced only by an fsync that ran)
        self.fsync_fault: tuple[str, int] | None = None  # (slow-fsync | eio-fsync, ms per fsync): the fsync fault
        self.checkpoint_confirm = 0
        self.epochs = EpochFileCache(None)
        self.durable_loss: DurableLoss | None = None  # the marker file: kept across restarts until cleared
        self.fsyncs = 0
        # memory, rebuilt by open()
        self.items: list[Item] = []
        self.starts: list[int] = []
        self.next_qo: dict[tuple[str, int], int] = {}
        self.pending: deque[Item] = deque()
        self.cqs: dict[tuple[str, int], list[Item]] = {}
        self.confirm = 0
        self.dispatched = 0
        self.torn_tails = 0
        self.open()

    # -- offsets ---------------------------------------------------------------------------------
    @property
    def max_offset(self) -> int:
        return len(self.log)

    @property
    def stable_offset(self) -> int:
        """End of finished appends: under SYNC the synced offset, else the max offset (``durability.py``)."""
        return stable_offset(self.synced, len(self.log), sync=self.sync)

    def queue_bounds(self, topic: str, queue_id: int) -> tuple[int, int]:
        return 0, len(self.cqs.get((topic, queue_id), ()))

    # -- writing ---------------------------------------------------------------------------------
    def put(self, topic: str, queue_id: int, values: list[str], now_ms: int) -> list[Item]:
        """Append as master: each record gets the next queue offset of its queue; under SYNC fsynced at once."""
        out = self.write_put(topic, queue_id, values, now_ms)
        if self.sync:
            self._fsync()
        return out

    def write_put(self, topic: str, queue_id: int, values: list[str], now_ms: int) -> list[Item]:
        """The first half of :meth:`put`: write the records, fsync nothing (the caller finishes the append with
        :meth:`sync_plan` and :meth:`finish_sync`, or undoes it with :meth:`rollback`)."""
        key = (topic, queue_id)
        first = self.next_qo.get(key, 0)
        offsets = list(range(first, first + len(values)))
        records = trusted_records(topic, queue_id, now_ms, [v.encode() for v in values], [""] * len(values))
        data, sizes = encode_stamped(records, offsets, now_ms)
        phys = len(self.log)
        self.log += data
        out = []
        for v, qo, size in zip(values, offsets, sizes):
            it = Item(phys, size, topic, queue_id, qo, v)
            self._add(it)
            out.append(it)
            phys += size
        self.next_qo[key] = first + len(values)
        return out

    def append_raw(self, phys: int, data: bytes) -> None:
        """Append replicated whole frames at ``phys`` == max offset (CRC-checked as they are decoded)."""
        if phys != len(self.log):
            raise ValueError(f"append_raw at {phys} but the log ends at {len(self.log)}")
        res = decode_many(data, phys)
        if res.stop is not None or res.end != phys + len(data):
            raise ValueError(f"append_raw at {phys}: bytes are not whole valid frames ({res.stop})")
        self.log += data
        for d in res.records:
            r = d.record
            it = Item(d.offset, d.size, r.topic, r.queue_id, r.queue_offset, r.body.decode())
            self._add(it)
            key = (r.topic, r.queue_id)
            self.next_qo[key] = max(self.next_qo.get(key, 0), r.queue_offset + 1)
        if self.sync:
            self._fsync()

    def _add(self, it: Item) -> None:
        self.items.append(it)
        self.starts.append(it.phys)
        self.pending.append(it)

    def read_raw(self, start: int, max_bytes: int) -> bytes:
        """Whole frames from ``start`` (a record boundary), at most ``max_bytes`` (at least one frame)."""
        i = bisect.bisect_left(self.starts, start)
        if i >= len(self.items):
            return b""
        end = start
        while i < len(self.items):
            it = self.items[i]
            if it.end - start > max_bytes and end > start:
                break
            end = it.end
            i += 1
        return bytes(self.log[start:end])

    def item_at(self, phys: int) -> Item | None:
        """The record that starts at ``phys``, if any."""
        i = bisect.bisect_left(self.starts, phys)
        return self.items[i] if i < len(self.items) and self.starts[i] == phys else None

    def boundary_at_or_below(self, offset: int) -> int:
        """The largest record boundary <= ``offset``."""
        i = bisect.bisect_right(self.starts, offset) - 1
        if i < 0:
            return 0
        it = self.items[i]
        return it.end if it.end <= offset else it.phys

    # -- visibility ------------------------------------------------------------------------------
    def set_confirm_offset(self, offset: int) -> None:
        """Dispatch (or withdraw) consume-queue entries so that exactly the records ending <= ``offset``
        are visible."""
        if not 0 <= offset <= len(self.log):
            raise ValueError(f"confirm offset {offset} outside the commit log [0, {len(self.log)}]")
        if offset < self.dispatched:
            redo = [it for it in self.items if it.end > offset and it.phys < self.dispatched]
            for it in reversed(redo):
                cq = self.cqs.get((it.topic, it.queue_id))
                if cq and cq[-1] is it:
                    cq.pop()
            self.pending.extendleft(reversed(redo))
            self.dispatched = redo[0].phys if redo else offset
        self.confirm = offset
        self._dispatch_up_to(offset)

    def _dispatch_up_to(self, offset: int) -> None:
        pending = self.pending
        while pending and pending[0].end <= offset:
            it = pending.popleft()
            self.cqs.setdefault((it.topic, it.queue_id), []).append(it)
            self.dispatched = it.end

    def get(self, topic: str, queue_id: int, offset: int, max_count: int) -> list[Item]:
        cq = self.cqs.get((topic, queue_id), [])
        return cq[offset:offset + max_count]

    # -- truncation and durability ---------------------------------------------------------------
    def truncate(self, offset: int) -> None:
        """Drop the log from ``offset`` (a record boundary): every part, durably."""
        if offset > len(self.log) or (offset < len(self.log) and offset not in self._boundaries(offset)):
            raise ValueError(f"truncate at {offset}: not a record boundary of the log [0, {len(self.log)}]")
        i = bisect.bisect_left(self.starts, offset)
        removed = self.items[i:]
        del self.items[i:]
        del self.starts[i:]
        del self.log[offset:]
        for it in removed:
            key = (it.topic, it.queue_id)
            self.next_qo[key] = min(self.next_qo.get(key, 0), it.queue_offset)
            cq = self.cqs.get(key)
            if cq is not None:
                while cq and cq[-1].phys >= offset:
                    cq.pop()
        self.pending = deque(it for it in self.pending if it.phys < offset)
        self.dispatched = min(self.dispatched, offset)
        self.confirm = min(self.confirm, offset)
        self.synced = min(self.synced, offset)
        self.durable = min(self.durable, offset)
        self.epochs.truncate_suffix_by_offset(offset)
        self.checkpoint_confirm = min(self.checkpoint_confirm, offset)

    def _boundaries(self, offset: int) -> set[int]:
        i = bisect.bisect_left(self.starts, offset)
        return {self.starts[i]} if i < len(self.starts) else set()

    def flush(self) -> None:
        """The background flusher (ASYNC) and the checkpoint: fsync the log, record the confirm offset.  Under
        an ``eio-fsync`` fault the fsync fails and nothing becomes more durable (the real flush raises; its
        next run tries again); a slow fsync is taken at once here (no send waits for it)."""
        self._fsync(ok=self.fsync_fault is None or self.fsync_fault[0] != "eio-fsync")
        self.checkpoint_confirm = self.confirm

    def _fsync(self, ok: bool = True) -> None:
        plan = self.sync_plan()
        if plan is not None:
            self.finish_sync(plan, ok=ok)

    def sync_plan(self) -> SyncPlan | None:
        """What an fsync attempt now does (``durability.plan_sync``; dirty: bytes the disk does not hold yet)."""
        return plan_sync(self.synced, len(self.log), self.durable < len(self.log))

    def finish_sync(self, plan: SyncPlan, *, ok: bool) -> None:
        """The fsync of ``plan`` has finished (``ok``) or failed: the disk holds what it fsynced, and the store
        publishes what ``durability.synced_after`` says -- never beyond the log, which a rollback may have cut."""
        if ok and plan.fsync:
            self.durable = max(self.durable, min(plan.target, len(self.log)))
            self.fsyncs += 1
        self.synced = min(synced_after(plan, self.synced, fsync_ok=ok), len(self.log))

    def rollback(self, begin: int) -> None:
        """Undo an append begun at ``begin`` whose fsync failed (``durability.rollback_point``): its bytes, items
        and queue offsets go; nothing of it was confirmed or dispatched (it was above the stable offset), and
        the epoch file is left as it is (as the real store's rollback)."""
        point = rollback_point(begin, len(self.log))
        if point is None:
            return
        i = bisect.bisect_left(self.starts, point)
        for it in self.items[i:]:
            key = (it.topic, it.queue_id)
            self.next_qo[key] = min(self.next_qo.get(key, 0), it.queue_offset)
        del self.items[i:]
        del self.starts[i:]
        del self.log[point:]
        self.pending = deque(it for it in self.pending if it.phys < point)
        self.synced = min(self.synced, point)
        self.durable = min(self.durable, point)

    def reset_empty(self) -> None:
        """An empty store forgets the epochs that wrote nothing here (slave handshake)."""
        self.epochs.truncate_suffix_by_offset(0)

    # -- crash and recovery ----------------------------------------------------------------------
    def _epoch_at(self, offset: int) -> int | None:
        found = self.epochs.find_entry_by_offset(offset)
        return None if found is None else found.epoch

    def clear_durable_loss(self) -> None:
        """Forget the durable loss: replication has refilled the log (the broker decides when)."""
        self.durable_loss = None

    def damage_tail(self, mode: str) -> int | None:
        """Disk damage while the process is down (the disk nemesis's ``corrupt-file`` tail modes): the last whole
        record of the log is cut in its middle (``truncate-tail``; torn bytes after it go too) or has the lowest
        bit of its middle byte flipped (``bitflip-tail``), fsynced or not.  The next open finds a torn tail there
        and cuts it; below the durable offset that is a durable loss.  The checkpoint (with its confirm offset)
        and the epoch file stay as they were.  Returns where the damage is, None if the log holds no record."""
        records = decode_many(bytes(self.log), 0).records
        if not records:
            return None
        last = records[-1]
        at = last.offset + last.size // 2
        if mode == "truncate-tail":
            del self.log[at:]
        elif mode == "bitflip-tail":
            self.log[at] ^= 1
        else:
            raise ValueError(f"damage_tail: unknown mode {mode!r}")
        return at

    @property
    def unsynced(self) -> int:
        """Bytes of the log the disk does not hold for sure (a crash keeps a random prefix of them)."""
        return len(self.log) - self.durable

    def crash(self, keep_unsynced: int) -> None:
        """The process died: keep the durable bytes plus ``keep_unsynced`` more (clamped), lose memory.  The
        published synced offset stays as it was written (recovery compares the log with it)."""
        keep = min(len(self.log), self.durable + max(0, keep_unsynced))
        del self.log[keep:]
        self.durable = min(self.durable, keep)

    def open(self) -> None:
        """Recover from the disk: cut a torn tail, drop epochs beyond the end, clamp the checkpoint's confirm
        offset, re-derive queue offsets and consume queues."""
        res = decode_many(bytes(self.log), 0)
        loss = durable_loss_after(self.durable_loss, res.end, self.synced, self._epoch_at)
        if loss is not None:
            self.durable_loss = loss
        if res.end < len(self.log):
            self.torn_tails += 1
            del self.log[res.end:]
        self.synced = min(self.synced, len(self.log))
        self.durable = min(self.durable, len(self.log))
        self.items, self.starts = [], []
        self.next_qo, self.pending, self.cqs = {}, deque(), {}
        for d in res.records:
            r = d.record
            it = Item(d.offset, d.size, r.topic, r.queue_id, r.queue_offset, r.body.decode())
            self._add(it)
            key = (r.topic, r.queue_id)
            self.next_qo[key] = max(self.next_qo.get(key, 0), r.queue_offset + 1)
        self.epochs.remove_beyond(len(self.log))
        self.dispatched = 0
        # As the real store's open: the confirm offset is set, not moved (set_confirm_offset refuses an offset
        # beyond the log, which only a wrong recovery rule could produce); records ending at or below it are
        # visible, the others wait for it.
        self.confirm = recovered_confirm_offset(self.checkpoint_confirm, 0, len(self.log))
        self._dispatch_up_to(self.confirm)

    def describe(self) -> str:
        return (f"log [0,{len(self.log)}) synced {self.synced} confirm {self.confirm} epochs "
                f"{self.epochs.describe()}")
