"""Three Raft nodes as real OS processes (python -m system_under_test.raft.demo) on loopback.

Kill the leader with SIGKILL while it is committing writes, see a new leader commit, restart the
killed node from its directory and check it recovers at least every write it had acknowledged.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from system_under_test.raft.demo import free_ports

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]
ROOT = Path(__file__).resolve().parents[3]


class Node:
    def __init__(self, node_id: str, peers: str, data: Path, events: queue.Queue[dict[str, Any]], *extra: str) -> None:
        self.node_id = node_id
        self.p = subprocess.Popen(
            [sys.executable, "-m", "system_under_test.raft.demo", "--node-id", node_id, "--peers", peers,
             "--dir", str(data / node_id), "--report-ms", "100", *extra],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        threading.Thread(target=self._read, args=(events,), daemon=True).start()

    def _read(self, events: queue.Queue[dict[str, Any]]) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            events.put(json.loads(line))

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.p.poll() is None:
            self.p.send_signal(sig)
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait(5)


def wait_event(events: queue.Queue[dict[str, Any]], seen: list[dict[str, Any]], pred: Any, timeout_s: float,
               what: str) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    for ev in seen:
        if pred(ev):
            return ev
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"no {what} within {timeout_s}s; events so far: {seen[-10:]}")
        try:
            ev = events.get(timeout=remaining)
        except queue.Empty:
            continue
        seen.append(ev)
        if pred(ev):
            return ev


def test_sigkill_leader_new_leader_commits_old_leader_recovers(tmp_path: Path) -> None:
    ids = ["n1", "n2", "n3"]
    peers = ",".join(f"{nid}=127.0.0.1:{port}" for nid, port in zip(ids, free_ports(3), strict=True))
    events: queue.Queue[dict[str, Any]] = queue.Queue()
    seen: list[dict[str, Any]] = []
    nodes = {nid: Node(nid, peers, tmp_path, events, "--load-proposers", "16", "--run-s", "40", "--seed", str(i))
             for i, nid in enumerate(ids)}
    try:
        first = wait_event(events, seen, lambda e: e["event"] == "first_commit", 20, "first commit")
        old = first["node"]
        acked = wait_event(events, seen, lambda e: e["event"] == "commits" and e["node"] == old and e["total"] > 200,
                           20, f"200 acknowledged writes on {old}")
        nodes[old].stop(signal.SIGKILL)
        time.sleep(0.2)  # let the killed node's last stdout lines drain
        acked_total = max(e["total"] for e in seen if e["event"] == "commits" and e["node"] == old)
        assert acked_total >= acked["total"]
        new = wait_event(events, seen, lambda e: e["event"] == "first_commit" and e["node"] != old
                         and e["term"] > first["term"], 15, "a new leader's first commit")
        nodes[old] = Node(old, peers, tmp_path, events, "--run-s", "4")
        stopped = wait_event(events, seen, lambda e: e["event"] == "stopped" and e["node"] == old, 20,
                             f"restarted {old} to finish")
        # every write the killed leader acknowledged is in the log the restarted node applied
        assert stopped["status"]["applied_index"] >= acked_total, (stopped, acked_total, new)
    finally:
        for n in nodes.values():
            n.stop()
