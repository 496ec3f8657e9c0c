"""The system registry (systems/), the spec's ``system:`` key and validation by capability.

Third-party adapters are found through entry points; these tests point the registry at entry points they make
(importlib.metadata.EntryPoint objects over a module they put in ``sys.modules``) instead of installing a package.
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass
from importlib.metadata import EntryPoint
from typing import Any

import pytest

import systems
from harness.commands._parts import build_parts, refuse_missing_capabilities, validate_spec
from harness.protocols import CAPABILITIES, DB, SystemDB, SystemOptions
from harness.spec import SpecError, load_spec, resolved_yaml, spec_from_dict
from nemesis import faults, packages
from nemesis.schedule import Step
from nemesis.targets import Topology
from systems.splitbrain.db import SplitbrainDB
from systems.splitbrain.options import cluster_options
from systems.splitbrain.selectors import SELECTORS


@dataclass(frozen=True)
class FakeSystem:
    """Our cluster's DB behind a name that offers less: what a system lacking capabilities looks like."""

    name: str = "fake"
    roles: tuple[str, ...] = ("controllers", "broker_sets")
    capabilities: frozenset[str] = frozenset({"kill", "log-files", "splitbrain-protocol"})

    def options(self, raw: Any, *, file: str = "<spec>") -> SystemOptions:
        return cluster_options(raw, file=file)

    def make_db(self, spec: Any, options: Any) -> DB:
        return SplitbrainDB(spec, options)


class NotASystem:
    name = "odd"


