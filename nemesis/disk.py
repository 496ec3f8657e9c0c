"""Disk faults: slow fsync, full disk, I/O errors, lost unsynced writes, corrupted files.

Two halves, like the rest of the nemeses:

* the **node side** (``python -m nemesis.disk ...``, run on the node through the control backend,
  so it works the same in a namespace, a container or on an SSH host) does the file surgery on a
  *dead* broker's store and prints one JSON object saying exactly what it changed: which file, at
  which offset, how many bytes.  :func:`plan_corruption` and :func:`apply_corruption` are pure
  and seeded, so a recorded corruption can be replayed byte for byte;
* :class:`DiskNemesis` (harness side) arms the store's failpoints over the admin RPC for the
  live faults, and for the crash faults kills the broker, runs the node side, restarts it and
  records whether it came back, repaired the damage, or refused to start (and its log line).

Faults (``start-disk`` value ``{"fault": F, "targets": SEL, "delay_ms": N}``):

* ``slow-fsync`` -- every fsync takes ``delay_ms`` longer (brokers: ``store.before_fsync``;
  controllers: ``raft.before_persist``); shows in the broker's ``disk.fsync_*_ms`` status;
* ``enospc`` -- commit-log writes fail with "no space left" (DISK_FULL to producers, nothing
  appended);
* ``eio-write`` / ``eio-fsync`` / ``eio-read`` -- commit-log writes / fsyncs / reads fail with EIO.

``stop-disk`` disarms them all.  ``lose-unfsynced`` kills a broker and cuts its commit log at the
synced offset the store last published (``<store>/commitlog.synced``) -- or, with ``cluster.store_fs: lazyfs``,
tells the broker's lazy file system (:mod:`nemesis.lazyfs`) to drop every write the broker never fsynced, which
does not trust the store's own account of its fsyncs.  ``corrupt-file`` kills a
broker and damages one commit-log segment (:data:`CORRUPT_MODES`): the ``*-tail`` modes damage the
last record, which the store cuts as a torn tail; the others damage the middle of the log, which
the store refuses to open (the broker exits 4 with the file and offset).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from nemesis.base import NemesisBase, guard, restart_and_wait
from nemesis.disk_kinds import CORRUPT_MODES, DISK_FAILPOINTS, FAULTS, REPAIRABLE_MODES, TAIL_BYTES
from nemesis.failpoint import admin_failpoints
from system_under_test.broker.store.commitlog import COMMITLOG_DIR, read_synced_file
from system_under_test.broker.store.offline import cut_files_offline
from system_under_test.broker.store.record import frame_length_at


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


class DiskNemesis(NemesisBase):
    """Disk faults (module docstring): start-disk, stop-disk, lose-unfsynced, corrupt-file."""

    FS = frozenset({"start-disk", "stop-disk", "lose-unfsynced", "corrupt-file"})

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        value = op.get("value") or {}
        handlers = {"start-disk": self._start, "stop-disk": self._stop, "lose-unfsynced": self._lose,
                    "corrupt-file": self._corrupt}
        return await guard(op, lambda: handlers[op["f"]](test, value))

    async def _start(self, test: dict[str, Any], value: Mapping[str, Any]) -> dict[str, Any]:
        fault = str(value.get("fault", "slow-fsync"))
        if fault not in FAULTS:
            raise ValueError(f"start-disk: unknown fault {fault!r}; known: {', '.join(FAULTS)}")
        broker_point, controller_point, template = FAULTS[fault]
        action = template.format(delay_ms=int(value.get("delay_ms", 100)))
        nodes = await self.targets(test, str(value.get("targets", "brokers:one")))
        results: dict[str, str] = {}
        for n in nodes:
            point = broker_point if n in self.topo.brokers else controller_point
            if point is None:
                results[n] = f"skipped: {fault} applies to brokers only"
                continue
            results.update(await admin_failpoints(self.db, test, [n], "arm-failpoint", point, action))
        return {"fault": fault, "action": action, "nodes": nodes, "results": results}

    async def _stop(self, test: dict[str, Any], value: Mapping[str, Any]) -> dict[str, Any]:
        results: dict[str, str] = {}
        for point in DISK_FAILPOINTS:
            for n, r in (await admin_failpoints(self.db, test, self.topo.brokers, "disarm-failpoint", point)).items():
                if results.get(n, "ok") == "ok":  # keep the first failure per node
                    results[n] = r
        controller = await admin_failpoints(self.db, test, self.topo.controllers, "disarm-failpoint",
                                            "raft.before_persist")
        return {"results": {**results, **controller}}

    async def _brokers(self, test: dict[str, Any], value: Mapping[str, Any]) -> list[str]:
        nodes = await self.targets(test, str(value.get("targets", "brokers:one")))
        brokers = [n for n in nodes if n in self.topo.brokers]
        if not brokers:
            raise ValueError(f"targets {value.get('targets')!r} resolved to {nodes}: no brokers (disk faults that "
                             f"touch files apply to brokers only)")
        return brokers

    async def _node_tool(self, test: dict[str, Any], node: str, args: Sequence[str]) -> dict[str, Any]:
        res = await test["remote"].exec(node, [self.db.python, "-m", "nemesis.disk", *args], timeout_s=60)
        if res.exit_code != 0:
            raise RuntimeError(f"nemesis.disk {args[0]} on {node} exited {res.exit_code}: {res.stderr.strip()[-400:]}")
        out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
        return out

    async def _crash_and(self, test: dict[str, Any], value: Mapping[str, Any], args: Sequence[str],
                         seeded: bool) -> dict[str, Any]:
        """Kill each target broker, run the node tool on its store, restart it, report per node."""
        report: dict[str, Any] = {}
        for n in await self._brokers(test, value):
            was_alive = await self.db.alive(test, n)
            if was_alive:
                await self.db.kill(test, n)
            extra = ["--seed", str(self.rng.randrange(2**31))] if seeded else []
            entry = await self._node_tool(test, n, [*args, "--store", self.db.store_dir(test, n), *extra])
            entry["was_alive"] = was_alive
            if was_alive:  # a node another nemesis killed stays down for that nemesis to restart
                entry.update(await restart_and_wait(self.db, test, n, float(value.get("ready_timeout_s", 20))))
            report[n] = entry
        return report

    async def _lose(self, test: dict[str, Any], value: Mapping[str, Any]) -> dict[str, Any]:
        if getattr(self.db.options, "store_fs", "plain") == "lazyfs":
            return {"store_fs": "lazyfs", "nodes": await self._lose_lazyfs(test, value)}
        return {"nodes": await self._crash_and(test, value, ["lose-unfsynced"], seeded=False)}

    async def _lose_lazyfs(self, test: dict[str, Any], value: Mapping[str, Any]) -> dict[str, Any]:
        """``lose-unfsynced`` over lazyfs: kill the target brokers, let each store's file system drop every write
        that was never fsynced (whatever the store claims it fsynced), restart them.  One power cut for all the
        targets: every one is down and crashed before any restarts, so none refills another's log in between.
        Records the bytes really dropped per file; 0 when nothing was pending, said in ``note``."""
        nodes = await self._brokers(test, value)
        report: dict[str, Any] = {}
        for n in nodes:
            was_alive = await self.db.alive(test, n)
            if was_alive:
                await self.db.kill(test, n)
            report[n] = {"was_alive": was_alive}
        for n in nodes:
            crash = await self.db.lazyfs_crash(test, n)
            entry = report[n]
            entry.update({"dropped": int(crash.get("dropped", 0)), "files": crash.get("files", {})})
            if not entry["dropped"]:
                entry["note"] = "nothing was pending: every write had been fsynced, the crash dropped 0 bytes"
        for n in nodes:
            if report[n]["was_alive"]:  # a node another nemesis killed stays down for that nemesis to restart
                report[n].update(await restart_and_wait(self.db, test, n, float(value.get("ready_timeout_s", 20))))
        return report

    async def _corrupt(self, test: dict[str, Any], value: Mapping[str, Any]) -> dict[str, Any]:
        mode = str(value.get("mode", "bitflip-tail"))
        if mode not in CORRUPT_MODES:
            raise ValueError(f"corrupt-file: unknown mode {mode!r}; known: {', '.join(CORRUPT_MODES)}")
        return {"mode": mode, "nodes": await self._crash_and(test, value, ["corrupt", "--mode", mode], seeded=True)}

    async def teardown(self, test: dict[str, Any]) -> None:
        await self._stop(test, {})


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nemesis.disk",
                                 description="File surgery on a dead broker's store; prints one JSON object.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    lose = sub.add_parser("lose-unfsynced", help="cut the commit log at the store's last published synced offset")
    lose.add_argument("--store", required=True, help="the broker's store directory")
    cor = sub.add_parser("corrupt", help="damage one commit-log segment")
    cor.add_argument("--store", required=True, help="the broker's store directory")
    cor.add_argument("--mode", required=True, choices=CORRUPT_MODES)
    cor.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if not os.path.isdir(args.store):
        print(f"nemesis.disk: --store {args.store}: no such directory", file=sys.stderr)
        return 2
    try:
        out = lose_unfsynced(args.store) if args.cmd == "lose-unfsynced" else corrupt_store(args.store, args.mode,
                                                                                              args.seed)
    except (ValueError, OSError) as exc:
        print(f"nemesis.disk {args.cmd}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
