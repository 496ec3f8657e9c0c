"""A standalone Raft demo: a replicated key-value map over real TCP and real files.

Used by the integration tests and ``bench/raft_throughput.py``; not part of the controller.

Words:

* :class:`KvStateMachine` -- the replicated map; an entry is msgpack ``[key, value]``.
* :class:`LocalCluster` -- N :class:`RaftNode` s in the *current* event loop, each with its own
  directory and loopback :func:`serve_raft` server; nodes can be killed (no clean shutdown) and
  restarted from their directory.
* process mode -- ``python -m system_under_test.raft.demo --node-id n1 --peers n1=127.0.0.1:7001,...
  --dir DIR`` runs one node per OS process.  It prints one JSON object per line on stdout:
  ``{"event": "leader", ...}`` when it becomes leader and, with ``--load-proposers N``, drives N
  concurrent proposers while it leads and prints ``{"event": "commits", ...}`` every
  ``--report-ms``.  It runs until ``--run-s`` elapses or it is killed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import msgpack

from system_under_test.clock import make_rng
from system_under_test.raft.node import RaftNode
from system_under_test.raft.server import RaftServer, serve_raft
from system_under_test.raft.types import RaftConfig, RaftError

log = logging.getLogger("splitbrain.raft.demo")

#: Defaults chosen for loopback (measured with bench/raft_throughput.py): 50 ms ticks, heartbeat
#: every tick, election timeout randomized in [4, 8) ticks = 200-400 ms.  A follower refuses votes
#: while it heard from a leader within the timeout (check_quorum lease), so failover is roughly the
#: later of the two followers' timeouts plus a few round trips: p50 ~0.3 s, p99 < 0.8 s; four missed
#: heartbeats (200 ms of loop stall) are needed for a spurious election.
DEFAULT_TICK_MS = 50
DEFAULT_ELECTION_TICKS = 4
#: Few append messages in flight per follower: proposals arriving meanwhile are batched into the
#: next append (up to max_batch_entries) instead of one message per proposal.
DEFAULT_MAX_INFLIGHT = 4


class KvStateMachine:
    """A dict replicated by Raft.  ``apply`` returns the entry's index."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.applied = 0

    def apply(self, index: int, data: bytes) -> Any:
        key, value = msgpack.unpackb(data, raw=False)
        self.data[key] = value
        self.applied = index
        return index

    def snapshot(self) -> bytes:
        return msgpack.packb([self.applied, self.data], use_bin_type=True)

    def restore(self, data: bytes, index: int) -> None:
        _, self.data = msgpack.unpackb(data, raw=False)
        self.applied = index


def kv_entry(key: str, value: Any) -> bytes:
    return msgpack.packb([key, value], use_bin_type=True)


def free_ports(n: int) -> list[int]:
    """Ask the kernel for ``n`` free loopback ports (bound then released)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class LocalCluster:
    """``n`` Raft nodes in this event loop over loopback TCP, each in ``root / node_id``."""

    def __init__(
        self,
        root: Path,
        n: int = 3,
        *,
        seed: int = 1,
        tick_interval_ms: int = DEFAULT_TICK_MS,
        election_ticks: int = DEFAULT_ELECTION_TICKS,
        snapshot_every_entries: int = 10_000,
        segment_bytes: int | None = None,
        max_inflight: int = DEFAULT_MAX_INFLIGHT,
    ) -> None:
        self.root = Path(root)
        self.max_inflight = max_inflight
        self.ids = [f"n{i + 1}" for i in range(n)]
        self.addrs = {nid: f"127.0.0.1:{port}" for nid, port in zip(self.ids, free_ports(n), strict=True)}
        self.seed = seed
        self.tick_interval_ms = tick_interval_ms
        self.election_ticks = election_ticks
        self.snapshot_every_entries = snapshot_every_entries
        self.segment_bytes = segment_bytes
        self.nodes: dict[str, RaftNode] = {}
        self.machines: dict[str, KvStateMachine] = {}
        self.servers: dict[str, RaftServer] = {}
        self._incarnation = 0

    async def start_node(self, node_id: str) -> RaftNode:
        self._incarnation += 1
        sm = KvStateMachine()
        cfg = RaftConfig(node_id=node_id, voters=tuple(self.ids), election_ticks=self.election_ticks,
                         max_inflight=self.max_inflight)
        node = RaftNode(
            cfg, self.root / node_id, self.addrs, sm, tick_interval_ms=self.tick_interval_ms,
            rng=make_rng(self.seed * 1000 + self._incarnation), snapshot_every_entries=self.snapshot_every_entries,
            segment_bytes=self.segment_bytes,
        )
        host, port = self.addrs[node_id].rsplit(":", 1)
        self.servers[node_id] = await serve_raft(node.handle_message, host, int(port), name=f"raft-{node_id}")
        await node.start()
        self.nodes[node_id], self.machines[node_id] = node, sm
        return node

    async def start(self) -> None:
        for nid in self.ids:
            await self.start_node(nid)

    async def stop_node(self, node_id: str, *, clean: bool = True) -> None:
        server = self.servers.pop(node_id, None)
        if server is not None:
            await server.stop()
        node = self.nodes.pop(node_id, None)
        if node is not None:
            await node.stop(clean=clean)

    async def kill(self, node_id: str) -> None:
        """Stop ``node_id`` abruptly: no final sync, no goodbye to peers."""
        await self.stop_node(node_id, clean=False)

    async def stop(self) -> None:
        for nid in list(self.nodes):
            await self.stop_node(nid)

    async def wait_leader(self, *, timeout_s: float = 10.0, exclude: str | None = None) -> RaftNode:
        """Wait until exactly one running node leads; raises TimeoutError naming every node's view."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            leaders = [n for nid, n in self.nodes.items() if n.is_leader and nid != exclude]
            if len(leaders) == 1:
                return leaders[0]
            await asyncio.sleep(0.02)
        views = {nid: (n.status()["role"], n.term, n.leader_id) for nid, n in self.nodes.items()}
        raise TimeoutError(f"no single leader within {timeout_s}s; (role, term, leader) per node: {views}")

    async def propose(self, data: bytes, *, timeout_s: float = 10.0) -> tuple[int, Any]:
        """Propose through whichever node leads until ``timeout_s``, retrying on any RaftError.

        A retry after an unknown outcome may apply ``data`` twice: use idempotent entries.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            leader = await self.wait_leader(timeout_s=max(0.1, deadline - time.monotonic()))
            try:
                return await leader.propose(data, timeout_s=max(0.1, deadline - time.monotonic()))
            except RaftError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.02)

    async def wait_applied(self, index: int, *, timeout_s: float = 10.0) -> None:
        """Wait until every running node applied ``index``; raises TimeoutError naming the laggards."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(n.applied_index >= index for n in self.nodes.values()):
                return
            await asyncio.sleep(0.02)
        lag = {nid: n.applied_index for nid, n in self.nodes.items() if n.applied_index < index}
        raise TimeoutError(f"nodes still below applied index {index} after {timeout_s}s: {lag}")


