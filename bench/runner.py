"""Harness runner benchmark: interpreter throughput with a no-op client, and RSS over 1M ops.

The interpreter, generator and history writer run exactly as in a test (history streamed to a
real ``history.jsonl``, line-buffered); only the client is a no-op, so the figures measure the
harness's own overhead.

Figures:

* ``ops_per_s`` -- invocations per wall-clock second over ``--seconds`` (``--concurrency`` workers,
  ``clients(repeat(...))`` generator).  Each op is two history lines (invoke + completion).
* ``ops_per_cpu_s`` -- the same ops per CPU second of this process (less sensitive to a busy host).
* ``rss_growth_mb`` -- resident set size at the end of a ``--rss-ops`` run minus RSS after its
  first 10% (history not kept in memory); ``rss_flat`` is true when growth < 10 MB.

Usage::

    python bench/runner.py [--json] [--seconds 5] [--concurrency 8] [--rss-ops 1000000]

Prints ``name  measured  target`` lines, or one JSON object with ``--json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import generator as g  # noqa: E402
from harness.history_writer import HistoryWriter  # noqa: E402
from harness.interpreter import Interpreter  # noqa: E402

TARGETS = {"ops_per_s": ">= 20000", "rss_flat": "== true (growth < 10 MB over 1M ops)"}


class NoopClient:
    async def open(self, test: dict[str, Any], node: str) -> NoopClient:
        return self

    async def setup(self, test: dict[str, Any]) -> None:
        return None

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        return {**op, "type": "ok"}

    async def teardown(self, test: dict[str, Any]) -> None:
        return None

    async def close(self, test: dict[str, Any]) -> None:
        return None


def rss_mb() -> float:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


async def _drive(path: Path, concurrency: int, gen: Any, on_tick: Any = None) -> tuple[int, float, float]:
    writer = HistoryWriter(path, client_threads=concurrency, keep=False)
    interp = Interpreter({}, writer, client_threads=concurrency, seed=1, op_timeout_s=5.0, nemesis_timeout_s=5.0)
    await interp.start_workers(NoopClient(), None, ["n1"])
    ticker = None
    if on_tick is not None:
        async def tick() -> None:
            while True:
                await asyncio.sleep(0.5)
                on_tick(writer.counts["invoke"])
        ticker = asyncio.get_running_loop().create_task(tick())
    wall, cpu = time.monotonic(), time.process_time()
    await interp.run(gen)
    wall, cpu = time.monotonic() - wall, time.process_time() - cpu
    if ticker is not None:
        ticker.cancel()
    await interp.stop_workers()
    writer.close()
    return writer.counts["invoke"], wall, cpu


def throughput(tmp: Path, seconds: float, concurrency: int) -> dict[str, float]:
    gen = g.time_limit(seconds, g.clients(g.repeat({"f": "write", "value": 1})))
    n, wall, cpu = asyncio.run(_drive(tmp / "throughput.jsonl", concurrency, gen))
    return {"ops": n, "ops_per_s": round(n / wall, 1), "ops_per_cpu_s": round(n / cpu, 1)}


def rss(tmp: Path, ops: int, concurrency: int) -> dict[str, Any]:
    samples: list[tuple[int, float]] = []
    gen = g.clients(g.limit(ops, g.repeat({"f": "write", "value": 1})))
    n, wall, _ = asyncio.run(_drive(tmp / "rss.jsonl", concurrency, gen, lambda k: samples.append((k, rss_mb()))))
    samples.append((n, rss_mb()))
    base = next((mb for k, mb in samples if k >= ops // 10), samples[0][1])
    growth = samples[-1][1] - base
    step = max(1, len(samples) // 10)
    return {"rss_ops": n, "rss_wall_s": round(wall, 1), "rss_start_mb": round(base, 1),
            "rss_end_mb": round(samples[-1][1], 1), "rss_growth_mb": round(growth, 1), "rss_flat": growth < 10.0,
            "rss_samples": [(k, round(mb, 1)) for k, mb in samples[::step]]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--json", action="store_true")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--rss-ops", type=int, default=1_000_000)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sb-bench-runner-") as d:
        figures = throughput(Path(d), args.seconds, args.concurrency)
        figures.update(rss(Path(d), args.rss_ops, args.concurrency))
    figures["loadavg_1m"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"figures": figures, "targets": TARGETS}))
    else:
        for name, value in figures.items():
            if name != "rss_samples":
                print(f"{name:18} {value!s:>12}  {TARGETS.get(name, '')}")
        print(f"{'rss_samples':18} {figures['rss_samples']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
