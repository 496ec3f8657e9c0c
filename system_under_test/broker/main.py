"""``splitbrain broker``: run one broker node.

Example (one broker of set ``b``)::

    splitbrain broker --cluster-name demo --broker-name b --listen 127.0.0.1:9201 --store-dir /tmp/b1 \\
        --controllers 127.0.0.1:9101,127.0.0.1:9102,127.0.0.1:9103 --token-file /tmp/token

Exit codes: 0 orderly (controlled) shutdown, 2 bad flags, 3 registration refused or impossible,
4 store corruption or a store of another cluster, 86 failpoint crash.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal

from system_under_test.broker.config import BUGS, BrokerConfig, BrokerConfigError, FlushMode
from system_under_test.lease_timing import DEFAULT_LEASE_TIMEOUT_MS, heartbeat_interval_for
from system_under_test.node_main import read_token, run_node

log = logging.getLogger("splitbrain.broker")


def _bool(raw: str) -> bool:
    low = raw.strip().lower()
    if low in ("true", "1", "yes", "on"):
        return True
    if low in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {raw!r}")


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cluster-name", required=True)
    p.add_argument("--broker-name", required=True, help="the broker set this broker belongs to")
    p.add_argument("--listen", required=True, help="host:port to serve on (also the registered address)")
    p.add_argument("--store-dir", required=True)
    p.add_argument("--controllers", required=True, help="controller addresses: host:port,host:port,...")
    p.add_argument("--token-file", help="file holding the cluster token (else env SPLITBRAIN_TOKEN)")
    p.add_argument("--all-ack-in-sync-state-set", type=_bool, nargs="?", const=True, default=True, metavar="BOOL",
                   help="a put waits for every SyncStateSet member (default true)")
    p.add_argument("--no-all-ack-in-sync-state-set", dest="all_ack_in_sync_state_set", action="store_false",
                   help="a put waits for --in-sync-replicas copies only")
    p.add_argument("--in-sync-replicas", type=int, default=1)
    p.add_argument("--min-in-sync-replicas", type=int, default=1)
    p.add_argument("--flush", choices=[m.value for m in FlushMode], default="async")
    p.add_argument("--flush-interval-ms", type=int, default=200)
    p.add_argument("--flush-slave-timeout-ms", type=int, default=3000)
    p.add_argument("--ha-max-time-slave-not-catchup-ms", type=int, default=3000)
    p.add_argument("--heartbeat-interval-ms", type=int, default=None,
                   help="default: 500, or a quarter of --lease-timeout-ms if that is shorter")
    p.add_argument("--lease-timeout-ms", type=int, default=DEFAULT_LEASE_TIMEOUT_MS)
    p.add_argument("--replica-info-interval-ms", type=int, default=1000)
    p.add_argument("--async-learner", action="store_true")
    p.add_argument("--election-priority", type=int, default=0)
    p.add_argument("--segment-bytes", type=int, default=64 * 1024 * 1024)
    p.add_argument("--seed", type=int, help="seed for this process's randomness (incarnation id, backoff)")
    p.add_argument("--bug", action="append", default=[], choices=sorted(BUGS),
                   help="deliberately broken behaviour (tests only)")


def build_config(args: argparse.Namespace) -> BrokerConfig:
    """Raises BrokerConfigError (or ValueError from the token file) naming the flag."""
    controllers = tuple(a.strip() for a in str(args.controllers).split(",") if a.strip())
    return BrokerConfig(
        cluster_name=args.cluster_name, broker_name=args.broker_name, listen=args.listen,
        store_dir=str(args.store_dir), controllers=controllers, token=read_token(args.token_file),
        all_ack_in_sync_state_set=args.all_ack_in_sync_state_set, in_sync_replicas=args.in_sync_replicas,
        min_in_sync_replicas=args.min_in_sync_replicas, flush=FlushMode(args.flush),
        flush_interval_ms=args.flush_interval_ms, flush_slave_timeout_ms=args.flush_slave_timeout_ms,
        ha_max_time_slave_not_catchup_ms=args.ha_max_time_slave_not_catchup_ms,
        heartbeat_interval_ms=(args.heartbeat_interval_ms if args.heartbeat_interval_ms is not None
                               else heartbeat_interval_for(args.lease_timeout_ms)),
        lease_timeout_ms=args.lease_timeout_ms,
        replica_info_interval_ms=args.replica_info_interval_ms, async_learner=args.async_learner,
        election_priority=args.election_priority, segment_bytes=args.segment_bytes, bugs=frozenset(args.bug),
    )


async def _serve(cfg: BrokerConfig, seed: int | None) -> int:
    from system_under_test.broker.lifecycle import Broker

    broker = Broker(cfg, seed=seed)
    loop = asyncio.get_running_loop()
    stopping: list[asyncio.Task[None]] = []

    starting = loop.create_task(broker.start())

    def on_term() -> None:
        if not starting.done():
            starting.cancel()  # not registered yet: nothing to hand over
        elif not stopping:
            stopping.append(loop.create_task(broker.shutdown()))

    loop.add_signal_handler(signal.SIGTERM, on_term)
    loop.add_signal_handler(signal.SIGINT, on_term)
    try:
        await starting
    except asyncio.CancelledError:
        log.info("stopped during start-up")
        await broker.stop(clean=True)
        return 0
    except BaseException:
        await broker.stop(clean=False)
        raise
    await broker.wait_stopped()
    if stopping:
        await stopping[0]
    return 0


def run(args: argparse.Namespace) -> int:
    from system_under_test.broker.registration import RegistrationError
    from system_under_test.broker.store import InconsistentClusterId, StoreCorruption

    return run_node(
        "broker", lambda: build_config(args), lambda cfg: _serve(cfg, args.seed),
        label=lambda cfg: cfg.broker_name, profile_name=lambda cfg: cfg.listen.replace(":", "_"),
        bad_input=(BrokerConfigError,),
        refusals=[((RegistrationError,), 3, "registration failed: "),
                  ((InconsistentClusterId, StoreCorruption), 4, "store refused: ")],
    )
