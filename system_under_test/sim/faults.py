"""The simulated nemesis: faults drawn from the seed (or played from a given schedule), recorded as nemesis ops
and as a replayable schedule.

Fault kinds (:data:`FAULT_KINDS`; ``--faults`` picks a subset).  Each is injected, held for a random while,
then undone; sometimes a second one joins the first (:class:`Nemesis` says when):

* ``kill`` -- crash a node (a controller, or a broker: the master more often than not) and start it again
  later; the disk keeps what was fsynced plus a random, possibly torn, part of the rest;
* ``pause`` -- stop a node (SIGSTOP) and resume it; what arrives meanwhile waits;
* ``partition`` -- cut links: isolate one node (the master, the controller leader or any node), the master
  from its slaves only, or split the cluster into random halves; healed by ``stop-partition``;
* ``packet`` -- drop, delay and (Raft only) duplicate messages on every link; reordering follows from delays;
* ``clock`` -- run one node's clock faster or slower (its timers and leases with it); ``reset-clock`` resets
  every node, as the real nemesis does;
* ``registration-crash`` -- start a fresh broker of its own broker set (``x1`` of ``regcrash-0``, a new disk each
  time, as the real nemesis uses extra broker processes) and crash it at one of the registration driver's
  failpoints; it is started again 3 s later and must start (a broker that refuses is a ``restart-refused``
  anomaly);
* ``disk`` -- ``corrupt-file`` in a tail mode (``truncate-tail``, ``bitflip-tail``) on a broker of the set (the
  master half the time): the broker is killed, the last record of its commit log damaged in the middle -- fsynced
  or not, so the restarted store may find it lost durable records and stay out of mastership until replication
  refills it -- and started again; never where it could leave the set without an electable member
  (:func:`_damage_keeps_a_leader`).  Not in :data:`DEFAULT_FAULTS` (see docs/simulation.md);
* ``fsync`` -- ``start-disk`` ``slow-fsync`` or ``eio-fsync`` on a broker of the set (the master three times in
  four): while it holds, each append's fsync under SYNC takes 5-200 ms of simulated time, and with ``eio-fsync``
  then fails, so the append is rolled back and its send answered STORE_ERROR; healed by ``stop-disk``.  Not in
  :data:`DEFAULT_FAULTS` either (same reason);
* ``correlated-kill`` -- a rack or power failure: two or three brokers of the set crash within half a second of
  each other (each :data:`CORRELATED_SPREAD_MS` at most after the one before), before the cluster has reacted to
  the first crash (the master's 500-ms housekeeping that shrinks the SyncStateSet, the 1-s lease), and each
  starts again after a hold of its own, so they come back in any order.  Written as plain ``kill``/``start``
  steps, one per node and instant, so a schedule replays it.  Two independent ``kill`` faults never come that
  close: a joining fault waits at least 200 ms, and only 30% of faults have one.  Not in
  :data:`DEFAULT_FAULTS` either (same reason).

A drawn fault is a step ``{f, value}`` in the vocabulary of ``nemesis.schedule`` (:data:`DRAW`), performed
through :func:`system_under_test.sim.playback.action_of` -- the same path a given schedule's steps take
(``Nemesis.script``), so the schedule a run writes replays it.  The nemesis draws from its own RNG (seeded from
the world's when the cluster is built) and acts before the other events of its millisecond
(:meth:`World.at_first`): playing a schedule instead of drawing it leaves the clients' and the network's draws
exactly as they were.

Every performed step is recorded twice: as nemesis ops in the history (``process: "nemesis"``; an ``invoke``
and an ``info`` completion whose ``value`` names the nodes or the grudge, with ``fault`` and ``effective``), in
the shapes ``checker.availability`` reads; and as a *schedule* step ``{at_s, f, value}`` (``at_s`` from the
start of the main phase, node names as selectors).  A step that changes nothing (starting a node that is up) is
not recorded.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from system_under_test.broker.registration.driver import FAILPOINTS
from system_under_test.sim.broker import SimBroker
from system_under_test.sim.network import Network, PacketFault, SimNode
from system_under_test.sim.playback import FSYNC_FAULTS, REGCRASH_RESTART_MS, TAIL_MODES, Action, Timed, action_of
from system_under_test.sim.swarm import Intensity
from system_under_test.sim.world import World

__all__ = ["CORRELATED_SPREAD_MS", "DEFAULT_FAULTS", "DRAW", "FAULT_KINDS", "UNDO_OF", "Burst", "Cluster", "Nemesis"]

FAULT_KINDS = ("kill", "pause", "partition", "packet", "clock", "registration-crash", "disk", "fsync",
               "correlated-kill")
DEFAULT_FAULTS = ("kill", "pause", "partition", "packet", "clock")


class Cluster(Protocol):
    """What the nemesis needs of the simulated cluster (``SimCluster`` is one)."""

    @property
    def world(self) -> World: ...
    @property
    def net(self) -> Network: ...
    @property
    def main_start_ms(self) -> int: ...
    @property
    def broker_names(self) -> tuple[str, ...]: ...
    @property
    def brokers(self) -> Mapping[str, SimBroker]: ...
    def node_names(self) -> tuple[str, ...]: ...
    def node(self, name: str) -> SimNode: ...
    def leader_node(self) -> str | None: ...
    def master_node(self) -> str | None: ...
    @property
    def extra_broker(self) -> SimBroker: ...


Drawn = dict[str, Any]
"""A drawn step before its time is known: ``{f, value}``."""


@dataclass(frozen=True)
class Burst:
    """A fault made of several steps at set offsets from its start, each undone after a hold of its own (a
    correlated failure: :func:`_draw_correlated_kill`).  ``steps`` are ``(offset_ms, step, hold_ms)``, offsets
    ascending from 0; each step's undo (:data:`UNDO_OF`) is performed ``hold_ms`` after the step itself."""

    steps: tuple[tuple[int, Drawn, int], ...]

    def __post_init__(self) -> None:
        offsets = [o for o, _, _ in self.steps]
        if not self.steps or offsets[0] != 0 or offsets != sorted(offsets) or any(h <= 0 for _, _, h in self.steps):
            raise ValueError(f"Burst: offsets must start at 0 and ascend, holds be > 0: {self.steps}")


