"""``splitbrain controller``: run one controller node.

Example (three nodes on one machine)::

    splitbrain controller --node-id c1 --peers c1=127.0.0.1:9101,c2=127.0.0.1:9102,c3=127.0.0.1:9103 \\
        --data-dir /tmp/c1 --cluster-name demo --token-file /tmp/token

Exit codes: 0 orderly shutdown, 1 shutdown that could not finish its last step (e.g. the clean marker could
not be written; the reason is logged), 2 bad flags, 3 formation refused (foreign store, option mismatch,
manual recovery needed, timeout), 4 storage corruption, 86 failpoint crash.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from system_under_test.controller.config import ControllerConfig
from system_under_test.controller.errors import ConfigError
from system_under_test.lease_timing import DEFAULT_LEASE_TIMEOUT_MS, scan_interval_for
from system_under_test.node_main import read_token, run_node

if TYPE_CHECKING:  # the CLI imports this module for its flags; the server is imported when a node starts
    from system_under_test.controller.server import NodeOptions

log = logging.getLogger("splitbrain.controller")

#: Allocations (net of frees) between two young-generation collections of the cyclic GC in a
#: controller process; CPython's default is 700.
GC_YOUNG_THRESHOLD = 20_000


def tune_gc() -> None:
    """Run the cyclic garbage collector in larger, rarer batches.

    Every request allocates dozens of containers (frames, dicts, futures), so under load the
    default threshold ran a young collection every few requests: about 6% of the leader's CPU at
    8k writes/s, mostly spent walking the objects still in flight.  Collections stay automatic
    (cycles are still freed); the objects alive at start-up (modules, code, tables) are frozen out
    of every later full collection.
    """
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, gen1, gen2)


def parse_peers(raw: str) -> dict[str, str]:
    """``c1=host:port,c2=host:port`` -> dict.  Raises ValueError naming the bad entry."""
    peers: dict[str, str] = {}
    for entry in filter(None, (e.strip() for e in raw.split(","))):
        node, sep, addr = entry.partition("=")
        if not sep or not node or not addr:
            raise ValueError(f"--peers entry {entry!r} must be NODE_ID=HOST:PORT")
        if node in peers:
            raise ValueError(f"--peers names node {node!r} twice")
        peers[node] = addr
    if not peers:
        raise ValueError("--peers is empty; give NODE_ID=HOST:PORT for every controller")
    return peers


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--node-id", required=True, help="this controller's id (must appear in --peers)")
    p.add_argument("--peers", required=True, help="every controller: c1=host:port,c2=host:port,...")
    p.add_argument("--data-dir", required=True, type=Path, help="Raft log, snapshots and store signatures")
    p.add_argument("--cluster-name", required=True)
    p.add_argument("--token-file", help="file holding the cluster token (else env SPLITBRAIN_TOKEN)")
    p.add_argument("--wait-for", type=int, default=0,
                   help="initial members to wait for before going active (default: all peers)")
    p.add_argument("--dirty-recovery", choices=["manual", "raft"], default="manual",
                   help="after a total failure with no clean store: refuse (manual, the seed's rule) or trust "
                        "the fsynced Raft log (raft)")
    p.add_argument("--formation-timeout-s", type=float, default=120.0)
    p.add_argument("--listen-host", help="bind address (default: the host of this node's --peers entry)")
    p.add_argument("--enable-elect-unclean-master", action="store_true")
    p.add_argument("--lease-timeout-ms", type=int, default=DEFAULT_LEASE_TIMEOUT_MS)
    p.add_argument("--scan-interval-ms", type=int, default=None,
                   help="how often the leader scans leases (default: an eighth of the lease, 10..500 ms)")
    p.add_argument("--no-notify", action="store_true", help="do not push NOTIFY_BROKER_ROLE_CHANGED")
    p.add_argument("--tick-interval-ms", type=int, default=50)
    p.add_argument("--election-ticks", type=int, default=4,
                   help="election timeout in ticks, randomized up to 2x (default 4 x 50 ms: failover p50 ~0.35 s)")
    p.add_argument("--snapshot-every", type=int, default=10_000, help="entries between snapshots")
    p.add_argument("--seed", type=int, help="seed for this node's randomness (election timeouts)")
    p.add_argument("--bug", action="append", default=[], help="deliberately broken behaviour (tests only)")


def build_options(args: argparse.Namespace) -> NodeOptions:
    from system_under_test.controller.server import NodeOptions

    peers = parse_peers(args.peers)
    controller = ControllerConfig(
        cluster_name=args.cluster_name, enable_elect_unclean_master=args.enable_elect_unclean_master,
        lease_timeout_ms=args.lease_timeout_ms,
        scan_interval_ms=(args.scan_interval_ms if args.scan_interval_ms is not None
                          else scan_interval_for(args.lease_timeout_ms)),
        notify_broker_role_changed=not args.no_notify,
    )
    wait_for = args.wait_for or len(peers)
    if not 1 <= wait_for <= len(peers):
        raise ValueError(f"--wait-for must be between 1 and {len(peers)} (the number of peers), got {wait_for}")
    for name in ("tick_interval_ms", "election_ticks", "snapshot_every"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.election_ticks < 2:
        raise ValueError("--election-ticks must be >= 2 (heartbeats are sent every tick)")
    return NodeOptions(
        node_id=args.node_id, peers=peers, data_dir=args.data_dir, token=read_token(args.token_file),
        controller=controller, wait_for=wait_for, dirty_recovery=args.dirty_recovery,
        formation_timeout_s=args.formation_timeout_s, tick_interval_ms=args.tick_interval_ms,
        election_ticks=args.election_ticks, snapshot_every_entries=args.snapshot_every,
        listen_host=args.listen_host, seed=args.seed, bugs=frozenset(args.bug),
    )


async def _serve(options: NodeOptions) -> int:
    from system_under_test.controller.server import ControllerServer

    server = ControllerServer(options)
    await server.start()
    loop = asyncio.get_running_loop()

    stopping: list[asyncio.Task[None]] = []

    def on_term() -> None:
        async def go() -> None:
            last = not await server.peers_reachable()
            await server.stop(clean=last)

        if not stopping:
            stopping.append(loop.create_task(go()))

    loop.add_signal_handler(signal.SIGTERM, on_term)
    loop.add_signal_handler(signal.SIGINT, on_term)
    await server.wait_stopped()
    for result in await asyncio.gather(*stopping, return_exceptions=True):
        if isinstance(result, BaseException):  # stopped anyway; say why it was not orderly
            log.error("controller %s: stop failed: %r", options.node_id, result)
            print(f"splitbrain controller {options.node_id}: stop failed: {result!r}", file=sys.stderr)
            return 1
    return 0


def run(args: argparse.Namespace) -> int:
    from system_under_test.controller.server import FormationFailed
    from system_under_test.raft.types import StorageCorruption

    return run_node(
        "controller", lambda: build_options(args), _serve, label=lambda options: options.node_id,
        bad_input=(ConfigError,), before_serve=tune_gc,
        refusals=[((FormationFailed,), 3, "formation refused: "), ((StorageCorruption,), 4, "storage corruption: ")],
    )
