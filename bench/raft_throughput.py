"""Raft benchmark: committed writes/s with fsync on, and leader failover time.

Runs 3 Raft nodes as separate OS processes (``python -m system_under_test.raft.demo``) on loopback,
each with its own data directory (fsync on every Ready).  The leader process runs
``--proposers`` concurrent proposal loops; each process reports progress as JSON lines.

Figures:

* ``committed_writes_per_s`` -- proposals applied on the leader per second over a steady window
  of ``--throughput-s`` seconds (no faults).
* ``failover_p50_s`` / ``failover_p99_s`` -- SIGKILL the leader, time until a proposal of the new
  leader's term is applied (``first_commit`` event); ``--trials`` trials, the killed node is
  restarted from its directory between trials.
* ``spurious_elections`` -- leader changes during the fault-free throughput window.

Defaults (from system_under_test.raft.demo): 50 ms ticks, election timeout 4-8 ticks, heartbeat
every tick, ``max_inflight`` 4 (with RaftConfig's default of 64 the leader sends one append per
proposal per follower and throughput roughly halves).

Usage::

    python bench/raft_throughput.py [--json] [--trials 20] [--throughput-s 5] [--proposers 256]

Prints ``name  measured  target`` lines, or one JSON object ``{"figures": ..., "targets": ...}``
with ``--json``.  Every wait is bounded; the whole run stops after ``--max-s`` seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from system_under_test.raft.demo import (  # noqa: E402
    DEFAULT_ELECTION_TICKS,
    DEFAULT_MAX_INFLIGHT,
    DEFAULT_TICK_MS,
    free_ports,
)

TARGETS = {
    "committed_writes_per_s": ">= 10000",
    "failover_p50_s": "<= 0.5",
    "failover_p99_s": "<= 1.5",
    "spurious_elections": "== 0",
}


class Proc:
    """One demo node process; its JSON events land in a shared queue."""

    def __init__(self, node_id: str, args: list[str], events: queue.Queue[dict[str, Any]], log_dir: Path) -> None:
        self.node_id = node_id
        self.stderr = open(log_dir / f"{node_id}.stderr", "ab")  # noqa: SIM115 - closed in kill()
        self.p = subprocess.Popen(
            [sys.executable, "-m", "system_under_test.raft.demo", *args],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=self.stderr, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        self._reader = threading.Thread(target=self._read, args=(events,), daemon=True)
        self._reader.start()

    def _read(self, events: queue.Queue[dict[str, Any]]) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            try:
                events.put(json.loads(line))
            except ValueError:
                continue

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.p.poll() is None:
            self.p.send_signal(sig)
        try:
            self.p.wait(5)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait(5)
        self.stderr.close()


class Bench:
    def __init__(self, args: argparse.Namespace, root: Path) -> None:
        self.args = args
        self.root = root
        self.ids = ["n1", "n2", "n3"]
        ports = free_ports(3)
        self.peers = ",".join(f"{nid}=127.0.0.1:{port}" for nid, port in zip(self.ids, ports, strict=True))
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.procs: dict[str, Proc] = {}
        self.leader: str | None = None
        self.leader_term = 0
        self.leader_changes: list[tuple[float, str, int]] = []
        self.commits: dict[str, list[tuple[float, int]]] = {nid: [] for nid in self.ids}
        self.first_commits: list[dict[str, Any]] = []
        self.started: list[str] = []
        self.deadline = time.monotonic() + args.max_s

    def start(self, node_id: str) -> None:
        a = self.args
        argv = [
            "--node-id", node_id, "--peers", self.peers, "--dir", str(self.root / node_id),
            "--tick-ms", str(a.tick_ms), "--election-ticks", str(a.election_ticks),
            "--max-inflight", str(a.max_inflight), "--load-proposers", str(a.proposers), "--run-s", str(a.max_s + 30),
            "--seed", str(self.ids.index(node_id) + 1),
        ]
        self.procs[node_id] = Proc(node_id, argv, self.events, self.root)

    def pump(self, timeout_s: float) -> None:
        """Consume events for up to ``timeout_s``."""
        end = time.monotonic() + timeout_s
        while True:
            remaining = end - time.monotonic()
            if remaining <= 0:
                return
            try:
                ev = self.events.get(timeout=remaining)
            except queue.Empty:
                return
            kind, node = ev.get("event"), str(ev.get("node"))
            if kind == "leader" and ev["term"] >= self.leader_term:
                self.leader, self.leader_term = node, ev["term"]
                self.leader_changes.append((ev["t"], node, ev["term"]))
            elif kind == "commits":
                self.commits[node].append((ev["t"], ev["total"]))
            elif kind == "first_commit":
                self.first_commits.append(ev)
            elif kind == "started":
                self.started.append(node)

    def wait_for(self, pred: Any, timeout_s: float, what: str) -> None:
        end = min(time.monotonic() + timeout_s, self.deadline)
        while not pred():
            if time.monotonic() > end:
                raise TimeoutError(f"timed out waiting for {what} (leader={self.leader} term={self.leader_term})")
            self.pump(0.02)

    def throughput(self) -> tuple[float, int]:
        self.wait_for(lambda: self.leader is not None and len(self.commits[self.leader]) > 5, 20,
                      "a leader committing writes")
        self.pump(1.0)  # warm up
        leader = self.leader
        assert leader is not None
        changes_before = len(self.leader_changes)
        n_before = len(self.commits[leader])
        self.pump(self.args.throughput_s)
        window = self.commits[leader][n_before - 1:]
        (t0, c0), (t1, c1) = window[0], window[-1]
        return (c1 - c0) / max(t1 - t0, 1e-9), len(self.leader_changes) - changes_before

    def failover_trial(self) -> float:
        old = self.leader
        assert old is not None
        self.wait_for(lambda: len(self.commits[old]) > 2, 10, f"{old} committing before the kill")
        seen = len(self.first_commits)
        t_kill = time.time()
        self.procs[old].kill()
        self.wait_for(
            lambda: any(ev["node"] != old and ev["t"] > t_kill for ev in self.first_commits[seen:]), 10,
            f"a new leader's first commit after killing {old}",
        )
        ev = next(ev for ev in self.first_commits[seen:] if ev["node"] != old and ev["t"] > t_kill)
        # restart from its directory and let it rejoin, so every trial starts from 3 healthy nodes
        n_started = self.started.count(old)
        self.start(old)
        self.wait_for(lambda: self.started.count(old) > n_started, 10, f"{old} to restart")
        self.pump(0.5)
        return float(ev["t"] - t_kill)

    def stop(self) -> None:
        for p in self.procs.values():
            p.kill()


def meets(value: float, target: str) -> bool:
    """``target`` is "<op> <number>" with op one of >=, <=, ==."""
    op, num = target.split()
    bound = float(num)
    return {">=": value >= bound, "<=": value <= bound, "==": value == bound}[op]


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--throughput-s", type=float, default=5.0)
    p.add_argument("--proposers", type=int, default=256)
    p.add_argument("--tick-ms", type=int, default=DEFAULT_TICK_MS)
    p.add_argument("--election-ticks", type=int, default=DEFAULT_ELECTION_TICKS)
    p.add_argument("--max-inflight", type=int, default=DEFAULT_MAX_INFLIGHT,
                   help="append messages in flight per follower (RaftConfig.max_inflight)")
    p.add_argument("--max-s", type=float, default=150.0, help="hard bound on the whole run")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="raft-bench-") as tmp:
        bench = Bench(args, Path(tmp))
        figures: dict[str, Any] = {"tick_ms": args.tick_ms, "election_ticks": args.election_ticks,
                                   "max_inflight": args.max_inflight, "proposers": args.proposers}
        try:
            for nid in bench.ids:
                bench.start(nid)
            rate, spurious = bench.throughput()
            figures["committed_writes_per_s"] = round(rate)
            figures["spurious_elections"] = spurious
            times = []
            for _ in range(args.trials):
                if time.monotonic() > bench.deadline:
                    break
                times.append(bench.failover_trial())
            if times:
                figures["failover_trials"] = len(times)
                figures["failover_p50_s"] = round(percentile(times, 0.5), 3)
                figures["failover_p99_s"] = round(percentile(times, 0.99), 3)
                figures["failover_max_s"] = round(max(times), 3)
        except TimeoutError as exc:
            figures["error"] = str(exc)
        finally:
            bench.stop()
    met = {name: meets(figures[name], target) for name, target in TARGETS.items() if name in figures}
    if args.json:
        print(json.dumps({"figures": figures, "targets": TARGETS, "met": met}))
    else:
        for name, value in figures.items():
            verdict = "" if name not in met else "ok" if met[name] else "MISSED"
            print(f"{name:28s}  {value!s:>12}  {TARGETS.get(name, ''):>10}  {verdict}")
    return 1 if "error" in figures else 0


if __name__ == "__main__":
    raise SystemExit(main())
