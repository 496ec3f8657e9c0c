"""The node side of our cluster's disk faults: file surgery on a *dead* broker's store.

``python -m systems.splitbrain.store_tool ...`` runs on the node through the control backend (so it works the same
in a namespace, a container or on an SSH host), changes the store's files and prints one JSON object saying exactly
what it changed: which file, at which offset, how many bytes.  It knows our commit log's format, which is why it
lives with the adapter and not in the disk nemesis (:mod:`nemesis.disk`, which runs it through the DB's
``store_tool``: the ``store-files`` capability).  :func:`plan_corruption` and :func:`apply_corruption` are pure and
seeded, so a recorded corruption can be replayed byte for byte.

* ``lose-unfsynced`` cuts the commit log at the synced offset the store last published
  (``<store>/commitlog.synced``);
* ``corrupt`` damages one commit-log segment (:data:`nemesis.disk_kinds.CORRUPT_MODES`): the ``*-tail`` modes damage
  the last record, which the store cuts as a torn tail; the others damage the middle of the log, which the store
  refuses to open (the broker exits 4 with the file and offset).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from nemesis.disk_kinds import CORRUPT_MODES, REPAIRABLE_MODES, TAIL_BYTES
from system_under_test.broker.store.commitlog import COMMITLOG_DIR, read_synced_file
from system_under_test.broker.store.offline import cut_files_offline
from system_under_test.broker.store.record import frame_length_at

__all__ = ["CORRUPT_MODES", "Corruption", "apply_corruption", "commitlog_segments", "corrupt_store",
           "last_record_start", "lose_unfsynced", "main", "plan_corruption"]


@dataclass(frozen=True)
class Corruption:
    """One planned change to one file (``file`` is relative to the store directory)."""

    mode: str
    file: str
    offset: int  # position in the file where the damage starts
    length: int  # bytes changed (bitflip: 1; truncate: bytes cut off the end)
    bit: int = 0  # bitflip: which bit of the byte at ``offset``
    source: int = -1  # copy-chunk: position the copied bytes came from

    def describe(self) -> str:
        if self.mode.startswith("bitflip"):
            return f"{self.mode}: flipped bit {self.bit} of the byte at {self.file}:{self.offset}"
        if self.mode.startswith("truncate"):
            return f"{self.mode}: cut {self.length} bytes off {self.file} at {self.offset}"
        return f"{self.mode}: copied {self.length} bytes of {self.file} from {self.source} over {self.offset}"


def plan_corruption(segments: Sequence[tuple[str, int]], mode: str, rng: random.Random,
                    tail_start: int | None = None) -> Corruption:
    """Choose where to damage a commit log, from its segments ``(relative path, size)`` oldest first.
    ``tail_start`` is where the last record of the last non-empty segment begins (the tail modes
    damage only that record); unknown, they damage only the last :data:`TAIL_BYTES` bytes.

    Raises:
        ValueError: unknown mode, or every segment is empty (nothing to damage).
    """
    if mode not in CORRUPT_MODES:
        raise ValueError(f"corrupt-file: unknown mode {mode!r}; known: {', '.join(CORRUPT_MODES)}")
    nonempty = [(p, n) for p, n in segments if n > 0]
    if not nonempty:
        raise ValueError("corrupt-file: the commit log is empty; nothing to damage")
    if mode.endswith("-tail"):
        path, size = nonempty[-1]
        lo = max(0, size - TAIL_BYTES) if tail_start is None else min(max(0, tail_start), size - 1)
        if mode == "bitflip-tail":
            return Corruption(mode, path, rng.randrange(lo, size), 1, bit=rng.randrange(8))
        cut = rng.randrange(min(lo + 1, size - 1), size)  # strictly inside the record: a torn tail
        return Corruption(mode, path, cut, size - cut)
    path, size = nonempty[rng.randrange(len(nonempty))]
    if mode == "bitflip":
        return Corruption(mode, path, rng.randrange(size), 1, bit=rng.randrange(8))
    if mode == "truncate":
        cut = rng.randrange(size)
        return Corruption(mode, path, cut, size - cut)
    if size < 2:
        raise ValueError(f"corrupt-file: copy-chunk needs a segment of 2+ bytes, {path} has {size}")
    length = min(rng.randint(16, 512), size // 2)
    dest = rng.randrange(size - length + 1)
    source = rng.randrange(size - length + 1)
    if source == dest:
        source = (dest + length) % (size - length + 1)
    return Corruption(mode, path, dest, length, source=source)


def apply_corruption(data: bytes, c: Corruption) -> bytes:
    """The file's new content (pure)."""
    if c.mode.startswith("truncate"):
        return data[: c.offset]
    out = bytearray(data)
    if c.mode.startswith("bitflip"):
        out[c.offset] ^= 1 << c.bit
    else:
        out[c.offset : c.offset + c.length] = data[c.source : c.source + c.length]
    return bytes(out)


