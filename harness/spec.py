"""The test spec: what a YAML test file may say, validated before anything starts.

A spec names the test, the system under test (``system:``, :mod:`systems`; our own cluster by default), the
control backend, the node roles the system declares (our cluster: controllers and broker sets of replicas; a
replicated system such as etcd: ``members``), free cluster options (validated later by the cluster module), the
workloads, the nemesis packages and schedule, the load (concurrency, rate), the phases and the seed.  Example::

    name: queue-partition
    system: splitbrain             # the system under test: an adapter of the registry (systems); the default
    backend: local                 # local | docker | ssh
    nodes:
      controllers: 3               # a count (named c1..c3) or a list of node names
      broker_sets: {count: 1, replicas: 3}   # or a list of lists of node names
      # members: 3                 # a system that declares the members role (etcd): a count (m1..m3) or names
      # voters: 3                  # a flat role an adapter declares of its own (harness.roles.NodeRole)
    cluster: {}                    # free map, checked by the cluster module
    workloads: [queue]             # names, or {name: queue, options: {...}}
    nemesis: {packages: [partition, kill], interval_s: 10, targets: [one, minority]}
    concurrency: 6                 # client worker threads
    rate: 50                       # total client ops/s (mean)
    time_limit_s: 60               # main phase length
    phases: {recovery_s: 10, final_drain_s: 30}
    checker: {availability: {write_resume_s: 8}}   # optional; keys and defaults: checker/availability
    seed: null                     # null -> chosen at load time and written to test.yaml
    test_count: 1
    leave_running: false

:func:`load_spec` raises :class:`SpecError` (a ``ValueError``) naming the file, the key path
(``nemesis.interval_s``), the value and the allowed range.  Unknown keys are errors with a
"did you mean" suggestion.  :func:`resolved_yaml` dumps the exact spec that ran.
"""

from __future__ import annotations

import difflib
import re
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from harness.errors import SpecError
from harness.roles import BUILT_IN as BUILT_IN_ROLES
from harness.roles import NodeRole, declared_names, role_table
from nemesis.targets import Selectors, Topology, topology_of

__all__ = [
    "BACKENDS",
    "NEMESIS_MODES",
    "NEMESIS_TARGETS",
    "NODE_ROLES",
    "NemesisSpec",
    "NodesSpec",
    "OVERRIDE_KEYS",
    "PhasesSpec",
    "SpecError",
    "TestSpec",
    "WorkloadSpec",
    "apply_overrides",
    "load_spec",
    "resolved_yaml",
    "spec_from_dict",
]

BACKENDS = ("local", "docker", "ssh")
NEMESIS_MODES = ("random", "guided")
NEMESIS_TARGETS = ("one", "minority", "majority", "minority-third", "primaries", "all", "controllers", "brokers")
OVERRIDE_KEYS = (
    "nodes", "time_limit", "concurrency", "rate", "nemesis", "workload", "seed", "test_count", "leave_running",
    "backend", "nemesis_mode", "sut_revision",
)
NODE_ROLES = tuple(r.name for r in BUILT_IN_ROLES)
"""The built-in roles the ``nodes:`` map can hold (:data:`harness.roles.BUILT_IN`); a system declares which of them
it reads, and may add flat roles of its own (:attr:`systems.System.roles`).  ``controllers`` and ``broker_sets`` are
our cluster's; ``members`` are the peers of a system that has one kind of node (etcd).  A role the system does not
declare has no nodes."""
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_NODE_RE = re.compile(r"^[a-z][a-z0-9-]{0,9}$")
_MAX_SEED = 2**63 - 1


