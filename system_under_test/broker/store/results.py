"""What MessageStore.put / get return, and the consume-queue facts of one record (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from system_under_test.broker.store.record import Decoded


class PutResult(NamedTuple):
    """Where a put record landed (a named tuple: a put makes one per record)."""

    topic: str
    queue_id: int
    queue_offset: int
    phys_offset: int
    size: int


@dataclass(frozen=True)
class GetResult:
    """Records read from one queue.

    Attributes:
        records: decoded records (holes skipped), each with its physical offset and size.
        next_offset: the logical offset to ask for next.
        min_offset: the queue's first visible logical offset.
        max_offset: one past the queue's last visible logical offset.
    """

    records: list[Decoded]
    next_offset: int
    min_offset: int
    max_offset: int


@dataclass(frozen=True)
class RawGetResult:
    """Records read from one queue as undecoded frames (what PULL_MESSAGE sends).

    Attributes:
        data: the frames of ``spans`` back to back.
        spans: ``(phys_offset, size)`` of each run of adjacent frames, in queue order.
        count: how many frames ``data`` holds.
        next_offset, min_offset, max_offset: as in :class:`GetResult`.
    """

    data: bytes
    spans: list[tuple[int, int]]
    count: int
    next_offset: int
    min_offset: int
    max_offset: int


class QueueItem(NamedTuple):
    """A record's consume-queue facts, as found in the commit log (a named tuple: one is built per
    record appended, on the hot path of every put and every replicated batch)."""

    topic: str
    queue_id: int
    queue_offset: int
    phys_offset: int
    size: int
    tag: int

    @property
    def end(self) -> int:
        return self.phys_offset + self.size

    def row(self) -> tuple[str, int, int, int, int, int]:
        return (self.topic, self.queue_id, self.queue_offset, self.phys_offset, self.size, self.tag)
