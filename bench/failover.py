"""Failover of a broker master, measured where a user feels it: the first acknowledged send on the successor.

    python bench/failover.py [--trials 20] [--scenarios isolate,kill] [--hold-s 4] [--healthy-s 600]
                             [--lease-ms MS] [--json]

A cluster of three controllers (c1..c3) and one broker set of three brokers (b1..b3), safe settings (acks wait
for the whole SyncStateSet, clean elections only, the default lease and heartbeat interval), runs in network
namespaces.  Four producers on the host send one record after another throughout (each send waits at most
2 s); the host is never cut off.  Each trial waits until the set is whole and sends succeed, then

* ``isolate``: cuts the master off from every other node (controllers and slaves) with the partition
  nemesis's iptables drops -- clients still reach it -- holds the cut ``--hold-s`` beyond the first send
  acknowledged by a new master, heals, and waits until the old master serves as a slave;
* ``kill``: kill -9 the master; after the first send on a new master, starts it again and waits until it
  serves as a slave.

Figures per scenario, p50 and p99 over the trials (rows ``<scenario>-<figure>-p50_s`` / ``-p99_s``):

* ``writes_back`` -- from the fault to the first send acknowledged with a higher master epoch (target for
  ``isolate``: p99 <= 1.5 s, issue 30 section 2; today's design waits out a lease first);
* where that time goes, from the nodes' own event logs (``ADMIN_EVENTS``, real monotonic clock shared by
  every process on this host): ``detect_elect`` fault -> the ElectMaster entry applied on the controller
  leader (lease expiry, the scan's wait, the Raft commit); ``role`` -> the successor's ``become-master``;
  ``clients`` -> the first acknowledged send on it (route refresh, the producers' retries);
* ``old_fenced`` -- fault -> the old master fencing itself (``fenced`` via lease expiry; isolate only): until
  then it still answers as master (its sends cannot be acknowledged: the slaves are cut off);
* ``old_acks_after_fault`` -- sends the old master acknowledged after the fault (0 expected under all-ack);
* ``rejoin`` -- heal (or restart) -> the old master's ``become-slave`` (a trial that saw none within 30 s
  lists the old master's last events instead).

``--healthy-s N`` first runs N seconds of the same load without faults and counts master changes and
fencings: each is a false failure detection (issue 30: none in 10 minutes).  ``--lease-ms`` runs the cluster
at another ``lease_timeout_ms`` (the brokers heartbeat every quarter lease, the controller scans every eighth).

The benchmark measures; it never asserts a time.  Needs root (network namespaces, iptables).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.heal import stop_cluster
from harness.control.local import LocalRemote
from harness.spec import spec_from_dict
from nemesis import grudge as gr
from nemesis.partition import PartitionNemesis
from system_under_test.client.producer import Producer, SendError
from system_under_test.protocol import Connection, RequestCode, connect
from systems.splitbrain.db import SplitbrainDB
from systems.splitbrain.options import cluster_options

CONTROLLERS = ("c1", "c2", "c3")
BROKERS = ("b1", "b2", "b3")
BROKER_NAME = "broker-0"
SCENARIOS = ("isolate", "kill")
FIGURES = ("writes_back", "detect_elect", "role", "clients", "old_fenced", "rejoin")
TARGETS = {"isolate-writes_back-p99_s": 1.5}
PRODUCERS = 4
CAP_S = 30.0


class Usage(Exception):
    """A bad command-line value (printed, exit 2)."""


class Cluster:
    """The cluster in namespaces, the producers on the host and the nodes' event logs."""

    def __init__(self, work: Path, seed: int, lease_ms: int | None, verbose: bool = False) -> None:
        self.work = work
        self.verbose = verbose
        lease = {} if lease_ms is None else {"lease_timeout_ms": lease_ms}
        self.spec = spec_from_dict({
            "name": "failover", "backend": "local",
            "nodes": {"controllers": list(CONTROLLERS), "broker_sets": [list(BROKERS)]},
            "cluster": {"all_ack_in_sync_state_set": True, "enable_elect_unclean_master": False, **lease},
            "workloads": ["queue"], "seed": seed}, file="<bench/failover.py>")
        self.db = SplitbrainDB(self.spec, cluster_options(self.spec.cluster))
        self.rng = random.Random(seed)
        self.test: dict[str, Any] = {}
        self.nemesis: PartitionNemesis | None = None
        self.producer: Producer | None = None
        self.acks: list[tuple[float, int, int]] = []  # (monotonic s, master epoch, broker id)
        self.errors: list[tuple[float, str]] = []  # (monotonic s, why a send failed)
        self.stop_load = asyncio.Event()
        self.loaders: list[asyncio.Task[None]] = []
        self.conns: dict[str, Connection] = {}
        self.since: dict[str, tuple[Any, int]] = {}

    async def start(self) -> None:
        remote = await LocalRemote.create([*CONTROLLERS, *BROKERS], state_dir=self.work / "state")
        self.test = {"remote": remote, "run_dir": str(self.work)}
        await asyncio.gather(*(self.db.setup(self.test, n) for n in CONTROLLERS))
        await asyncio.gather(*(self.db.setup(self.test, n) for n in BROKERS))
        self.nemesis = await PartitionNemesis(self.db, self.rng).setup(self.test)
        self.producer = Producer(self.db.controller_addrs(self.test), self.db.token, timeout_s=2.0)
        self.loaders = [asyncio.ensure_future(self._load(i)) for i in range(PRODUCERS)]

    async def stop(self) -> None:
        self.stop_load.set()
        await asyncio.gather(*self.loaders, return_exceptions=True)
        for conn in self.conns.values():
            conn.close("bench over")
        if self.producer is not None:
            await self.producer.close()
        await stop_cluster(self.db, self.test, self.nemesis, (*BROKERS, *CONTROLLERS))

    async def _load(self, i: int) -> None:
        assert self.producer is not None
        n = 0
        while not self.stop_load.is_set():
            n += 1
            try:
                res = await self.producer.send(BROKER_NAME, "failover", i % 4, b"f%d-%d" % (i, n), timeout_s=2.0)
            except SendError as exc:
                self.errors.append((time.monotonic(), str(exc)[:160]))
                await asyncio.sleep(0.01)
                continue
            except Exception:  # a connection torn down mid-send: try again
                await asyncio.sleep(0.01)
                continue
            self.acks.append((time.monotonic(), res.master_epoch, res.broker_id))

    async def events(self, node: str) -> list[dict[str, Any]]:
        """The node's new events, each with ``t`` on this process's monotonic clock (seconds); a restarted
        process (a new ``boot``) is read from its first event.  A node that does not answer (dead, or cut off
        -- the host never is) gives none now and is read again on the next call."""
        for _ in range(2):
            conn = self.conns.get(node)
            boot, since = self.since.get(node, (None, 0))
            try:
                if conn is None or conn.closed:
                    conn = self.conns[node] = await connect(self.db.admin_addr(self.test, node), timeout_s=0.5)
                reply = (await conn.request(RequestCode.ADMIN_EVENTS, {"since": since}, timeout_s=1.0)).header
                if boot is not None and reply.get("boot") != boot and since:
                    reply = (await conn.request(RequestCode.ADMIN_EVENTS, {"since": 0}, timeout_s=1.0)).header
            except Exception:
                self.conns.pop(node, None)
                continue
            self.since[node] = (reply.get("boot"), int(reply.get("next", 0)))
            return [{**e, "t": int(e["mono_ns"]) / 1e9} for e in reply.get("events") or []]
        return []

    async def drain_events(self) -> None:
        for n in (*CONTROLLERS, *BROKERS):
            await self.events(n)

    async def state(self) -> tuple[str | None, int]:
        """The master node and master epoch the brokers report (None: no master)."""
        master = next((n for n in await self.db.primaries(self.test) if n in BROKERS), None)
        if master is None:
            return None, -1
        recent = [a for a in self.acks[-50:] if time.monotonic() - a[0] < 1.0]
        return master, max((a[1] for a in recent), default=-1)

    async def wait_healthy(self, timeout_s: float = 90.0) -> tuple[str, int] | None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            master, epoch = await self.state()
            if master is not None and epoch >= 0 and await self._set_whole():
                return master, epoch
            await asyncio.sleep(0.3)
        return None

    async def _set_whole(self) -> bool:
        client = self.db.client(self.test, timeout_s=1.0)
        try:
            resp = await client.call(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, {"broker_names": [BROKER_NAME]})
        except Exception:
            return False
        finally:
            await client.close()
        rows = resp.body or []
        return any(len(r.get("sync_state_set") or []) == len(BROKERS) for r in rows if isinstance(r, dict))

    async def trial(self, scenario: str, hold_s: float) -> dict[str, Any] | None:
        assert self.nemesis is not None
        healthy = await self.wait_healthy()
        if healthy is None:
            return None
        old, old_epoch = healthy
        await asyncio.sleep(0.5)
        await self.drain_events()
        if scenario == "isolate":
            await self.nemesis.apply(self.test, gr.isolate([old], [*CONTROLLERS, *BROKERS]))
        else:
            await self.db.kill(self.test, old)
        t0 = time.monotonic()
        first = await self._first_ack_above(old_epoch, t0)
        got: dict[str, float] = {}
        if first is not None:
            got["writes_back"] = first[0] - t0
        await asyncio.sleep(hold_s)
        evs = {n: await self.events(n) for n in (*CONTROLLERS, *BROKERS)}
        elect = min((e["t"] for n in CONTROLLERS for e in evs[n]
                     if e["kind"] == "apply" and e.get("event") == "ElectMaster" and e["t"] >= t0
                     and int(e.get("master_epoch") or 0) > old_epoch), default=None)
        become = min((e["t"] for n in BROKERS if n != old for e in evs[n]
                      if e["kind"] == "become-master" and e["t"] >= t0), default=None)
        fenced = min((e["t"] for e in evs[old] if e["kind"] == "fenced" and e["t"] >= t0), default=None)
        if elect is not None:
            got["detect_elect"] = elect - t0
        if elect is not None and become is not None:
            got["role"] = become - elect
        before_first_ack: list[str] = []  # --verbose: why the producers waited between the role change and the ack
        if become is not None and first is not None:
            got["clients"] = first[0] - become
            before_first_ack = [f"{t - become:+.3f} {e}" for t, e in self.errors if become - 0.2 <= t <= first[0]][-12:]
            before_first_ack += [f"{e['t'] - become:+.3f} {n} {e['kind']} {e.get('change', '')} {e.get('members', '')}"
                                 f"{e.get('event', '')}" for n in (*CONTROLLERS, *BROKERS) for e in evs[n]
                                 if become - 0.3 <= e["t"] <= first[0] + 0.05]
        if fenced is not None:
            got["old_fenced"] = fenced - t0
        got["old_acks_after_fault"] = float(sum(1 for t, e, _ in list(self.acks) if t > t0 and e <= old_epoch))
        if scenario == "isolate":
            await self.nemesis.heal(self.test)
        else:
            await self.db.start(self.test, old)
        t1 = time.monotonic()
        deadline = t1 + CAP_S
        seen: list[str] = []
        while time.monotonic() < deadline and "rejoin" not in got:
            for e in await self.events(old):
                seen.append(f"{e['kind']}@{e['t'] - t1:+.2f}")
                if e["kind"] == "become-slave" and e["t"] >= t1:
                    got["rejoin"] = e["t"] - t1
                    break
            await asyncio.sleep(0.1)
        out: dict[str, Any] = {k: round(v, 3) for k, v in got.items()}
        if "rejoin" not in got:
            out["old_master_events_after"] = seen[-8:]
        if self.verbose and before_first_ack:
            out["errors_before_first_ack"] = before_first_ack
        return out

    async def _first_ack_above(self, epoch: int, since: float) -> tuple[float, int, int] | None:
        deadline = since + CAP_S
        seen = len(self.acks)
        while time.monotonic() < deadline:
            for a in self.acks[seen:]:
                if a[0] >= since and a[1] > epoch:
                    return a
            seen = max(0, len(self.acks) - 64)
            await asyncio.sleep(0.01)
        return None