@dataclass(frozen=True)
class NodesSpec:
    """Node names per role.  ``broker_sets[i]`` are the replicas of broker set i; ``members`` are the nodes of a
    system whose nodes are all alike (empty for our cluster); ``others`` the flat roles the system declares of its
    own, each row with its nodes, in the order it declares them; ``selectors`` the pools its adapter adds
    (:func:`systems.selectors_of`; not part of the spec's value: the system's name says it)."""

    controllers: tuple[str, ...]
    broker_sets: tuple[tuple[str, ...], ...]
    members: tuple[str, ...] = ()
    others: tuple[tuple[NodeRole, tuple[str, ...]], ...] = ()
    selectors: Selectors = field(default_factory=Selectors, compare=False, repr=False)

    @property
    def all(self) -> tuple[str, ...]:
        """Every node in role-table order (the order ``--nodes`` names them in)."""
        return self.topology.all

    @property
    def topology(self) -> Topology:
        """The nodes as selectors see them (:class:`nemesis.targets.Topology`)."""
        return topology_of(self)


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NemesisSpec:
    """``packages``: fault kinds (empty = none); ``interval_s``: mean time between faults;
    ``targets``: node selectors the packages draw from."""

    packages: tuple[str, ...] = ()
    interval_s: float = 10.0
    targets: tuple[str, ...] = ("one", "minority", "majority")
    schedule: tuple[Any, ...] | None = None
    """Explicit steps (:class:`nemesis.schedule.Step`); when set, the packages plan no random faults."""
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Per package: ``{kinds: [...], targets: [...]}`` -- which kinds it may pick and which targets it uses."""
    role_wait_s: float = 10.0
    """How long a role selector (``masters``, ``controller-leader``...) waits for its role to exist."""
    mode: str = "random"
    """``random``: the packages' faults planned from the seed before the run; ``guided``: the same faults chosen
    during the run from the observed cluster events (:mod:`nemesis.guided`).  A ``schedule`` overrides both."""
    modes: tuple[str, ...] = ()
    """Matrix runs (``test-all --matrix``): one cell per mode listed here (e.g. ``[random, guided]``, so a nightly
    mixes guided and random cells); empty means just ``mode``.  A single run uses ``mode``."""
    guided_memory: str | None = None
    """Guided mode: a JSON file of what the policy learned, read at the start if it exists and written at the
    end, so a campaign of runs keeps learning (relative paths are relative to the working directory)."""
    guided_load_max: float = 1.0
    """Guided mode: the client rate rises with the faults in force, from ``rate`` with none to ``rate *
    guided_load_max`` with the most the policy stacks (1 = the spec's ``rate`` throughout)."""


@dataclass(frozen=True)
class PhasesSpec:
    """``recovery_s``: wait after healing before final reads; ``final_drain_s``: limit on final reads."""

    recovery_s: float = 10.0
    final_drain_s: float = 30.0


@dataclass(frozen=True)
class TestSpec:
    __test__ = False  # not a pytest class
    name: str
    backend: str
    nodes: NodesSpec
    cluster: Mapping[str, Any]
    workloads: tuple[WorkloadSpec, ...]
    nemesis: NemesisSpec
    concurrency: int
    rate: float
    time_limit_s: float
    phases: PhasesSpec
    seed: int
    test_count: int
    leave_running: bool
    source: str = "<dict>"
    checker: Mapping[str, Any] = field(default_factory=dict)
    """Checker options beyond the workloads' own: ``availability`` (:mod:`checker.availability`)."""
    system: str = "splitbrain"
    """The system under test: a name in the adapter registry (:mod:`systems`), checked to load when the spec is read."""


# ---------------------------------------------------------------------------------------------
# Field checks: each takes (where, key, value) and returns the clean value or raises SpecError.


class _Ctx:
    def __init__(self, file: str) -> None:
        self.file = file

    def err(self, key: str, value: Any, allowed: str) -> SpecError:
        return SpecError(self.file, key, value, allowed)

    def mapping(self, key: str, value: Any, allowed_keys: tuple[str, ...]) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.err(key, value, f"a mapping with keys {list(allowed_keys)}")
        for k in value:
            if k not in allowed_keys:
                hint = difflib.get_close_matches(str(k), allowed_keys, n=1)
                did = f" (did you mean {hint[0]!r}?)" if hint else ""
                where = f"{key}.{k}" if key else str(k)
                raise self.err(where, value[k], f"a known key{did}; known: {list(allowed_keys)}")
        return value

    def int_range(self, key: str, value: Any, lo: int, hi: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise self.err(key, value, f"an integer in [{lo}, {hi}]")
        return value

    def num_range(self, key: str, value: Any, lo: float, hi: float, *, lo_open: bool = False) -> float:
        ok = isinstance(value, int | float) and not isinstance(value, bool) and value == value
        if not ok or not ((lo < value) if lo_open else (lo <= value)) or value > hi:
            raise self.err(key, value, f"a number in {'(' if lo_open else '['}{lo}, {hi}]")
        return float(value)

    def boolean(self, key: str, value: Any) -> bool:
        if not isinstance(value, bool):
            raise self.err(key, value, "true or false")
        return value

    def choice(self, key: str, value: Any, choices: tuple[str, ...]) -> str:
        if value not in choices:
            raise self.err(key, value, f"one of {list(choices)}")
        return str(value)

    def name(self, key: str, value: Any, pattern: re.Pattern[str], what: str) -> str:
        if not isinstance(value, str) or not pattern.match(value):
            raise self.err(key, value, what)
        return value

    def str_list(self, key: str, value: Any) -> list[Any]:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list | tuple):
            raise self.err(key, value, "a list (or comma-separated string)")
        return list(value)


_TOP_KEYS = (
    "name", "system", "backend", "nodes", "cluster", "workloads", "nemesis", "concurrency", "rate", "time_limit_s",
    "phases", "seed", "test_count", "leave_running", "checker",
)
_NODE_WHAT = "a node name: lowercase letter then up to 9 of [a-z0-9-]"


@dataclass(frozen=True)
class _Served:
    """What the spec's system serves: its name, the node roles it declares (names, and the rows in table order) and
    the capabilities it offers, and the selector pools it adds."""

    name: str
    roles: tuple[str, ...]
    capabilities: frozenset[str]
    rows: tuple[NodeRole, ...] = ()
    selectors: Selectors = field(default_factory=Selectors)

    def lacks(self, *, role: bool) -> str:
        """``..., which 'etcd' does not declare (it declares: members)`` for a role, or ``offer`` for a capability."""
        if role:
            return f"which {self.name!r} does not declare (it declares: {', '.join(self.roles)})"
        return (f"which {self.name!r} does not offer (it offers: {', '.join(sorted(self.capabilities)) or 'nothing'}; "
                f"capabilities: docs/systems.md)")


def _system(c: _Ctx, raw: Any) -> _Served:
    """``system:``: the adapter's name, the node roles it declares and the capabilities it offers.  The adapter is
    loaded here, so a name no adapter has, or one that fails to load (a broken entry point), is refused before
    anything else is read."""
    import systems

    if not isinstance(raw, str):
        raise c.err("system", raw, f"the name of a system; known: {', '.join(systems.names())}")
    try:
        system = systems.get(raw)
    except systems.UnknownSystem:
        raise c.err("system", raw, f"one of the known systems: {', '.join(systems.names())}") from None
    except systems.RegistryError as exc:
        raise c.err("system", raw, f"a system adapter that loads ({exc})") from None
    # the registry checked the roles make a table (systems.check)
    return _Served(system.name, declared_names(system.roles), frozenset(system.capabilities), role_table(system.roles),
                   systems.selectors_of(system))


def _role_nodes(c: _Ctx, raw: Any, row: NodeRole) -> tuple[str, ...]:
    """A flat role given as a count (named ``<prefix>1`` ..) or as a list of node names, within the row's bounds."""
    key = f"nodes.{row.name}"
    if isinstance(raw, list):
        if not row.lo <= len(raw) <= row.hi:
            raise c.err(key, raw, f"{row.lo} to {row.hi} node names")
        return tuple(c.name(f"{key}[{i}]", n, _NODE_RE, _NODE_WHAT) for i, n in enumerate(raw))
    return tuple(f"{row.prefix}{i + 1}" for i in range(c.int_range(key, raw, row.lo, row.hi)))


def _nodes(c: _Ctx, raw: Any, served: _Served) -> NodesSpec:
    """``nodes:``: exactly the roles the system declares (:mod:`harness.roles`).  A built-in role the system does
    not declare has no nodes, and giving it nodes is refused (etcd declares only ``members``); any other key is
    unknown.  A declared role left out gets its row's default: 3 controllers, one broker set of 3 replicas, 3
    members."""
    m = c.mapping("nodes", raw, (*NODE_ROLES, *(r.name for r in served.rows if r.name not in NODE_ROLES)))
    roles = served.roles
    for role in NODE_ROLES:
        if role not in roles and m.get(role) not in (None, 0, [], {"count": 0}):
            raise c.err(f"nodes.{role}", m[role], f"nothing: system {served.name!r} declares the roles {list(roles)}")
    if "broker_sets" not in roles:
        m = {**m, "broker_sets": {"count": 0}}
    flat = {r.name: _role_nodes(c, m.get(r.name, r.default), r) for r in served.rows if not r.sets}
    controllers, members = flat.pop("controllers", ()), flat.pop("members", ())
    others = tuple((r, flat[r.name]) for r in served.rows if r.name in flat)
    bs = m.get("broker_sets", {"count": 1, "replicas": 3})
    if isinstance(bs, list):
        if len(bs) > 16:
            raise c.err("nodes.broker_sets", bs, "at most 16 broker sets")
        sets = []
        for i, s in enumerate(bs):
            if not isinstance(s, list) or not 1 <= len(s) <= 5:
                raise c.err(f"nodes.broker_sets[{i}]", s, "a list of 1 to 5 node names")
            sets.append(tuple(c.name(f"nodes.broker_sets[{i}][{j}]", n, _NODE_RE, _NODE_WHAT) for j, n in enumerate(s)))
        broker_sets = tuple(sets)
    else:
        bm = c.mapping("nodes.broker_sets", bs, ("count", "replicas"))
        count = c.int_range("nodes.broker_sets.count", bm.get("count", 1), 0, 16)
        replicas = c.int_range("nodes.broker_sets.replicas", bm.get("replicas", 3), 1, 5)
        broker_sets = tuple(tuple(f"b{i + 1}-{j + 1}" for j in range(replicas)) for i in range(count))
    spec = NodesSpec(controllers, broker_sets, members, others, served.selectors)
    seen: set[str] = set()
    for n in spec.all:
        if n in seen:
            raise c.err("nodes", n, "each node name used once")
        seen.add(n)
    return spec


def _workloads(c: _Ctx, raw: Any, system: _Served | None = None) -> tuple[WorkloadSpec, ...]:
    """``workloads:``.  A workload whose needs the system cannot serve -- a node role it talks to that the system
    does not declare, a capability it does not offer (:func:`workloads.registry.needs` and
    :func:`~workloads.registry.roles`) -- is refused on ``workloads[i].name`` before it is built against the wrong
    DB; an unknown name is left to the registry's build, which lists the known ones."""
    items = c.str_list("workloads", raw)
    if not 1 <= len(items) <= 8:
        raise c.err("workloads", raw, "1 to 8 workloads")
    out = []
    for i, w in enumerate(items):
        key = f"workloads[{i}]"
        if isinstance(w, str):
            w = {"name": w}
        wm = c.mapping(key, w, ("name", "options"))
        name = c.name(f"{key}.name", wm.get("name"), _NAME_RE, "a workload name ([A-Za-z0-9_.-], up to 64)")
        options = wm.get("options") or {}
        if not isinstance(options, Mapping):
            raise c.err(f"{key}.options", options, "a mapping of workload options")
        out.append(WorkloadSpec(name, dict(options)))
        if system is not None:
            _refuse_unservable_workload(c, f"{key}.name", name, system)
    return tuple(out)


def _refuse_unservable_workload(c: _Ctx, key: str, name: str, system: _Served) -> None:
    from workloads import registry

    roles = [r for r in registry.roles(name) if r not in system.roles]
    if roles:
        raise c.err(key, name, f"a workload that system {system.name!r} can serve: {name!r} talks to the node role "
                    f"{', '.join(roles)}, {system.lacks(role=True)}")
    lacking = [n for n in registry.needs(name) if n not in system.capabilities]
    if lacking:
        raise c.err(key, name, f"a workload that system {system.name!r} can serve: {name!r} needs the capability "
                    f"{', '.join(lacking)}, {system.lacks(role=False)}")


def _nemesis(c: _Ctx, raw: Any, nodes: NodesSpec, system: _Served | None = None) -> NemesisSpec:
    if raw is None or raw == "none":
        return NemesisSpec()
    m = c.mapping("nemesis", raw, ("packages", "interval_s", "targets", "schedule", "options", "role_wait_s", "mode",
                                             "modes", "guided_memory", "guided_load_max"))
    packages = c.str_list("nemesis.packages", m.get("packages", []))
    if packages == ["none"]:
        packages = []
    pk = tuple(c.name(f"nemesis.packages[{i}]", p, _NAME_RE, "a nemesis package name") for i, p in enumerate(packages))
    interval = c.num_range("nemesis.interval_s", m.get("interval_s", 10.0), 0.1, 3600.0)
    targets = c.str_list("nemesis.targets", m.get("targets", list(NemesisSpec.targets)))
    if not targets:
        raise c.err("nemesis.targets", targets, "at least one target")
    if system is not None:  # before the selectors' syntax: a role the system lacks is the cause to name
        _refuse_unserved(c, system, nodes, pk, targets, m)
    tg = tuple(_target(c, f"nemesis.targets[{i}]", t, nodes) for i, t in enumerate(targets))
    options = m.get("options") or {}
    if not isinstance(options, Mapping):
        raise c.err("nemesis.options", options, "a mapping of package name -> {kinds: [...], targets: [...]}")
    role_wait = c.num_range("nemesis.role_wait_s", m.get("role_wait_s", 10.0), 0.0, 600.0)
    mode = m.get("mode", "random")
    if mode not in NEMESIS_MODES:
        raise c.err("nemesis.mode", mode, f"one of {', '.join(NEMESIS_MODES)}")
    if mode == "guided" and not pk and m.get("schedule") is None:
        raise c.err("nemesis.mode", mode, "random, or nemesis.packages to choose faults from (guided mode picks "
                    "among the packages' faults)")
    modes = c.str_list("nemesis.modes", m.get("modes", []))
    for i, one in enumerate(modes):
        if one not in NEMESIS_MODES or one in modes[:i]:
            raise c.err(f"nemesis.modes[{i}]", one, f"one of {', '.join(NEMESIS_MODES)}, each at most once")
    if "guided" in modes and not pk:
        raise c.err("nemesis.modes", modes, "nemesis.packages to choose faults from in the guided cells")
    memory = m.get("guided_memory")
    if memory is not None and (not isinstance(memory, str) or not memory.strip()):
        raise c.err("nemesis.guided_memory", memory, "a file path (JSON, written by guided runs)")
    load_max = c.num_range("nemesis.guided_load_max", m.get("guided_load_max", 1.0), 1.0, 10.0)
    return NemesisSpec(pk, interval, tg, _schedule(c, m.get("schedule"), nodes), dict(options), role_wait, mode,
                       tuple(modes), memory, load_max)


def _refuse_unserved(c: _Ctx, system: _Served, nodes: NodesSpec, packages: tuple[str, ...], targets: list[Any],
                     m: Mapping[str, Any]) -> None:
    """Refuse what the ``nemesis:`` map asks of the system and the system cannot serve: a package whose faults need
    a capability it lacks, a selector (``nemesis.targets``, a package's options or its own default targets, an
    explicit schedule step's value) drawing from a node role it does not declare, needing a capability it does not
    offer, or naming no pool it has (the pool table, :attr:`nemesis.targets.Topology.table`), a partition kind aimed
    at such a pool (``isolate-master`` on etcd), or what guided mode needs (nothing now:
    :data:`nemesis.faults.GUIDED_NEEDS`) (:func:`nemesis.packages.missing_capabilities`).  The first key wins; its
    missing capabilities are all named."""
    from nemesis.packages import missing_capabilities
    from nemesis.schedule import Step
    options = m.get("options") if isinstance(m.get("options"), Mapping) else {}
    raw_steps = m.get("schedule")
    steps = [Step(0.0, str(s.get("f")), s.get("value")) if isinstance(s, Mapping) else Step(0.0, "", None)
             for s in (raw_steps if isinstance(raw_steps, list) else [])]
    raw_modes = m.get("modes")
    modes = raw_modes.split(",") if isinstance(raw_modes, str) else raw_modes if isinstance(raw_modes, list) else []
    guided = m.get("mode") == "guided" or "guided" in [str(x).strip() for x in modes]
    missing = missing_capabilities(packages, system.capabilities, targets=[str(t) for t in targets],
                                   options=options, guided=guided, schedule=steps, roles=system.roles,
                                   topo=nodes.topology)
    if not missing:
        return
    first = missing[0]
    same = [x for x in missing if (x.key, x.value) == (first.key, first.value)]
    direct = [x.capability for x in same if not x.via and not x.role and not x.pools]
    if first.kinds:  # a partition kind that is none of this system's (another adapter's, or a typo)
        why = (f"{first.value!r}: {first.kind!r} is no partition kind of {system.name!r} (its kinds: {first.kinds}; "
               f"docs/nemeses.md){_kind_elsewhere(first.kind, system.name)}")
    elif first.pools:  # a word that is no pool of this system (another system's, or a typo)
        why = (f"{first.value!r}: {first.via + ': ' if first.via else ''}{first.pool!r} is no pool of {system.name!r} "
               f"(its pools: {first.pools}; selectors: docs/nemeses.md){_pool_elsewhere(first.pool, system.name)}")
    elif direct:  # the key itself needs them (a package's faults, guided mode, a step's f)
        why = f"{first.value!r} needs {', '.join(direct)}, {system.lacks(role=False)}"
    else:
        why = f"{first.value!r}: {first.via} needs {first.what}, {system.lacks(role=bool(first.role))}"
    what = "package" if first.key == "nemesis.packages" else "setting"
    raise c.err(first.key, first.value, f"a {what} that system {system.name!r} can serve: {why}")


def _other_adapters_selectors(system: str) -> Iterator[tuple[str, Selectors]]:
    """Each built-in adapter but ``system`` that loads, with the pools and partition kinds it adds (for refusals that
    say where a word would belong: :func:`_pool_elsewhere`, :func:`_kind_elsewhere`)."""
    import systems

    for name in systems.BUILT_IN:
        if name == system:
            continue
        try:
            own = systems.selectors_of(systems.get(name))
        except systems.RegistryError:
            continue
        yield name, own


def _pool_elsewhere(word: str, system: str) -> str:
    """``; 'masters' is a pool of 'splitbrain' (drawing from the node role broker_sets)`` when a built-in adapter other
    than ``system`` has the pool ``word``, so a refusal says what the word would need; empty otherwise.  Read only
    when a spec is refused: it loads the built-in adapters."""
    from nemesis.targets import pools_of

    homes = []
    for name, own in _other_adapters_selectors(system):
        table = Topology(selectors=own).table
        found = pools_of(word, table)
        if found and any(p.name == found[0] for p in own.pools):
            homes.append(f"{name!r} (drawing from the node role {' or '.join(table[found[0]].roles)})")
    return f"; {word!r} is a pool of {', '.join(homes)}" if homes else ""


def _kind_elsewhere(word: str, system: str) -> str:
    """``; 'isolate-master' is a partition kind of 'splitbrain' (aiming at 'masters')`` when a built-in adapter other
    than ``system`` adds the partition kind ``word`` (:attr:`nemesis.targets.Selectors.cuts`); empty otherwise.
    Read only when a spec is refused: it loads the built-in adapters."""
    homes = []
    for name, own in _other_adapters_selectors(system):
        homes += [f"{name!r} (aiming at {c.aim!r})" for c in own.cuts if c.name == word]
    return f"; {word!r} is a partition kind of {', '.join(homes)}" if homes else ""


def _schedule(c: _Ctx, raw: Any, nodes: NodesSpec) -> tuple[Any, ...] | None:
    """``nemesis.schedule``: explicit steps; :mod:`nemesis.schedule` owns the format."""
    if raw is None:
        return None
    from nemesis.schedule import ScheduleError, parse

    try:
        return parse(raw, nodes.topology)
    except ScheduleError as exc:
        step = "" if exc.index is None else f"[{exc.index}]" + (f".{exc.field}" if exc.field else "")
        value = raw if exc.index is None else raw[exc.index]
        if exc.index is not None and exc.field and isinstance(value, Mapping):
            value = value.get(exc.field.split(".")[0], value)
        raise c.err(f"nemesis.schedule{step}", value, f"a valid schedule step ({exc.message})") from None


def _target(c: _Ctx, key: str, raw: Any, nodes: NodesSpec) -> str:
    """A target selector; nemesis.targets owns the syntax (one, controllers:minority, masters, node names...)."""
    import random

    from nemesis.targets import validate as validate_target

    if not isinstance(raw, str):
        raise c.err(key, raw, f"a target selector string such as {NEMESIS_TARGETS}")
    try:
        validate_target(raw, nodes.topology, random.Random(0))
    except ValueError as exc:
        raise c.err(key, raw, str(exc)) from None
    return raw


def _checker(c: _Ctx, raw: Any) -> dict[str, Any]:
    """``checker: {availability: {...}}``; :mod:`checker.availability` owns the keys and their ranges."""
    from checker.availability import ExpectationError, validate_options

    m = c.mapping("checker", raw if raw is not None else {}, ("availability",))
    try:
        return {"availability": validate_options(m["availability"])} if m.get("availability") is not None else {}
    except ExpectationError as exc:
        key = f"checker.availability.{exc.key}" if exc.key else "checker.availability"
        raise c.err(key, exc.value, exc.allowed) from None


def _phases(c: _Ctx, raw: Any) -> PhasesSpec:
    m = c.mapping("phases", raw, ("recovery_s", "final_drain_s"))
    return PhasesSpec(
        c.num_range("phases.recovery_s", m.get("recovery_s", 10.0), 0.0, 3600.0),
        c.num_range("phases.final_drain_s", m.get("final_drain_s", 30.0), 0.0, 3600.0),
    )


def spec_from_dict(raw: Any, *, file: str = "<dict>", seed_source: Any = None) -> TestSpec:
    """Validate a parsed YAML document.  ``seed: null`` becomes a fresh random seed.

    Raises:
        SpecError: the first invalid field.
    """
    c = _Ctx(file)
    m = c.mapping("", raw if raw is not None else {}, _TOP_KEYS)
    if "name" not in m:
        raise c.err("name", None, "a test name ([A-Za-z0-9_.-], up to 64 chars)")
    served = _system(c, m.get("system", "splitbrain"))
    nodes = _nodes(c, m.get("nodes", {}), served)
    cluster = m.get("cluster") or {}
    if not isinstance(cluster, Mapping):
        raise c.err("cluster", cluster, "a mapping of cluster options")
    seed = m.get("seed")
    if seed is None:
        seed = (seed_source or secrets.randbelow)(2**31)
    return TestSpec(
        name=c.name("name", m["name"], _NAME_RE, "a test name ([A-Za-z0-9_.-], up to 64 chars)"),
        backend=c.choice("backend", m.get("backend", "local"), BACKENDS),
        nodes=nodes,
        cluster=dict(cluster),
        workloads=_workloads(c, m.get("workloads", ["queue"]), served),
        nemesis=_nemesis(c, m.get("nemesis"), nodes, served),
        concurrency=c.int_range("concurrency", m.get("concurrency", 5), 1, 1024),
        rate=c.num_range("rate", m.get("rate", 100.0), 0.0, 1_000_000.0, lo_open=True),
        time_limit_s=c.num_range("time_limit_s", m.get("time_limit_s", 60.0), 0.0, 86_400.0, lo_open=True),
        phases=_phases(c, m.get("phases", {})),
        seed=c.int_range("seed", seed, 0, _MAX_SEED),
        test_count=c.int_range("test_count", m.get("test_count", 1), 1, 10_000),
        leave_running=c.boolean("leave_running", m.get("leave_running", False)),
        source=file,
        checker=_checker(c, m.get("checker")),
        system=served.name,
    )


def apply_overrides(
    raw: Mapping[str, Any], overrides: Mapping[str, Any], *, file: str = "<overrides>"
) -> dict[str, Any]:
    """CLI-style overrides on top of the parsed YAML (before validation).

    Keys: ``nodes`` (comma list of names, assigned to controllers, then broker replicas, then members, then the
    system's own flat roles in the order it declares them: :func:`harness.roles.role_table`),
    ``time_limit``, ``concurrency``, ``rate``, ``nemesis`` (comma list of packages or "none"),
    ``workload`` (comma list of names), ``seed``, ``test_count``, ``leave_running``, ``backend``,
    ``nemesis_mode`` (``random`` | ``guided``), ``sut_revision`` (the cluster's ``revision`` option:
    :mod:`harness.revisions`).
    ``None`` values are ignored.
    """
    c = _Ctx(file)
    out = dict(raw)
    for key, value in overrides.items():
        if value is None:
            continue
        if key not in OVERRIDE_KEYS:
            hint = difflib.get_close_matches(key, OVERRIDE_KEYS, n=1)
            did = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise c.err(f"--{key}", value, f"a known override{did}; known: {list(OVERRIDE_KEYS)}")
        if key == "nodes":
            names = c.str_list("--nodes", value)
            current = spec_from_dict({**out, "seed": 0}, file=file).nodes
            if len(names) != len(current.all):
                raise c.err("--nodes", value, f"exactly {len(current.all)} node names (as many as the spec's roles)")
            it = iter(names)
            out["nodes"] = {
                "controllers": [next(it) for _ in current.controllers],
                "broker_sets": [[next(it) for _ in s] for s in current.broker_sets],
                **({"members": [next(it) for _ in current.members]} if current.members else {}),
                **{row.name: [next(it) for _ in nodes] for row, nodes in current.others},
            }
        elif key == "time_limit":
            out["time_limit_s"] = value
        elif key == "nemesis":
            nem = dict(out.get("nemesis") or {})
            nem["packages"] = c.str_list("--nemesis", value)
            out["nemesis"] = nem
        elif key == "nemesis_mode":
            nem = dict(out.get("nemesis") or {})
            nem["mode"] = value
            out["nemesis"] = nem
        elif key == "sut_revision":
            cluster = out.get("cluster") or {}
            if not isinstance(cluster, Mapping):
                raise c.err("cluster", cluster, "a mapping of cluster options")
            out["cluster"] = {**cluster, "revision": value}
        elif key == "workload":
            current_w = c.str_list("workloads", out.get("workloads", []))
            existing = {(w if isinstance(w, str) else w.get("name")): w for w in current_w}
            out["workloads"] = [existing.get(n, n) for n in c.str_list("--workload", value)]
        else:
            out[key] = value
    return out


def load_spec(path: str | Path, overrides: Mapping[str, Any] | None = None) -> TestSpec:
    """Read, override and validate a YAML spec.

    Raises:
        SpecError: unreadable file, bad YAML, or an invalid field (naming file, key, value, range).
    """
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(file, "<file>", None, f"a readable YAML file ({exc.strerror})") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError(file, "<yaml>", None, f"valid YAML ({exc})") from None
    if raw is not None and not isinstance(raw, Mapping):
        raise SpecError(file, "<top>", raw, "a mapping at the top level")
    raw = apply_overrides(raw or {}, overrides or {}, file=file)
    return spec_from_dict(raw, file=file)


def spec_to_dict(spec: TestSpec) -> dict[str, Any]:
    d = asdict(spec)
    d.pop("source", None)
    if spec.system == TestSpec.system:  # the default: a resolved spec reads as it did before the key existed
        d.pop("system")
    d["nodes"] = {"controllers": list(spec.nodes.controllers), "broker_sets": [list(s) for s in spec.nodes.broker_sets]}
    if spec.nodes.members:  # only a system that declares members has them: every other spec reads as before
        d["nodes"]["members"] = list(spec.nodes.members)
    for row, nodes in spec.nodes.others:  # a system's own flat roles, in the order it declares them
        d["nodes"][row.name] = list(nodes)
    d["workloads"] = [{"name": w.name, "options": dict(w.options)} for w in spec.workloads]
    d["nemesis"] = {
        "packages": list(spec.nemesis.packages), "interval_s": spec.nemesis.interval_s,
        "targets": list(spec.nemesis.targets),
    }
    if spec.nemesis.options:
        d["nemesis"]["options"] = {k: dict(v) for k, v in spec.nemesis.options.items()}
    if spec.nemesis.role_wait_s != NemesisSpec.role_wait_s:
        d["nemesis"]["role_wait_s"] = spec.nemesis.role_wait_s
    if spec.nemesis.mode != NemesisSpec.mode:
        d["nemesis"]["mode"] = spec.nemesis.mode
    if spec.nemesis.modes:
        d["nemesis"]["modes"] = list(spec.nemesis.modes)
    if spec.nemesis.guided_memory is not None:
        d["nemesis"]["guided_memory"] = spec.nemesis.guided_memory
    if spec.nemesis.guided_load_max != 1.0:
        d["nemesis"]["guided_load_max"] = spec.nemesis.guided_load_max
    if spec.nemesis.schedule is not None:
        from nemesis.schedule import to_data

        d["nemesis"]["schedule"] = to_data(spec.nemesis.schedule)
    d["cluster"] = dict(spec.cluster)
    if spec.checker:
        d["checker"] = {k: dict(v) for k, v in spec.checker.items()}
    else:
        d.pop("checker", None)
    return d


def resolved_yaml(spec: TestSpec) -> str:
    """The exact spec (resolved seed, defaults, explicit node names) as YAML; loading it gives ``spec`` back."""
    return yaml.safe_dump(spec_to_dict(spec), sort_keys=False)


def with_seed(spec: TestSpec, seed: int) -> TestSpec:
    return replace(spec, seed=seed)