def commitlog_segments(store_dir: str) -> list[tuple[str, int]]:
    """``(path relative to the store, size)`` of every commit-log segment, oldest first."""
    d = Path(store_dir) / COMMITLOG_DIR
    if not d.is_dir():
        return []
    names = sorted(p.name for p in d.iterdir() if len(p.name) == 20 and p.name.isdigit())
    return [(f"{COMMITLOG_DIR}/{n}", (d / n).stat().st_size) for n in names]


def _write_durably(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def last_record_start(data: bytes) -> int | None:
    """Where the last whole frame of a segment's bytes begins (None if it holds none)."""
    pos, last = 0, None
    while pos < len(data):
        total = frame_length_at(data, pos)
        if total is None or total <= 0 or pos + total > len(data):
            break
        last, pos = pos, pos + total
    return last


def corrupt_store(store_dir: str, mode: str, seed: int) -> dict[str, Any]:
    """Node side of ``corrupt-file``: plan, apply and report (the broker must be dead)."""
    segments = commitlog_segments(store_dir)
    tail_start = None
    nonempty = [p for p, n in segments if n > 0]
    if mode in REPAIRABLE_MODES and nonempty:
        tail_start = last_record_start((Path(store_dir) / nonempty[-1]).read_bytes())
    c = plan_corruption(segments, mode, random.Random(seed), tail_start)
    path = Path(store_dir) / c.file
    before = path.read_bytes()
    after = apply_corruption(before, c)
    _write_durably(path, after)
    first = next((i for i in range(c.offset, min(len(before), len(after))) if before[i] != after[i]),
                 min(len(before), len(after)))
    return {**asdict(c), "path": str(path), "size_before": len(before), "size_after": len(after),
            "changed": before != after, "first_changed": first, "describe": c.describe()}


def lose_unfsynced(store_dir: str) -> dict[str, Any]:
    """Node side of ``lose-unfsynced``: cut the dead broker's log at its last published synced offset."""
    synced = read_synced_file(store_dir)
    segs = commitlog_segments(store_dir)
    end = max((int(Path(p).name) + n for p, n in segs), default=0)
    if synced is None:
        return {"synced_offset": None, "max_offset": end, "dropped": 0,
                "note": "the store never published a synced offset; nothing cut"}
    dropped = cut_files_offline(store_dir, synced) if segs else 0
    return {"synced_offset": synced, "max_offset": end, "dropped": dropped}


def main(argv: Sequence[str] | None = None) -> int:
    """``--store DIR lose-unfsynced`` or ``--store DIR corrupt --mode M [--seed S]``: 0 and one JSON line on
    stdout; 2 for a store that is not a directory, 1 when the surgery failed (the reason on stderr)."""
    ap = argparse.ArgumentParser(prog="python -m systems.splitbrain.store_tool",
                                 description="File surgery on a dead broker's store; prints one JSON object.")
    ap.add_argument("--store", required=True, help="the broker's store directory")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("lose-unfsynced", help="cut the commit log at the store's last published synced offset")
    cor = sub.add_parser("corrupt", help="damage one commit-log segment")
    cor.add_argument("--mode", required=True, choices=CORRUPT_MODES)
    cor.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if not os.path.isdir(args.store):
        print(f"store_tool: --store {args.store}: no such directory", file=sys.stderr)
        return 2
    try:
        out = lose_unfsynced(args.store) if args.cmd == "lose-unfsynced" else corrupt_store(args.store, args.mode,
                                                                                              args.seed)
    except (ValueError, OSError) as exc:
        print(f"store_tool {args.cmd}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
