"""Systems under test as adapters: the registry a spec's ``system:`` key is looked up in.

A *system* is what the harness tests: our own controller-and-broker cluster is one, the counter service of the
self-test another, and a third party may ship their own.  An adapter (:class:`System`) says what the harness needs
to know before anything starts: its name, the node roles it reads from the spec's ``nodes:`` map (built-in ones by
name, or rows of its own: :mod:`harness.roles`), the selector pools it adds (optional, :class:`HasSelectors`), the
capabilities
it offers (names from the one table, :data:`harness.protocols.CAPABILITIES`), how to read the spec's ``cluster:``
map (its own options: a key means what the system says it means), and how to make its DB for one run.
Validation refuses a spec that asks a system for something it does not offer (a nemesis package needing a
capability it lacks) instead of failing mid-run.

Where adapters come from, in this order:

* built in: one module per adapter under ``systems/<name>/``, listed in :data:`BUILT_IN` (module -> the name of its
  ``System`` attribute);
* third party: the Python entry-point group ``splitbrain.systems`` (:data:`ENTRY_POINT_GROUP`), each entry point
  named after the system and pointing at a ``System`` object (``name = "package.module:SYSTEM"``).  A built-in name
  cannot be taken over by an entry point: the built-in adapter is the one used.

Built-in adapters are imported by name (``importlib``), like entry points, so this module imports none of them:
the registry stays below the harness layer, while an adapter may build on the harness (our cluster's,
``systems.splitbrain``, holds its DB, options and tools; the counter's still wraps ``harness.testing.counter``).
A system with no options of its own parses ``cluster:`` with :func:`systems.options.plain_options`.

Errors (:class:`RegistryError`, a ``LookupError``): :class:`UnknownSystem` names the system and the known ones;
:class:`BrokenSystem` names the adapter or entry point that failed to load or does not describe a system, and why
-- never a traceback.  :mod:`harness.spec` turns either into a ``SpecError`` on the key ``system``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from harness.protocols import CAPABILITIES, SystemDB, SystemOptions
from harness.roles import NodeRole, RoleTableError, role_table
from nemesis.targets import Selectors

__all__ = [
    "BUILT_IN", "CAPABILITIES", "DEFAULT", "ENTRY_POINT_GROUP", "BrokenSystem", "HasSelectors", "RegistryError",
    "ReportsRecordStatus", "System", "UnknownSystem", "check", "get", "names", "selectors_of",
]

ENTRY_POINT_GROUP = "splitbrain.systems"
DEFAULT = "splitbrain"
"""The system of a spec without a ``system:`` key (every spec written before the key existed)."""

BUILT_IN: Mapping[str, str] = {
    "splitbrain": "systems.splitbrain:SYSTEM",
    "counter": "systems.counter:SYSTEM",
    "etcd": "systems.etcd.system:SYSTEM",
    "redis": "systems.redis.system:SYSTEM",
    "rabbitmq": "systems.rabbitmq.system:SYSTEM",
    "rabbitmq-mirrored": "systems.rabbitmq.system:MIRRORED",
}
"""The adapters in this repository: system name -> ``module:attribute`` of its :class:`System`."""


@runtime_checkable
class System(Protocol):
    """An adapter for one system under test.

    ``spec`` is the validated :class:`harness.spec.TestSpec` (typed loosely because this registry sits below the
    harness layer that defines it) and ``options`` what :meth:`options` parsed from its ``cluster:`` map.
    """

    @property
    def name(self) -> str:
        """The name a spec's ``system:`` key uses."""
        ...

    @property
    def roles(self) -> tuple[str | NodeRole, ...]:
        """The keys of the spec's ``nodes:`` map it reads: names of built-in roles (``controllers``,
        ``broker_sets``, ``members``: :data:`harness.roles.BUILT_IN`) or flat roles of its own
        (:class:`harness.roles.NodeRole` rows, e.g. ``NodeRole("voters", prefix="v")``).  Each flat role is a selector
        pool of its own (:mod:`nemesis.targets`)."""
        ...

    @property
    def capabilities(self) -> frozenset[str]:
        """What it lets the harness do to it: names from :data:`harness.protocols.CAPABILITIES`."""
        ...

    def options(self, raw: Mapping[str, Any], *, file: str = "<spec>") -> SystemOptions:
        """The spec's ``cluster:`` map (``raw``) as this system's options, validated before anything starts.

        Generic harness code reads only :class:`harness.protocols.SystemOptions` of the result; the adapter's
        ``make_db`` gets it whole.

        Raises:
            SpecError (:class:`harness.errors.SpecError`): in ``file``, naming ``cluster.<key>``, the value and what
                is allowed -- an unknown key included.
        """
        ...

    def make_db(self, spec: Any, options: Any) -> SystemDB:
        """A fresh DB for one run of ``spec`` with ``options`` (what :meth:`options` returned for its ``cluster:``
        map), which keeps ``spec`` (:class:`harness.protocols.SystemDB`: the nemeses read the topology from it);
        nothing starts until the runner calls ``setup``."""
        ...


@runtime_checkable
class HasSelectors(Protocol):
    """An adapter that adds selector pools of its own (optional): our cluster's ``masters``, ``controller-leader``...
    (:mod:`systems.splitbrain.selectors`).  An adapter without it has the generic pools only: one per flat role it
    declares, and ``primaries``."""

    @property
    def selectors(self) -> Selectors:
        """Its pool rows and how its nodes' roles are named (:class:`nemesis.targets.Selectors`)."""
        ...


