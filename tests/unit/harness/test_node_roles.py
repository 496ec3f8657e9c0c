"""Node roles (harness/roles.py): one table, built-in rows plus the rows an adapter declares, read by the spec's
``nodes:`` map, ``--nodes`` and the selectors (every flat role is a pool, nemesis/targets.py).

A small adapter defined here declares two roles of its own (``voters`` and ``witnesses``) and is validated end to
end: a spec loads, refuses a key it does not declare, resolves selectors over its roles, and passes
``harness.commands._parts.validate_spec``.
"""

from __future__ import annotations

import random
import sys
import types
from dataclasses import dataclass
from importlib.metadata import EntryPoint
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import systems
from harness.protocols import DB, Client
from harness.roles import BUILT_IN, NodeRole, RoleTableError, declared_names, role_table
from harness.spec import SpecError, apply_overrides, resolved_yaml, spec_from_dict
from nemesis.targets import RoleUnavailable, pools_of, resolve, roles_of, unserved, validate
from systems.options import plain_options

VOTERS = NodeRole("voters", "v")
WITNESSES = NodeRole("witnesses", "w", default=2, lo=1, hi=4, noun="witness")


class _VoterDB:
    """Makes register clients (the capability the adapter offers); nothing starts in these tests."""

    def __init__(self, spec: Any) -> None:
        self.spec = spec

    async def setup(self, test: dict[str, Any], node: str) -> None:
        raise NotImplementedError

    async def teardown(self, test: dict[str, Any], node: str) -> None:
        raise NotImplementedError

    def register_client(self, *, read_mode: str, timeout_s: float) -> Client:
        return types.SimpleNamespace(read_mode=read_mode)  # type: ignore[return-value]  # never opened here


@dataclass(frozen=True)
class VoterSystem:
    """A system of voters and witnesses: roles of its own, no pools of its own."""

    name: str = "voters"
    roles: tuple[str | NodeRole, ...] = (VOTERS, WITNESSES)
    capabilities: frozenset[str] = frozenset({"kill", "pause", "network", "primaries", "log-files",
                                              "register-client"})

    def options(self, raw: Any, *, file: str = "<spec>") -> Any:
        return plain_options(raw, file=file, system=self.name)

    def make_db(self, spec: Any, options: Any) -> DB:
        return _VoterDB(spec)


