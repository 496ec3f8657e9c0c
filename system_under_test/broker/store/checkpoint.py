"""The store checkpoint: how far the commit log is known durable, and the confirm offset.

Fields:

* ``commitlog_flushed_offset`` -- every commit-log byte below it had been fsynced when the
  checkpoint was written; a clean recovery re-verifies CRCs only from here on.
* ``dispatched_offset`` -- how far the consume queues had been built (never beyond the confirm
  offset).  Informational: the consume queues are re-derived from the commit log on every open.
* ``confirm_offset`` -- RIP-44 confirmOffset: records ending beyond it are not visible to
  consumers.  Recovery clamps it to ``[min offset, recovered max offset]``.

The file ``<store>/checkpoint`` is ``key=value`` lines plus a ``crc=`` line, written atomically.
A missing or damaged checkpoint is not fatal: :func:`load_checkpoint` returns None (logging
why) and the store falls back to a full-verification recovery with confirm offset at the log
start.
"""

from __future__ import annotations

import logging
import os
from dataclasses import asdict, dataclass

from system_under_test.broker.store import _fileio
from system_under_test.broker.store._kv import encode_kv, parse_kv

log = logging.getLogger("splitbrain.broker.store.checkpoint")

CHECKPOINT_FILE_NAME = "checkpoint"
_FIELDS = ("commitlog_flushed_offset", "dispatched_offset", "confirm_offset")


@dataclass(frozen=True)
class Checkpoint:
    commitlog_flushed_offset: int = 0
    dispatched_offset: int = 0
    confirm_offset: int = 0

    def __post_init__(self) -> None:
        for name in _FIELDS:
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"Checkpoint.{name} must be an int >= 0, got {value!r}")

    def describe(self) -> str:
        return (
            f"flushed={self.commitlog_flushed_offset} dispatched={self.dispatched_offset} confirm={self.confirm_offset}"
        )


def encode_checkpoint(cp: Checkpoint) -> bytes:
    return encode_kv(asdict(cp))


def parse_checkpoint(raw: bytes, where: str = CHECKPOINT_FILE_NAME) -> Checkpoint:
    """Raises ValueError naming ``where`` and the problem."""
    fields = parse_kv(raw, where, _FIELDS)
    try:
        return Checkpoint(**{k: int(fields[k]) for k in _FIELDS})
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from exc


def checkpoint_path(store_dir: str) -> str:
    return os.path.join(store_dir, CHECKPOINT_FILE_NAME)


def load_checkpoint(store_dir: str) -> Checkpoint | None:
    """The stored checkpoint, or None when missing or damaged (logged)."""
    path = checkpoint_path(store_dir)
    raw = _fileio.read_or_none(path)
    if raw is None:
        return None
    try:
        return parse_checkpoint(raw, path)
    except ValueError as exc:
        log.warning("ignoring damaged checkpoint (%s); recovery will verify the whole commit log", exc)
        return None


def save_checkpoint(store_dir: str, cp: Checkpoint) -> None:
    """Write the checkpoint atomically and durably."""
    _fileio.atomic_write(checkpoint_path(store_dir), encode_checkpoint(cp))