def selectors_of(system: System) -> Selectors:
    """The pools ``system`` adds (none unless it is :class:`HasSelectors`)."""
    return system.selectors if isinstance(system, HasSelectors) else Selectors()


@runtime_checkable
class ReportsRecordStatus(Protocol):
    """An adapter that can say, from a cluster record alone, how a cluster left running is doing (optional:
    ``splitbrain cluster status`` prints the line; ours: its controller quorum's leader).  The record is what
    :func:`harness.commands._clusters.cluster_record` wrote; no DB exists in that process."""

    async def record_status(self, record: Mapping[str, Any]) -> str:
        """One line on the recorded cluster, or why it did not answer (never raises for a cluster that is down)."""
        ...


class RegistryError(LookupError):
    """A system that cannot be used; ``name`` is the system asked for."""

    def __init__(self, name: str, message: str) -> None:
        self.name = name
        super().__init__(message)


class UnknownSystem(RegistryError):
    """No built-in adapter and no entry point has that name."""


class BrokenSystem(RegistryError):
    """An adapter or entry point that failed to load, or loaded something that does not describe a system."""


EntryPoints = Callable[[], Iterable[importlib.metadata.EntryPoint]]


def _installed_entry_points() -> Iterable[importlib.metadata.EntryPoint]:
    return importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)


entry_points: EntryPoints = _installed_entry_points
"""Where third-party adapters are found; a unit test may point this at entry points it made."""


def names() -> tuple[str, ...]:
    """Every system a spec may name: the built-in ones, then the entry points', sorted (each name once)."""
    extra = sorted({ep.name for ep in entry_points()} - set(BUILT_IN))
    return (*BUILT_IN, *extra)


def check(system: object, where: str) -> System:
    """``system`` if it describes a system (see :class:`System`), else :class:`BrokenSystem` naming ``where``.

    A loaded object is checked here, once, so a mistake in an adapter is reported by name when the spec is
    read rather than as an attribute error mid-run."""
    name = getattr(system, "name", None)
    if not isinstance(system, System) or not isinstance(name, str):
        raise BrokenSystem(str(name), f"{where} is not a system adapter: it needs a name (str), roles, capabilities, "
                                      f"options(raw, file=...) and make_db(spec, options) (systems.System); got "
                                      f"{type(system).__name__}")
    caps = system.capabilities
    if not isinstance(caps, frozenset):
        raise BrokenSystem(name, f"{where}: capabilities must be a frozenset of names; got {type(caps).__name__}")
    unknown = sorted(str(c) for c in caps if c not in CAPABILITIES)
    if unknown:
        raise BrokenSystem(name, f"{where} offers unknown capabilities {unknown}; known: {', '.join(CAPABILITIES)}")
    roles = system.roles
    if not isinstance(roles, tuple) or not roles or not all(isinstance(r, str | NodeRole) for r in roles):
        raise BrokenSystem(name, f"{where}: roles must be a non-empty tuple of node-role names or "
                                 f"harness.roles.NodeRole rows; got {roles!r}")
    try:
        role_table(roles)
    except RoleTableError as exc:
        raise BrokenSystem(name, f"{where}: {exc}") from None
    if isinstance(system, HasSelectors) and not isinstance(system.selectors, Selectors):
        raise BrokenSystem(name, f"{where}: selectors must be a nemesis.targets.Selectors; got "
                                 f"{type(system.selectors).__name__}")
    return system


def _load(name: str, target: str, where: str, load: Callable[[], object]) -> System:
    try:
        obj = load()
    except Exception as exc:  # an adapter's import may fail any way at all; say which and why, not a traceback
        raise BrokenSystem(name, f"{where} ({target}) failed to load: {type(exc).__name__}: {exc}") from None
    system = check(obj, f"{where} ({target})")
    if system.name != name:
        raise BrokenSystem(name, f"{where} ({target}) is registered as {name!r} but calls itself {system.name!r}")
    return system


def _built_in(name: str) -> System:
    target = BUILT_IN[name]
    module, _, attr = target.partition(":")
    return _load(name, target, f"built-in system {name!r}", lambda: getattr(importlib.import_module(module), attr))


def get(name: str) -> System:
    """The adapter called ``name``.

    Raises:
        UnknownSystem: no adapter has that name (the message lists the known ones).
        BrokenSystem: its module or entry point failed to load, or what it names is not a system.
    """
    if name in BUILT_IN:
        return _built_in(name)
    found = [ep for ep in entry_points() if ep.name == name]
    if not found:
        raise UnknownSystem(name, f"no system called {name!r}; known: {', '.join(names())} (built in: systems/<name>/; "
                                  f"others: the entry-point group {ENTRY_POINT_GROUP!r})")
    if len(found) > 1:
        raise BrokenSystem(name, f"{len(found)} entry points in group {ENTRY_POINT_GROUP!r} are called {name!r}: "
                                 f"{', '.join(ep.value for ep in found)}; uninstall all but one")
    ep = found[0]
    return _load(name, ep.value, f"entry point {name!r} in group {ENTRY_POINT_GROUP!r}", ep.load)