@pytest.fixture(autouse=True)
def voter_system(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("node_roles_systems_for_test")
    module.SYSTEM = VoterSystem()  # type: ignore[attr-defined]
    module.BAD = VoterSystem(name="bad", roles=("voters",))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(systems, "entry_points", lambda: [
        EntryPoint("voters", f"{module.__name__}:SYSTEM", systems.ENTRY_POINT_GROUP),
        EntryPoint("bad", f"{module.__name__}:BAD", systems.ENTRY_POINT_GROUP)])


def _spec(**extra: Any) -> Any:
    return spec_from_dict({"name": "t", "seed": 1, "system": "voters", "workloads": ["register"], **extra},
                          file="v.yaml")


# -- the table ---------------------------------------------------------------------------------------------------


def test_the_built_in_rows_are_the_three_roles_in_nodes_order() -> None:
    assert [r.name for r in BUILT_IN] == ["controllers", "broker_sets", "members"]
    assert [r.one for r in BUILT_IN] == ["controller", "broker", "member"]
    assert role_table(("members", "controllers")) == (BUILT_IN[0], BUILT_IN[2])  # table order, not declared order
    assert role_table((WITNESSES, "members", VOTERS)) == (BUILT_IN[2], WITNESSES, VOTERS)


@pytest.mark.parametrize(("declared", "words"), [
    ((), "at least one"),
    (("members", "members"), "declared twice"),
    (("members", NodeRole("members", "m")), "declared twice"),
    ((NodeRole("controllers", "k"),), "is built in"),
    (("voters",), "unknown roles ['voters']"),
    ((NodeRole("Voters", "v"),), "lowercase"),
    ((NodeRole("voters", "V1"),), "prefix"),
    ((NodeRole("voters", "v", default=12),), "default"),
    ((NodeRole("voters", "v", lo=0, default=0),), "lo"),
    ((NodeRole("sets", "s", sets=True),), "sets shape"),
])
def test_a_role_table_that_cannot_be_is_refused_naming_the_row(declared: tuple[Any, ...], words: str) -> None:
    with pytest.raises(RoleTableError, match=words.replace("[", r"\[").replace("]", r"\]")):
        role_table(declared)


_ROW = st.builds(NodeRole, name=st.from_regex(r"[a-z]{2,8}", fullmatch=True).filter(
                     lambda n: n not in {r.name for r in BUILT_IN}),
                 prefix=st.from_regex(r"[a-z]{1,3}", fullmatch=True), default=st.integers(1, 4),
                 lo=st.just(1), hi=st.integers(4, 9))


@settings(max_examples=200, deadline=None)
@given(st.sets(st.sampled_from([r.name for r in BUILT_IN]), min_size=0, max_size=3),
       st.lists(_ROW, max_size=3, unique_by=lambda r: r.name))
def test_a_table_is_the_declared_built_in_rows_then_the_adapters_in_its_order(names: set[str],
                                                                              own: list[NodeRole]) -> None:
    declared = (*sorted(names), *own)
    if not declared:
        return
    table = role_table(declared)
    assert [r.name for r in table] == [r.name for r in BUILT_IN if r.name in names] + [r.name for r in own]
    assert set(declared_names(declared)) == {r.name for r in table}


# -- a system of voters and witnesses, end to end ----------------------------------------------------------------


def test_nodes_default_to_each_rows_count_and_prefix_and_read_back_unchanged() -> None:
    spec = _spec()
    assert spec.nodes.all == ("v1", "v2", "v3", "w1", "w2")
    assert spec.nodes.controllers == () and spec.nodes.broker_sets == () and spec.nodes.members == ()
    assert yaml.safe_load(resolved_yaml(spec))["nodes"] == {"controllers": [], "broker_sets": [],
                                                             "voters": ["v1", "v2", "v3"], "witnesses": ["w1", "w2"]}
    again = spec_from_dict(yaml.safe_load(resolved_yaml(spec)), file="v.yaml")
    assert again == spec and again.nodes.all == spec.nodes.all


def test_nodes_take_counts_and_names_within_each_rows_bounds() -> None:
    spec = _spec(nodes={"voters": ["alpha", "beta", "gamma"], "witnesses": 4})
    assert spec.nodes.all == ("alpha", "beta", "gamma", "w1", "w2", "w3", "w4")
    with pytest.raises(SpecError) as info:
        _spec(nodes={"witnesses": 5})
    assert info.value.key == "nodes.witnesses" and "[1, 4]" in info.value.allowed
    with pytest.raises(SpecError) as info:
        _spec(nodes={"witnesses": ["a1", "a2", "a3", "a4", "a5"]})
    assert info.value.key == "nodes.witnesses" and "1 to 4 node names" in info.value.allowed


@pytest.mark.parametrize(("nodes", "key"), [
    ({"members": 3}, "nodes.members"),  # a built-in role it does not declare
    ({"controllers": 1}, "nodes.controllers"),
    ({"observers": 2}, "nodes.observers"),  # no role at all
])
def test_nodes_accept_exactly_the_declared_roles(nodes: dict[str, Any], key: str) -> None:
    with pytest.raises(SpecError) as info:
        _spec(nodes=nodes)
    assert info.value.key == key


def test_our_cluster_refuses_another_systems_role() -> None:
    with pytest.raises(SpecError) as info:
        spec_from_dict({"name": "t", "seed": 1, "nodes": {"voters": 3}}, file="s.yaml")
    assert info.value.key == "nodes.voters" and "known key" in info.value.allowed


def test_dash_dash_nodes_names_the_declared_roles_in_table_order() -> None:
    raw = apply_overrides({"name": "t", "seed": 1, "system": "voters", "workloads": ["register"]},
                          {"nodes": "p,q,r,s,t"})
    assert raw["nodes"] == {"controllers": [], "broker_sets": [], "voters": ["p", "q", "r"], "witnesses": ["s", "t"]}
    with pytest.raises(SpecError) as info:
        apply_overrides({"name": "t", "system": "voters", "workloads": ["register"]}, {"nodes": "p,q"})
    assert info.value.key == "--nodes" and "exactly 5" in info.value.allowed


def test_each_declared_role_is_a_pool_and_random_subsets_draw_from_every_node() -> None:
    topo = _spec().nodes.topology
    assert tuple(topo.table) == ("controllers", "members", "voters", "witnesses", "primaries")
    assert resolve("witnesses", topo, [], random.Random(0)) == ["w1", "w2"]
    rng = random.Random(3)  # the terms draw in the order written, from the one RNG
    drawn = rng.sample(["v1", "v2", "v3"], 2) + rng.sample(["w1", "w2"], 1)
    assert resolve("voters:majority+witnesses:one", topo, [], random.Random(3)) == sorted(drawn)
    assert resolve("all", topo, [], random.Random(0)) == ["v1", "v2", "v3", "w1", "w2"]
    assert resolve("primaries", topo, ["w2", "v1"], random.Random(0)) == ["v1", "w2"]
    with pytest.raises(RoleUnavailable):
        resolve("primaries", topo, [], random.Random(0))
    assert roles_of(["v1", "v2", "w1"], topo, ["v1"]) == {"v1": "voter-leader", "v2": "voter-follower",
                                                          "w1": "witness"}
    assert pools_of("voters:one+witnesses", topo.table) == ("voters", "witnesses")
    assert unserved("voters:one+masters", topo, ("voters", "witnesses"), frozenset({"primaries"}))[0].pool == "masters"
    validate("voters:minority+w1", topo)


def test_selectors_of_the_voter_system_are_validated_at_load() -> None:
    spec = _spec(nemesis={"packages": ["kill", "partition"], "targets": ["voters:one", "witnesses", "primaries"]})
    assert spec.nemesis.targets == ("voters:one", "witnesses", "primaries")
    with pytest.raises(SpecError) as info:
        _spec(nemesis={"packages": ["kill"], "targets": ["one", "masters"]})
    assert info.value.key == "nemesis.targets[1]"
    assert "'masters' is no pool of 'voters' (its pools: controllers, members, voters, witnesses, primaries" in \
        info.value.allowed
    with pytest.raises(SpecError) as info:
        _spec(nemesis={"packages": ["kill"], "targets": ["members:one"]})
    assert info.value.key == "nemesis.targets[0]" and "does not declare (it declares: voters, witnesses)" in \
        info.value.allowed


def test_the_voter_system_passes_the_whole_validation() -> None:
    from harness.commands._parts import validate_spec

    validate_spec(_spec(nemesis={"packages": ["partition", "kill", "pause"], "targets": ["voters:one", "witnesses"]}))


def test_an_adapter_whose_roles_make_no_table_is_a_broken_system() -> None:
    with pytest.raises(systems.BrokenSystem, match="unknown roles"):
        systems.get("bad")
