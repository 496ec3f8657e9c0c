"""Controller quorum benchmarks over real processes on loopback (fsync on).

    python bench/controller.py [--seconds 5] [--trials 20] [--json]

Figures (each printed next to its target from the controller issue):

* ``writes_per_s``     committed controller writes/s (RegisterBroker address changes, each one
                       UpdateBrokerAddress event = one Raft entry), many pipelined clients.
* ``heartbeats_per_s`` broker heartbeats handled by the leader (no state change).
* ``failover_p50_s`` / ``failover_p99_s``  kill -9 the leader, time until the next write commits.
* ``*_per_leader_cpu_s``  the same work divided by the leader process's CPU seconds: the capacity of one
                       core, comparable across runs on a loaded machine (``load_average_1m`` is printed too).

The benchmark measures; it never asserts a time.  Everything is bounded in time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import eventloop
from system_under_test.client.controller_client import ControllerClient
from system_under_test.protocol import Connection, RequestCode, connect
from systems.splitbrain.demo import register_broker
from systems.splitbrain.local_cluster import LocalQuorum

TARGETS = {"writes_per_s": 10_000, "heartbeats_per_s": 20_000, "failover_p50_s": 0.5, "failover_p99_s": 1.5}
LOWER_IS_BETTER = {"failover_p50_s", "failover_p99_s"}


async def _setup_brokers(q: LocalQuorum, n: int) -> tuple[ControllerClient, list[dict[str, Any]]]:
    client = q.client(timeout_s=5)
    brokers = [await register_broker(client, q.cluster_name, f"b{i % 8}", f"10.9.{i}.1:1") for i in range(n)]
    return client, brokers


async def _pipeline(conns: list[Connection], make: Any, seconds: float, depth: int) -> tuple[int, int]:
    """Keep ``depth`` requests in flight per connection for ``seconds``; count successes and errors."""
    ok = err = 0
    stop = time.monotonic() + seconds

    async def worker(conn: Connection, slot: int) -> None:
        nonlocal ok, err
        i = 0
        while time.monotonic() < stop:
            code, header = make(slot, i)
            i += 1
            try:
                resp = await conn.request(code, header, timeout_s=10, check=False)
                if resp.code == 0:
                    ok += 1
                else:
                    err += 1
            except Exception:
                err += 1

    await asyncio.gather(*(worker(c, s * len(conns) + k) for k, c in enumerate(conns) for s in range(depth)))
    return ok, err


def _cpu_s(pid: int) -> float:
    """User+system CPU seconds of a process (from /proc), to report capacity independent of machine load."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def bench_throughput(q: LocalQuorum, seconds: float) -> dict[str, float]:
    leader = await q.wait_leader()
    leader_pid = q.procs[leader].pid
    client, brokers = await _setup_brokers(q, 64)
    conns = [await connect(q.peers[leader]) for _ in range(4)]
    for b in brokers:  # unfence everyone first so heartbeats are pure reads of the lease table
        await conns[0].request(RequestCode.BROKER_HEARTBEAT, _hb(q, b))

    def write(slot: int, i: int) -> tuple[int, dict[str, Any]]:
        b = brokers[slot % len(brokers)]
        return RequestCode.CONTROLLER_REGISTER_BROKER, {
            "cluster_name": q.cluster_name, "broker_name": b["broker_name"], "broker_id": b["broker_id"],
            "broker_addr": f"10.8.{slot % 250}.{i % 250}:{1000 + i % 5000}", "incarnation_id": b["incarnation"],
            "token": q.token}

    for b in brokers:
        b["incarnation"] = (await conns[0].request(RequestCode.CONTROLLER_GET_BROKER_EPOCHS,
                                                   {"broker_name": b["broker_name"]})).body
    for b in brokers:
        b["incarnation"] = next(e["incarnation_id"] for e in b["incarnation"] if e["broker_id"] == b["broker_id"])
    t0, c0 = time.monotonic(), _cpu_s(leader_pid)
    ok_w, err_w = await _pipeline(conns, write, seconds, depth=64)
    writes = ok_w / (time.monotonic() - t0)
    writes_cpu = ok_w / max(_cpu_s(leader_pid) - c0, 1e-9)

    def hb(slot: int, i: int) -> tuple[int, dict[str, Any]]:
        return RequestCode.BROKER_HEARTBEAT, _hb(q, brokers[(slot + i) % len(brokers)])

    t0, c0 = time.monotonic(), _cpu_s(leader_pid)
    ok_h, err_h = await _pipeline(conns, hb, seconds, depth=64)
    heartbeats = ok_h / (time.monotonic() - t0)
    heartbeats_cpu = ok_h / max(_cpu_s(leader_pid) - c0, 1e-9)
    for c in conns:
        c.close()
    await client.close()
    return {"writes_per_s": round(writes, 1), "writes_per_leader_cpu_s": round(writes_cpu, 1), "write_errors": err_w,
            "heartbeats_per_s": round(heartbeats, 1), "heartbeats_per_leader_cpu_s": round(heartbeats_cpu, 1),
            "heartbeat_errors": err_h, "load_average_1m": round(os.getloadavg()[0], 2)}


