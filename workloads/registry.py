"""The workload registry: name -> builder of (client, generators, checkers).

A *workload* is what a test does to the cluster and how the result is judged (Jepsen's
``workload`` map): a client factory, the main-phase generator, an optional final generator (drains
and final reads after healing) and named checkers.  Builders receive a :class:`WorkloadContext`
(the spec, the cluster DB, the workload's options, the seed) and must validate their options,
raising ``SpecError`` naming ``workloads[i].options.<key>``.

Workloads register themselves with :func:`register`; ``splitbrain test --workload NAME`` and the
spec's ``workloads:`` list select them.  Each workload names what it needs of the system
(``register(name, needs=..., roles=...)``): the capabilities its client asks of the DB (:func:`needs`; names from
:data:`harness.protocols.CAPABILITIES`: ``register-client`` for ``register``, ``splitbrain-protocol`` for our
cluster's own workloads, which speak its wire protocol) and the node roles it talks to (:func:`roles`; names from
:data:`harness.spec.NODE_ROLES`: ``queue`` sends to broker sets).  Validation (:mod:`harness.spec`) refuses a spec
whose system lacks one, on ``workloads[i].name``, before anything starts.  The context's ``db`` is typed as the
generic :class:`harness.protocols.DB`: a workload reaches the system only through the protocol of the capability
it needs, narrowing with ``isinstance`` -- the generic ones in their builders (``SpecError`` naming the system's
DB and the capability, :func:`workloads.common.unserved`), our cluster's own where their clients first call the DB
(:class:`harness.protocols.MissingCapability`; :func:`workloads.common.wire_db`), since their builders also run
without a DB to validate options.  Several workloads can run in one test:
their generators are mixed and each op is routed to the client of the workload whose ``fs`` contains its ``f``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.errors import SpecError
from harness.protocols import DB


@dataclass(frozen=True)
class WorkloadContext:
    spec: Any  # harness.spec.TestSpec
    db: DB  # the spec's system's DB; a workload narrows it to the capability protocol it calls (module docstring)
    options: Mapping[str, Any]
    seed: int
    index: int = 0  # position in the spec's workloads list (for error paths)

    def option(self, key: str, default: Any, typ: type, allowed: str) -> Any:
        """Read and type-check one option (SpecError names ``workloads[i].options.key``)."""
        value = self.options.get(key, default)
        if typ is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
            raise SpecError(getattr(self.spec, "source", "<spec>"), f"workloads[{self.index}].options.{key}", value,
                            allowed)
        return value


@dataclass
class Workload:
    """What one workload contributes to a test."""

    name: str
    client: Any  # harness.protocols.Client (one instance is opened per worker)
    generator: Any  # client ops of the main phase
    checkers: dict[str, Any]  # name -> harness.protocols.Checker
    fs: frozenset[str]  # the op fs this workload's client handles
    final_generator: Any = None
    nemesis_packages: tuple[str, ...] = ()  # extra packages this workload needs (e.g. registration-crash)
    op_timeouts: dict[str, float] = field(default_factory=dict)  # f -> seconds, for ops slower than the default
    extra: dict[str, Any] = field(default_factory=dict)


Builder = Callable[[WorkloadContext], Workload]
_BUILDERS: dict[str, Builder] = {}
_NEEDS: dict[str, tuple[str, ...]] = {}
_ROLES: dict[str, tuple[str, ...]] = {}
_POPULATED: dict[str, tuple[str, ...]] = {}
_MODULES = ("workloads.queue", "workloads.controller_register", "workloads.broker_ids", "workloads.membership",
            "workloads.register", "workloads.generic_queue", "workloads.counter")


def register(name: str, *, needs: tuple[str, ...] = (), roles: tuple[str, ...] = (),
             populated: tuple[str, ...] | None = None) -> Callable[[Builder], Builder]:
    """Register a builder under ``name``; ``needs``: the capabilities it asks of the system; ``roles``: the node
    roles it talks to, each of which the system must declare (see the module docstring); ``populated``: those of
    ``roles`` the spec must give nodes (default: all of them; ``broker-ids`` brings brokers of its own, so it runs
    with no broker set)."""
    if populated is not None and not set(populated) <= set(roles):
        raise ValueError(f"workload {name!r}: populated roles {populated} are not among its roles {roles}")
    def deco(fn: Builder) -> Builder:
        if name in _BUILDERS and _BUILDERS[name] is not fn:
            raise ValueError(f"workload {name!r} registered twice")
        _BUILDERS[name] = fn
        _NEEDS[name] = tuple(needs)
        _ROLES[name] = tuple(roles)
        _POPULATED[name] = tuple(roles if populated is None else populated)
        return fn

    return deco


def needs(name: str) -> tuple[str, ...]:
    """The capabilities workload ``name`` needs of the system (empty for an unknown name: :func:`build` says so)."""
    _load_all()
    return _NEEDS.get(name, ())


def roles(name: str) -> tuple[str, ...]:
    """The node roles workload ``name`` talks to (empty: any node; and for an unknown name)."""
    _load_all()
    return _ROLES.get(name, ())


def populated(name: str) -> tuple[str, ...]:
    """The node roles workload ``name`` needs nodes in (a spec that gives one of them none is refused: it would
    run with nobody to talk to); empty for an unknown name."""
    _load_all()
    return _POPULATED.get(name, ())


def _load_all() -> None:
    for mod in _MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise


def names() -> list[str]:
    _load_all()
    return sorted(_BUILDERS)


def build(name: str, ctx: WorkloadContext) -> Workload:
    """Build workload ``name``.

    Raises:
        SpecError: unknown workload (naming ``workloads[i].name`` and the known ones) or bad options.
    """
    _load_all()
    if name not in _BUILDERS:
        raise SpecError(getattr(ctx.spec, "source", "<spec>"), f"workloads[{ctx.index}].name", name,
                        f"one of {sorted(_BUILDERS)}")
    return _BUILDERS[name](ctx)
