"""The disk nemesis's vocabulary: which disk faults and file-corruption modes exist (pure data).

Kept apart from :mod:`nemesis.disk` (the shell that injects them) so that schedule validation
(:mod:`nemesis.schedule`) can name them without importing the nemeses.
"""

from __future__ import annotations

__all__ = ["CORRUPT_MODES", "DISK_FAILPOINTS", "FAULTS", "REPAIRABLE_MODES", "TAIL_BYTES"]

CORRUPT_MODES = ("bitflip-tail", "truncate-tail", "bitflip", "truncate", "copy-chunk")
REPAIRABLE_MODES = ("bitflip-tail", "truncate-tail")
TAIL_BYTES = 48  # without a known last-record start, the tail modes damage at most this many last bytes

# fault name -> (failpoint on brokers, failpoint on controllers or None, action template)
FAULTS: dict[str, tuple[str, str | None, str]] = {
    "slow-fsync": ("store.before_fsync", "raft.before_persist", "delay({delay_ms})"),
    "enospc": ("store.write", None, "error"),
    "eio-write": ("store.write", None, "error(5)"),
    "eio-fsync": ("store.before_fsync", None, "error(5)"),
    "eio-read": ("store.read", None, "error(5)"),
}
DISK_FAILPOINTS = ("store.write", "store.before_fsync", "store.read")