# ---------------------------------------------------------------------------------------------
# Process mode.
# ---------------------------------------------------------------------------------------------


def _emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, "t": time.time(), **fields}) + "\n")
    sys.stdout.flush()


async def _load(node: RaftNode, proposers: int, stop: asyncio.Event, counter: list[int]) -> None:
    """Run ``proposers`` concurrent proposal loops while this node leads.

    Emits ``first_commit`` the first time a proposal of a new leader term is applied here (the
    bench measures failover up to this moment).
    """
    reported_terms: set[int] = set()
    leading = asyncio.Event()

    def on_role(is_leader: bool, term: int) -> None:
        (leading.set if is_leader else leading.clear)()

    node.on_role_change.append(on_role)
    if node.is_leader:
        leading.set()

    async def one(worker: int) -> None:
        seq = 0
        while not stop.is_set():
            if not node.is_leader:
                if leading.is_set():  # the role callback has not run yet
                    await asyncio.sleep(0.002)
                else:
                    await leading.wait()
                continue
            seq += 1
            term = node.term
            try:
                await node.propose(kv_entry(f"k{worker}", seq), timeout_s=2.0)
            except RaftError:
                await asyncio.sleep(0.002)
                continue
            counter[0] += 1
            if term not in reported_terms:
                reported_terms.add(term)
                _emit("first_commit", node=node.node_id, term=term)

    async def release() -> None:
        await stop.wait()
        leading.set()

    await asyncio.gather(release(), *(one(w) for w in range(proposers)))


async def _run_process(args: argparse.Namespace) -> int:
    peers = dict(p.split("=", 1) for p in args.peers.split(","))
    cfg = RaftConfig(node_id=args.node_id, voters=tuple(peers), election_ticks=args.election_ticks,
                     max_inflight=args.max_inflight)
    node = RaftNode(cfg, Path(args.dir), peers, KvStateMachine(), tick_interval_ms=args.tick_ms,
                    rng=make_rng(args.seed), snapshot_every_entries=args.snapshot_every)
    node.on_role_change.append(lambda leader, term: _emit("leader" if leader else "follower", node=args.node_id,
                                                          term=term))
    host, port = peers[args.node_id].rsplit(":", 1)
    server = await serve_raft(node.handle_message, host, int(port), name=f"raft-{node.node_id}")
    await node.start()
    _emit("started", node=args.node_id, pid=os.getpid(), applied_index=node.applied_index)
    stop = asyncio.Event()
    counter = [0]
    load = asyncio.ensure_future(_load(node, args.load_proposers, stop, counter)) if args.load_proposers else None
    deadline = time.monotonic() + args.run_s
    last = 0
    try:
        while time.monotonic() < deadline:
            await asyncio.sleep(args.report_ms / 1000)
            if counter[0] != last:
                _emit("commits", node=args.node_id, total=counter[0], term=node.term)
                last = counter[0]
    finally:
        stop.set()
        if load is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(load, 3.0)
        status = node.status()
        await server.stop()
        await node.stop()
    _emit("stopped", node=args.node_id, status={k: status[k] for k in ("term", "applied_index", "fsyncs", "readies")})
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m system_under_test.raft.demo", description=__doc__)
    p.add_argument("--node-id", required=True)
    p.add_argument("--peers", required=True, help="id=host:port,... for every voter including this node")
    p.add_argument("--dir", required=True)
    p.add_argument("--tick-ms", type=int, default=DEFAULT_TICK_MS)
    p.add_argument("--election-ticks", type=int, default=DEFAULT_ELECTION_TICKS)
    p.add_argument("--max-inflight", type=int, default=DEFAULT_MAX_INFLIGHT)
    p.add_argument("--snapshot-every", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--load-proposers", type=int, default=0)
    p.add_argument("--report-ms", type=int, default=50)
    p.add_argument("--run-s", type=float, default=60.0)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    return asyncio.run(_run_process(args))


if __name__ == "__main__":
    raise SystemExit(main())
