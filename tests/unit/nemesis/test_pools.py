"""The pool table (nemesis/targets.py Topology.table: the generic rows and our cluster's, systems/splitbrain/
selectors.py): what each selector pool draws from and needs, and the places
that read it -- the pure checks of a selector against a system's roles and capabilities, the selectors a step
or a package aims with (nemesis/schedule.py selectors_of, PARTITION_AIMS; nemesis/packages.py own_selectors),
and the partition nemesis, which must ask for no pool its kind's row does not name."""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.protocols import CAPABILITIES
from harness.spec import NODE_ROLES, NodesSpec
from nemesis.guided import Move, aims_of
from nemesis.packages import KINDS, definitions, own_selectors
from nemesis.partition import PartitionNemesis
from nemesis.schedule import PARTITION_AIMS, PARTITION_KINDS, partition_aims, selectors_of
from nemesis.targets import (
    SIMPLE,
    Lack,
    RoleUnavailable,
    SelectorError,
    Topology,
    needs_roles,
    pools_of,
    resolve,
    unserved,
    validate,
)
from systems.splitbrain.selectors import SELECTORS

ALL = frozenset(CAPABILITIES)
OURS = Topology(("c1", "c2", "c3"), (("b1-1", "b1-2", "b1-3"),), selectors=SELECTORS)
ETCD = Topology(members=("m1", "m2", "m3"))
POOL_OF = OURS.table
POOLS = tuple(POOL_OF)


def test_every_pool_draws_from_known_roles_and_needs_known_capabilities() -> None:
    for pool in POOL_OF.values():
        assert pool.roles and set(pool.roles) <= set(NODE_ROLES), pool
        assert set(pool.needs) <= set(CAPABILITIES), pool
        assert pool.leads == bool(pool.needs), pool  # only who leads is asked of the system
    assert tuple(p for p in POOLS if POOL_OF[p].leads) == (
        "primaries", "controller-leader", "controller-followers", "masters", "slaves")
    assert set(POOLS) == {"controllers", "members", "brokers", "broker-set-N", "controller-leader",
                          "controller-followers", "masters", "slaves", "primaries"}
    assert tuple(ETCD.table) == ("controllers", "members", "primaries")  # the generic rows only


@pytest.mark.parametrize(("selector", "pools"), [
    ("one", ()),
    ("c1,b1-2", ()),
    ("masters", ("masters",)),
    ("slaves:one", ("slaves",)),
    ("masters+controller-followers:one+masters", ("masters", "controller-followers")),
    ("broker-set-3:minority", ("broker-set-N",)),
    (" members : one + primaries", ("members", "primaries")),
])
def test_pools_of_reads_each_term(selector: str, pools: tuple[str, ...]) -> None:
    assert pools_of(selector, OURS.table) == pools
    assert pools_of(selector) == pools  # spelt like pools: the same without a table


def test_pools_of_with_a_table_counts_only_its_pools() -> None:
    assert pools_of("masters+members:one", ETCD.table) == ("members",)
    assert pools_of("masters+members:one") == ("masters", "members")


_ETCD_POOLS = ("controllers", "members", "primaries")


@pytest.mark.parametrize(("selector", "topo", "roles", "offered", "lacks"), [
    ("masters", ETCD, ("members",), ALL, (Lack("masters", pools=_ETCD_POOLS),)),
    ("masters", OURS, ("members",), frozenset(), (Lack("masters", roles=("broker_sets",)),
                                                  Lack("masters", capability="primaries"))),
    ("primaries", ETCD, ("members",), frozenset({"kill"}), (Lack("primaries", capability="primaries"),)),
    ("primaries", OURS, ("controllers",), ALL, (Lack("primaries", roles=("broker_sets",)),)),
    ("controller-leader", ETCD, ("members",), ALL, (Lack("controller-leader", pools=_ETCD_POOLS),)),
    ("controllers:one+members", ETCD, ("members",), ALL, (Lack("controllers", roles=("controllers",)),)),
    ("members:one", ETCD, ("members",), frozenset(), ()),
    ("m1,m2+m1", ETCD, ("members",), frozenset(), ()),  # node names are no pools
    ("one", ETCD, ("members",), frozenset(), ()),
    ("masters+slaves:one", OURS, ("controllers", "broker_sets"), ALL, ()),
    ("broker-set-0:one+broker-set-9", OURS, ("broker_sets",), ALL, ()),  # one family, once
])
def test_unserved_names_each_missing_role_and_capability(selector: str, topo: Topology, roles: tuple[str, ...],
                                                         offered: frozenset[str], lacks: tuple[Lack, ...]) -> None:
    assert unserved(selector, topo, roles, offered) == lacks


