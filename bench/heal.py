"""Recovery after a partition heals, on the local backend with real iptables drops.

    python bench/heal.py [--quick] [--trials 10] [--durations 5,15,30] [--scenarios a,b,c,d]
                         [--no-baseline] [--json]

A cluster of three controllers (c1..c3) and one broker set of two brokers (b1, b2) runs in network
namespaces.  Each trial waits until the cluster is healthy, drops packets with iptables in the
nodes' INPUT path (the PartitionNemesis's chain) for a duration, heals, and measures from the
heal to

1. ``leader``  -- every controller reports the same Raft leader (asked from the host, whose
   links are never cut);
2. ``write``   -- the first controller write invoked after the heal commits (RegisterBroker of a
   probe broker: one UpdateBrokerAddress entry); a write is started every 50 ms;
3. ``send``    -- the first send invoked after the heal is acknowledged; one every 50 ms.

Scenarios: (a) the controller leader isolated from every node, (b) one follower controller
isolated from the other controllers, (c) the broker master isolated from its slave, (d) the
master isolated from the controllers.  Rows are ``<scenario>-<duration>s-<figure>`` with p50/p99
over the trials; targets p50 <= 0.5 s and p99 <= 1.0 s for every row.

The same run measures the tree's behaviour with link liveness switched off
(``SPLITBRAIN_LINK=off`` in the nodes' environment: no pings, no TCP_USER_TIMEOUT, one connect
attempt -- the transport as it was before issue 17) on a second cluster, as the baseline; its
rows are prefixed ``old-``.  ``--no-baseline`` skips it.  ``--quick`` runs every row with 3
trials of 15 s.  A figure that did not recover within ``--cap-s`` is recorded as the cap and
counted in ``<row>-unrecovered``.

The figures count from the end of the heal call, when the last node's rules are gone; the nodes'
rules are flushed in parallel, so a pair whose rules went first may already talk before that.
``<scenario>-<duration>-heal_call-max_s`` is the longest heal call of the row: the figures may
understate a recovery by at most that much.  The leader figure is polled every 50 ms (one poll at
a time), so it reads up to 50 ms late.

The benchmark measures; it never asserts a time.  Needs root (network namespaces, iptables).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.control.local import LocalRemote
from harness.spec import spec_from_dict
from nemesis import grudge as gr
from nemesis.partition import PartitionNemesis
from system_under_test.client.controller_client import ControllerClient
from system_under_test.client.producer import Producer
from system_under_test.protocol import Connection, RequestCode, connect
from systems.splitbrain.db import CONTROLLER_PORT, SplitbrainDB
from systems.splitbrain.options import cluster_options

TARGET_P50_S = 0.5
TARGET_P99_S = 1.0
SCENARIOS = {
    "a": "controller leader isolated",
    "b": "follower controller isolated from the other controllers",
    "c": "broker master isolated from its slave",
    "d": "broker master isolated from the controllers",
}
FIGURES = ("leader", "write", "send")
CONTROLLERS = ("c1", "c2", "c3")
BROKERS = ("b1", "b2")
BROKER_NAME = "broker-0"
PROBE_EVERY_S = 0.05
HEALTHY_TIMEOUT_S = 90.0


class Usage(Exception):
    """A bad command-line value (printed, exit 2)."""


def _floats(flag: str, raw: str) -> list[float]:
    try:
        out = [float(x) for x in raw.split(",") if x]
    except ValueError:
        raise Usage(f"{flag}: expected comma-separated seconds such as 5,15,30, got {raw!r}") from None
    if not out or any(not 0 < x <= 600 for x in out):
        raise Usage(f"{flag}: every duration must be in (0, 600] seconds, got {raw!r}")
    return out


def _scenarios(raw: str) -> list[str]:
    out = [x for x in raw.split(",") if x]
    bad = [x for x in out if x not in SCENARIOS]
    if not out or bad:
        raise Usage(f"--scenarios: expected letters from {','.join(SCENARIOS)}, got {raw!r}")
    return out


async def stop_cluster(db: SplitbrainDB, test: dict[str, Any], nemesis: PartitionNemesis | None,
                       nodes: tuple[str, ...]) -> None:
    """Heal the partitions, tear every node down (each failure ignored: the next still goes) and close the
    backend; nothing if the cluster never started.  bench/failover.py stops its cluster the same way."""
    if not test:
        return
    if nemesis is not None:
        with contextlib.suppress(Exception):
            await nemesis.heal(test)
    for n in nodes:
        with contextlib.suppress(Exception):
            await db.teardown(test, n)
    await test["remote"].close()


class Cluster:
    """One cluster in namespaces plus the host-side probes that measure it."""

    def __init__(self, work: Path, *, liveness: bool, seed: int) -> None:
        self.work = work
        self.liveness = liveness
        self.rng = random.Random(seed)
        self.spec = spec_from_dict({"name": "heal", "backend": "local",
                                    "nodes": {"controllers": list(CONTROLLERS), "broker_sets": [list(BROKERS)]},
                                    "workloads": ["queue"], "seed": seed}, file="<bench/heal.py>")
        self.db = SplitbrainDB(self.spec, cluster_options({}))
        self.test: dict[str, Any] = {}
        self.nemesis: PartitionNemesis | None = None
        self.client: ControllerClient | None = None
        self.producer: Producer | None = None
        self.meta_conns: dict[str, Connection] = {}
        self.probe: dict[str, Any] = {}
        self.seq = 0

    async def start(self) -> None:
        remote = await LocalRemote.create([*CONTROLLERS, *BROKERS], state_dir=self.work / "state")
        self.test = {"remote": remote, "run_dir": str(self.work)}
        old = os.environ.get("SPLITBRAIN_LINK")
        if not self.liveness:
            os.environ["SPLITBRAIN_LINK"] = "off"  # inherited by the node processes only at spawn
        try:
            await asyncio.gather(*(self.db.setup(self.test, n) for n in CONTROLLERS))
            await asyncio.gather(*(self.db.setup(self.test, n) for n in BROKERS))
        finally:
            if old is None:
                os.environ.pop("SPLITBRAIN_LINK", None)
            else:
                os.environ["SPLITBRAIN_LINK"] = old
        self.nemesis = await PartitionNemesis(self.db, self.rng).setup(self.test)
        self.client = ControllerClient(self.db.controller_addrs(self.test), token=self.db.token, timeout_s=1.0)
        self.producer = Producer(self.db.controller_addrs(self.test), self.db.token, timeout_s=2.0)
        name = "heal-probe"
        next_id = await self.client.get_next_broker_id(self.db.options.cluster_name, name)
        addr = "10.99.0.1:1"
        await self.client.apply_broker_id(self.db.options.cluster_name, name, next_id, f"{addr};probe", addr)
        self.probe = {"broker_name": name, "broker_id": next_id, "incarnation": "heal-probe"}

    async def stop(self) -> None:
        for conn in self.meta_conns.values():
            conn.close("bench over")
        if self.client is not None:
            await self.client.close()
        if self.producer is not None:
            await self.producer.close()
        await stop_cluster(self.db, self.test, self.nemesis, (*BROKERS, *CONTROLLERS))

    # -- probes ----------------------------------------------------------------------------------

    async def leaders(self) -> dict[str, str | None]:
        """Each controller's view of the leader (None: no leader known or no answer)."""
        remote = self.test["remote"]

        async def one(node: str) -> str | None:
            conn = self.meta_conns.get(node)
            try:
                if conn is None or conn.closed:
                    conn = self.meta_conns[node] = await connect(f"{remote.address(node)}:{CONTROLLER_PORT}",
                                                                 timeout_s=0.5)
                md = (await conn.request(RequestCode.CONTROLLER_GET_METADATA_INFO, timeout_s=0.5)).header
                leader = md.get("leader_id")
                return str(leader) if leader else None
            except Exception:
                return None

        views = await asyncio.gather(*(one(n) for n in CONTROLLERS))
        return dict(zip(CONTROLLERS, views, strict=True))

    async def leader_agreed(self) -> bool:
        views = set((await self.leaders()).values())
        return len(views) == 1 and None not in views

    async def write(self) -> bool:
        """One RegisterBroker of the probe broker at a new address: one committed Raft entry."""
        assert self.client is not None
        self.seq += 1
        p = self.probe
        try:
            await self.client.register_broker(self.db.options.cluster_name, p["broker_name"], p["broker_id"],
                                              f"10.99.{self.seq // 250 % 250}.{self.seq % 250}:1", p["incarnation"],
                                              None)
            return True
        except Exception:
            return False

    async def send(self) -> bool:
        assert self.producer is not None
        try:
            await self.producer.send(BROKER_NAME, "heal", 0, b"x", timeout_s=2.0)
            return True
        except Exception:
            return False

    async def sync_state_full(self) -> bool:
        assert self.client is not None
        try:
            resp = await self.client.call(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, {"broker_names": [BROKER_NAME]})
        except Exception:
            return False
        rows = resp.body or []
        return any(len(r.get("sync_state_set") or []) == len(BROKERS) for r in rows if isinstance(r, dict))

    async def healthy(self) -> bool:
        return (await self.leader_agreed() and await self.write() and await self.send()
                and await self.sync_state_full())

    async def wait_healthy(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if await self.healthy():
                return True
            await asyncio.sleep(0.2)
        return False

    # -- one trial -------------------------------------------------------------------------------

    async def grudge(self, scenario: str) -> dict[str, frozenset[str]]:
        primaries = await self.db.primaries(self.test)
        leader = next((p for p in primaries if p in CONTROLLERS), None)
        master = next((p for p in primaries if p in BROKERS), None)
        if scenario == "a":
            if leader is None:
                raise RuntimeError("no controller leader to isolate")
            return gr.isolate([leader], [*CONTROLLERS, *BROKERS])
        if scenario == "b":
            follower = self.rng.choice([c for c in CONTROLLERS if c != leader])
            return gr.isolate_from(follower, [c for c in CONTROLLERS if c != follower])
        if master is None:
            raise RuntimeError("no broker master to isolate")
        if scenario == "c":
            return gr.isolate_from(master, [b for b in BROKERS if b != master])
        return gr.isolate_from(master, CONTROLLERS)

    async def trial(self, scenario: str, duration_s: float, cap_s: float) -> dict[str, float] | None:
        """Partition, heal, measure; None if the cluster was not healthy beforehand."""
        assert self.nemesis is not None
        if not await self.wait_healthy(HEALTHY_TIMEOUT_S):
            return None
        await self.nemesis.apply(self.test, await self.grudge(scenario))
        await asyncio.sleep(duration_s)
        heal_started = time.monotonic()
        await self.nemesis.heal(self.test)
        healed = time.monotonic()
        out = await asyncio.gather(
            _first(self.leader_agreed, healed, cap_s, overlap=False),
            _first(self.write, healed, cap_s, overlap=True),
            _first(self.send, healed, cap_s, overlap=True),
        )
        return {**dict(zip(FIGURES, out, strict=True)), "heal_call": round(healed - heal_started, 3)}


async def _first(probe: Callable[[], Awaitable[bool]], since: float, cap_s: float, *, overlap: bool) -> float:
    """Seconds from ``since`` until ``probe`` first succeeds (a probe started at or after ``since``).

    With ``overlap`` a new probe starts every PROBE_EVERY_S even while earlier ones are pending, so
    one stuck request does not hide a later success; the figure is the earliest completion time of
    any successful probe.  Returns ``cap_s`` if nothing succeeds within it.
    """
    done = asyncio.Event()
    best: list[float] = []

    async def one() -> None:
        if await probe() and not done.is_set():
            best.append(time.monotonic() - since)
            done.set()

    tasks: set[asyncio.Task[None]] = set()
    try:
        while not done.is_set() and time.monotonic() - since < cap_s:
            if overlap or not tasks:
                t = asyncio.ensure_future(one())
                tasks.add(t)
                t.add_done_callback(tasks.discard)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), PROBE_EVERY_S)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return round(best[0], 3) if best else cap_s


