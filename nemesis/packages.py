"""Nemesis packages: which faults a spec asks for, planned into one schedule before the run starts.

A spec's ``nemesis: {packages: [...], interval_s: S, targets: [...], options: {...}}`` picks packages by
name.  Each package knows its fault *kinds* (partition kinds, ``kill``/``terminate``, clock faults,
packet behaviours, disk faults, failpoints) and draws one per fault from the kinds and targets its
options allow (``options: {partition: {kinds: [isolate-master-from-slaves], targets: [masters]}}``; without
options, every kind and the spec's ``targets``).

:func:`plan` turns the packages into a :mod:`nemesis.schedule` -- a pure function of the packages, their
options, the interval, the main phase's length and the seed: each package alternates a fault and, an
interval later, its undo step (``stop-partition``, ``start``, ``resume``...), with gaps of ``interval_s``
on average (uniform in half to one and a half intervals); failpoint walks (``protocol-crash``,
``registration-crash``) crash something every interval or so.  Each package draws from its own RNG (seeded
by the seed and its name), so adding a package does not change another's faults.  A spec with
``nemesis.schedule`` skips planning and runs its steps as written.

:func:`build` makes the nemesis (one member per kind of fault, routed by ``f`` and wrapped by
:class:`nemesis.accounting.Accounted`), the generator that performs the schedule, and the heal ops
that undo everything after the main phase (heal partitions and packets, reset clocks, resume paused
processes, restart dead ones, disarm failpoints).  Which class performs an ``f`` and which heal ops it needs
come from its row in the fault table (:mod:`nemesis.faults`).  With ``nemesis.mode: guided`` the same packages' faults
are chosen during the run by :mod:`nemesis.guided_run` instead of planned.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.protocols import CAPABILITIES, Nemesis, Specified, compose_nemeses
from nemesis.accounting import Accounted
from nemesis.clock import ClockNemesis
from nemesis.disk import CORRUPT_MODES, FAULTS, REPAIRABLE_MODES, DiskNemesis
from nemesis.failpoint import FailpointNemesis
from nemesis.faults import FAULTS as ROW_OF
from nemesis.faults import GUIDED_NEEDS, NEMESES, ROWS, Need, need_met, package_needs, row
from nemesis.packet import PacketNemesis
from nemesis.packet_behavior import PRESETS
from nemesis.partition import PartitionNemesis
from nemesis.process import ProcessNemesis
from nemesis.registration import REGISTRATION_POINTS, RegistrationCrashNemesis
from nemesis.schedule import UNDO, Step, partition_aims, selectors_of, timed
from nemesis.targets import SelectorError, Topology, topology_of, unserved
from nemesis.targets import validate as validate_target

__all__ = [
    "ALIASES", "KINDS", "NEMESIS_OF", "PROTOCOL_POINTS", "Composed", "Missing", "PackageDef", "build", "definitions",
    "expand", "missing_capabilities", "own_selectors", "plan", "validate",
]

StartFn = Callable[[random.Random, int], dict[str, Any]]


@dataclass(frozen=True)
class PackageDef:
    """What a package plans: ``start(rng, k)`` is its k-th fault op; ``alternate`` puts each fault's
    undo step one interval after it; ``heal`` undoes everything the package can leave behind."""

    name: str
    start: StartFn
    alternate: bool
    heal: tuple[dict[str, Any], ...]
    nemesis: Callable[[Any, random.Random], Nemesis]


@dataclass(frozen=True)
class _Options:
    kinds: tuple[str, ...]
    targets: tuple[str, ...]


def _pick(rng: random.Random, options: Sequence[Any]) -> Any:
    return options[rng.randrange(len(options))]


# ---------------------------------------------------------------------------------------------
# One definition per package: its kinds (all, default) and how it draws a fault


PARTITION_DEFAULT = ("random-halves", "isolate", "majorities-ring", "bridge", "one-way")
"""The partition package's default kinds, in the order it draws them, unless the adapter says its own
(:attr:`nemesis.targets.Selectors.partition_default`: ours adds ``isolate-controller-leader`` and ``isolate-master``
after ``isolate``)."""
CLOCK_KINDS = ("bump-clock", "skew-clock", "strobe-clock")
DISK_KINDS = (*FAULTS, "lose-unfsynced", "corrupt-file")
PROTOCOL_POINTS = (
    ("controller.before_propose", "controller-leader"),
    ("controller.after_commit_before_reply", "controller-leader"),
    ("raft.after_persist", "controllers:one"),
    ("raft.before_apply", "controllers:one"),
    ("broker.master.after_append_before_replication", "masters"),
)
"""(failpoint, whom to arm it on): the controller and replication steps ``protocol-crash`` walks."""


def _partition(o: _Options, interval_s: float) -> StartFn:
    def start(rng: random.Random, k: int) -> dict[str, Any]:
        kind = _pick(rng, o.kinds)
        value: dict[str, Any] = {"kind": kind}
        if kind == "isolate":
            value["targets"] = _pick(rng, o.targets)
        if kind == "one-way":
            value.update({"from": "one", "to": "all"})
        return {"f": "start-partition", "value": value}
    return start


def _process(o: _Options, interval_s: float) -> StartFn:
    return lambda rng, k: {"f": _pick(rng, o.kinds), "value": _pick(rng, o.targets)}


def _clock(o: _Options, interval_s: float) -> StartFn:
    def start(rng: random.Random, k: int) -> dict[str, Any]:
        kind, target = _pick(rng, o.kinds), _pick(rng, o.targets)
        if kind == "bump-clock":
            return {"f": kind, "value": {"targets": target, "delta_ms": _pick(rng, [-60_000, 60_000, 5_000])}}
        if kind == "skew-clock":
            return {"f": kind, "value": {"targets": target, "rate": _pick(rng, [0.5, 2.0, 5.0])}}
        return {"f": kind, "value": {"targets": target, "delta_ms": 200, "period_ms": 50,
                                     "duration_s": min(interval_s, 5.0)}}
    return start


def _packet(o: _Options, interval_s: float) -> StartFn:
    return lambda rng, k: {"f": "start-packet", "value": {"targets": _pick(rng, o.targets),
                                                          "behavior": PRESETS[_pick(rng, o.kinds)]}}


def _disk(modes: Sequence[str]) -> Callable[[_Options, float], StartFn]:
    def make(o: _Options, interval_s: float) -> StartFn:
        def start(rng: random.Random, k: int) -> dict[str, Any]:
            kind, target = _pick(rng, o.kinds), _pick(rng, o.targets)
            if kind == "lose-unfsynced":
                return {"f": kind, "value": {"targets": target}}
            if kind == "corrupt-file":
                return {"f": kind, "value": {"targets": target, "mode": _pick(rng, list(modes))}}
            return {"f": "start-disk", "value": {"fault": kind, "targets": target,
                                                 "delay_ms": _pick(rng, [20, 100, 400])}}
        return start
    return make


class _Walk:
    """A failpoint walk: every kind in order, forever, from a start drawn once per run from the package's RNG.

    Starting every run at the first point meant a campaign of short runs never reached the later points
    (the registration walk's temp-file and rename steps, docs/bugs.md); a seeded start spreads a campaign over
    the whole walk and a run still replays from its seed."""

    def __init__(self, kinds: Sequence[str]) -> None:
        self.kinds = tuple(kinds)
        self.offset: int | None = None

    def at(self, rng: random.Random, k: int) -> str:
        if self.offset is None:
            self.offset = rng.randrange(len(self.kinds))
        return self.kinds[(self.offset + k) % len(self.kinds)]


def _protocol_crash(o: _Options, interval_s: float, custom_targets: bool) -> StartFn:
    default_targets = dict(PROTOCOL_POINTS)
    walk = _Walk(o.kinds)

    def start(rng: random.Random, k: int) -> dict[str, Any]:
        name = walk.at(rng, k)
        target = _pick(rng, o.targets) if custom_targets else default_targets.get(name, "one")
        return {"f": "crash-at", "value": {"name": name, "targets": target, "timeout_s": max(5.0, 2 * interval_s)}}
    return start


def _registration_crash(o: _Options, interval_s: float) -> StartFn:
    walk = _Walk(o.kinds)
    return lambda rng, k: {"f": "registration-crash", "value": {"failpoint": walk.at(rng, k)}}


@dataclass(frozen=True)
class _Kind:
    """A package's vocabulary: every kind it may pick, the default choice, its fixed targets."""

    all: Callable[[Topology], tuple[str, ...]]  # the topology -> every kind
    default: Callable[[Topology], tuple[str, ...]]  # the topology -> default kinds
    make: Callable[[_Options, float], StartFn]
    alternate: bool
    heal: tuple[dict[str, Any], ...]
    nemesis: Callable[[Any, random.Random], Nemesis]
    default_targets: tuple[str, ...] | None = None  # None: the spec's nemesis.targets
    any_kind: bool = False  # kinds are failpoint names: any well-formed name is allowed


def _present(topo: Topology) -> tuple[str, ...]:
    """The node roles a topology has nodes in."""
    return (*(("broker_sets",) if topo.broker_sets else ()),
            *(role for role, _, nodes in topo.flat if nodes))


def _aimable(kinds: tuple[str, ...], topo: Topology) -> tuple[str, ...]:
    """``kinds`` without those aimed at a pool the topology lacks or whose role it has no nodes in
    (``isolate-master*`` without broker sets or without our cluster's pools, ``isolate-controller-leader`` without
    controllers: an etcd or Redis spec of ``members``; by :func:`nemesis.schedule.partition_aims` and the topology's
    pool table), so a default never draws a fault that can only wait for its role and complete as not effective."""
    present, aims = _present(topo), partition_aims(topo)
    return tuple(k for k in kinds if not any(lack.roles or lack.pools for lack in unserved(
        aims.get(k) or "", topo, present, frozenset(CAPABILITIES))))


def _heal(package: str) -> tuple[dict[str, Any], ...]:
    """What a package's faults may leave behind, undone: the heal ops of the rows that name the package (once
    each, in table order)."""
    out: list[dict[str, Any]] = []
    for r in ROWS:
        for op in r.heal if package in r.packages else ():
            if op not in out:
                out.append(dict(op))
    return tuple(out)


KINDS: dict[str, _Kind] = {  # by package name: the names a spec may use
    "partition": _Kind(lambda t: tuple(k for k in partition_aims(t) if k != "grudge"),
                       lambda t: _aimable(t.selectors.partition_default or PARTITION_DEFAULT, t), _partition, True,
                       _heal("partition"), PartitionNemesis),
    "kill": _Kind(lambda t: ("kill", "terminate"), lambda t: ("kill",), _process, True, _heal("kill"), ProcessNemesis),
    "pause": _Kind(lambda t: ("pause",), lambda t: ("pause",), _process, True, _heal("pause"), ProcessNemesis),
    "clock": _Kind(lambda t: CLOCK_KINDS, lambda t: CLOCK_KINDS, _clock, True, _heal("clock"), ClockNemesis),
    "packet": _Kind(lambda t: tuple(PRESETS), lambda t: tuple(PRESETS), _packet, True, _heal("packet"), PacketNemesis),
    "disk": _Kind(lambda t: DISK_KINDS, lambda t: DISK_KINDS, _disk(REPAIRABLE_MODES), True, _heal("disk"),
                  DiskNemesis, ("brokers:one", "masters")),
    "disk-corrupt": _Kind(lambda t: DISK_KINDS, lambda t: DISK_KINDS, _disk(CORRUPT_MODES), True,
                          _heal("disk-corrupt"), DiskNemesis, ("brokers:one", "masters")),
    "protocol-crash": _Kind(lambda t: tuple(p for p, _ in PROTOCOL_POINTS),
                            lambda t: _aimed_points(t),
                            lambda o, i: _protocol_crash(o, i, False), False, _heal("protocol-crash"),
                            FailpointNemesis, any_kind=True),
    "registration-crash": _Kind(lambda t: REGISTRATION_POINTS, lambda t: REGISTRATION_POINTS, _registration_crash,
                                False, _heal("registration-crash"), RegistrationCrashNemesis),
}
ALIASES = {"all": ["partition", "kill", "pause", "clock", "packet", "disk"], "leader-chaos": ["partition", "kill"]}


def expand(names: Sequence[str]) -> list[str]:
    out: list[str] = []
    for n in names:
        for m in ALIASES.get(n, [n]):
            if m not in out:
                out.append(m)
    return out


def _lacks(selector: str, topo: Topology) -> bool:
    """Whether the topology lacks a pool ``selector`` draws from, or nodes in the roles one draws from."""
    return any(lack.roles or lack.pools for lack in unserved(selector, topo, _present(topo), frozenset(CAPABILITIES)))


def _aimed_points(topo: Topology) -> tuple[str, ...]:
    """``protocol-crash``'s default walk: the points whose target ``topo`` has (without broker sets, not the master's
    step); every point when it has none of them (a system of members, which validation refuses the package for want of
    failpoints), so the walk is never empty."""
    return tuple(p for p, aim in PROTOCOL_POINTS if not _lacks(aim, topo)) or tuple(p for p, _ in PROTOCOL_POINTS)


def _options(name: str, raw: Mapping[str, Any] | None, targets: Sequence[str], topo: Topology) -> _Options:
    kind = KINDS[name]
    raw = raw or {}
    kinds = tuple(raw.get("kinds") or kind.default(topo))
    tg = tuple(raw.get("targets") or kind.default_targets or targets or ("one",))
    return _Options(kinds, tg)


def definitions(names: Sequence[str], *, targets: Sequence[str], options: Mapping[str, Mapping[str, Any]] | None,
                interval_s: float, topo: Topology) -> list[PackageDef]:
    """The expanded packages with their options applied (validated names assumed); the default kinds leave out
    those aimed at a pool or role ``topo`` lacks (:func:`_aimable`)."""
    out = []
    for name in expand(names):
        kind = KINDS[name]
        raw = (options or {}).get(name)
        o = _options(name, raw, targets, topo)
        if name == "protocol-crash" and raw and raw.get("targets"):
            start = _protocol_crash(o, interval_s, True)
        else:
            start = kind.make(o, interval_s)
        out.append(PackageDef(name, start, kind.alternate, kind.heal, kind.nemesis))
    return out


def _gap(rng: random.Random, interval_s: float) -> float:
    """A gap of ``interval_s`` on average, uniform in [0.5, 1.5) x interval (so packages drift apart
    instead of striking in lockstep)."""
    return interval_s * (0.5 + rng.random())


def plan(defs: Sequence[PackageDef], *, interval_s: float, time_limit_s: float, seed: int) -> tuple[Step, ...]:
    """The schedule the packages ask for (see the module docstring); pure."""
    timed_steps: list[tuple[float, int, int, Step]] = []
    for order, d in enumerate(defs):
        rng = random.Random(f"{seed}:{d.name}")
        timing = random.Random(f"{seed}:{d.name}:timing")  # apart, so options on kinds do not move the times
        t, k = _gap(timing, interval_s), 0
        while t < time_limit_s:
            op = d.start(rng, k)
            timed_steps.append((t, order, len(timed_steps), Step(round(t, 3), op["f"], op.get("value"))))
            if d.alternate:
                t += _gap(timing, interval_s)
                undo = UNDO.get(op["f"])
                if undo is not None and t < time_limit_s:
                    timed_steps.append((t, order, len(timed_steps), Step(round(t, 3), undo, None)))
            t += _gap(timing, interval_s)
            k += 1
    return tuple(s for *_, s in sorted(timed_steps, key=lambda x: x[:3]))


def validate(names: Sequence[str], targets: Sequence[str], topo: Topology, rng: random.Random | None = None, *,
             options: Mapping[str, Any] | None = None) -> None:
    """Reject unknown package names, malformed selectors and bad per-package options before the test
    starts (ValueError whose message starts with the offending key)."""
    for n in expand(names):
        if n not in KINDS:
            raise ValueError(f"unknown nemesis package {n!r}; known: {sorted(KINDS) + sorted(ALIASES)}")
    for t in targets:
        validate_target(t, topo, rng)
    for name, raw in (options or {}).items():
        key = f"nemesis.options.{name}"
        if name not in KINDS:
            raise ValueError(f"{key}: unknown package {name!r}; known: {sorted(KINDS)}")
        if not isinstance(raw, Mapping) or set(map(str, raw)) - {"kinds", "targets"}:
            raise ValueError(f"{key}: expected a mapping with keys kinds and/or targets, got {raw!r}")
        kind = KINDS[name]
        kinds = raw.get("kinds")
        if kinds is not None:
            allowed = kind.all(topo)
            if not isinstance(kinds, list) or not kinds:
                raise ValueError(f"{key}.kinds: expected a non-empty list of {', '.join(allowed)}; got {kinds!r}")
            for i, k in enumerate(kinds):
                if k not in allowed and not (kind.any_kind and isinstance(k, str) and "." in k):
                    raise ValueError(f"{key}.kinds[{i}]: unknown kind {k!r}; kinds: {', '.join(allowed)}")
                aim = partition_aims(topo).get(str(k)) if name == "partition" else None
                if aim:
                    try:
                        validate_target(aim, topo, rng)
                    except SelectorError as exc:
                        raise ValueError(f"{key}.kinds[{i}]: {k} aims at {aim!r}, which this topology cannot "
                                         f"serve ({exc})") from None
        tg = raw.get("targets")
        if tg is not None:
            if not isinstance(tg, list) or not tg:
                raise ValueError(f"{key}.targets: expected a non-empty list of selectors, got {tg!r}")
            for i, t in enumerate(tg):
                try:
                    validate_target(str(t), topo, rng)
                except SelectorError as exc:
                    raise ValueError(f"{key}.targets[{i}]: {exc}") from None


def own_selectors(name: str, raw: Any, *, topo: Topology) -> tuple[str, ...]:
    """The selectors package ``name`` aims with of its own, beyond ``nemesis.targets`` and what its options
    (``raw``) name (pure; each once): its default targets when its options give none (``disk``: ``brokers:one``,
    ``masters``), the roles its default kinds aim at by themselves (partition kinds:
    :func:`nemesis.schedule.partition_aims`; the defaults leave out those the topology lacks, :func:`_aimable`)
    and the targets of ``protocol-crash``'s walk over its kinds (:data:`PROTOCOL_POINTS`, when its options give
    no targets).  A unit test holds this to what the package plans."""
    kind = KINDS.get(name)
    if kind is None:
        return ()
    o = raw if isinstance(raw, Mapping) else {}
    given_kinds = isinstance(o.get("kinds"), list) and bool(o.get("kinds"))
    kinds = o["kinds"] if given_kinds else kind.default(topo)
    custom_targets = bool(o.get("targets"))
    found: list[str | None] = list(kind.default_targets or ()) if not custom_targets else []
    if name == "partition" and not given_kinds:  # given kinds are checked at their own key
        found += [partition_aims(topo).get(str(k)) for k in kinds]
    if name == "protocol-crash" and not custom_targets:
        points = dict(PROTOCOL_POINTS)
        found += [points.get(str(k), "one") for k in kinds]
    out: list[str] = []
    for sel in found:
        if sel and sel not in out:
            out.append(sel)
    return tuple(out)


@dataclass(frozen=True)
class Missing:
    """What the spec asks of its system and the system cannot serve: ``key`` and ``value`` say where the spec asks
    (``nemesis.packages`` and the package, ``nemesis.targets[1]`` and the selector...).  ``capability`` is a
    capability name the system does not offer, or alternatives none of which it offers, spelt ``clock-admin or
    clock-faketime``; ``role`` (then ``capability`` is empty) the node roles none of which it declares, spelt
    ``broker_sets or members``; ``pools`` (then both are empty) the pools the system has, when ``via`` names a
    word that is none of them (``masters`` for etcd); ``kinds`` (then all three are empty) the system's partition
    kinds, when ``kind`` is none of them (``isolate-master`` for etcd: our cluster's adapter adds it).  ``via``
    says how the key comes to need it (``pool 'masters'``, ``its target 'masters'``); empty when the key needs it
    directly (a package's fault, guided mode, a step's ``f``)."""

    key: str
    value: Any
    capability: str = ""
    role: str = ""
    via: str = ""
    pools: str = ""
    pool: str = ""
    """With ``pools``: the word that is no pool of the system."""
    kinds: str = ""
    kind: str = ""
    """With ``kinds``: the word that is no partition kind of the system."""

    @property
    def what(self) -> str:
        """The missing thing in words: ``the capability primaries``, ``the node role broker_sets``, ``a pool of
        the system (its pools: ...)`` or ``a partition kind of the system (its kinds: ...)``."""
        if self.kinds:
            return f"a partition kind of the system (its kinds: {self.kinds})"
        if self.pools:
            return f"a pool of the system (its pools: {self.pools})"
        return f"the node role {self.role}" if self.role else f"the capability {self.capability}"


def missing_capabilities(names: Sequence[str], offered: frozenset[str], *, targets: Sequence[str] = (),
                         options: Mapping[str, Any] | None = None, guided: bool = False,
                         schedule: Sequence[Step] = (), roles: Sequence[str] | None = None,
                         topo: Topology | None = None) -> list[Missing]:
    """What the spec asks of a system that offers the capabilities ``offered`` and, unless ``roles`` is None,
    declares the node roles ``roles``, and that system cannot serve; pure.  ``topo`` is the system's topology, whose
    pool table (:attr:`nemesis.targets.Topology.table`) says what each pool word draws from and needs; without it only
    the generic pools are known, and a word that is none of them is left to selector validation.  In this order:

    * each package (aliases expanded; unknown names are left to :func:`validate`): its faults' ``needs``
      (:func:`nemesis.faults.package_needs`), then, given the topology ``topo`` (its defaults depend on it), the
      pools of the selectors it aims with of its own (:func:`own_selectors`);
    * the selectors of ``nemesis.targets`` and ``nemesis.options.*.targets``, and the partition kinds of
      ``nemesis.options.partition.kinds``, by the pools they draw from (:func:`nemesis.targets.unserved`: each
      pool's node roles and capabilities, or a word that is no pool of the system);
    * guided mode (:data:`nemesis.faults.GUIDED_NEEDS`: nothing now, every system's clients can guide it);
    * each step of an explicit schedule: its ``f``'s ``needs``, then the pools of the selectors it hits
      (:func:`nemesis.schedule.selectors_of`: its value's targets and its partition kind's aim); a step whose
      ``f`` has no row is left to :func:`nemesis.schedule.parse`, which refuses it.
    """
    out: list[Missing] = []
    table_topo = topo if topo is not None else Topology()
    every_role = sorted({r for p in table_topo.table.values() for r in p.roles})
    declared = tuple(roles) if roles is not None else tuple(every_role)

    def need(key: str, value: Any, capabilities: Sequence[Need]) -> None:
        out.extend(Missing(key, value, str(c)) for c in capabilities if not need_met(c, offered))

    def aim(key: str, value: Any, selector: str, via: str) -> None:
        for lack in unserved(selector, table_topo, declared, offered):
            where = f"{via} (pool {lack.pool!r})" if via else f"pool {lack.pool!r}"
            if lack.pools:
                if topo is not None:  # without the system's topology its pools are unknown here
                    out.append(Missing(key, value, via=via, pools=", ".join(lack.pools), pool=lack.pool))
            elif lack.capability is not None:
                out.append(Missing(key, value, lack.capability, via=where))
            else:
                out.append(Missing(key, value, role=" or ".join(lack.roles), via=where))

    def unknown_kind(key: str, value: Any, kind: Any) -> None:
        """A partition kind that is none of the system's (another adapter's, or a typo); the rest of a malformed
        value is :func:`validate`'s or :func:`nemesis.schedule.parse`'s to refuse."""
        kinds = partition_aims(table_topo)
        if topo is not None and isinstance(kind, str) and kind not in kinds:
            out.append(Missing(key, value, via=f"kind {kind!r}", kinds=", ".join(kinds), kind=kind))

    for name in expand(names):
        need("nemesis.packages", name, package_needs(name))
        if topo is not None:  # a package's defaults depend on the topology
            for sel in own_selectors(name, (options or {}).get(name), topo=topo):
                aim("nemesis.packages", name, sel, f"its own target {sel!r}")
    for i, t in enumerate(targets):
        aim(f"nemesis.targets[{i}]", t, str(t), "")
    for name, raw in (options or {}).items():
        o = raw if isinstance(raw, Mapping) else {}
        for i, t in enumerate(o.get("targets") or () if isinstance(o.get("targets"), list) else ()):
            aim(f"nemesis.options.{name}.targets[{i}]", t, str(t), "")
        for i, k in enumerate(o.get("kinds") or () if name == "partition" and isinstance(o.get("kinds"), list)
                              else ()):
            unknown_kind(f"nemesis.options.{name}.kinds[{i}]", k, k)
            kind_aim = partition_aims(table_topo).get(str(k))
            if kind_aim:
                aim(f"nemesis.options.{name}.kinds[{i}]", k, kind_aim, f"kind {k!r} aims at {kind_aim!r}")
    if guided:
        need("nemesis.mode", "guided", GUIDED_NEEDS)
    for i, step in enumerate(schedule):
        if step.f not in ROW_OF:  # refused by nemesis.schedule.parse, which names the f
            continue
        need(f"nemesis.schedule[{i}].f", step.f, ROW_OF[step.f].needs)
        if ROW_OF[step.f].value == "partition" and isinstance(step.value, Mapping):
            kind = step.value.get("kind", "random-halves")
            unknown_kind(f"nemesis.schedule[{i}].value.kind", kind, kind)
        for sel in selectors_of(step.f, step.value, partition_aims(table_topo)):
            aim(f"nemesis.schedule[{i}].value", step.value, sel, f"its target {sel!r}")
    seen: set[tuple[str, str, str, str]] = set()  # once per key and need (two pools of a selector need primaries)
    unique = []
    for m in out:
        if (m.key, repr(m.value), m.capability, m.role) not in seen:
            seen.add((m.key, repr(m.value), m.capability, m.role))
            unique.append(m)
    return unique


@dataclass
class Composed:
    """The nemesis for a test, the generator performing its schedule, the heal ops, and the schedule."""

    nemesis: Nemesis | None
    generator: Any
    heal: Any
    schedule: tuple[Step, ...] = ()


def build(db: Specified, names: Sequence[str], *, interval_s: float, targets: Sequence[str], seed: int,
          time_limit_s: float | None = None, options: Mapping[str, Mapping[str, Any]] | None = None,
          schedule: Sequence[Step] | None = None) -> Composed:
    """Compose the named packages (see the module docstring).  With ``schedule`` the packages' random
    faults are off and the steps run as given; the nemeses of every f the schedule uses are added."""
    spec = db.spec
    defs = definitions(names, targets=targets, options=options, interval_s=interval_s,
                       topo=topology_of(spec.nodes))
    mode = getattr(getattr(spec, "nemesis", None), "mode", "random")
    if mode == "guided" and schedule is None and defs:
        return _build_guided(db, defs, interval_s=interval_s, seed=seed,
                             memory=getattr(getattr(spec, "nemesis", None), "guided_memory", None))
    if schedule is None:
        limit = float(time_limit_s if time_limit_s is not None else getattr(spec, "time_limit_s", 60.0))
        steps = plan(defs, interval_s=interval_s, time_limit_s=limit, seed=seed)
    else:
        steps = tuple(schedule)
    makers = {d.nemesis for d in defs}
    makers.update(_MAKER_BY_F[s.f] for s in steps)
    if not makers:
        return Composed(None, None, None, ())
    rng = random.Random(seed)
    members = [make(db, rng) for make in _ordered(makers)]
    heal_ops = [op for d in defs for op in d.heal] + [op for s in steps for op in _heal_for(s.f)]
    heal = [op for i, op in enumerate(heal_ops) if op not in heal_ops[:i]]
    nemesis = Accounted(compose_nemeses(members), seed=seed)
    return Composed(nemesis, timed(steps) if steps else None, heal, steps)


def _build_guided(db: Specified, defs: Sequence[PackageDef], *, interval_s: float, seed: int,
                  memory: str | None) -> Composed:
    """Guided mode (:mod:`nemesis.guided_run`): the same packages' faults, chosen during the run from what
    the cluster is observed doing; nothing is planned up front (the executed schedule is recorded).  A system the
    observer sees through its clients only (neither event reports nor ``primaries``: the observer says so at setup,
    :attr:`nemesis.guided_run.Feed.clients_only`) is guided by their outcomes.

    Raises:
        SpecError: ``memory`` names a malformed file (key ``nemesis.guided_memory``).
    """
    from nemesis.guided_run import GuidedNemesis, guided, load_memory

    try:
        start = load_memory(memory)
    except ValueError as exc:
        from harness.errors import SpecError

        raise SpecError(str(getattr(db.spec, "source", "<spec>")), "nemesis.guided_memory", memory,
                        f"a guided memory file written by an earlier guided run ({exc})") from None
    gen, feed, moves = guided(defs, seed=seed, interval_s=interval_s, start=start,
                              partition_aims=partition_aims(topology_of(db.spec.nodes)))
    makers = {d.nemesis for d in defs} | {_MAKER_BY_F[m.f] for m in moves}
    rng = random.Random(seed)
    members = [make(db, rng) for make in _ordered(makers)]
    heal_ops = [op for d in defs for op in d.heal] + [op for m in moves for op in _heal_for(m.f)]
    heal = [op for i, op in enumerate(heal_ops) if op not in heal_ops[:i]]
    return Composed(GuidedNemesis(Accounted(compose_nemeses(members), seed=seed), feed, memory), gen, heal, ())


NEMESIS_OF: dict[str, Callable[[Any, random.Random], Nemesis]] = {
    "partition": PartitionNemesis, "process": ProcessNemesis, "clock": ClockNemesis, "packet": PacketNemesis,
    "failpoint": FailpointNemesis, "disk": DiskNemesis, "registration": RegistrationCrashNemesis,
}
"""Nemesis family (:data:`nemesis.faults.NEMESES`, in that order) -> the class that performs its fs."""
_MAKER_BY_F: dict[str, Callable[[Any, random.Random], Nemesis]] = {r.f: NEMESIS_OF[r.nemesis] for r in ROWS}
"""f -> the nemesis class that performs it, by its row (a family without a class fails at import)."""


def _heal_for(f: str) -> tuple[dict[str, Any], ...]:
    """The heal ops a run that used ``f`` ends with (its row's).

    Raises:
        UnknownFault: ``f`` has no row (a schedule's steps are parsed against the table first).
    """
    return tuple(dict(op) for op in row(f, "heal").heal)


def _ordered(makers: set[Callable[[Any, random.Random], Nemesis]]) -> list[Callable[[Any, random.Random], Nemesis]]:
    order = [NEMESIS_OF[n] for n in NEMESES]
    return sorted(makers, key=order.index)