def test_a_lack_says_what_is_missing() -> None:
    assert str(Lack("masters", roles=("broker_sets",))) == "pool 'masters' draws from the node role broker_sets"
    assert str(Lack("primaries", capability="primaries")) == "pool 'primaries' needs the capability primaries"
    assert str(Lack("masters", pools=_ETCD_POOLS)) == ("'masters' is no pool of the system (its pools: controllers, "
                                                        "members, primaries)")


_ATOMS = st.sampled_from([*SIMPLE, *(p for p in POOLS if p != "broker-set-N"), "broker-set-0", "c1"])
_SUBSET = st.sampled_from(["", *(f":{s}" for s in SIMPLE)])
_TERMS = st.lists(st.tuples(_ATOMS, _SUBSET).map(lambda t: t[0] + (t[1] if t[0] not in SIMPLE + ("c1",) else "")),
                  min_size=1, max_size=4)


@settings(max_examples=300, deadline=None)
@given(_TERMS)
def test_needs_roles_and_pools_follow_the_table(terms: list[str]) -> None:
    selector = "+".join(terms)
    pools = pools_of(selector, OURS.table)
    assert needs_roles(selector, OURS) == any(POOL_OF[p].leads for p in pools)
    assert set(pools) <= set(POOLS)
    assert not unserved(selector, OURS, NODE_ROLES, ALL)  # a system declaring every role and offering all serves any


_TOPOLOGIES = {
    "controllers": Topology(("c1", "c2", "c3"), ()),
    "broker_sets": Topology((), (("b1-1", "b1-2", "b1-3"),)),
    "members": Topology((), (), ("m1", "m2", "m3")),
}


@settings(max_examples=300, deadline=None)
@given(_TERMS, st.sets(st.sampled_from(NODE_ROLES), min_size=1))
def test_a_selector_whose_roles_a_topology_has_resolves_there(terms: list[str], roles: set[str]) -> None:
    """The table against the resolver: on a topology with nodes in exactly ``roles``, a selector the table finds
    no role missing for resolves, and one it refuses either does not resolve or draws nothing from the pool it
    refuses (``controllers`` without controllers is empty) -- the table does not refuse what would hit a node,
    nor pass what would wait for a role that cannot exist.  Our cluster's ``primaries`` needs both its
    controller leader and a master, so it also needs controllers when it draws from broker sets."""
    selector = "+".join(t for t in terms if t != "c1") or "one"
    topo = Topology(_TOPOLOGIES["controllers"].controllers if "controllers" in roles else (),
                    _TOPOLOGIES["broker_sets"].broker_sets if "broker_sets" in roles else (),
                    _TOPOLOGIES["members"].members if "members" in roles else (), selectors=SELECTORS)
    role_lacks = [lack for lack in unserved(selector, topo, sorted(roles), ALL) if lack.roles]
    ours_without_leader = ("primaries" in pools_of(selector) and "broker_sets" in roles and "controllers" not in roles)
    mixed = "primaries" in pools_of(selector) and "members" in roles
    try:
        validate(selector, topo)
        resolves = True
    except SelectorError:
        resolves = False
    if ours_without_leader or mixed:  # shapes no system declares (ours has both; a system of members has only them)
        return
    if not role_lacks:
        assert resolves, (selector, sorted(roles))
        return
    for lack in role_lacks:
        pool = "broker-set-0" if lack.pool == "broker-set-N" else lack.pool
        try:
            hit = resolve(pool, topo, [], random.Random(0))
        except (SelectorError, RoleUnavailable):
            hit = []
        assert hit == [], (selector, sorted(roles), lack)


# -- the selectors a step and a package aim with ------------------------------------------------------------------


def test_every_partition_kind_has_its_aim_and_each_aim_is_a_selector_of_pools() -> None:
    assert tuple(PARTITION_AIMS) == PARTITION_KINDS
    for kind, aim in partition_aims(OURS).items():
        assert aim is None or (pools_of(aim) and all(p in POOLS for p in pools_of(aim))), kind


@pytest.mark.parametrize(("f", "value", "selectors"), [
    ("kill", "masters", ("masters",)),
    ("start", "dead", ("dead",)),  # the value is read; "dead" draws from no pool
    ("start-partition", {"kind": "isolate", "targets": "slaves:one"}, ("slaves:one",)),
    ("start-partition", {"kind": "isolate-master-from-controllers"}, ("masters+controllers",)),
    ("start-partition", {"kind": "one-way", "from": "one", "to": "primaries"}, ("one", "primaries")),
    ("start-partition", None, ()),
    ("skew-clock", {"targets": "controller-leader", "rate": 2}, ("controller-leader",)),
    ("start-packet", {"targets": "one", "to": "masters"}, ("one", "masters")),
    ("crash-at", {"name": "raft.before_apply", "targets": "controllers:one"}, ("controllers:one",)),
    ("registration-crash", {"failpoint": "x.y"}, ()),
    ("stop-partition", None, ()),
    ("no-such-f", "masters", ()),
])
def test_selectors_of_reads_where_the_row_says(f: str, value: Any, selectors: tuple[str, ...]) -> None:
    assert selectors_of(f, value, partition_aims(OURS)) == selectors


