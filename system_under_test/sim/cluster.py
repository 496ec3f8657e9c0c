"""The whole cluster in one seeded simulation: three controllers, one broker set, clients and a nemesis.

:func:`run` builds a :class:`SimCluster` from a :class:`SimConfig` and plays one run, the phases of a real
``splitbrain test``:

1. **start** (``warmup_s``): the controllers elect a leader; the brokers register, heartbeat and elect a master;
2. **main** (``seconds``): the clients send and poll; the nemesis injects faults (``faults``);
3. **heal**: the fault in effect is undone and every node that is down is started; the clients go on for
   ``settle_s``;
4. **drain**: the clients stop and every queue is drained from offset 0 (retried until it completes, at most
   ``drain_s``).

Everything -- message delays and losses, Raft election timeouts, client choices, fault times and targets --
comes from one ``random.Random(seed)``, so a seed replays exactly: the same seed gives the same history, byte
for byte.  The result (:class:`SimRun`) carries the history, the brokers' node events and the executed fault
schedule; checking them is the harness's job (``systems/splitbrain/sim/check.py``), with the same checkers a real run
gets.

Node names follow a spec's defaults: controllers ``c1..c3``, brokers ``b1-1..b1-3`` of broker set ``broker-0``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from system_under_test.controller.config import ControllerConfig
from system_under_test.lease_timing import DEFAULT_LEASE_TIMEOUT_MS, heartbeat_interval_for, scan_interval_for
from system_under_test.sim.admin import MEMBERSHIP_SET, SimAllocator, SimMembership, SimRegister
from system_under_test.sim.broker import TORN_META, BrokerOptions, SimBroker
from system_under_test.sim.client import SimClients
from system_under_test.sim.controller import ControllerTiming, SimController
from system_under_test.sim.faults import DEFAULT_FAULTS, FAULT_KINDS, Nemesis
from system_under_test.sim.network import Network, SimNode
from system_under_test.sim.playback import Timed
from system_under_test.sim.swarm import Intensity, SwarmDraw
from system_under_test.sim.swarm import draw as draw_swarm
from system_under_test.sim.world import World

__all__ = ["BROKER_BUGS", "CONTROLLER_BUGS", "DEFAULT_WORKLOADS", "SIM_BUGS", "SIM_WORKLOADS", "SimCluster",
           "SimConfig", "SimRun", "run"]

CONTROLLER_BUGS = frozenset({"stale-read", "no-epoch-fencing", "reuse-broker-id", "slow-failover"})
BROKER_BUGS = frozenset({"ack-before-replication", "non-atomic-meta"})
SIM_BUGS = CONTROLLER_BUGS | BROKER_BUGS
BROKER_SET = "broker-0"
EXTRA_BROKER_SET = "regcrash-0"
TOPIC = "sb"
SIM_WORKLOADS = ("queue", "broker-ids", "membership", "controller-register")
"""The workloads a simulated run can play (docs/simulation.md's workload table names each)."""
DEFAULT_WORKLOADS = SIM_WORKLOADS


@dataclass(frozen=True)
class SimConfig:
    """One simulated run.  Times are simulated seconds.

    Attributes:
        seed: the only source of randomness.
        seconds: length of the main phase (clients and faults).
        bugs: deliberate bugs (names of ``systems/splitbrain/options.py``'s KNOWN_BUGS), given to the nodes that
            own them.
        faults: fault kinds of :data:`~system_under_test.sim.faults.FAULT_KINDS` (empty: no nemesis).
        workloads: which of :data:`SIM_WORKLOADS` run (``queue`` always does: its clients and drain are the run).
        threads: queue client threads; ``think_ms`` the mean pause between one thread's ops (load).
        lease_timeout_ms: the broker lease and the controller's lease (as ``cluster.lease_timeout_ms``).
        all_ack_in_sync_state_set, enable_elect_unclean_master, sync_flush: the safety settings (safe: True,
            False, True).
        swarm: swarm testing (``sim/swarm.py``): ``faults`` and ``workloads`` are pools, and the run plays the
            subset of each, and the nemesis intensities, that the seed draws (:meth:`resolved`).
    """

    seed: int = 0
    seconds: float = 30.0
    bugs: frozenset[str] = frozenset()
    faults: tuple[str, ...] = DEFAULT_FAULTS
    workloads: tuple[str, ...] = DEFAULT_WORKLOADS
    threads: int = 4
    think_ms: int = 100
    queues: int = 4
    lease_timeout_ms: int = DEFAULT_LEASE_TIMEOUT_MS
    all_ack_in_sync_state_set: bool = True
    enable_elect_unclean_master: bool = False
    sync_flush: bool = True
    warmup_s: float = 3.0
    settle_s: float = 5.0
    drain_s: float = 20.0
    swarm: bool = False

    def __post_init__(self) -> None:
        unknown = sorted(set(self.bugs) - SIM_BUGS)
        if unknown:
            raise ValueError(f"SimConfig.bugs: unknown bug(s) {unknown}; known: {sorted(SIM_BUGS)}")
        bad = sorted(set(self.faults) - set(FAULT_KINDS))
        if bad:
            raise ValueError(f"SimConfig.faults: unknown fault kind(s) {bad}; known: {', '.join(FAULT_KINDS)}")
        bad = sorted(set(self.workloads) - set(SIM_WORKLOADS))
        if bad or "queue" not in self.workloads:
            raise ValueError(f"SimConfig.workloads: unknown workload(s) {bad} or no queue; known: "
                             f"{', '.join(SIM_WORKLOADS)} (queue always)")
        if not 0 < self.seconds <= 1e6:
            raise ValueError(f"SimConfig.seconds must be in (0, 1e6], got {self.seconds}")
        if self.threads < 1 or self.think_ms < 1 or self.queues < 1:
            raise ValueError("SimConfig.threads, think_ms and queues must be >= 1")

    def resolved(self) -> tuple[SimConfig, SwarmDraw | None]:
        """The config a run plays and its swarm draw: with ``swarm``, the seed's subsets of the pools (the
        draw's own RNG, so the world's streams are untouched); without, this config and None."""
        if not self.swarm:
            return self, None
        d = draw_swarm(self.seed, self.faults, self.workloads)
        return replace(self, faults=d.faults, workloads=d.workloads, swarm=False), d

    @property
    def settings(self) -> str:
        safe = self.all_ack_in_sync_state_set and not self.enable_elect_unclean_master
        return "safe" if safe and "ack-before-replication" not in self.bugs else "unsafe"


@dataclass
class SimRun:
    """What one run produced: the history (ops in the history format), node events, the executed fault
    schedule (``nemesis.schedule`` steps) and figures."""

    config: SimConfig
    history: list[dict[str, Any]]
    node_events: list[dict[str, Any]]
    schedule: list[dict[str, Any]]
    stats: dict[str, Any]
    controllers: tuple[str, ...]
    broker_sets: tuple[tuple[str, ...], ...]
    main_start_s: float
    simulated_s: float
    refused: dict[str, str] = field(default_factory=dict)
    setup_errors: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Per workload whose setup did not finish: ``(kind, message)`` (``SimRegister.setup_error``)."""
    swarm: SwarmDraw | None = None
    """A swarm seed's draw (``config`` is then the resolved one: the drawn faults and workloads); ``pools`` the
    given config's fault kinds and workloads, which the replay command names."""
    pools: tuple[tuple[str, ...], tuple[str, ...]] | None = None


class SimCluster:
    """The nodes, the network and the nemesis of one run."""

    def __init__(self, cfg: SimConfig, script: tuple[Timed, ...] | None = None) -> None:
        self.pools = (cfg.faults, cfg.workloads) if cfg.swarm else None
        cfg, self.swarm = cfg.resolved()
        self.cfg = cfg
        self.world = World(cfg.seed)
        self.net = Network(self.world)
        self.controller_names = ("c1", "c2", "c3")
        self.broker_names = ("b1-1", "b1-2", "b1-3")
        ccfg = ControllerConfig(cluster_name="splitbrain", enable_elect_unclean_master=cfg.enable_elect_unclean_master,
                                lease_timeout_ms=cfg.lease_timeout_ms,
                                scan_interval_ms=scan_interval_for(cfg.lease_timeout_ms))
        timing = ControllerTiming()
        self.controllers = {n: SimController(n, self.world, self.net, self.controller_names, ccfg, timing,
                                             cfg.bugs & CONTROLLER_BUGS) for n in self.controller_names}
        bopts = BrokerOptions(broker_name=BROKER_SET, all_ack_in_sync_state_set=cfg.all_ack_in_sync_state_set,
                              sync_flush=cfg.sync_flush, lease_timeout_ms=cfg.lease_timeout_ms,
                              heartbeat_interval_ms=heartbeat_interval_for(cfg.lease_timeout_ms),
                              bugs=cfg.bugs & BROKER_BUGS)
        self.brokers = {n: SimBroker(n, self.world, self.net, self.controller_names, bopts) for n in self.broker_names}
        for node in (*self.controllers.values(), *self.brokers.values()):
            self.net.add(node)
        self.clients = SimClients("client", self.world, self.net, self.controller_names, broker_name=BROKER_SET,
                                  topic=TOPIC, queues_per_set=cfg.queues, threads=cfg.threads, think_ms=cfg.think_ms)
        self.net.add(self.clients, cluster=False)
        # the registration-crash fault's broker: a broker set of its own, a new disk for every crash (as the real
        # nemesis crashes extra broker processes, never the cluster's)
        self.extra_broker = SimBroker("x1", self.world, self.net, self.controller_names,
                                      replace(bopts, broker_name=EXTRA_BROKER_SET))
        self.net.add(self.extra_broker, cluster=False)
        # the broker-ids allocator clients and the membership workload's own broker set (never faulted)
        self.allocator = SimAllocator("ids-client", self.world, self.net, self.controller_names,
                                      think_ms=2 * cfg.think_ms) if "broker-ids" in cfg.workloads else None
        self.member_brokers: dict[str, SimBroker] = {}
        self.membership: SimMembership | None = None
        if "membership" in cfg.workloads:
            self.member_brokers = {n: SimBroker(n, self.world, self.net, self.controller_names,
                                                replace(bopts, broker_name=MEMBERSHIP_SET)) for n in ("m0", "m1", "m2")}
            self.membership = SimMembership("mem-client", self.world, self.net, self.controller_names,
                                            self.member_brokers, think_ms=5 * cfg.think_ms,
                                            lease_ms=cfg.lease_timeout_ms)
        for extra in (self.allocator, self.membership, *self.member_brokers.values()):
            if extra is not None:
                self.net.add(extra, cluster=False)
        knobs = self.swarm.intensity if self.swarm is not None else Intensity()
        self.nemesis = Nemesis(self, tuple(cfg.faults), self.world.sub_rng(), knobs=knobs, script=script)
        # the controller-register client: its RNG is drawn after the nemesis's, so adding it left the nemesis's
        # stream (the drawn schedules) as it was
        self.register: SimRegister | None = None
        if "controller-register" in cfg.workloads:
            self.register = SimRegister("reg-client", self.world, self.net, self.controller_names,
                                        self.world.sub_rng(), think_ms=2 * cfg.think_ms)
            self.net.add(self.register, cluster=False)
        self.main_start_ms = int(cfg.warmup_s * 1000)

    # -- views the nemesis uses ------------------------------------------------------------------
    def node_names(self) -> tuple[str, ...]:
        return self.controller_names + self.broker_names

    def node(self, name: str) -> SimNode:
        return self.controllers.get(name) or self.brokers[name]

    def leader_node(self) -> str | None:
        best: SimController | None = None
        for c in self.controllers.values():
            if c.up and c.is_leader and c.core is not None and (best is None or c.core.term > best.core.term):  # type: ignore[union-attr]
                best = c
        return best.name if best is not None else None

    def master_node(self) -> str | None:
        """The broker acting as master with the highest master epoch (what a role selector would see)."""
        best: SimBroker | None = None
        for b in self.brokers.values():
            if b.up and b.ha.active and (best is None or b.master_epoch > best.master_epoch):
                best = b
        return best.name if best is not None else None

    # -- the run ---------------------------------------------------------------------------------
    def run(self) -> SimRun:
        cfg, w = self.cfg, self.world
        for c in self.controllers.values():
            c.start()
        for b in (*self.brokers.values(), *self.member_brokers.values()):
            w.after(w.rng.randint(0, 200), b.start)
        self.clients.start()
        admin = [a for a in (self.allocator, self.membership, self.register) if a is not None]
        for a in admin:
            a.start()
            w.at(self.main_start_ms, a.begin)
        main_end = self.main_start_ms + int(cfg.seconds * 1000)
        w.at(self.main_start_ms, self.clients.begin)
        w.at(self.main_start_ms, self.nemesis.begin)
        w.at_first(main_end, self.nemesis.stop)  # before any nemesis step due at the same millisecond
        drain_at = main_end + int(cfg.settle_s * 1000)
        w.at(drain_at, self.clients.end)
        for a in admin:
            w.at(drain_at, a.end)
        w.at(drain_at + 1000, self.clients.drain)
        end = drain_at + 1000 + int(cfg.drain_s * 1000)
        step = 1000
        t = 0
        while t < end:
            t = min(end, t + step)
            w.run_until(t)
            if self.clients.draining and len(self.clients.drained) == len(self.clients.queues):
                w.run_until(w.now_ms + 1)
                break
        return self._result()

    def _result(self) -> SimRun:
        w = self.world
        refused = {e["node"]: str(e.get("reason", "")) for e in w.node_events if e["event"] == TORN_META}
        stats: dict[str, Any] = {
            "events": w.events_run, "messages_sent": self.net.sent, "messages_dropped": self.net.dropped,
            "faults": dict(sorted(self.nemesis.injected.items())),
            "client_ops": self.clients.ops_done + sum(c.ops_done for c in (self.allocator, self.membership,
                                                                           self.register) if c is not None),
            "drained_queues": len(self.clients.drained), "queues": len(self.clients.queues),
            "brokers": {n: {"broker_id": b.broker_id, "role": b.role.value, "master_epoch": b.master_epoch,
                            "max_offset": b.store.max_offset, "confirm_offset": b.store.confirm,
                            "torn_tails": b.store.torn_tails, "up": b.up}
                        for n, b in self.brokers.items()},
            **({"register_setup": "ok" if self.register.setup_error is None else self.register.setup_error[1]}
               if self.register is not None else {}),
            "controllers": {n: {"up": c.up, "leader": c.is_leader, "applied": c.applied,
                                "term": c.core.term if c.core is not None else None}
                            for n, c in self.controllers.items()},
        }
        setup = {"controller-register": self.register.setup_error} if self.register is not None and \
            self.register.setup_error is not None else {}
        return SimRun(self.cfg, w.history, w.node_events, list(self.nemesis.schedule), stats, self.controller_names,
                      (self.broker_names,), self.main_start_ms / 1000, w.now_ms / 1000, refused, setup,
                      self.swarm, self.pools)


def run(cfg: SimConfig, script: tuple[Timed, ...] | None = None) -> SimRun:
    """Play one simulated run of ``cfg`` (module docstring).  With ``script`` (a schedule planned by
    :func:`system_under_test.sim.playback.plan`) the nemesis plays it instead of drawing faults; the seed still
    drives everything else, so the same seed and script replay the same history."""
    return SimCluster(cfg, script).run()
