"""Broker benchmarks over real processes on loopback: 3 controllers + 1 master and 2 slaves, allAck.

    python bench/broker.py [--seconds 5] [--trials 5] [--batch 64] [--depth 32] [--json]

Figures (each printed next to its target from the broker issue):

* ``produce_msgs_per_s``  1 KiB messages acknowledged per second (allAckInSyncStateSet: every
                          SyncStateSet member holds them); ``--batch`` records per SEND_MESSAGE,
                          ``--depth`` requests in flight.
* ``consume_msgs_per_s``  messages pulled per second from the master (1024 per PULL_MESSAGE).
* ``failover_p50_s`` / ``failover_p99_s``  kill -9 the master while producers run; time until the
                          first send acknowledged by a master of a higher epoch.  Brokers run with
                          ``--lease-timeout-ms 1000 --heartbeat-interval-ms 200`` (the lease bounds
                          detection); the old master is restarted between trials.

The benchmark measures; it never asserts a time.  Everything is bounded in time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import eventloop
from system_under_test.client.consumer import Consumer
from system_under_test.client.producer import Producer, SendError
from systems.splitbrain.local_broker_set import LocalBrokerSet
from systems.splitbrain.local_cluster import LocalQuorum

TARGETS = {"produce_msgs_per_s": 30_000, "consume_msgs_per_s": 100_000, "failover_p50_s": 2.0, "failover_p99_s": 4.0}
LOWER_IS_BETTER = {"failover_p50_s", "failover_p99_s"}
BROKER_ARGS = ["--lease-timeout-ms", "1000", "--heartbeat-interval-ms", "200", "--flush", "sync"]
SET = "bench"


def _full_set(s: LocalBrokerSet, n: int) -> Any:
    return lambda i: (m := s.master(i)) is not None and len(i[m].get("sync_state_set") or []) == n


async def produce_for(p: Producer, seconds: float, batch: int, depth: int, topic: str = "t") -> tuple[int, int]:
    """Keep ``depth`` batched sends in flight for ``seconds``; returns (messages acked, errors)."""
    payload = [b"x" * 1024] * batch
    stop = time.monotonic() + seconds
    acked = errors = 0

    async def worker(i: int) -> None:
        nonlocal acked, errors
        while time.monotonic() < stop:
            try:
                res = await p.send(SET, topic, i % 4, payload, timeout_s=10)
                acked += res.count
            except SendError:
                errors += 1

    await asyncio.gather(*(worker(i) for i in range(depth)))
    return acked, errors


async def consume_all(c: Consumer, topic: str = "t") -> tuple[int, float]:
    t0 = time.monotonic()
    n = 0
    for qid in range(4):
        n += len(await c.pull_all(SET, topic, qid))
    return n, time.monotonic() - t0


async def failover_trial(q: LocalQuorum, s: LocalBrokerSet, p: Producer) -> float:
    infos = await s.wait_for(_full_set(s, 3), "a set of 3 before the trial", 60)
    old = s.master(infos)
    assert old is not None
    old_epoch = int(infos[old]["master_epoch"])
    stop = time.monotonic() + 30
    done = asyncio.Event()
    first: list[float] = []

    async def load() -> None:
        while not done.is_set() and time.monotonic() < stop:
            try:
                res = await p.send(SET, "f", 0, b"y" * 1024, timeout_s=10)
            except SendError:
                continue
            if res.master_epoch > old_epoch and not first:
                first.append(time.monotonic())
                done.set()

    loaders = [asyncio.create_task(load()) for _ in range(4)]
    await asyncio.sleep(0.3)
    killed_at = time.monotonic()
    s.kill(old)
    await asyncio.wait_for(done.wait(), 30)
    await asyncio.gather(*loaders)
    s.start(old)
    return first[0] - killed_at


async def run_bench(seconds: float, trials: int, batch: int, depth: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-broker-") as tmp:
        base = Path(tmp)
        with LocalQuorum(base / "q") as q:
            q.start_all()
            await q.wait_leader()
            with LocalBrokerSet(base / "b", q.addrs, base / "q" / "token", broker_name=SET,
                                extra_args=BROKER_ARGS) as s:
                s.start_all()
                await s.wait_for(_full_set(s, 3), "a set of 3", 60)
                p = Producer(q.addrs, q.token, timeout_s=10)
                c = Consumer(q.addrs, q.token)
                await produce_for(p, 0.5, batch, depth)  # warm-up
                t0 = time.monotonic()
                acked, errors = await produce_for(p, seconds, batch, depth)
                produce_rate = acked / (time.monotonic() - t0)
                n, dt = await consume_all(c)
                times = [await failover_trial(q, s, p) for _ in range(trials)]
                await p.close()
                await c.close()
    times.sort()
    return {
        "produce_msgs_per_s": round(produce_rate),
        "produce_errors": errors,
        "consume_msgs_per_s": round(n / dt) if dt > 0 else 0,
        "consumed": n,
        "failover_p50_s": round(statistics.median(times), 3) if times else None,
        "failover_p99_s": round(times[min(len(times) - 1, int(len(times) * 0.99))], 3) if times else None,
        "failover_trials": len(times),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64, help="records per SEND_MESSAGE")
    ap.add_argument("--depth", type=int, default=32, help="sends in flight")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    figures = eventloop.run(run_bench(args.seconds, args.trials, args.batch, args.depth))
    if args.json:
        print(json.dumps({"figures": figures, "targets": TARGETS}))
    else:
        for name, value in figures.items():
            target = TARGETS.get(name)
            op = "<=" if name in LOWER_IS_BETTER else ">="
            tgt = "" if target is None else f"target {op} {target}"
            print(f"{name:20s} {value!s:>12}  {tgt}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