def _p99(values: list[float]) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(0.99 * (len(s) - 1)))]


async def healthy_run(cluster: Cluster, seconds: float, log: Any) -> dict[str, Any]:
    """Load without faults for ``seconds``: every master change is a false failure detection."""
    if await cluster.wait_healthy() is None:
        return {"healthy-skipped": 1}
    await cluster.drain_events()
    start, acks0 = time.monotonic(), len(cluster.acks)
    elections: list[float] = []
    fenced: list[str] = []
    while time.monotonic() - start < seconds:
        await asyncio.sleep(1.0)
        for n in CONTROLLERS:
            for e in await cluster.events(n):
                if e["kind"] == "apply" and e.get("event") == "ElectMaster" and e.get("change") == "elect":
                    elections.append(round(e["t"] - start, 3))
        for n in BROKERS:
            fenced += [f"{n}@{e['t'] - start:.1f}s via {e.get('via')}" for e in await cluster.events(n)
                       if e["kind"] == "fenced"]
    elections = sorted(set(elections))
    took = time.monotonic() - start
    log(f"healthy run: {len(cluster.acks) - acks0} acks in {took:.0f} s, master changes at {elections}, "
        f"fencings {fenced}")
    return {"healthy-seconds": round(took), "healthy-acks_per_s": round((len(cluster.acks) - acks0) / took),
            "healthy-master_changes": len(elections), "healthy-fencings": len(fenced)}