def _hb(q: LocalQuorum, b: dict[str, Any]) -> dict[str, Any]:
    return {"cluster_name": q.cluster_name, "broker_name": b["broker_name"], "broker_id": b["broker_id"],
            "broker_addr": b["addr"], "broker_epoch": b["broker_epoch"], "master_epoch": 0, "max_offset": 0,
            "confirm_offset": 0, "token": q.token}


async def bench_failover(q: LocalQuorum, trials: int) -> dict[str, float]:
    times: list[float] = []
    client = q.client(timeout_s=0.5)
    for t in range(trials):
        leader = await q.wait_leader()
        await client.get_next_broker_id(q.cluster_name, "warm")
        await register_broker(client, q.cluster_name, "f", f"10.7.{t}.1:1")
        q.kill(leader)
        t0 = time.monotonic()
        deadline = t0 + 20
        while time.monotonic() < deadline:
            try:
                await register_broker(client, q.cluster_name, "f", f"10.6.{t}.1:1")
                break
            except Exception:
                await asyncio.sleep(0.01)
        times.append(time.monotonic() - t0)
        q.start(leader)
        await asyncio.sleep(1.5)  # let the restarted node catch up before the next trial
    await client.close()
    times.sort()
    p99 = times[min(len(times) - 1, round(0.99 * (len(times) - 1)))]
    return {"failover_p50_s": round(statistics.median(times), 3), "failover_p99_s": round(p99, 3),
            "failover_max_s": round(times[-1], 3), "failover_trials": len(times)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--seconds", type=float, default=5.0, help="duration of each throughput phase")
    ap.add_argument("--trials", type=int, default=20, help="failover trials")
    ap.add_argument("--election-ticks", type=int, help="override the controller default (ticks of 50 ms)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    figures: dict[str, float] = {}
    extra = ["--election-ticks", str(args.election_ticks)] if args.election_ticks else []
    with tempfile.TemporaryDirectory(prefix="sb-bench-") as d:
        with LocalQuorum(Path(d) / "tp", extra_args=extra) as q:
            q.start_all()
            figures.update(eventloop.run(bench_throughput(q, args.seconds)))
        with LocalQuorum(Path(d) / "fo", extra_args=extra) as q:
            q.start_all()
            figures.update(eventloop.run(bench_failover(q, args.trials)))
    if args.json:
        print(json.dumps({"figures": figures, "targets": TARGETS}))
    else:
        for name, value in figures.items():
            target = TARGETS.get(name)
            op = "<=" if name in LOWER_IS_BETTER else ">="
            tgt = "" if target is None else f"target {op} {target}"
            print(f"{name:20s} {value:>12}  {tgt}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
