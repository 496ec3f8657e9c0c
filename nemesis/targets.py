"""Target selectors: which nodes a fault hits, resolved at the moment of injection.

A selector is a string.  Its atoms:

* ``one`` / ``minority`` / ``minority-third`` / ``majority`` / ``all`` -- random subsets of every node
  (``minority-third``: at most a third, at least one);
* a *pool* -- ``controllers``, ``brokers``, ``broker-set-N`` (the replicas of broker set N), ``members``
  (the nodes of a system whose nodes are all alike, such as etcd), or a role:
  ``controller-leader``, ``controller-followers`` (every controller but the leader), ``masters`` (every
  broker set's master), ``slaves`` (every broker set's non-masters, in sets whose master is known) and
  ``primaries`` (the controller leader and every master; unavailable until both a leader and a master
  are known, so a run and its replay pick the same roles; in a topology of members: the members that
  lead right now);
* ``POOL:SUBSET`` -- SUBSET (one of the random subsets above) taken within the pool
  (``controllers:minority``, ``slaves:one``, ``controller-followers:one``);
* a node name, or a comma list of node names (``c1,b0-1``).

Atoms join with ``+`` into a union (``masters+controller-followers:one``); the result is the sorted
set of nodes any atom picked.

Every pool has one row in :data:`POOL_TABLE`: the node roles (:data:`harness.spec.NODE_ROLES`) it draws from and
the capabilities (:data:`harness.protocols.CAPABILITIES`) it needs of the system.  :func:`unserved` reads it to say
what a system cannot serve of a selector (a pool whose roles it does not declare, a capability it does not offer),
so validation refuses ``masters`` for a system of ``members`` (etcd) or ``primaries`` for one that cannot say who
leads (RabbitMQ) before the run, instead of a step that waits ``role_wait_s`` and completes as not effective.

Role atoms need the cluster's current roles (``primaries``: the controller leader first, if known,
then the broker masters, as :meth:`systems.splitbrain.db.SplitbrainDB.primaries` returns them; for members, the
members that say they lead, as :meth:`systems.etcd.db.EtcdDB.primaries` returns them).  When a role
has no node right now (no leader mid-election), :func:`resolve` raises :class:`RoleUnavailable`, which
the nemesis answers by asking again until its wait runs out; a selector that can never be satisfied
(an unknown word, a broker set that does not exist) raises :class:`SelectorError`.

Everything here is pure: topology, roles and a seeded RNG come in, node names come out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


class Sampler(Protocol):
    """What resolution needs of an RNG (``random.Random`` is one)."""

    def sample(self, population: Sequence[str], k: int) -> list[str]: ...

__all__ = [
    "POOLS", "POOL_OF", "POOL_TABLE", "ROLE_POOLS", "SIMPLE", "Lack", "Pool", "RoleUnavailable", "SelectorError",
    "Topology", "needs_roles", "pins", "pools_of", "resolve", "roles_of", "unserved", "validate",
]


@dataclass(frozen=True)
class Topology:
    """Node names per role: our cluster's controllers and broker sets, and the ``members`` of a system whose
    nodes are all alike (an adapter declaring the ``members`` role; empty for our cluster)."""

    controllers: tuple[str, ...]
    broker_sets: tuple[tuple[str, ...], ...]
    members: tuple[str, ...] = ()

    @property
    def brokers(self) -> tuple[str, ...]:
        return tuple(n for s in self.broker_sets for n in s)

    @property
    def all(self) -> tuple[str, ...]:
        return self.controllers + self.brokers + self.members

    def broker_set_of(self, node: str) -> tuple[str, ...]:
        return next((s for s in self.broker_sets if node in s), ())


SIMPLE = ("one", "minority", "minority-third", "majority", "all")


@dataclass(frozen=True)
class Pool:
    """One pool a selector may name.

    Attributes:
        name: as a selector spells it (``broker-set-N`` stands for every ``broker-set-<i>``).
        roles: the node roles (the keys of a spec's ``nodes:`` map, :attr:`systems.System.roles`) it draws from;
            a system must declare at least one of them.
        needs: the capabilities a system must offer for the pool to resolve (``primaries``: it says who leads).
        leads: resolved from who leads right now (a *role* pool: it may have no node mid-election, and waits).
    """

    name: str
    roles: tuple[str, ...]
    needs: tuple[str, ...] = ()
    leads: bool = False


_LEADS = ("primaries",)  # who leads right now is asked of the DB (harness.protocols.Primary)
POOL_TABLE: tuple[Pool, ...] = (
    Pool("controllers", ("controllers",)),
    Pool("brokers", ("broker_sets",)),
    Pool("broker-set-N", ("broker_sets",)),
    Pool("members", ("members",)),
    Pool("controller-leader", ("controllers",), _LEADS, leads=True),
    Pool("controller-followers", ("controllers",), _LEADS, leads=True),
    Pool("masters", ("broker_sets",), _LEADS, leads=True),
    Pool("slaves", ("broker_sets",), _LEADS, leads=True),
    # our cluster: the controller leader and every master (broker sets); a system of members: whoever leads
    Pool("primaries", ("broker_sets", "members"), _LEADS, leads=True),
)
"""Every pool, with what it needs of the system (see :class:`Pool`); :data:`POOLS` and :data:`ROLE_POOLS` derive
from it, and :func:`unserved` reads it."""
POOL_OF: dict[str, Pool] = {p.name: p for p in POOL_TABLE}
POOLS = tuple(POOL_OF)
ROLE_POOLS = tuple(p.name for p in POOL_TABLE if p.leads)


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


@dataclass(frozen=True)
class _Roles:
    leader: tuple[str, ...]
    masters: tuple[str, ...]
    leading_members: tuple[str, ...] = ()

    @staticmethod
    def of(topo: Topology, primaries: Sequence[str]) -> _Roles:
        return _Roles(tuple(p for p in primaries if p in topo.controllers)[:1],
                      tuple(p for p in primaries if p in topo.brokers),
                      tuple(p for p in primaries if p in topo.members))

    def slaves(self, topo: Topology) -> tuple[str, ...]:
        return tuple(n for s in topo.broker_sets if any(m in s for m in self.masters) for n in s
                     if n not in self.masters)


def _pool(selector: str, name: str, topo: Topology, roles: _Roles) -> Sequence[str]:
    if name == "controllers":
        return topo.controllers
    if name == "brokers":
        return topo.brokers
    if name == "members":
        return topo.members
    if name.startswith("broker-set-") and name[len("broker-set-"):].isdigit():
        i = int(name[len("broker-set-"):])
        if i >= len(topo.broker_sets):
            raise SelectorError(f"target {selector!r}: there are only {len(topo.broker_sets)} broker sets "
                                f"(broker-set-0 .. broker-set-{len(topo.broker_sets) - 1})")
        return topo.broker_sets[i]
    if name not in ROLE_POOLS:
        raise SelectorError(f"target {selector!r}: {name!r} is not a pool; pools: {', '.join(POOLS)}")
    if name == "primaries" and topo.members and not (topo.controllers or topo.broker_sets):
        if not roles.leading_members:  # a topology of members: whoever leads among them (etcd: its leader)
            raise RoleUnavailable(f"target {selector!r}: no member leads right now")
        return roles.leading_members
    if name in ("masters", "slaves", "primaries") and not topo.broker_sets:
        raise SelectorError(f"target {selector!r}: {name} needs broker sets and this topology has none")
    pool = {
        "controller-leader": roles.leader,
        "controller-followers": tuple(c for c in topo.controllers if c not in roles.leader) if roles.leader else (),
        "masters": roles.masters,
        "slaves": roles.slaves(topo),
        # both parts: with the leader missing mid-election, "primaries" would be just the masters in one run
        # and leader + masters in its replay (seen in the determinism bench)
        "primaries": roles.leader + roles.masters if roles.leader and roles.masters else (),
    }[name]
    if not pool:
        raise RoleUnavailable(f"target {selector!r}: no {name} right now (controller leader: "
                              f"{list(roles.leader) or 'unknown'}, masters: {list(roles.masters) or 'none known'})")
    return pool


def _atom(selector: str, atom: str, topo: Topology, roles: _Roles, rng: Sampler) -> list[str]:
    if not atom:
        raise SelectorError(f"target {selector!r}: empty term (write terms joined by '+', e.g. masters+slaves:one)")
    if atom in SIMPLE:
        return _subset(atom, topo.all, rng)
    if ":" in atom:
        scope, inner = atom.split(":", 1)
        if inner not in SIMPLE:
            raise SelectorError(f"target {selector!r}: after {scope}: use one of {', '.join(SIMPLE)}")
        return _subset(inner, _pool(selector, scope, topo, roles), rng)
    if atom in POOLS or atom.startswith("broker-set-"):
        return list(_pool(selector, atom, topo, roles))
    names = [n.strip() for n in atom.split(",") if n.strip()]
    unknown = [n for n in names if n not in topo.all]
    if not names or unknown:
        raise SelectorError(f"target {selector!r}: unknown node(s) {unknown or [atom]}; use {', '.join(SIMPLE)}, "
                            f"a pool ({', '.join(POOLS)}), POOL:SUBSET, node names, or terms joined by '+'")
    return names


def resolve(selector: str, topo: Topology, primaries: Sequence[str], rng: Sampler) -> list[str]:
    """Nodes hit by ``selector`` now, sorted.

    Args:
        selector: see the module docstring.
        topo: node names per role.
        primaries: controller leader first (if known), then broker masters, or the leading members (as returned
            by the DB).
        rng: the step's seeded RNG (random subsets draw from it, in the order the terms are written).
    Raises:
        SelectorError: the selector is malformed or names what the topology does not have.
        RoleUnavailable: a role term has no node right now.
    """
    roles = _Roles.of(topo, primaries)
    out: set[str] = set()
    for atom in selector.strip().split("+"):
        out.update(_atom(selector, atom.strip(), topo, roles, rng))
    return sorted(out)


def _pool_name(atom: str) -> str | None:
    """The pool ``atom`` (a term of a selector, ``POOL`` or ``POOL:SUBSET``) draws from, None for a random subset
    of every node or node names."""
    scope = atom.split(":", 1)[0].strip() if ":" in atom else atom.strip()
    if scope.startswith("broker-set-") and scope[len("broker-set-"):].isdigit():
        return "broker-set-N"
    return scope if scope in POOL_OF else None


def pools_of(selector: str) -> tuple[str, ...]:
    """The pools (:data:`POOL_TABLE` names) ``selector`` draws from, in the order written, each once (pure,
    syntactic: random subsets of every node and node names draw from no pool)."""
    out: list[str] = []
    for atom in selector.split("+"):
        name = _pool_name(atom)
        if name is not None and name not in out:
            out.append(name)
    return tuple(out)


def needs_roles(selector: str) -> bool:
    """Whether resolving ``selector`` needs the cluster's current roles (pure, syntactic)."""
    return any(POOL_OF[p].leads for p in pools_of(selector))


@dataclass(frozen=True)
class Lack:
    """What a system cannot serve of a selector: pool ``pool`` draws from the node roles ``roles``, none of which
    it declares, or needs the capability ``capability``, which it does not offer (one of the two is set)."""

    pool: str
    roles: tuple[str, ...] = ()
    capability: str | None = None

    def __str__(self) -> str:
        if self.capability is not None:
            return f"pool {self.pool!r} needs the capability {self.capability}"
        return f"pool {self.pool!r} draws from the node role {' or '.join(self.roles)}"


def unserved(selector: str, roles: Sequence[str], offered: frozenset[str] | set[str]) -> tuple[Lack, ...]:
    """What a system declaring the node roles ``roles`` and offering the capabilities ``offered`` cannot serve of
    ``selector``, by :data:`POOL_TABLE` (pure; empty: it can).  A pool whose roles are all undeclared is one
    :class:`Lack` naming them; each capability it needs and ``offered`` lacks is another."""
    out: list[Lack] = []
    for name in pools_of(selector):
        pool = POOL_OF[name]
        if not set(pool.roles) & set(roles):
            out.append(Lack(name, roles=pool.roles))
        out.extend(Lack(name, capability=c) for c in pool.needs if c not in offered)
    return tuple(out)


def roles_of(nodes: Sequence[str], topo: Topology, primaries: Sequence[str]) -> dict[str, str]:
    """The role each of ``nodes`` has given ``primaries``: controller-leader, controller-follower,
    master, slave, or plain controller/broker when the leader or its set's master is unknown; for members,
    member-leader, member-follower, or plain member when no member leads."""
    roles = _Roles.of(topo, primaries)
    out: dict[str, str] = {}
    for n in nodes:
        if n in topo.controllers:
            out[n] = ("controller-leader" if n in roles.leader else
                      "controller-follower" if roles.leader else "controller")
        elif n in topo.members:
            out[n] = ("member-leader" if n in roles.leading_members else
                      "member-follower" if roles.leading_members else "member")
        elif n in roles.masters:
            out[n] = "master"
        elif any(m in topo.broker_set_of(n) for m in roles.masters):
            out[n] = "slave"
        else:
            out[n] = "broker" if n in topo.brokers else "unknown"
    return out


class _First:
    """Stands in for an RNG when only the syntax matters: a "random" subset is the first nodes."""

    @staticmethod
    def sample(nodes: Sequence[str], n: int) -> list[str]:
        return list(nodes[:n])


def validate(selector: str, topo: Topology, rng: Sampler | None = None) -> None:
    """Check a selector's syntax before the test starts, against a cluster where every role exists
    (the first controller leads, every set's first replica is master, the first member leads).  ``rng`` is accepted for
    callers that have one; random subsets do not matter here.

    Raises:
        SelectorError: naming the selector and what is wrong.
    """
    primaries = list(topo.controllers[:1]) + [s[0] for s in topo.broker_sets if s] + list(topo.members[:1])
    try:
        resolve(selector, topo, primaries, rng if rng is not None else _First())
    except RoleUnavailable as exc:  # e.g. controller-followers with a single controller
        raise SelectorError(f"{exc}: this topology never has one") from None


def pins(nodes: Sequence[str]) -> str:
    """The selector that names exactly ``nodes`` (for replays pinned to recorded nodes)."""
    return ",".join(nodes)

