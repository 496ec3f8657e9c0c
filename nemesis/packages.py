"""Nemesis packages: a nemesis, the generator that schedules its faults, and the final heal.

A spec's ``nemesis: {packages: [...], interval_s: S, targets: [...]}`` picks packages by name;
:func:`build` composes them into one nemesis (routing by ``f``), one generator that mixes their
fault schedules, and one heal generator that undoes everything (heal partitions and packets,
reset clocks, resume paused processes, restart dead ones, disarm failpoints).  Faults of different
packages may overlap; each package alternates start/stop on its own.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from harness import generator as g
from harness.protocols import Nemesis, compose_nemeses
from nemesis.faults import ClockNemesis, FailpointNemesis, PacketNemesis, PartitionNemesis, ProcessNemesis
from nemesis.targets import Topology
from nemesis.targets import validate as validate_target


@dataclass
class Package:
    name: str
    nemesis: Nemesis
    generator: Any
    heal: list[dict[str, Any]]


def _pick(options: Sequence[Any]) -> Callable[[Any], Any]:
    return lambda ctx: options[ctx.rng.randrange(len(options))]


def _alternate(interval_s: float, start: Callable[[Any], dict[str, Any]], stop: dict[str, Any]) -> Any:
    """sleep ~interval, start a fault, sleep ~interval, stop it; forever (the runner's time limit ends it)."""
    return g.cycle([g.sleep(interval_s), g.once(start), g.sleep(interval_s), stop])


def partition_package(db: Any, rng: random.Random, interval_s: float, targets: Sequence[str]) -> Package:
    kinds = ["random-halves", "isolate", "isolate-controller-leader", "isolate-master", "majorities-ring", "bridge",
             "one-way"]
    if not db.spec.nodes.broker_sets:
        kinds = [k for k in kinds if "master" not in k]
    pick_kind, pick_target = _pick(kinds), _pick(list(targets) or ["one"])

    def start(ctx: Any) -> dict[str, Any]:
        kind = pick_kind(ctx)
        value: dict[str, Any] = {"kind": kind}
        if kind == "isolate":
            value["targets"] = pick_target(ctx)
        if kind == "one-way":
            value.update({"from": "one", "to": "all"})
        return {"f": "start-partition", "value": value}

    return Package("partition", PartitionNemesis(db, rng), _alternate(interval_s, start, {"f": "stop-partition"}),
                   [{"f": "stop-partition"}])


def kill_package(db: Any, rng: random.Random, interval_s: float, targets: Sequence[str]) -> Package:
    pick = _pick(list(targets) or ["one"])
    return Package("kill", ProcessNemesis(db, rng),
                   _alternate(interval_s, lambda ctx: {"f": "kill", "value": pick(ctx)}, {"f": "start"}),
                   [{"f": "start"}])


def pause_package(db: Any, rng: random.Random, interval_s: float, targets: Sequence[str]) -> Package:
    pick = _pick(list(targets) or ["one"])
    return Package("pause", ProcessNemesis(db, rng),
                   _alternate(interval_s, lambda ctx: {"f": "pause", "value": pick(ctx)}, {"f": "resume"}),
                   [{"f": "resume"}])


def clock_package(db: Any, rng: random.Random, interval_s: float, targets: Sequence[str]) -> Package:
    pick = _pick(list(targets) or ["one"])

    def start(ctx: Any) -> dict[str, Any]:
        choice = ctx.rng.randrange(3)
        if choice == 0:
            return {"f": "bump-clock", "value": {"targets": pick(ctx), "delta_ms": ctx.rng.choice([-60_000, 60_000,
                                                                                                    5_000])}}
        if choice == 1:
            return {"f": "skew-clock", "value": {"targets": pick(ctx), "rate": ctx.rng.choice([0.5, 2.0, 5.0])}}
        return {"f": "strobe-clock", "value": {"targets": pick(ctx), "delta_ms": 200, "period_ms": 50,
                                               "duration_s": min(interval_s, 5.0)}}

    return Package("clock", ClockNemesis(db, rng), _alternate(interval_s, start, {"f": "reset-clock"}),
                   [{"f": "reset-clock"}])


def packet_package(db: Any, rng: random.Random, interval_s: float, targets: Sequence[str]) -> Package:
    pick = _pick(list(targets) or ["one"])
    behaviors = [{"delay": {"time_ms": 50, "jitter_ms": 10}}, {"loss": {"percent": 20}},
                 {"duplicate": {"percent": 20}}, {"delay": {"time_ms": 20}, "reorder": {"percent": 25}},
                 {"rate": {"rate": "1mbit"}}]
    pick_b = _pick(behaviors)
    return Package("packet", PacketNemesis(db, rng),
                   _alternate(interval_s, lambda ctx: {"f": "start-packet", "value": {"targets": pick(ctx),
                                                                                      "behavior": pick_b(ctx)}},
                              {"f": "stop-packet"}),
                   [{"f": "stop-packet"}])


def _disk_package(db: Any, rng: random.Random, interval_s: float, targets: Sequence[str], *, name: str,
                  corrupt_modes: Sequence[str]) -> Package:
    """Live disk faults on a broker (or a master), alternating with crashes that lose unsynced writes
    or damage a segment; brokers only (the spec's targets pick controllers as often as brokers)."""
    from nemesis.disk import FAULTS, DiskNemesis

    faults, broker_targets = list(FAULTS), ["brokers:one", "masters"]

    def start(ctx: Any) -> dict[str, Any]:
        target = ctx.rng.choice(broker_targets)
        choice = ctx.rng.randrange(len(faults) + 2)
        if choice < len(faults):
            return {"f": "start-disk", "value": {"fault": faults[choice], "targets": target,
                                                 "delay_ms": ctx.rng.choice([20, 100, 400])}}
        if choice == len(faults):
            return {"f": "lose-unfsynced", "value": {"targets": target}}
        return {"f": "corrupt-file", "value": {"targets": target, "mode": ctx.rng.choice(list(corrupt_modes))}}

    return Package(name, DiskNemesis(db, rng), _alternate(interval_s, start, {"f": "stop-disk"}),
                   [{"f": "stop-disk"}])


def disk_package(db: Any, rng: random.Random, interval_s: float, targets: Sequence[str]) -> Package:
    from nemesis.disk import REPAIRABLE_MODES

    return _disk_package(db, rng, interval_s, targets, name="disk", corrupt_modes=REPAIRABLE_MODES)


def disk_corrupt_package(db: Any, rng: random.Random, interval_s: float, targets: Sequence[str]) -> Package:
    """Like ``disk`` but also damages the middle of logs: those brokers refuse to start and stay down."""
    from nemesis.disk import CORRUPT_MODES

    return _disk_package(db, rng, interval_s, targets, name="disk-corrupt", corrupt_modes=CORRUPT_MODES)


# (failpoint, whom to arm it on): the controller and replication steps the protocol-crash package walks
PROTOCOL_POINTS = (
    ("controller.before_propose", "controller-leader"),
    ("controller.after_commit_before_reply", "controller-leader"),
    ("raft.after_persist", "controllers:one"),
    ("raft.before_apply", "controllers:one"),
    ("broker.master.after_append_before_replication", "masters"),
)


def protocol_crash_package(db: Any, rng: random.Random, interval_s: float, targets: Sequence[str]) -> Package:
    """Crash processes at exact protocol steps, walking :data:`PROTOCOL_POINTS` in order, forever: a
    controller between deciding and proposing a write, between commit and reply, after persisting and
    before applying Raft entries, a master between append and replication.  Each is restarted."""
    points = [(n, t) for n, t in PROTOCOL_POINTS if t != "masters" or db.spec.nodes.broker_sets]
    steps: list[Any] = []
    for name, target in points:
        steps += [g.sleep(interval_s), {"f": "crash-at", "value": {"name": name, "targets": target,
                                                                 "timeout_s": max(5.0, 2 * interval_s)}}]
    return Package("protocol-crash", FailpointNemesis(db, rng), g.cycle(steps),
                   [{"f": "disarm-failpoint", "value": {"targets": "all", "name": "*"}}])


def _registration_crash_package(db: Any, rng: random.Random, interval_s: float, targets: Sequence[str]) -> Package:
    """Imported lazily: nemesis.registration spawns extra brokers and imports the broker code."""
    from nemesis.registration import registration_crash_package

    return registration_crash_package(db, rng, interval_s, targets)


BUILDERS: dict[str, Callable[[Any, random.Random, float, Sequence[str]], Package]] = {
    "partition": partition_package,
    "kill": kill_package,
    "pause": pause_package,
    "clock": clock_package,
    "packet": packet_package,
    "disk": disk_package,
    "disk-corrupt": disk_corrupt_package,
    "protocol-crash": protocol_crash_package,
    "registration-crash": _registration_crash_package,
}
ALIASES = {"all": ["partition", "kill", "pause", "clock", "packet", "disk"], "leader-chaos": ["partition", "kill"]}


def expand(names: Sequence[str]) -> list[str]:
    out: list[str] = []
    for n in names:
        for m in ALIASES.get(n, [n]):
            if m not in out:
                out.append(m)
    return out


def validate(names: Sequence[str], targets: Sequence[str], topo: Topology, rng: random.Random) -> None:
    """Reject unknown package names and malformed target selectors before the test starts (ValueError)."""
    for n in expand(names):
        if n not in BUILDERS:
            raise ValueError(f"unknown nemesis package {n!r}; known: {sorted(BUILDERS) + sorted(ALIASES)}")
    for t in targets:
        validate_target(t, topo, rng)


@dataclass
class Composed:
    nemesis: Nemesis | None
    generator: Any
    heal: Any


def build(db: Any, names: Sequence[str], *, interval_s: float, targets: Sequence[str], seed: int) -> Composed:
    """Compose the named packages (see the module docstring)."""
    rng = random.Random(seed)
    packages = [BUILDERS[n](db, rng, interval_s, targets) for n in expand(names)]
    if not packages:
        return Composed(None, None, None)
    # one ProcessNemesis instance may serve both kill and pause
    members: dict[type, Nemesis] = {}
    for p in packages:
        members.setdefault(type(p.nemesis), p.nemesis)
    if "kill" in expand(names) and "pause" in expand(names):
        shared = members[ProcessNemesis]
        for p in packages:
            if isinstance(p.nemesis, ProcessNemesis):
                p.nemesis = shared
    nemesis = compose_nemeses(list(members.values()))
    gens = [p.generator for p in packages]
    generator = gens[0] if len(gens) == 1 else g.any_of(*gens)
    heal_ops = [op for p in packages for op in p.heal]
    heal = [op for i, op in enumerate(heal_ops) if op not in heal_ops[:i]]
    return Composed(nemesis, generator, heal)


__all__ = ["ALIASES", "BUILDERS", "Composed", "FailpointNemesis", "Package", "build", "expand", "validate"]