@pytest.fixture
def plugins(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Entry points of the group by name -> value; a module ``fake_systems_for_test`` holds what they name."""
    module = types.ModuleType("fake_systems_for_test")
    module.FAKE = FakeSystem()  # type: ignore[attr-defined]
    module.ODD = NotASystem()  # type: ignore[attr-defined]
    module.WRONG_NAME = FakeSystem(name="other")  # type: ignore[attr-defined]
    module.UNKNOWN_CAP = FakeSystem(name="unknown-cap", capabilities=frozenset({"kill", "teleport"}))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_systems_for_test", module)
    table = {"fake": "fake_systems_for_test:FAKE", "odd": "fake_systems_for_test:ODD",
             "wrong-name": "fake_systems_for_test:WRONG_NAME", "unknown-cap": "fake_systems_for_test:UNKNOWN_CAP",
             "broken": "no_such_module_for_splitbrain_test:SYSTEM"}
    monkeypatch.setattr(systems, "entry_points",
                        lambda: [EntryPoint(n, v, systems.ENTRY_POINT_GROUP) for n, v in table.items()])
    return table


SERVED = {"etcd": "register", "redis": "generic-queue", "rabbitmq": "generic-queue",
          "rabbitmq-mirrored": "generic-queue", "counter": "counter"}
"""A workload each system can serve (our cluster and the fake one: queue)."""


def _raw(**extra: Any) -> dict[str, Any]:
    return {"name": "t", "seed": 1, "workloads": [SERVED.get(str(extra.get("system")), "queue")], **extra}


# -- the registry ---------------------------------------------------------------------------------------------------


def test_built_in_systems_load_and_splitbrain_offers_every_capability_but_a_register_client_and_faketime() -> None:
    assert systems.names()[:3] == ("splitbrain", "counter", "etcd")
    assert systems.get("splitbrain").capabilities == frozenset(CAPABILITIES) - {"register-client", "queue-client",
                                                                                "counter-client", "clock-faketime"}
    assert systems.get("counter").capabilities == {"kill", "pause", "log-files", "clock-faketime", "counter-client"}
    for name in systems.BUILT_IN:
        assert systems.get(name).name == name


@pytest.mark.parametrize("name", list(systems.BUILT_IN))
def test_a_built_in_db_implements_the_protocol_of_each_capability_it_offers(name: str) -> None:
    system = systems.get(name)
    spec = spec_from_dict(_raw(system=name), file="s.yaml")
    db = system.make_db(spec, system.options(spec.cluster, file=spec.source))
    assert isinstance(db, SystemDB) and db.spec is spec  # a DB, and the spec the nemeses read the topology from
    for cap in system.capabilities:
        protocol = CAPABILITIES[cap].protocol
        assert protocol is None or isinstance(db, protocol), (name, cap)


@pytest.mark.parametrize("name", list(systems.BUILT_IN))
def test_a_built_in_adapter_parses_its_own_cluster_map_and_refuses_a_key_it_does_not_know(name: str) -> None:
    system = systems.get(name)
    options = system.options({"version": "0.3"}, file="s.yaml")
    assert isinstance(options, SystemOptions) and (options.version, options.revision) == ("0.3", None)
    with pytest.raises(SpecError) as info:
        system.options({"no_such_option": 1}, file="s.yaml")
    assert (info.value.file, info.value.key) == ("s.yaml", "cluster.no_such_option")
    with pytest.raises(SpecError) as info:
        system.options({"version": "not a label"}, file="s.yaml")
    assert info.value.key == "cluster.version"


def test_only_our_cluster_takes_our_options_and_only_the_others_take_system_options() -> None:
    assert systems.get("splitbrain").options({"lease_timeout_ms": 2000}).lease_timeout_ms == 2000  # type: ignore[attr-defined]
    with pytest.raises(SpecError, match="system 'etcd' has no option 'lease_timeout_ms'") as info:
        systems.get("etcd").options({"lease_timeout_ms": 2000}, file="e.yaml")
    assert info.value.key == "cluster.lease_timeout_ms"
    with pytest.raises(SpecError) as info:
        systems.get("splitbrain").options({"system_options": {}}, file="s.yaml")
    assert info.value.key == "cluster.system_options"
    redis = systems.get("redis").options({"system_options": {"wait_replicas": 1}})
    assert redis.system_options == {"wait_replicas": 1}  # type: ignore[attr-defined]
    with pytest.raises(SpecError) as info:
        systems.get("redis").options({"system_options": [1]}, file="r.yaml")
    assert info.value.key == "cluster.system_options"
    with pytest.raises(SpecError) as info:  # no node commands of this repository to swap a revision into
        validate_spec(spec_from_dict(_raw(system="etcd", nodes={"members": 3}, workloads=["register"],
                                          cluster={"revision": "HEAD"}), file="e.yaml"))
    assert info.value.key == "cluster.revision"


def test_entry_points_are_found_by_name(plugins: dict[str, str]) -> None:
    assert set(plugins) <= set(systems.names())
    assert systems.get("fake") == FakeSystem()


@pytest.mark.parametrize(("name", "words"), [
    ("broken", ["entry point 'broken'", "no_such_module_for_splitbrain_test:SYSTEM", "ModuleNotFoundError"]),
    ("odd", ["entry point 'odd'", "not a system adapter", "NotASystem"]),
    ("wrong-name", ["registered as 'wrong-name'", "calls itself 'other'"]),
    ("unknown-cap", ["unknown capabilities ['teleport']"]),
])
def test_an_entry_point_that_cannot_serve_is_a_precise_error(plugins: dict[str, str], name: str,
                                                            words: list[str]) -> None:
    with pytest.raises(systems.BrokenSystem) as info:
        systems.get(name)
    for w in words:
        assert w in str(info.value)


def test_an_unknown_system_names_the_known_ones() -> None:
    with pytest.raises(systems.UnknownSystem,
                       match="no system called 'mongodb'; known: splitbrain, counter, etcd, redis"):
        systems.get("mongodb")


# -- the spec's system: key -----------------------------------------------------------------------------------------


def test_a_spec_without_system_is_our_cluster_and_its_resolved_yaml_is_unchanged() -> None:
    spec = spec_from_dict(_raw(), file="s.yaml")
    assert spec.system == "splitbrain"
    assert "system" not in resolved_yaml(spec)


def test_an_unknown_or_broken_system_is_a_spec_error_on_the_key_system(plugins: dict[str, str]) -> None:
    with pytest.raises(SpecError) as info:
        spec_from_dict(_raw(system="mongodb"), file="s.yaml")
    assert info.value.key == "system" and info.value.value == "mongodb"
    assert "splitbrain, counter, etcd, redis" in info.value.allowed and "fake" in info.value.allowed
    with pytest.raises(SpecError) as info:
        spec_from_dict(_raw(system="broken"), file="s.yaml")
    assert info.value.key == "system" and "entry point 'broken'" in info.value.allowed
    with pytest.raises(SpecError, match="system: got 3"):
        spec_from_dict(_raw(system=3), file="s.yaml")


def test_a_spec_file_naming_an_unknown_system_is_refused_by_load_spec(tmp_path: Any) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("name: t\nsystem: nosuch\nworkloads: [queue]\n")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert (info.value.file, info.value.key) == (str(path), "system")


def test_a_counter_spec_declares_members_only() -> None:
    spec = spec_from_dict(_raw(system="counter", nodes={"members": 2}), file="s.yaml")
    assert (spec.nodes.controllers, spec.nodes.broker_sets, spec.nodes.members) == ((), (), ("m1", "m2"))
    assert spec_from_dict({**yaml_of(spec), "seed": 1}, file="again") == spec_from_dict(
        _raw(system="counter", nodes={"members": 2}), file="again")
    for role, value in (("broker_sets", {"count": 1, "replicas": 3}), ("controllers", 2)):
        with pytest.raises(SpecError) as info:
            spec_from_dict(_raw(system="counter", nodes={role: value}), file="s.yaml")
        assert info.value.key == f"nodes.{role}" and "declares the roles ['members']" in info.value.allowed


def test_a_counter_spec_validates_and_its_workload_is_in_the_registry() -> None:
    from workloads import registry

    assert "counter" in registry.names() and registry.needs("counter") == ("counter-client",)
    spec = spec_from_dict(_raw(system="counter", nodes={"members": 1}, workloads=[{"name": "counter"}],
                               nemesis={"packages": ["pause", "kill", "clock"], "targets": ["one"]}), file="s.yaml")
    validate_spec(spec)
    parts, db = build_parts(spec, systems.get("counter").options(spec.cluster, file="s.yaml"))
    assert type(db).__module__ == "systems.counter.db" and set(parts.checkers) == {"counter/counter"}
    with pytest.raises(SpecError) as info:  # our cluster makes no counter client
        validate_spec(spec_from_dict(_raw(workloads=["counter"]), file="s.yaml"))
    assert info.value.key == "workloads[0].name" and "needs the capability counter-client" in info.value.allowed


def test_the_counter_example_and_the_selftest_spec_validate_as_specs_of_splitbrain_test() -> None:
    import argparse
    from pathlib import Path

    from harness.commands._parts import prepare
    from harness.testing.run_counter import configure, counter_spec

    example = prepare(str(Path(__file__).resolve().parents[2] / "examples" / "counter.yaml"), {})
    assert (example.spec.system, example.spec.nodes.members) == ("counter", ("m1",))
    assert [w.name for w in example.spec.workloads] == ["counter"] and example.spec.nemesis.packages
    parser = argparse.ArgumentParser()
    configure(parser)
    raw = counter_spec(parser.parse_args(["--nodes", "2", "--nemesis", "clock", "--seed", "3"]))
    spec = spec_from_dict(raw, file="<selftest>")
    validate_spec(spec)
    assert (spec.nodes.members, spec.nemesis.packages, spec.seed) == (("m1", "m2"), ("clock",), 3)
    with pytest.raises(SpecError) as info:
        validate_spec(spec_from_dict(counter_spec(parser.parse_args(["--nemesis", "partition"])), file="<selftest>"))
    assert info.value.key == "nemesis.packages" and "needs network" in info.value.allowed


def yaml_of(spec: Any) -> dict[str, Any]:
    import yaml

    loaded: dict[str, Any] = yaml.safe_load(resolved_yaml(spec))
    assert loaded["system"] == spec.system
    return loaded


# -- capabilities: the fault table and validation -------------------------------------------------------------------


def test_every_package_row_selector_and_mode_needs_only_known_capabilities() -> None:
    for r in faults.ROWS:
        assert r.needs, f"fault table row {r.f!r} names no capability it needs"
        assert {c for need in r.needs for c in faults.need_names(need)} <= set(CAPABILITIES), (r.f, r.needs)
        if r.undo is not None:
            assert set(faults.FAULTS[r.undo].needs) <= set(r.needs), (r.f, r.undo)
    for name in packages.KINDS:
        needs = faults.package_needs(name)
        assert needs, f"package {name!r} needs nothing: no fault table row names it"
        assert {c for need in needs for c in faults.need_names(need)} <= set(CAPABILITIES), (name, needs)
    pools = Topology(selectors=SELECTORS).table.values()  # the generic pools and our cluster's
    assert {c for pool in pools for c in pool.needs} | set(faults.GUIDED_NEEDS) <= set(CAPABILITIES)


def test_missing_capabilities_expands_aliases_and_reads_selectors_modes_and_steps() -> None:
    missing = packages.missing_capabilities(["leader-chaos"], frozenset({"kill"}),
                                            targets=["one", "masters+slaves:one"],
                                            options={"kill": {"targets": ["controller-leader"]}}, guided=True,
                                            topo=Topology(("c1",), (("b1",),), selectors=SELECTORS))
    assert [(m.key, m.value, m.capability) for m in missing] == [
        ("nemesis.packages", "partition", "network"),
        ("nemesis.packages", "partition", "primaries"),  # its default kinds aim at masters and the leader
        ("nemesis.targets[1]", "masters+slaves:one", "primaries"),  # once, though both pools need it
        ("nemesis.options.kill.targets[0]", "controller-leader", "primaries"),
    ]  # guided mode needs nothing of its own (faults.GUIDED_NEEDS): every system's clients' outcomes guide it
    assert packages.missing_capabilities(["all", "protocol-crash", "registration-crash", "disk-corrupt"],
                                         frozenset(CAPABILITIES), targets=["primaries"], guided=True) == []


def test_a_need_with_alternatives_is_met_by_any_one_of_them() -> None:
    clock = faults.AnyOf(("clock-admin", "clock-faketime"))
    assert faults.package_needs("clock") == (clock,)
    assert faults.need_met(clock, frozenset({"clock-faketime"})) and faults.need_met(clock, frozenset({"clock-admin"}))
    assert not faults.need_met(clock, frozenset({"kill"}))
    assert packages.missing_capabilities(["clock"], frozenset({"clock-faketime"})) == []
    assert packages.missing_capabilities(["clock"], frozenset({"kill"})) == [
        packages.Missing("nemesis.packages", "clock", "clock-admin or clock-faketime")]
    steps = (Step(1.0, "skew-clock", {"targets": "one", "rate": 2}), Step(2.0, "reset-clock"))
    assert packages.missing_capabilities([], frozenset({"clock-faketime"}), schedule=steps) == []


def test_validate_spec_refuses_a_package_the_system_cannot_serve(plugins: dict[str, str]) -> None:
    validate_spec(spec_from_dict(_raw(system="fake", nemesis={"packages": ["kill"], "targets": ["one"]}),
                                 file="s.yaml"))
    with pytest.raises(SpecError) as info:
        validate_spec(spec_from_dict(_raw(system="fake", nemesis={"packages": ["kill", "clock"],
                                                                  "targets": ["one"]}), file="s.yaml"))
    assert (info.value.key, info.value.value) == ("nemesis.packages", "clock")
    assert "needs clock-admin or clock-faketime, which 'fake' does not offer" in info.value.allowed
    with pytest.raises(SpecError) as info:
        validate_spec(spec_from_dict(_raw(system="fake", nemesis={"packages": ["kill"], "targets": ["primaries"]}),
                                     file="s.yaml"))
    assert (info.value.key, info.value.value) == ("nemesis.targets[0]", "primaries")
    with pytest.raises(SpecError) as info:  # an explicit schedule is checked step by step
        validate_spec(spec_from_dict(_raw(system="fake", nemesis={
            "schedule": [{"at_s": 1, "f": "pause", "value": "one"}]}), file="s.yaml"))
    assert (info.value.key, info.value.value) == ("nemesis.schedule[0].f", "pause")
    assert "needs pause" in info.value.allowed


def test_the_counter_system_is_refused_the_faults_it_does_not_offer() -> None:
    spec = spec_from_dict(_raw(system="counter", nemesis={"packages": ["pause"], "targets": ["one"]}), file="s")
    refuse_missing_capabilities(spec, systems.get("counter").capabilities, ["kill", "pause"])
    with pytest.raises(SpecError) as info:
        refuse_missing_capabilities(spec, systems.get("counter").capabilities, ["disk"])
    assert (info.value.key, info.value.value) == ("nemesis.packages", "disk")
    assert "needs failpoints, store-files, which 'counter' does not offer" in info.value.allowed
