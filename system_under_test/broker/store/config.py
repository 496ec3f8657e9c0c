"""Store configuration (one frozen, validated dataclass)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

MIB = 1024 * 1024


class FlushPolicy(enum.Enum):
    """When appended bytes are fsynced.

    * ``SYNC`` -- every append (put / append_raw) fsyncs before it returns: an acknowledged write
      survives a power cut; costs one fsync per call, so batch records per call.
    * ``ASYNC`` -- a background flusher fsyncs every ``flush_interval_ms`` (group commit): a crash
      of the machine loses up to one interval of acknowledged writes (RIP-44 case (2)).
    """

    SYNC = "sync"
    ASYNC = "async"


@dataclass(frozen=True)
class StoreConfig:
    """Knobs of one message store.

    Attributes:
        segment_bytes: a commit-log segment file rolls over once the next append would make it
            larger than this (a single larger record still gets its own segment).  Smaller
            segments mean more files and cheaper recovery of the last one; tests use a few KiB.
            Must be >= ``max_message_bytes``.
        flush_policy: see :class:`FlushPolicy`.
        flush_interval_ms: the background flusher's period: ASYNC fsync of the commit log, and for
            both policies the fsync of consume queues and the checkpoint write (which persists the
            confirm offset).  Shorter = less loss on a crash, more fsyncs.
        max_message_bytes: largest record frame accepted by put/append_raw (answer
            MESSAGE_TOO_LARGE-style errors above it).
        background_flush: run the flusher thread.  Tests turn it off to call ``flush()`` by hand;
            with it off and ASYNC, nothing is fsynced until ``flush()`` or ``close()``.
    """

    segment_bytes: int = 64 * MIB
    flush_policy: FlushPolicy = FlushPolicy.ASYNC
    flush_interval_ms: int = 500
    max_message_bytes: int = 4 * MIB
    background_flush: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.segment_bytes, int) or not 4096 <= self.segment_bytes <= 1 << 34:
            raise ValueError(f"StoreConfig.segment_bytes must be an int in [4096, 2**34], got {self.segment_bytes!r}")
        if not isinstance(self.flush_policy, FlushPolicy):
            raise ValueError(f"StoreConfig.flush_policy must be a FlushPolicy, got {self.flush_policy!r}")
        if not isinstance(self.flush_interval_ms, int) or not 1 <= self.flush_interval_ms <= 60_000:
            raise ValueError(
                f"StoreConfig.flush_interval_ms must be an int in [1, 60000], got {self.flush_interval_ms!r}"
            )
        if not isinstance(self.max_message_bytes, int) or self.max_message_bytes < 64:
            raise ValueError(f"StoreConfig.max_message_bytes must be an int >= 64, got {self.max_message_bytes!r}")
        if self.max_message_bytes > self.segment_bytes:
            raise ValueError(
                f"StoreConfig.max_message_bytes ({self.max_message_bytes}) must be <= segment_bytes "
                f"({self.segment_bytes}) so a record always fits in one segment"
            )

    def describe(self) -> str:
        return (
            f"segment={self.segment_bytes}B flush={self.flush_policy.value}/{self.flush_interval_ms}ms "
            f"max_message={self.max_message_bytes}B"
        )