async def run(trials: int, scenarios: list[str], hold_s: float, seed: int, lease_ms: int | None,
              healthy_s: float, log: Any) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-failover-") as tmp:
        cluster = Cluster(Path(tmp), seed, lease_ms)
        try:
            await cluster.start()
            if healthy_s > 0:
                figures.update(await healthy_run(cluster, healthy_s, log))
            for scenario in scenarios:
                rows: list[dict[str, Any]] = []
                skipped = 0
                for i in range(trials):
                    res = await cluster.trial(scenario, hold_s)
                    if res is None:
                        skipped += 1
                        log(f"{scenario} trial {i + 1}/{trials}: cluster not healthy within 90 s, skipped")
                        continue
                    rows.append(res)
                    log(f"{scenario} trial {i + 1}/{trials}: {res}")
                for f in FIGURES:
                    vals = [r[f] for r in rows if f in r]
                    if vals:
                        figures[f"{scenario}-{f}-p50_s"] = round(statistics.median(vals), 3)
                        figures[f"{scenario}-{f}-p99_s"] = round(_p99(vals), 3)
                    figures[f"{scenario}-{f}-n"] = len(vals)
                figures[f"{scenario}-old_acks_after_fault"] = sum(int(r.get("old_acks_after_fault", 0)) for r in rows)
                figures[f"{scenario}-skipped"] = skipped
        finally:
            await cluster.stop()
    figures["lease_timeout_ms"] = cluster.db.options.lease_timeout_ms
    return figures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--trials", type=int, default=20, help="trials per scenario (default 20)")
    ap.add_argument("--scenarios", default="isolate,kill", help="comma list of isolate, kill")
    ap.add_argument("--hold-s", type=float, default=4.0, help="seconds the fault is held after writes are back")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--healthy-s", type=float, default=0.0,
                    help="first run this many seconds under load without faults and count master changes")
    ap.add_argument("--lease-ms", type=int, default=None,
                    help="the cluster's lease_timeout_ms (default: the cluster's default); heartbeats follow it")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    try:
        scenarios = [s for s in args.scenarios.split(",") if s]
        bad = [s for s in scenarios if s not in SCENARIOS]
        if not scenarios or bad:
            raise Usage(f"--scenarios: expected a comma list of {', '.join(SCENARIOS)}, got {args.scenarios!r}")
        if not 0 <= args.trials <= 1000:
            raise Usage(f"--trials: expected 0..1000, got {args.trials}")
        if not 0 <= args.healthy_s <= 86_400:
            raise Usage(f"--healthy-s: expected 0..86400 seconds, got {args.healthy_s}")
        if args.lease_ms is not None and not 100 <= args.lease_ms <= 600_000:
            raise Usage(f"--lease-ms: expected 100..600000, got {args.lease_ms}")
        if not 0 <= args.hold_s <= 120:
            raise Usage(f"--hold-s: expected 0..120 seconds, got {args.hold_s}")
    except Usage as exc:
        print(f"bench/failover.py: {exc}", file=sys.stderr)
        return 2

    def log(line: str) -> None:
        print(f"# {line}", file=sys.stderr, flush=True)

    figures = asyncio.run(run(args.trials, scenarios, args.hold_s, args.seed, args.lease_ms, args.healthy_s, log))
    if args.json:
        print(json.dumps(figures, sort_keys=True))
        return 0
    for key in sorted(figures):
        target = TARGETS.get(key)
        print(f"{key:40} {figures[key]!s:>10}" + (f"   target <= {target}" if target is not None else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
