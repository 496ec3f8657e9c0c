"""Benchmark: the broker store's append and read throughput with 1 KiB records.

Figures (records of 1 KiB body, one topic, 4 queues; each run bounded by ``--seconds`` and ``--count``):

* ``append_sync_b32_msgs_s`` / ``append_sync_b128_msgs_s``: ``MessageStore.put`` under FlushPolicy.SYNC,
  32 / 128 records per call (one write + one fsync per call).  Target >= 30,000 msg/s.
* ``append_async_msgs_s``: FlushPolicy.ASYNC, 32 records per call, background group fsync every 100 ms.
  Target >= 30,000 msg/s.
* ``read_msgs_s``: ``MessageStore.get`` of 32 records per call over everything the async run wrote
  (CRC-checked decode included).  Target >= 100,000 msg/s.

MB/s figures count record frames (body + header), i.e. commit-log bytes.  ``*_per_cpu_s`` divide the
record count by the process's CPU seconds instead of wall seconds: on a shared machine they show the store's
own cost (for SYNC runs the wall figure is bounded by the disk's fsync latency instead).

Usage::

    python3 bench/store.py [--json] [--seconds 4] [--count 200000] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from system_under_test.broker.store import FlushPolicy, MessageStore, Record, StoreConfig

TARGETS = {
    "append_sync_b32_msgs_s": 30_000,
    "append_sync_b128_msgs_s": 30_000,
    "append_async_msgs_s": 30_000,
    "read_msgs_s": 100_000,
}
QUEUES = 4


def _batch(n: int, start: int) -> list[Record]:
    body = b"x" * 1024
    return [Record("bench", (start + i) % QUEUES, body, key=str(start + i)) for i in range(n)]


def _append(directory: str, policy: FlushPolicy, batch: int, seconds: float, count: int) -> dict[str, float]:
    cfg = StoreConfig(flush_policy=policy, flush_interval_ms=100, segment_bytes=64 * 1024 * 1024)
    store = MessageStore.open(directory, cfg, "bench")
    batches = [_batch(batch, i * batch) for i in range(8)]
    n, nbytes, i = 0, 0, 0
    c0 = time.process_time()
    t0 = time.perf_counter()
    while n < count and time.perf_counter() - t0 < seconds:
        res = store.put(batches[i % len(batches)])
        i += 1
        n += len(res)
        nbytes += sum(r.size for r in res)
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - c0
    store.set_confirm_offset(store.max_phys_offset)
    store.close()
    return {"msgs_s": n / elapsed, "mb_s": nbytes / elapsed / 1e6, "msgs": n, "cpu_msgs_s": n / max(cpu, 1e-9)}


def _read(directory: str, seconds: float) -> dict[str, float]:
    cfg = StoreConfig(flush_policy=FlushPolicy.ASYNC, segment_bytes=64 * 1024 * 1024)
    store = MessageStore.open(directory, cfg, "bench")
    n, nbytes = 0, 0
    c0 = time.process_time()
    t0 = time.perf_counter()
    for q in range(QUEUES):
        offset = 0
        while time.perf_counter() - t0 < seconds:
            got = store.get("bench", q, offset, 32)
            if not got.records:
                break
            n += len(got.records)
            nbytes += sum(d.size for d in got.records)
            offset = got.next_offset
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - c0
    store.close()
    return {"msgs_s": n / elapsed, "mb_s": nbytes / elapsed / 1e6, "msgs": n, "cpu_msgs_s": n / max(cpu, 1e-9)}


def bench(seconds: float, count: int, base_dir: str | None) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(dir=base_dir) as tmp:
        for name, policy, batch in (
            ("append_sync_b32", FlushPolicy.SYNC, 32),
            ("append_sync_b128", FlushPolicy.SYNC, 128),
            ("append_async", FlushPolicy.ASYNC, 32),
        ):
            got = _append(f"{tmp}/{name}", policy, batch, seconds, count)
            figures[f"{name}_msgs_s"] = round(got["msgs_s"])
            figures[f"{name}_mb_s"] = round(got["mb_s"], 1)
            figures[f"{name}_msgs"] = int(got["msgs"])
            figures[f"{name}_per_cpu_s"] = round(got["cpu_msgs_s"])
        got = _read(f"{tmp}/append_async", seconds)
        figures["read_msgs_s"] = round(got["msgs_s"])
        figures["read_mb_s"] = round(got["mb_s"], 1)
        figures["read_msgs"] = int(got["msgs"])
        figures["read_per_cpu_s"] = round(got["cpu_msgs_s"])
    return figures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--seconds", type=float, default=4.0, help="time bound of each run")
    ap.add_argument("--count", type=int, default=200_000, help="record bound of each append run")
    ap.add_argument("--dir", default=None, help="parent directory for the temporary stores (default: system temp)")
    args = ap.parse_args(argv)
    figures = bench(args.seconds, args.count, args.dir)
    if args.json:
        print(json.dumps({"figures": figures, "targets": TARGETS}))
        return 0
    for name, value in figures.items():
        target = TARGETS.get(name)
        if target is None:
            print(f"{name:26s} {value}")
        else:
            verdict = "ok" if value >= target else "MISSED"
            print(f"{name:26s} {value:>10,} msg/s   target >= {target:,} msg/s   {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