def _victim(rng: random.Random, c: Cluster) -> str:
    r = rng.random()
    if r < 0.4 and c.master_node() is not None:
        return str(c.master_node())
    if r < 0.55 and c.leader_node() is not None:
        return str(c.leader_node())
    names = c.node_names()
    return names[rng.randrange(len(names))]


Draw = Callable[[random.Random, Cluster, Intensity], Drawn | Burst | None]


def _draw_process(f: str) -> Draw:
    def draw(rng: random.Random, c: Cluster, knobs: Intensity) -> Drawn | None:
        victim = _victim(rng, c)
        return {"f": f, "value": victim} if c.node(victim).up else None
    return draw


def _draw_partition(rng: random.Random, c: Cluster, knobs: Intensity) -> Drawn:
    """Isolate the master, the master from its slaves, the controller leader, any node, or random halves (with
    a swarm's shapes, :func:`_draw_shape`)."""
    if knobs.partition_shapes is not None:
        return {"f": "start-partition", "value": {"kind": "grudge", "grudge": _draw_shape(rng, c, knobs)}}
    names = c.node_names()
    r = rng.random()
    grudge: dict[str, list[str]] = {}
    master, leader = c.master_node(), c.leader_node()
    if r < 0.35 and master is not None:
        grudge[master] = [n for n in names if n != master]
    elif r < 0.5 and master is not None:
        grudge[master] = [n for n in c.broker_names if n != master]
    elif r < 0.65 and leader is not None:
        grudge[leader] = [n for n in names if n != leader]
    elif r < 0.85:
        victim = names[rng.randrange(len(names))]
        grudge[victim] = [n for n in names if n != victim]
    else:
        shuffled = list(names)
        rng.shuffle(shuffled)
        half = sorted(shuffled[: len(names) // 2])
        other = sorted(n for n in names if n not in half)
        for n in half:
            grudge[n] = other
    return {"f": "start-partition", "value": {"kind": "grudge", "grudge": grudge}}


def _draw_shape(rng: random.Random, c: Cluster, knobs: Intensity) -> dict[str, list[str]]:
    """A swarm's partition: one of its shapes, chosen uniformly; a shape whose role has no holder now (no
    master, no leader) cuts a random node off instead."""
    assert knobs.partition_shapes is not None
    names = c.node_names()
    shape = knobs.partition_shapes[rng.randrange(len(knobs.partition_shapes))]
    master, leader = c.master_node(), c.leader_node()
    controllers = [n for n in names if n not in c.broker_names]
    if shape == "halves":
        shuffled = list(names)
        rng.shuffle(shuffled)
        half = sorted(shuffled[: len(names) // 2])
        other = sorted(n for n in names if n not in half)
        return {n: other for n in half}
    if shape == "master-all" and master is not None:
        return {master: [n for n in names if n != master]}
    if shape == "master-slaves" and master is not None:
        return {master: [n for n in c.broker_names if n != master]}
    if shape == "master-controllers" and master is not None:
        return {master: controllers}
    if shape == "leader-all" and leader is not None:
        return {leader: [n for n in names if n != leader]}
    if shape == "leader-controllers" and leader is not None:
        return {leader: [n for n in controllers if n != leader]}
    victim = names[rng.randrange(len(names))]
    return {victim: [n for n in names if n != victim]}


def _draw_packet(rng: random.Random, c: Cluster, knobs: Intensity) -> Drawn:
    drop, dup, delay = rng.choice(knobs.packet_loss), rng.choice(knobs.packet_duplicate), \
        rng.choice(knobs.packet_delay)
    behavior: dict[str, Any] = {"loss": {"percent": drop}}
    if dup:
        behavior["duplicate"] = {"percent": dup}
    if delay:
        behavior["delay"] = {"time_ms": delay // 2, "jitter_ms": delay // 2}
    return {"f": "start-packet", "value": {"targets": "all", "behavior": behavior}}


def _draw_clock(rng: random.Random, c: Cluster, knobs: Intensity) -> Drawn:
    victim = _victim(rng, c)
    return {"f": "skew-clock", "value": {"targets": victim, "rate": rng.choice(knobs.clock_rates)}}


def _draw_registration_crash(rng: random.Random, c: Cluster, knobs: Intensity) -> Drawn:
    return {"f": "registration-crash", "value": {"failpoint": FAILPOINTS[rng.randrange(len(FAILPOINTS))]}}


def _draw_disk(rng: random.Random, c: Cluster, knobs: Intensity) -> Drawn | None:
    """Damage the tail of a broker's commit log (the master half the time, else any broker of the set); None when
    the damage could leave the set without an electable member (:func:`_damage_keeps_a_leader`)."""
    master = c.master_node()
    victim = master if master is not None and rng.random() < 0.5 else \
        c.broker_names[rng.randrange(len(c.broker_names))]
    mode = TAIL_MODES[rng.randrange(len(TAIL_MODES))]
    if not _damage_keeps_a_leader(c, victim):
        return None
    return {"f": "corrupt-file", "value": {"targets": victim, "mode": mode}}


def _damage_keeps_a_leader(c: Cluster, victim: str) -> bool:
    """Would the set still have an electable member if ``victim``'s log lost durable records now?

    A broker whose store lost durable records asks to stay fenced until replication refills it; if every member
    of the SyncStateSet is in that state (or down), the controller elects nobody -- by design, since an
    acknowledged record may be gone (docs/broker.md, Lost durable records) -- and the set stays without a master.
    The availability checker takes ``corrupt-file`` for a fault that undoes itself, so it would call that
    ``unavailable``.  The simulated nemesis therefore damages one disk at a time (no broker of the set still
    refilling), only while the set has a master, and a member of the SyncStateSet only if another member is up,
    unpaused and unfenced.  A member is one for sure when both the master's applied set and its proposal, if any,
    hold it."""
    brokers = c.brokers
    if any(b.store.durable_loss is not None for b in brokers.values()):
        return False
    master = c.master_node()
    if master is None:
        return False
    view = brokers[master].ha.view
    members = view.members & (view.proposed if view.proposed is not None else view.members)
    target = brokers[victim]
    if target.broker_id not in members:
        return True
    return any(b is not target and b.broker_id in members and b.up and not b.paused and not b.fenced
               for b in brokers.values())


def _draw_fsync(rng: random.Random, c: Cluster, knobs: Intensity) -> Drawn:
    """Slow or failing fsyncs on a broker of the set, the master three times in four: the window between an
    append being written and its fsync finishing -- or failing and being rolled back -- is the master's."""
    master = c.master_node()
    victim = master if master is not None and rng.random() < 0.75 else \
        c.broker_names[rng.randrange(len(c.broker_names))]
    fault = FSYNC_FAULTS[rng.randrange(len(FSYNC_FAULTS))]
    return {"f": "start-disk", "value": {"targets": victim, "fault": fault, "delay_ms": rng.choice((5, 20, 50, 200))}}


CORRELATED_SPREAD_MS = 500
"""The most a correlated failure's next crash comes after the one before: the master's housekeeping interval
(:data:`system_under_test.sim.ha.HOUSEKEEPING_MS`), below the 1-s lease -- so the later crashes land before the
cluster has reacted to the first (the SyncStateSet still holds the first victim)."""


def _draw_correlated_kill(rng: random.Random, c: Cluster, knobs: Intensity) -> Burst | None:
    """Two or three brokers of the set that are up, in a random order, crash within
    :data:`CORRELATED_SPREAD_MS` of one another; each is started again after its own hold (as a kill's: 1-15 s,
    scaled by the run's ``hold_scale``).  None when fewer than two brokers of the set are up."""
    up = [n for n in c.broker_names if c.node(n).up]
    if len(up) < 2:
        return None
    rng.shuffle(up)
    victims = up[: min(len(up), rng.choice((2, 3)))]
    steps: list[tuple[int, Drawn, int]] = []
    at = 0
    for i, victim in enumerate(victims):
        if i:
            at += rng.randint(0, CORRELATED_SPREAD_MS)
        hold = rng.randint(1000, 15000)
        if knobs.hold_scale != 1.0:
            hold = max(200, int(hold * knobs.hold_scale))
        steps.append((at, {"f": "kill", "value": victim}, hold))
    return Burst(tuple(steps))


DRAW: Mapping[str, Draw] = {
    "kill": _draw_process("kill"), "pause": _draw_process("pause"), "partition": _draw_partition,
    "packet": _draw_packet, "clock": _draw_clock, "registration-crash": _draw_registration_crash,
    "disk": _draw_disk, "fsync": _draw_fsync, "correlated-kill": _draw_correlated_kill,
}
"""Fault kind -> how the nemesis draws its step (or its :class:`Burst` of steps) from its RNG, the cluster's
state and the run's knobs (None: nothing to do now, e.g. the victim is already down).  Every drawn step is
performed through :func:`system_under_test.sim.playback.action_of`, as a given schedule's steps are."""

UNDO_OF: Mapping[str, str | None] = {
    "kill": "start", "pause": "resume", "start-partition": "stop-partition", "start-packet": "stop-packet",
    "skew-clock": "reset-clock", "registration-crash": None, "corrupt-file": None,
    "start-disk": "stop-disk",
}
"""A drawn fault's f -> the f of the step that undoes it (None: it heals itself)."""

_KIND_OF: Mapping[str, str] = {"kill": "kill", "pause": "pause", "start-partition": "partition",
                               "start-packet": "packet", "skew-clock": "clock",
                               "registration-crash": "registration-crash", "corrupt-file": "disk",
                               "start-disk": "fsync"}
"""A fault step's f -> the fault kind it counts under in the run's figures."""

_PROCESS_FS = frozenset({"kill", "pause", "start", "resume"})

_OP_FAULT: Mapping[str, str] = {"start-partition": "partition", "start-packet": "packet", "skew-clock": "clock"}
"""f -> the ``fault`` its history op names (default: the f itself), the names ``checker.availability`` reads."""


@dataclass
class Nemesis:
    """Draws (or plays), injects and undoes faults on a simulated cluster.

    Drawn timing: after a quiet gap (half the time 1-4 s, else 5-10 s: long enough for the availability
    checker's settle time) a fault is injected and held (kills and pauses 1-15 s, others 1-10 s; a
    registration crash's broker is started again after :data:`REGCRASH_RESTART_MS`).  With probability
    ``knobs.overlap`` a second fault of the run's kinds joins the first while it is held (faults combine, as the real
    nemesis packages do); the next gap starts when every fault is undone.  ``knobs`` (a swarm seed's
    :class:`~system_under_test.sim.swarm.Intensity`) scales the gaps and holds and narrows the packet, clock and
    partition choices; its defaults draw exactly as a run without swarm.  Every choice comes from ``rng``, the
    nemesis's own stream: the clients and the network draw from the world's, which a given ``script`` (a played
    schedule) leaves exactly as the drawn run left it.
    """

    cluster: Cluster
    kinds: tuple[str, ...]
    rng: random.Random
    knobs: Intensity = field(default_factory=Intensity)
    script: tuple[Timed, ...] | None = None
    schedule: list[dict[str, Any]] = field(default_factory=list)
    injected: dict[str, int] = field(default_factory=dict)
    active: bool = False
    _undos: list[Drawn] = field(default_factory=list)
    _restarts: list[Drawn] = field(default_factory=list)
    _played: int = 0

    def begin(self) -> None:
        if self.script is not None:
            self.active = True
            self._cue()
            return
        if not self.kinds:
            return
        self.active = True
        self._next()

    # -- a given schedule ------------------------------------------------------------------------
    def _cue(self) -> None:
        """Arm the next step of the script (:meth:`stop` plays what is left when the main phase ends)."""
        assert self.script is not None
        if self._played < len(self.script):
            c = self.cluster
            c.world.at_first(c.main_start_ms + self.script[self._played].at_ms, self._play_due)

    def _play_due(self) -> None:
        assert self.script is not None
        if not self.active:
            return
        now = self.cluster.world.now_ms - self.cluster.main_start_ms
        while self._played < len(self.script) and self.script[self._played].at_ms <= now:
            t = self.script[self._played]
            self._played += 1
            self._perform(dict(t.step), t.action)
        self._cue()

    # -- drawn faults ----------------------------------------------------------------------------
    def _next(self) -> None:
        rng = self.rng
        gap = rng.randint(1000, 4000) if rng.random() < 0.5 else rng.randint(5000, 10000)
        if self.knobs.gap_scale != 1.0:
            gap = max(200, int(gap * self.knobs.gap_scale))
        self.cluster.world.at_first(self.cluster.world.now_ms + gap, self._inject, False)

    def _inject(self, joining: bool) -> None:
        if not self.active or (joining and not self._undos):
            return
        c, rng = self.cluster, self.rng
        kind = self.kinds[rng.randrange(len(self.kinds))]
        drawn = DRAW[kind](rng, c, self.knobs)
        if drawn is None:
            if not self._undos:
                self._next()
            return
        if isinstance(drawn, Burst):
            self._burst(kind, drawn, joining)
            return
        action = action_of(len(self.schedule), drawn, c.node_names())
        self._perform(drawn, action)
        undo_f = UNDO_OF[drawn["f"]]
        undo: Drawn = {"f": undo_f, "value": self._undo_value(drawn)} if undo_f else {"f": "", "value": None}
        self._undos.append(undo)
        if undo_f is None:
            hold = REGCRASH_RESTART_MS
        else:
            hold = rng.randint(1000, 15000) if kind in ("kill", "pause") else rng.randint(1000, 10000)
            if self.knobs.hold_scale != 1.0:
                hold = max(200, int(hold * self.knobs.hold_scale))
        c.world.at_first(c.world.now_ms + hold, self._heal_one, undo)
        if not joining and rng.random() < self.knobs.overlap:
            c.world.at_first(c.world.now_ms + rng.randint(200, max(300, hold // 2)), self._inject, True)

    def _burst(self, kind: str, burst: Burst, joining: bool) -> None:
        """Perform a burst's steps at their offsets (the first now), each undone after its own hold; the burst
        counts as held until its last undo (a second fault may join it as it may join any other)."""
        c = self.cluster
        now = c.world.now_ms
        for offset, step, hold in burst.steps:
            undo: Drawn = {"f": UNDO_OF[step["f"]], "value": self._undo_value(step)}
            self._undos.append(undo)
            if offset:
                c.world.at_first(now + offset, self._burst_step, kind, step, undo)
            else:
                self._burst_step(kind, step, undo)
            c.world.at_first(now + offset + hold, self._heal_one, undo)
        if not joining and self.rng.random() < self.knobs.overlap:
            longest = max(hold for _, _, hold in burst.steps)
            c.world.at_first(now + self.rng.randint(200, max(300, longest // 2)), self._inject, True)

    def _burst_step(self, kind: str, step: Drawn, undo: Drawn) -> None:
        """One step of a burst; a step that changes nothing (its node is down already, or the main phase ended)
        drops its undo, so the burst never starts a node another fault holds down."""
        if not any(u is undo for u in self._undos):
            return
        before = len(self.schedule)
        if self.active:
            self._perform(step, action_of(len(self.schedule), step, self.cluster.node_names()), kind)
        if len(self.schedule) == before:
            self._undos = [u for u in self._undos if u is not undo]
            if self.active and not self._undos:
                self._next()

    @staticmethod
    def _undo_value(drawn: Drawn) -> Any:
        return drawn["value"] if drawn["f"] in ("kill", "pause") else None

    def _heal_one(self, undo: Drawn) -> None:
        if not any(u is undo for u in self._undos):
            return
        self._undos = [u for u in self._undos if u is not undo]
        if undo["f"]:
            self._perform(undo, action_of(len(self.schedule), undo, self.cluster.node_names()))
        if self.active and not self._undos:
            self._next()

    def stop(self) -> None:
        """The final heal: registration-crash brokers started again, the script's remaining steps played (a
        drawn run: every fault in effect undone), then whatever is still in effect undone and every node that is
        down started (recorded as steps, so the executed schedule ends healed)."""
        c = self.cluster
        self.active = False
        for restart in self._restarts:
            self._restart_extra(restart)
        self._restarts = []
        if self.script is not None:
            while self._played < len(self.script):
                t = self.script[self._played]
                self._played += 1
                self._perform(dict(t.step), t.action)
        undos, self._undos = self._undos, []
        for undo in undos:
            if undo["f"]:
                self._perform(undo, action_of(len(self.schedule), undo, c.node_names()))
        leftovers: list[Drawn] = []
        paused = [n for n in c.node_names() if c.node(n).up and c.node(n).paused]
        if paused:
            leftovers.append({"f": "resume", "value": ",".join(paused)})
        if c.net.cuts:
            leftovers.append({"f": "stop-partition", "value": None})
        if c.net.packet != PacketFault():
            leftovers.append({"f": "stop-packet", "value": None})
        if any(c.node(n).clock_rate != 1.0 for n in c.node_names()):
            leftovers.append({"f": "reset-clock", "value": None})
        if any(b.store.fsync_fault is not None for b in c.brokers.values()):
            leftovers.append({"f": "stop-disk", "value": None})
        down = [n for n in c.node_names() if not c.node(n).up]
        if down:
            leftovers.append({"f": "start", "value": ",".join(down)})
        for step in leftovers:
            self._perform(step, action_of(len(self.schedule), step, c.node_names()))

    # -- performing a step -----------------------------------------------------------------------
    def _main_s(self) -> float:
        return round((self.cluster.world.now_ms - self.cluster.main_start_ms) / 1000, 3)

    def _perform(self, step: Drawn, action: Action, kind: str | None = None) -> None:
        """Do ``action``; if it changed anything, record the step (its time now) and the nemesis ops; the step
        counts under ``kind`` in the run's figures (default: its f's kind, :data:`_KIND_OF`)."""
        value = _PERFORM[action.f](self, action)
        if value is _NOTHING:
            return
        entry: dict[str, Any] = {"at_s": self._main_s(), "f": step["f"]}
        if step.get("value") is not None:
            entry["value"] = step["value"]
            if action.nodes and action.f in _PROCESS_FS and list(action.nodes) != value:
                entry["value"] = ",".join(value)  # only the nodes it acted on (the others were down, up...)
        self.schedule.append(entry)
        kind = kind or _KIND_OF.get(action.f)
        if kind is not None:
            self.injected[kind] = self.injected.get(kind, 0) + 1
        w = self.cluster.world
        w.record("invoke", "nemesis", action.f, value)
        extra: dict[str, Any] = {"fault": _OP_FAULT.get(action.f, action.f), "effective": True}
        if action.nodes or action.f in _PROCESS_FS:
            nodes = list(value) if isinstance(value, list) else list(action.nodes)
            extra["targets"] = [{"selector": ",".join(nodes), "nodes": nodes, "roles": {}}]
        w.record("info", "nemesis", action.f, value, **extra)

    def _process(self, action: Action) -> Any:
        c = self.cluster
        if action.f == "kill":
            nodes = [n for n in action.nodes if c.node(n).up]
            for n in nodes:
                c.node(n).crash()
        elif action.f == "pause":
            nodes = [n for n in action.nodes if c.node(n).up and not c.node(n).paused]
            for n in nodes:
                c.node(n).pause()
        elif action.f == "start":
            nodes = [n for n in (action.nodes or c.node_names()) if not c.node(n).up]
            for n in nodes:
                c.node(n).start()
        else:
            nodes = [n for n in (action.nodes or c.node_names()) if c.node(n).up and c.node(n).paused]
            for n in nodes:
                c.node(n).resume()
        return nodes if nodes else _NOTHING

    def _partition(self, action: Action) -> Any:
        cuts = self.cluster.net.cuts
        for a, b in action.cuts:
            cuts.add(frozenset((a, b)))
        grudge: dict[str, list[str]] = {}
        for a, b in action.cuts:
            grudge.setdefault(a, []).append(b)
        return {"kind": "grudge", "grudge": grudge}

    def _heal_partition(self, action: Action) -> Any:
        if not self.cluster.net.cuts:
            return _NOTHING
        self.cluster.net.cuts.clear()
        return None

    def _packet(self, action: Action) -> Any:
        assert action.packet is not None
        self.cluster.net.packet = action.packet
        return {"text": action.packet.describe()}

    def _stop_packet(self, action: Action) -> Any:
        if self.cluster.net.packet == PacketFault():
            return _NOTHING
        self.cluster.net.packet = PacketFault()
        return None

    def _skew(self, action: Action) -> Any:
        for n in action.nodes:
            self.cluster.node(n).set_clock_rate(action.rate)
        return {"targets": ",".join(action.nodes), "rate": action.rate}

    def _reset_clock(self, action: Action) -> Any:
        c = self.cluster
        skewed = [n for n in c.node_names() if c.node(n).clock_rate != 1.0]
        for n in skewed:
            c.node(n).set_clock_rate(1.0)
        return None if skewed else _NOTHING

    def _registration_crash(self, action: Action) -> Any:
        broker = self.cluster.extra_broker
        broker.crash()
        broker.wipe()
        broker.arm_crash(action.failpoint)
        broker.start()
        restart: Drawn = {"f": "", "value": None}
        self._restarts.append(restart)
        self.cluster.world.at_first(self.cluster.world.now_ms + REGCRASH_RESTART_MS, self._restart_extra, restart)
        return {"failpoint": action.failpoint, "node": broker.identity}

    def _corrupt_file(self, action: Action) -> Any:
        """Kill each broker named, damage its log's last record, start it again (one that was down stays down)."""
        c = self.cluster
        hit: list[str] = []
        damaged: dict[str, int | None] = {}
        for n in action.nodes:
            broker = c.brokers.get(n)
            if broker is None:
                continue
            was_up = broker.up
            broker.crash()
            damaged[n] = broker.store.damage_tail(action.mode)
            if was_up:
                broker.start()
            hit.append(n)
        if not hit:
            return _NOTHING
        return {"targets": ",".join(hit), "mode": action.mode, "damaged_at": damaged}

    def _start_disk(self, action: Action) -> Any:
        """Give each broker named a disk whose fsync takes ``delay_ms`` (and fails, ``eio-fsync``)."""
        hit = [n for n in action.nodes if n in self.cluster.brokers]
        for n in hit:
            self.cluster.brokers[n].store.fsync_fault = (action.mode, action.delay_ms)
        if not hit:
            return _NOTHING
        return {"targets": ",".join(hit), "fault": action.mode, "delay_ms": action.delay_ms}

    def _stop_disk(self, action: Action) -> Any:
        faulty = [b for b in self.cluster.brokers.values() if b.store.fsync_fault is not None]
        for b in faulty:
            b.store.fsync_fault = None
        return None if faulty else _NOTHING

    def _restart_extra(self, restart: Drawn) -> None:
        if not any(r is restart for r in self._restarts):
            return
        self._restarts = [r for r in self._restarts if r is not restart]
        broker = self.cluster.extra_broker
        if not broker.up and broker.refused is None:
            broker.start()  # the crashed broker starts again; one that refused stays down


_NOTHING: Any = object()
"""What a perform function returns when the step changed nothing (it is then not recorded)."""

_PERFORM: Mapping[str, Callable[[Nemesis, Action], Any]] = {
    "kill": Nemesis._process, "pause": Nemesis._process, "start": Nemesis._process, "resume": Nemesis._process,
    "start-partition": Nemesis._partition, "stop-partition": Nemesis._heal_partition,
    "start-packet": Nemesis._packet, "stop-packet": Nemesis._stop_packet,
    "skew-clock": Nemesis._skew, "reset-clock": Nemesis._reset_clock,
    "registration-crash": Nemesis._registration_crash,
    "corrupt-file": Nemesis._corrupt_file,
    "start-disk": Nemesis._start_disk, "stop-disk": Nemesis._stop_disk,
}
"""Action f -> how the nemesis performs it on the cluster, returning the history op's value."""
