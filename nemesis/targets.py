"""Target selectors: which nodes a fault hits, resolved at the moment of injection.

A selector is a string.  Its atoms:

* ``one`` / ``minority`` / ``minority-third`` / ``majority`` / ``all`` -- random subsets of every node
  (``minority-third``: at most a third, at least one);
* a *pool*, by name: every flat node role the system declares is one (``controllers``, ``members``, or a role an
  adapter adds, such as ``voters``: :mod:`harness.roles`), and so is ``primaries`` (the nodes the DB says lead
  right now, :class:`harness.protocols.Primary`; unavailable while none does).  An adapter adds pools of its own
  (:class:`Selectors`): our cluster's ``brokers``, ``broker-set-N``, ``controller-leader``,
  ``controller-followers``, ``masters``, ``slaves`` and its own ``primaries`` are rows of
  :data:`systems.splitbrain.selectors.SELECTORS`;
* ``POOL:SUBSET`` -- SUBSET (one of the random subsets above) taken within the pool
  (``controllers:minority``, ``slaves:one``, ``members:one``);
* a node name, or a comma list of node names (``c1,b1-2``).

An adapter may also add partition kinds aimed at its pools (:class:`Cut`, our cluster's ``isolate-master``...).

Atoms join with ``+`` into a union (``masters+controller-followers:one``); the result is the sorted
set of nodes any atom picked.

The pools of a system are one table (:attr:`Topology.table`): one row (:class:`Pool`) per declared flat role, the
generic ``primaries``, then the adapter's rows (a row named like a generic one replaces it: our ``primaries``).  A
row says the node roles it draws from, the capabilities (:data:`harness.protocols.CAPABILITIES`) it needs, whether
it depends on who leads, and how it resolves.  :func:`unserved` reads the table to say what a system cannot serve of
a selector (a pool whose roles it does not declare, a capability it does not offer, a word that is no pool of it),
so validation refuses ``masters`` for etcd or ``primaries`` for RabbitMQ before the run, instead of a step that
waits ``role_wait_s`` and completes as not effective.

Pools that depend on who leads read the cluster's current primaries (as the DB's ``primaries`` returns them).  When
such a pool has no node right now (no leader mid-election), :func:`resolve` raises :class:`RoleUnavailable`, which
the nemesis answers by asking again until its wait runs out; a selector that can never be satisfied (an unknown
word, a broker set that does not exist) raises :class:`SelectorError`.

Everything here is pure: topology, primaries and a seeded RNG come in, node names come out.  Nothing here knows a
particular system: what only one system means lives in its adapter (``systems/<name>/``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

from harness.roles import NodeRole


class Sampler(Protocol):
    """What resolution needs of an RNG (``random.Random`` is one)."""

    def sample(self, population: Sequence[str], k: int) -> list[str]: ...

__all__ = [
    "SIMPLE", "Chooser", "Cut", "Cutter", "Lack", "Pool", "RoleNamer", "RoleUnavailable", "Resolver", "SelectorError",
    "Selectors", "Topology",
    "needs_roles", "pins", "pools_of", "resolve", "roles_of", "topology_of", "unserved", "validate",
]

SIMPLE = ("one", "minority", "minority-third", "majority", "all")

Resolver = Callable[["Topology", Sequence[str], str], Sequence[str]]
"""A pool's nodes: ``(topology, primaries, word) -> nodes`` (``word`` as the selector spells it, for a family such as
``broker-set-N``).  Pure.  Raises :class:`RoleUnavailable` (none right now) or :class:`SelectorError` (never), with a
message the caller prefixes with the selector."""

RoleNamer = Callable[[str, "Topology", Sequence[str]], "str | None"]
"""The role a node has given the primaries (``master``, ``controller-follower``), or None to leave the node to the
generic naming (``<one>-leader``, ``<one>-follower`` or ``<one>`` of its flat role)."""


@dataclass(frozen=True)
class Pool:
    """One pool a selector may name.

    Attributes:
        name: as a selector spells it; a name ending in ``-N`` is a family (``broker-set-N`` stands for every
            ``broker-set-<i>``).
        roles: the node roles (the keys of a spec's ``nodes:`` map, :mod:`harness.roles`) it draws from; a system
            must declare at least one of them.
        needs: the capabilities a system must offer for the pool to resolve (``primaries``: it says who leads).
        leads: resolved from who leads right now (it may have no node mid-election, and waits).
        resolver: its nodes (:data:`Resolver`); None: the nodes of its one flat role.
    """

    name: str
    roles: tuple[str, ...]
    needs: tuple[str, ...] = ()
    leads: bool = False
    resolver: Resolver | None = field(default=None, compare=False, repr=False)


class Chooser(Protocol):
    """What a :data:`Cutter` draws from (``random.Random`` is one)."""

    def choice(self, seq: Sequence[str]) -> str: ...


Cutter = Callable[["Topology", Sequence[str], Chooser], Mapping[str, frozenset[str]]]
"""How a :class:`Cut` groups nodes: ``(topology, the nodes its target resolved to, the step's RNG) -> grudge``
(node -> the nodes whose packets it drops, :mod:`nemesis.grudge`).  Pure."""


@dataclass(frozen=True)
class Cut:
    """A partition kind an adapter adds (``start-partition`` ``{kind: NAME}``): a cut aimed at its own pools.

    Attributes:
        name: the kind's name (``isolate-master``); never one of the generic kinds
            (:data:`nemesis.schedule.PARTITION_KINDS`).
        aim: the selector it aims at, for validation (a system that cannot serve it refuses the kind) and guided
            mode (the pools a move hits); may name more than ``target`` (the nodes it cuts a target from).
        target: the selector resolved when it strikes; its nodes go to ``cut``.
        cut: the grudge, from the topology, ``target``'s nodes and the step's RNG (:data:`Cutter`).
    """

    name: str
    aim: str
    target: str
    cut: Cutter = field(compare=False, repr=False)


@dataclass(frozen=True)
class Selectors:
    """What an adapter adds to the selector vocabulary (:attr:`systems.System` ``selectors``, optional): its pool
    rows, how its nodes' roles are named for the record of a fault (:func:`roles_of`), the partition kinds aimed
    at its pools (:class:`Cut`) and, when it has such kinds, the partition package's default kinds in the order it
    draws them (None: the generic default, :data:`nemesis.packages.PARTITION_DEFAULT`)."""

    pools: tuple[Pool, ...] = ()
    role_of: RoleNamer | None = field(default=None, compare=False, repr=False)
    cuts: tuple[Cut, ...] = ()
    partition_default: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        for what, names in (("selector pools", [p.name for p in self.pools]),
                            ("partition kinds", [c.name for c in self.cuts])):
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise ValueError(f"{what} named twice: {twice}")


_LEADS = ("primaries",)  # who leads right now is asked of the DB (harness.protocols.Primary)


@dataclass(frozen=True)
class Topology:
    """Node names per role, and the pools the system's adapter adds.

    ``controllers``, ``broker_sets`` and ``members`` are the built-in roles (:data:`harness.roles.BUILT_IN`);
    ``others`` the flat roles an adapter declares of its own, in the order it declares them; ``selectors`` the
    adapter's pools (:class:`Selectors`).
    """

    controllers: tuple[str, ...] = ()
    broker_sets: tuple[tuple[str, ...], ...] = ()
    members: tuple[str, ...] = ()
    others: tuple[tuple[NodeRole, tuple[str, ...]], ...] = ()
    selectors: Selectors = field(default_factory=Selectors)

    @property
    def brokers(self) -> tuple[str, ...]:
        return tuple(n for s in self.broker_sets for n in s)

    @property
    def all(self) -> tuple[str, ...]:
        """Every node, in role-table order (what ``one``/``minority``/... sample from)."""
        return self.controllers + self.brokers + self.members + tuple(n for _, nodes in self.others for n in nodes)

    @property
    def flat(self) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
        """``(role, one node's noun, nodes)`` of every flat role: controllers, members, then the adapter's."""
        return (("controllers", "controller", self.controllers), ("members", "member", self.members),
                *((r.name, r.one, nodes) for r, nodes in self.others))

    def broker_set_of(self, node: str) -> tuple[str, ...]:
        return next((s for s in self.broker_sets if node in s), ())

    @cached_property
    def table(self) -> Mapping[str, Pool]:
        """The pools a selector may name here, by name: one per flat role, the generic ``primaries``, then the
        adapter's rows (replacing a generic row of the same name)."""
        rows = {role: Pool(role, (role,)) for role, _, _ in self.flat}
        rows["primaries"] = Pool("primaries", tuple(rows), _LEADS, leads=True, resolver=_leading)
        rows.update((p.name, p) for p in self.selectors.pools)
        return rows


def _leading(topo: Topology, primaries: Sequence[str], word: str) -> Sequence[str]:
    """The generic ``primaries``: the nodes the DB says lead, in its order."""
    nodes = tuple(p for p in primaries if p in topo.all)
    if not nodes:
        raise RoleUnavailable("no node leads right now")
    return nodes


class _NodesLike(Protocol):
    """What :func:`topology_of` reads of a spec's nodes (:class:`harness.spec.NodesSpec`)."""

    @property
    def controllers(self) -> Sequence[str]: ...

    @property
    def broker_sets(self) -> Sequence[Sequence[str]]: ...


def topology_of(nodes: _NodesLike) -> Topology:
    """The topology of a spec's ``nodes`` (:class:`harness.spec.NodesSpec`, which carries the adapter's roles and
    selectors; a unit test's stand-in may give just controllers and broker sets)."""
    return Topology(tuple(nodes.controllers), tuple(tuple(s) for s in nodes.broker_sets),
                    tuple(getattr(nodes, "members", ())), tuple(getattr(nodes, "others", ())),
                    getattr(nodes, "selectors", None) or Selectors())


_FAMILY = re.compile(r"^(?P<stem>[a-z]+(?:-[a-z]+)*)-(?P<index>\d+)$")
_POOL_WORD = re.compile(r"^[a-z]+(?:[-_][a-z]+)*$")


def _row(table: Mapping[str, Pool], word: str) -> Pool | None:
    """The row ``word`` names: its own, or its family's (``broker-set-2`` -> ``broker-set-N``)."""
    if word in table:
        return table[word]
    m = _FAMILY.match(word)
    return table.get(f"{m['stem']}-N") if m else None


class SelectorError(ValueError):
    """A selector that no cluster state can satisfy: bad syntax, an unknown node or broker set."""


class RoleUnavailable(ValueError):
    """A role selector that has no node right now (e.g. no controller leader mid-election); asking
    again later may succeed."""


def _subset(kind: str, nodes: Sequence[str], rng: Sampler) -> list[str]:
    nodes = list(nodes)
    if not nodes or kind == "all":
        return nodes
    n = {"one": 1, "minority": max(1, (len(nodes) - 1) // 2), "minority-third": max(1, (len(nodes) - 1) // 3),
         "majority": len(nodes) // 2 + 1}[kind]
    return sorted(rng.sample(nodes, n))


def _pool(selector: str, word: str, topo: Topology, primaries: Sequence[str]) -> Sequence[str]:
    row = _row(topo.table, word)
    if row is None:
        raise SelectorError(f"target {selector!r}: {word!r} is not a pool; pools: {', '.join(topo.table)}")
    if row.resolver is None:
        return next((nodes for role, _, nodes in topo.flat if role == row.roles[0]), ())
    try:
        return row.resolver(topo, primaries, word)
    except RoleUnavailable as exc:
        raise RoleUnavailable(f"target {selector!r}: {exc}") from None
    except SelectorError as exc:
        raise SelectorError(f"target {selector!r}: {exc}") from None


def _atom(selector: str, atom: str, topo: Topology, primaries: Sequence[str], rng: Sampler) -> list[str]:
    if not atom:
        raise SelectorError(f"target {selector!r}: empty term (write terms joined by '+', e.g. masters+slaves:one)")
    if atom in SIMPLE:
        return _subset(atom, topo.all, rng)
    if ":" in atom:
        scope, inner = atom.split(":", 1)
        if inner not in SIMPLE:
            raise SelectorError(f"target {selector!r}: after {scope}: use one of {', '.join(SIMPLE)}")
        return _subset(inner, _pool(selector, scope, topo, primaries), rng)
    if _row(topo.table, atom) is not None:
        return list(_pool(selector, atom, topo, primaries))
    names = [n.strip() for n in atom.split(",") if n.strip()]
    unknown = [n for n in names if n not in topo.all]
    if not names or unknown:
        raise SelectorError(f"target {selector!r}: unknown node(s) {unknown or [atom]}; use {', '.join(SIMPLE)}, "
                            f"a pool ({', '.join(topo.table)}), POOL:SUBSET, node names, or terms joined by '+'")
    return names


def resolve(selector: str, topo: Topology, primaries: Sequence[str], rng: Sampler) -> list[str]:
    """Nodes hit by ``selector`` now, sorted.

    Args:
        selector: see the module docstring.
        topo: node names per role, and the adapter's pools.
        primaries: the nodes that lead right now, as the DB returns them (our cluster: the controller leader first,
            if known, then the broker masters).
        rng: the step's seeded RNG (random subsets draw from it, in the order the terms are written).
    Raises:
        SelectorError: the selector is malformed or names what the topology does not have.
        RoleUnavailable: a pool that depends on who leads has no node right now.
    """
    out: set[str] = set()
    for atom in selector.strip().split("+"):
        out.update(_atom(selector, atom.strip(), topo, primaries, rng))
    return sorted(out)


def _scope(atom: str) -> str:
    return atom.split(":", 1)[0].strip() if ":" in atom else atom.strip()


def _pool_name(atom: str, table: Mapping[str, Pool] | None) -> str | None:
    """The pool ``atom`` (a term of a selector, ``POOL`` or ``POOL:SUBSET``) draws from, None for a random subset
    of every node or node names.  Without a table, a word spelt like a pool (lowercase words joined by ``-`` or
    ``_``, with an optional ``-<index>`` of a family) is one: node names the harness makes carry digits."""
    scope = _scope(atom)
    if table is not None:
        row = _row(table, scope)
        return row.name if row is not None else None
    if scope in SIMPLE or not scope:
        return None
    m = _FAMILY.match(scope)
    if m:
        return f"{m['stem']}-N"
    return scope if _POOL_WORD.match(scope) else None


def pools_of(selector: str, table: Mapping[str, Pool] | None = None) -> tuple[str, ...]:
    """The pools ``selector`` draws from, in the order written, each once (pure, syntactic: random subsets of every
    node and node names draw from no pool).  With ``table`` (:attr:`Topology.table`) only its pools count; without
    one, every word spelt like a pool does (see :func:`_pool_name`)."""
    out: list[str] = []
    for atom in selector.split("+"):
        name = _pool_name(atom, table)
        if name is not None and name not in out:
            out.append(name)
    return tuple(out)


def needs_roles(selector: str, topo: Topology) -> bool:
    """Whether resolving ``selector`` needs the cluster's current primaries (pure, syntactic)."""
    return any(topo.table[p].leads for p in pools_of(selector, topo.table))


@dataclass(frozen=True)
class Lack:
    """What a system cannot serve of a selector: pool ``pool`` draws from the node roles ``roles``, none of which
    it declares; or needs the capability ``capability``, which it does not offer; or is no pool of the system at
    all (``pools``: the pools it has).  One of the three is set."""

    pool: str
    roles: tuple[str, ...] = ()
    capability: str | None = None
    pools: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.capability is not None:
            return f"pool {self.pool!r} needs the capability {self.capability}"
        if self.pools:
            return f"{self.pool!r} is no pool of the system (its pools: {', '.join(self.pools)})"
        return f"pool {self.pool!r} draws from the node role {' or '.join(self.roles)}"


def unserved(selector: str, topo: Topology, roles: Sequence[str], offered: frozenset[str] | set[str]
             ) -> tuple[Lack, ...]:
    """What a system with the pools of ``topo`` (:attr:`Topology.table`), declaring the node roles ``roles`` and
    offering the capabilities ``offered`` cannot serve of ``selector`` (pure; empty: it can).  A pool whose roles
    are all undeclared is one :class:`Lack` naming them; each capability it needs and ``offered`` lacks is another;
    a word spelt like a pool that is neither a pool of the system nor one of its nodes (``masters`` for etcd) is a
    third kind."""
    out: list[Lack] = []
    table = topo.table
    for atom in selector.split("+"):
        scope = _scope(atom)
        row = _row(table, scope)
        if row is None:
            word = _pool_name(atom, None)
            if word is not None and scope not in topo.all and all(lack.pool != scope for lack in out):
                out.append(Lack(scope, pools=tuple(table)))
            continue
        if any(lack.pool == row.name for lack in out):
            continue
        if not set(row.roles) & set(roles):
            out.append(Lack(row.name, roles=row.roles))
        out.extend(Lack(row.name, capability=c) for c in row.needs if c not in offered)
    return tuple(out)


def roles_of(nodes: Sequence[str], topo: Topology, primaries: Sequence[str]) -> dict[str, str]:
    """The role each of ``nodes`` has given ``primaries``: what the adapter names it (our cluster:
    controller-leader, controller-follower, master, slave, or plain controller/broker when the leader or its set's
    master is unknown); else, for a node of a flat role, ``<one>-leader``, ``<one>-follower``, or plain ``<one>``
    when no node of its role leads (``member-leader``...); ``unknown`` for a node of no role."""
    namer = topo.selectors.role_of
    out: dict[str, str] = {}
    for n in nodes:
        named = namer(n, topo, primaries) if namer is not None else None
        if named is not None:
            out[n] = named
            continue
        group = next(((one, members) for _, one, members in topo.flat if n in members), None)
        if group is None:
            out[n] = "unknown"
            continue
        one, members = group
        leading = [p for p in primaries if p in members]
        out[n] = f"{one}-leader" if n in leading else f"{one}-follower" if leading else one
    return out


class _First:
    """Stands in for an RNG when only the syntax matters: a "random" subset is the first nodes."""

    @staticmethod
    def sample(nodes: Sequence[str], n: int) -> list[str]:
        return list(nodes[:n])


def validate(selector: str, topo: Topology, rng: Sampler | None = None) -> None:
    """Check a selector's syntax before the test starts, against a cluster where every role exists
    (the first node of each flat role leads, and every broker set's first replica is its master).  ``rng`` is
    accepted for callers that have one; random subsets do not matter here.

    Raises:
        SelectorError: naming the selector and what is wrong.
    """
    primaries = (list(topo.controllers[:1]) + [s[0] for s in topo.broker_sets if s] + list(topo.members[:1])
                 + [nodes[0] for _, nodes in topo.others if nodes])
    try:
        resolve(selector, topo, primaries, rng if rng is not None else _First())
    except RoleUnavailable as exc:  # e.g. controller-followers with a single controller
        raise SelectorError(f"{exc}: this topology never has one") from None


def pins(nodes: Sequence[str]) -> str:
    """The selector that names exactly ``nodes`` (for replays pinned to recorded nodes)."""
    return ",".join(nodes)
