"""Our cluster's selector pools: the words a fault's target may use that only this cluster means.

The generic vocabulary (random subsets, one pool per declared flat role such as ``controllers``, node names,
``+`` unions) is :mod:`nemesis.targets`.  This cluster adds, as rows of :data:`SELECTORS`:

* ``brokers`` -- every broker replica; ``broker-set-N`` -- the replicas of broker set N (from 0);
* ``controller-leader`` -- the controller that leads (the first controller among the primaries);
* ``controller-followers`` -- every controller but the leader (none while the leader is unknown);
* ``masters`` -- every broker set's master; ``slaves`` -- the non-masters of every set whose master is known;
* ``primaries`` -- the controller leader and every master, replacing the generic row (the nodes the DB says lead):
  unavailable until both a leader and a master are known, so a run and its replay pick the same roles.

It adds partition kinds aimed at those pools, as the :data:`SELECTORS`' cuts (:class:`nemesis.targets.Cut`):

* ``isolate-controller-leader`` -- the controller leader cut off from every node;
* ``isolate-master`` -- one master (drawn from ``masters``) cut off from every node;
* ``isolate-master-from-slaves`` -- one master cut off from the other replicas of its set (they from it);
* ``isolate-master-from-controllers`` -- one master cut off from the controllers (they from it).

Primaries are what :meth:`systems.splitbrain.db.SplitbrainDB.primaries` returns: the controller leader first, if
known, then the broker masters.  :func:`role_of` names the role a node had when a fault hit it (controller-leader,
controller-follower, master, slave, or plain controller/broker when the leader or its set's master is unknown).

Pure: the rows are data and their resolvers functions of the topology and the primaries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from nemesis import grudge as gr
from nemesis.targets import Chooser, Cut, Pool, Resolver, RoleUnavailable, SelectorError, Selectors, Topology

__all__ = ["SELECTORS", "role_of"]

_LEADS = ("primaries",)  # who leads right now is asked of the DB (harness.protocols.Primary)


@dataclass(frozen=True)
class _Roles:
    """Who leads, read from the primaries: the controller leader (at most one) and the masters."""

    leader: tuple[str, ...]
    masters: tuple[str, ...]

    @staticmethod
    def of(topo: Topology, primaries: Sequence[str]) -> _Roles:
        return _Roles(tuple(p for p in primaries if p in topo.controllers)[:1],
                      tuple(p for p in primaries if p in topo.brokers))

    def slaves(self, topo: Topology) -> tuple[str, ...]:
        return tuple(n for s in topo.broker_sets if any(m in s for m in self.masters) for n in s
                     if n not in self.masters)

    def unavailable(self, word: str) -> RoleUnavailable:
        return RoleUnavailable(f"no {word} right now (controller leader: {list(self.leader) or 'unknown'}, "
                               f"masters: {list(self.masters) or 'none known'})")


def _brokers(topo: Topology, primaries: Sequence[str], word: str) -> Sequence[str]:
    return topo.brokers


def _broker_set(topo: Topology, primaries: Sequence[str], word: str) -> Sequence[str]:
    i = int(word.rsplit("-", 1)[1])
    if i >= len(topo.broker_sets):
        raise SelectorError(f"there are only {len(topo.broker_sets)} broker sets "
                            f"(broker-set-0 .. broker-set-{len(topo.broker_sets) - 1})")
    return topo.broker_sets[i]


def _lead(pick: str, topo: Topology, primaries: Sequence[str], word: str) -> Sequence[str]:
    """The nodes of ``pick``, one of the pools that depend on who leads."""
    if pick in ("masters", "slaves", "primaries") and not topo.broker_sets:
        raise SelectorError(f"{word} needs broker sets and this topology has none")
    roles = _Roles.of(topo, primaries)
    nodes = {
        "controller-leader": roles.leader,
        "controller-followers": tuple(c for c in topo.controllers if c not in roles.leader) if roles.leader else (),
        "masters": roles.masters,
        "slaves": roles.slaves(topo),
        # both parts: with the leader missing mid-election, "primaries" would be just the masters in one run
        # and leader + masters in its replay (seen in the determinism bench)
        "primaries": roles.leader + roles.masters if roles.leader and roles.masters else (),
    }[pick]
    if not nodes:
        raise roles.unavailable(word)
    return nodes


def _leading(pick: str) -> Resolver:
    """The resolver of the pool ``pick`` (a partial of a module-level function, so a spec holding it pickles)."""
    return partial(_lead, pick)


def role_of(node: str, topo: Topology, primaries: Sequence[str]) -> str | None:
    """The role ``node`` has given ``primaries`` (see the module docstring); None for a node of no role of ours."""
    roles = _Roles.of(topo, primaries)
    if node in topo.controllers:
        return "controller-leader" if node in roles.leader else "controller-follower" if roles.leader else "controller"
    if node in roles.masters:
        return "master"
    if any(m in topo.broker_set_of(node) for m in roles.masters):
        return "slave"
    return "broker" if node in topo.brokers else None


def _isolate(topo: Topology, nodes: Sequence[str], rng: Chooser) -> Mapping[str, frozenset[str]]:
    """``nodes`` (the controller leader) cut off from every node."""
    return gr.isolate(nodes, list(topo.all))


def _master(cut_from: str, topo: Topology, masters: Sequence[str], rng: Chooser) -> Mapping[str, frozenset[str]]:
    """One of ``masters`` (one draw of the RNG) cut off from ``cut_from``: ``all`` nodes, its set's ``slaves``,
    or the ``controllers``."""
    master = rng.choice(masters)
    if cut_from == "all":
        return gr.isolate([master], list(topo.all))
    others = topo.broker_set_of(master) if cut_from == "slaves" else topo.controllers
    return gr.isolate_from(master, others)


SELECTORS = Selectors(
    pools=(
        Pool("brokers", ("broker_sets",), resolver=_brokers),
        Pool("broker-set-N", ("broker_sets",), resolver=_broker_set),
        Pool("controller-leader", ("controllers",), _LEADS, leads=True, resolver=_leading("controller-leader")),
        Pool("controller-followers", ("controllers",), _LEADS, leads=True,
             resolver=_leading("controller-followers")),
        Pool("masters", ("broker_sets",), _LEADS, leads=True, resolver=_leading("masters")),
        Pool("slaves", ("broker_sets",), _LEADS, leads=True, resolver=_leading("slaves")),
        Pool("primaries", ("broker_sets",), _LEADS, leads=True, resolver=_leading("primaries")),
    ),
    role_of=role_of,
    cuts=(
        Cut("isolate-controller-leader", "controller-leader", "controller-leader", _isolate),
        Cut("isolate-master", "masters", "masters", partial(_master, "all")),
        Cut("isolate-master-from-slaves", "masters", "masters", partial(_master, "slaves")),  # and that set's slaves
        Cut("isolate-master-from-controllers", "masters+controllers", "masters", partial(_master, "controllers")),
    ),
    partition_default=("random-halves", "isolate", "isolate-controller-leader", "isolate-master", "majorities-ring",
                       "bridge", "one-way"),
)
"""Our cluster's pools (the ``selectors`` of :data:`systems.splitbrain.SYSTEM`)."""
