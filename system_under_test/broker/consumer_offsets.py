"""Committed consumer offsets of one broker, persisted in ``<store dir>/consumerOffset.json``.

A consumer group commits, per (topic, queue id), the next logical offset it will consume.  The
table lives on the broker that received the commit (master or slave); it is not replicated, so a
consumer that switches brokers carries its own offset (the harness's consumers do).  Each commit
rewrites the file atomically (write temp, fsync, rename), so a crash keeps the old or the new table.
"""

from __future__ import annotations

import json
import logging
import os
import threading

log = logging.getLogger("splitbrain.broker.offsets")

FILE_NAME = "consumerOffset.json"


class ConsumerOffsets:
    """``(group, topic, queue_id) -> offset``, loaded at start and saved on every commit."""

    def __init__(self, store_dir: str) -> None:
        self.path = os.path.join(store_dir, FILE_NAME)
        self._lock = threading.Lock()  # commits run in worker threads; one writer of the file at a time
        self._table: dict[str, int] = {}
        try:
            with open(self.path, encoding="utf-8") as f:
                raw = json.load(f)
            if isinstance(raw, dict):
                self._table = {str(k): int(v) for k, v in raw.items() if isinstance(v, int)}
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as exc:
            log.error("consumer offsets %s unreadable (%s); starting with an empty table", self.path, exc)

    @staticmethod
    def _key(group: str, topic: str, queue_id: int) -> str:
        return f"{group}\x1f{topic}\x1f{queue_id}"

    def get(self, group: str, topic: str, queue_id: int) -> int | None:
        return self._table.get(self._key(group, topic, queue_id))

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Record ``offset`` durably.  Raises ValueError for a negative offset, OSError on I/O failure."""
        if offset < 0:
            raise ValueError(f"consumer offset must be >= 0, got {offset} for {group} {topic}/{queue_id}")
        with self._lock:
            self._table[self._key(group, topic, queue_id)] = offset
            tmp = self.path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(self._table, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