def _p99(values: list[float]) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(0.99 * (len(s) - 1)))]


async def run_mode(work: Path, *, liveness: bool, scenarios: list[str], durations: list[float], trials: int,
                   cap_s: float, seed: int, log: Callable[[str], None]) -> dict[str, float]:
    prefix = "" if liveness else "old-"
    cluster = Cluster(work, liveness=liveness, seed=seed)
    figures: dict[str, float] = {}
    try:
        await cluster.start()
        for scenario in scenarios:
            for duration in durations:
                samples: dict[str, list[float]] = {f: [] for f in FIGURES}
                heal_calls: list[float] = []
                skipped = 0
                for i in range(trials):
                    res = await cluster.trial(scenario, duration, cap_s)
                    if res is None:
                        skipped += 1
                        continue
                    log(f"{prefix}{scenario}-{duration:g}s trial {i + 1}/{trials}: {res}")
                    for f in FIGURES:
                        samples[f].append(res[f])
                    heal_calls.append(res["heal_call"])
                for f in FIGURES:
                    row = f"{prefix}{scenario}-{duration:g}s-{f}"
                    if samples[f]:
                        figures[f"{row}-p50_s"] = round(statistics.median(samples[f]), 3)
                        figures[f"{row}-p99_s"] = round(_p99(samples[f]), 3)
                        figures[f"{row}-unrecovered"] = sum(v >= cap_s for v in samples[f])
                    figures[f"{row}-trials"] = len(samples[f])
                if heal_calls:
                    figures[f"{prefix}{scenario}-{duration:g}s-heal_call-max_s"] = max(heal_calls)
                if skipped:
                    figures[f"{prefix}{scenario}-{duration:g}s-unhealthy_before"] = skipped
    finally:
        await cluster.stop()
    return figures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="3 trials of 15 s per scenario")
    ap.add_argument("--trials", type=int, default=10, help="trials per row (default 10)")
    ap.add_argument("--durations", default="5,15,30", help="partition lengths in seconds (default 5,15,30)")
    ap.add_argument("--scenarios", default="a,b,c,d", help="which of a,b,c,d (default all)")
    ap.add_argument("--cap-s", type=float, default=40.0, help="give up measuring a figure after this long")
    ap.add_argument("--no-baseline", action="store_true", help="skip the liveness-off (old tree) cluster")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--json", action="store_true", help="print one JSON object of figures and targets")
    args = ap.parse_args(argv)
    try:
        durations = [15.0] if args.quick else _floats("--durations", args.durations)
        trials = 3 if args.quick else args.trials
        if not 1 <= trials <= 1000:
            raise Usage(f"--trials must be in 1..1000, got {trials}")
        if not 1 <= args.cap_s <= 600:
            raise Usage(f"--cap-s must be in 1..600, got {args.cap_s}")
        scenarios = _scenarios(args.scenarios)
        if os.geteuid() != 0:
            raise Usage("bench/heal.py needs root: it creates network namespaces and iptables rules")
    except Usage as exc:
        print(f"bench/heal.py: {exc}", file=sys.stderr)
        return 2

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    figures: dict[str, float] = {}
    modes = [True] if args.no_baseline else [True, False]
    with tempfile.TemporaryDirectory(prefix="sb-heal-") as d:
        for liveness in modes:
            figures.update(asyncio.run(run_mode(
                Path(d) / ("new" if liveness else "old"), liveness=liveness, scenarios=scenarios,
                durations=durations, trials=trials, cap_s=args.cap_s, seed=args.seed, log=log)))
    targets = {k: (TARGET_P50_S if k.endswith("-p50_s") else TARGET_P99_S)
               for k in figures if k.endswith(("-p50_s", "-p99_s"))}
    if args.json:
        print(json.dumps({"figures": figures, "targets": targets}))
    else:
        for name, value in figures.items():
            target = targets.get(name)
            tgt = "" if target is None else f"target <= {target}"
            print(f"{name:32s} {value:>8}  {tgt}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