def test_a_moves_aim_is_the_pools_its_selectors_and_kind_hit() -> None:
    ours = partition_aims(OURS)
    assert aims_of(Move("start-partition", {"kind": "isolate-master-from-slaves"}), ours) == {"masters"}
    assert aims_of(Move("start-partition", {"kind": "isolate-master-from-controllers"}), ours) == {"masters",
                                                                                                   "controllers"}
    assert aims_of(Move("start-partition", {"kind": "isolate-master-from-slaves"})) == frozenset()  # not etcd's kind
    assert aims_of(Move("kill", "masters+slaves:one")) == {"masters", "slaves"}
    assert aims_of(Move("kill", "master1")) == frozenset()  # a node's name is no pool, whatever it spells
    assert aims_of(Move("start-partition", {"kind": "random-halves"})) == frozenset()


_SHAPES = [(True, True), (False, True), (True, False), (False, False)]


def _shape(has_sets: bool, has_controllers: bool) -> Topology:
    """Our cluster's topology with or without broker sets and controllers (neither: a system of members)."""
    if not has_sets and not has_controllers:
        return ETCD
    return Topology(OURS.controllers if has_controllers else (), OURS.broker_sets if has_sets else (),
                    selectors=SELECTORS)


@pytest.mark.parametrize("name", sorted(KINDS))
@pytest.mark.parametrize(("has_sets", "has_controllers"), _SHAPES)
def test_own_selectors_cover_every_selector_a_package_plans(name: str, has_sets: bool, has_controllers: bool) -> None:
    """What validation checks of a package beyond the spec's targets is all it aims with: every selector of every
    op it draws (its defaults for the topology) is one of the spec's targets or one of its own selectors."""
    targets = ["one", "minority"]
    topo = _shape(has_sets, has_controllers)
    (d,) = definitions([name], targets=targets, options=None, interval_s=1.0, topo=topo)
    own = own_selectors(name, None, topo=topo)
    rng = random.Random(0)
    used = {sel for k in range(300) for op in [d.start(rng, k)] for sel in selectors_of(op["f"], op.get("value"))}
    assert used <= set(targets) | set(own) | {"all"}, sorted(used - set(targets) - set(own))


def test_own_selectors_leave_what_the_options_name_to_the_options_keys() -> None:
    assert own_selectors("disk", None, topo=OURS) == ("brokers:one", "masters")
    assert own_selectors("disk", {"targets": ["one"]}, topo=OURS) == ()
    assert own_selectors("partition", {"kinds": ["isolate-master"]}, topo=OURS) == ()
    assert own_selectors("partition", None, topo=ETCD) == ()  # defaults aimable
    assert "masters" not in own_selectors("protocol-crash", None, topo=_shape(False, True))
    assert own_selectors("no-such-package", None, topo=OURS) == ()


class _Asked(PartitionNemesis):
    """The partition nemesis with selectors recorded instead of resolved (each resolves to its pools' first nodes)."""

    def __init__(self, db: Any, rng: random.Random) -> None:
        super().__init__(db, rng)
        self.asked: list[str] = []

    async def targets(self, test: dict[str, Any], selector: str) -> list[str]:
        self.asked.append(selector)
        return [s[0] for s in self.topo.broker_sets] if "masters" in pools_of(selector) else list(self.topo.all[:1])


@pytest.mark.parametrize("kind", tuple(partition_aims(OURS)))
def test_the_partition_nemesis_asks_for_no_pool_its_kinds_row_does_not_name(kind: str) -> None:
    nodes = NodesSpec(("c1", "c2", "c3"), (("b1", "b2", "b3"),), selectors=SELECTORS)
    nem = _Asked(SimpleNamespace(spec=SimpleNamespace(nodes=nodes)), random.Random(0))
    value: dict[str, Any] = {"kind": kind, "targets": "slaves:one", "from": "one", "to": "primaries"}
    if kind == "grudge":
        value = {"kind": kind, "grudge": {"c1": ["c2"]}}
    asyncio.run(nem.grudge_for({}, value))
    asked = {p for sel in nem.asked for p in pools_of(sel)}
    aims = partition_aims(OURS)
    assert asked <= aims_of(Move("start-partition", value), aims), (kind, nem.asked)
    if aims[kind] is not None:  # the row claims no aim the nemesis never takes
        assert set(pools_of(aims[kind] or "")) & (asked | {"controllers"}) and nem.asked, kind
