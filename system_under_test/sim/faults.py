"""The simulated nemesis: faults drawn from the seed, recorded as nemesis ops and as a replayable schedule.

Fault kinds (:data:`FAULT_KINDS`; ``--faults`` picks a subset).  Each is injected, held for a random while,
then undone; sometimes a second one joins the first (:class:`Nemesis` says when):

* ``kill`` -- crash a node (a controller, or a broker: the master more often than not) and start it again
  later; the disk keeps what was fsynced plus a random, possibly torn, part of the rest;
* ``pause`` -- stop a node (SIGSTOP) and resume it; what arrives meanwhile waits;
* ``partition`` -- cut links: isolate one node (the master, the controller leader or any node), the master
  from its slaves only, or split the cluster into random halves; healed by ``stop-partition``;
* ``packet`` -- drop, delay and (Raft only) duplicate messages on every link; reordering follows from delays;
* ``clock`` -- run one node's clock faster or slower (its timers and leases with it);
* ``registration-crash`` -- start a fresh broker of its own broker set (``x1`` of ``regcrash-0``, a new disk each
  time, as the real nemesis uses extra broker processes) and crash it at one of the registration driver's
  failpoints; it is started again later and must start (a broker that refuses is a ``restart-refused``
  anomaly).

Every fault is recorded twice: as nemesis ops in the history (``process: "nemesis"``; an ``invoke`` and an
``info`` completion whose ``value`` names the nodes or the grudge, with ``fault`` and ``effective``), in the
shapes ``checker.availability`` reads; and as a *schedule* step ``{at_s, f, value}`` in the vocabulary of
``nemesis.schedule`` (``at_s`` from the start of the main phase, node names as selectors), so a failing seed
can be replayed against real processes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from system_under_test.broker.registration.driver import FAILPOINTS
from system_under_test.sim.broker import SimBroker
from system_under_test.sim.network import Network, PacketFault, SimNode
from system_under_test.sim.world import World

__all__ = ["DEFAULT_FAULTS", "FAULT_KINDS", "Cluster", "Nemesis"]

FAULT_KINDS = ("kill", "pause", "partition", "packet", "clock", "registration-crash")
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


@dataclass
class Nemesis:
    """Draws, injects and undoes faults on a simulated cluster.

    Timing: after a quiet gap (half the time 1-4 s, else 5-10 s: long enough for the availability checker's
    settle time) a fault is injected and held (kills and pauses 1-15 s, others 1-10 s).  With probability
    ``overlap`` a second fault of the run's kinds joins the first while it is held (faults combine, as the real
    nemesis packages do); the next gap starts when every fault is undone.
    """

    cluster: Cluster
    kinds: tuple[str, ...]
    overlap: float = 0.3
    schedule: list[dict[str, Any]] = field(default_factory=list)
    injected: dict[str, int] = field(default_factory=dict)
    active: bool = False
    _undos: list[Any] = field(default_factory=list)

    def begin(self) -> None:
        if not self.kinds:
            return
        self.active = True
        self._next()

    def _next(self) -> None:
        c = self.cluster
        rng = c.world.rng
        gap = rng.randint(1000, 4000) if rng.random() < 0.5 else rng.randint(5000, 10000)
        c.world.after(gap, self._inject, False)

    def _main_s(self) -> float:
        return round((self.cluster.world.now_ms - self.cluster.main_start_ms) / 1000, 3)

    def _op(self, f: str, value: Any, *, fault: str, targets: list[str] | None = None) -> None:
        """Record a nemesis invoke and its completion (both now) and the schedule step."""
        w = self.cluster.world
        w.record("invoke", "nemesis", f, value)
        extra: dict[str, Any] = {"fault": fault, "effective": True}
        if targets is not None:
            extra["targets"] = [{"selector": ",".join(targets), "nodes": targets, "roles": {}}]
        w.record("info", "nemesis", f, value, **extra)

    def _step(self, f: str, value: Any) -> None:
        step: dict[str, Any] = {"at_s": self._main_s(), "f": f}
        if value is not None:
            step["value"] = value
        self.schedule.append(step)

    def _inject(self, joining: bool) -> None:
        if not self.active or (joining and not self._undos):
            return
        c = self.cluster
        rng = c.world.rng
        kind = self.kinds[rng.randrange(len(self.kinds))]
        undo = getattr(self, "_" + kind.replace("-", "_"))()
        if undo is None:
            if not self._undos:
                self._next()
            return
        self.injected[kind] = self.injected.get(kind, 0) + 1
        self._undos.append(undo)
        hold = rng.randint(1000, 15000) if kind in ("kill", "pause") else rng.randint(1000, 10000)
        c.world.after(hold, self._heal_one, undo)
        if not joining and rng.random() < self.overlap:
            c.world.after(rng.randint(200, max(300, hold // 2)), self._inject, True)

    def _heal_one(self, undo: Any) -> None:
        if undo not in self._undos:
            return
        self._undos.remove(undo)
        undo()
        if self.active and not self._undos:
            self._next()

    def stop(self) -> None:
        """The final heal: undo every fault in effect, start every node that is down."""
        self.active = False
        undos, self._undos = self._undos, []
        for undo in undos:
            undo()
        down = [n for n in self.cluster.node_names() if not self.cluster.node(n).up]
        if down:
            self._step("start", ",".join(down))
            for n in down:
                self.cluster.node(n).start()
            self._op("start", down, fault="start", targets=down)

    # -- choosing a target -----------------------------------------------------------------------
    def _victim(self) -> str:
        c = self.cluster
        rng = c.world.rng
        r = rng.random()
        if r < 0.4 and c.master_node() is not None:
            return str(c.master_node())
        if r < 0.55 and c.leader_node() is not None:
            return str(c.leader_node())
        names = c.node_names()
        return names[rng.randrange(len(names))]

    # -- the faults ------------------------------------------------------------------------------
    def _kill(self) -> Any:
        victim = self._victim()
        node = self.cluster.node(victim)
        if not node.up:
            return None
        self._step("kill", victim)
        node.crash()
        self._op("kill", [victim], fault="kill", targets=[victim])

        def undo() -> None:
            self._step("start", victim)
            node.start()
            self._op("start", [victim], fault="start", targets=[victim])

        return undo

    def _pause(self) -> Any:
        victim = self._victim()
        node = self.cluster.node(victim)
        if not node.up:
            return None
        self._step("pause", victim)
        node.pause()
        self._op("pause", [victim], fault="pause", targets=[victim])

        def undo() -> None:
            self._step("resume", victim)
            node.resume()
            self._op("resume", [victim], fault="resume", targets=[victim])

        return undo

    def _partition(self) -> Any:
        c = self.cluster
        rng = c.world.rng
        names = c.node_names()
        r = rng.random()
        grudge: dict[str, list[str]] = {}
        master = c.master_node()
        if r < 0.35 and master is not None:
            kind, victim = "isolate-master", master
            grudge[victim] = [n for n in names if n != victim]
        elif r < 0.5 and master is not None:
            kind = "isolate-master-from-slaves"
            grudge[master] = [n for n in c.broker_names if n != master]
        elif r < 0.65 and c.leader_node() is not None:
            kind, victim = "isolate-controller-leader", str(c.leader_node())
            grudge[victim] = [n for n in names if n != victim]
        elif r < 0.85:
            kind, victim = "isolate", names[rng.randrange(len(names))]
            grudge[victim] = [n for n in names if n != victim]
        else:
            kind = "random-halves"
            shuffled = list(names)
            rng.shuffle(shuffled)
            half = sorted(shuffled[: len(names) // 2])
            other = sorted(n for n in names if n not in half)
            for n in half:
                grudge[n] = other
        value = {"kind": kind, "grudge": grudge}
        self._step("start-partition", {"kind": "grudge", "grudge": grudge})
        for a, drops in grudge.items():
            for b in drops:
                c.net.cuts.add(frozenset((a, b)))
        self._op("start-partition", value, fault="partition")

        def undo() -> None:
            self._step("stop-partition", None)
            c.net.cuts.clear()
            self._op("stop-partition", None, fault="stop-partition")

        return undo

    def _packet(self) -> Any:
        c = self.cluster
        rng = c.world.rng
        fault = PacketFault(drop_rate=rng.choice((0.02, 0.05, 0.1, 0.3)), dup_rate=rng.choice((0.0, 0.05, 0.2)),
                            extra_delay_ms=rng.choice((0, 20, 100, 400)))
        behavior: dict[str, Any] = {"loss": {"percent": round(fault.drop_rate * 100)}}
        if fault.dup_rate:
            behavior["duplicate"] = {"percent": round(fault.dup_rate * 100)}
        if fault.extra_delay_ms:
            behavior["delay"] = {"time_ms": fault.extra_delay_ms // 2, "jitter_ms": fault.extra_delay_ms // 2}
        self._step("start-packet", {"targets": "all", "behavior": behavior})
        c.net.packet = fault
        self._op("start-packet", {"behavior": behavior, "text": fault.describe()}, fault="packet")

        def undo() -> None:
            self._step("stop-packet", None)
            c.net.packet = PacketFault()
            self._op("stop-packet", None, fault="stop-packet")

        return undo

    def _clock(self) -> Any:
        c = self.cluster
        rng = c.world.rng
        victim = self._victim()
        node = c.node(victim)
        rate = rng.choice((0.5, 0.8, 1.25, 2.0))
        self._step("skew-clock", {"targets": victim, "rate": rate})
        node.set_clock_rate(rate)
        self._op("skew-clock", {"targets": victim, "rate": rate}, fault="clock", targets=[victim])

        def undo() -> None:
            self._step("reset-clock", None)
            node.set_clock_rate(1.0)
            self._op("reset-clock", None, fault="reset-clock")

        return undo

    def _registration_crash(self) -> Any:
        broker = self.cluster.extra_broker
        rng = self.cluster.world.rng
        point = FAILPOINTS[rng.randrange(len(FAILPOINTS))]
        self._step("registration-crash", {"failpoint": point})
        broker.crash()
        broker.wipe()
        broker.arm_crash(point)
        broker.start()
        self._op("registration-crash", {"failpoint": point, "node": broker.identity}, fault="registration-crash")

        def undo() -> None:
            if not broker.up and broker.refused is None:
                broker.start()  # the crashed broker starts again; one that refused stays down

        return undo
