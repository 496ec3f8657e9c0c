"""etcd as a system a spec selects: the ``members`` role, selectors over members, validation by capability, and the
adapter's DB.  Pure or in-process only: nothing here starts etcd (tests/integration/systems/ does)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import yaml

import systems
from harness import cli
from harness.commands._parts import validate_spec
from harness.protocols import CAPABILITIES, DB, RegisterClients
from harness.spec import SpecError, apply_overrides, load_spec, resolved_yaml, spec_from_dict
from nemesis.targets import RoleUnavailable, SelectorError, Topology, resolve, roles_of, validate
from systems.etcd.db import EtcdDB
from systems.splitbrain.selectors import SELECTORS

ROOT = Path(__file__).resolve().parents[3]


def _etcd(**extra: object) -> dict[str, object]:
    return {"name": "e", "seed": 1, "system": "etcd", "workloads": ["register"], **extra}


# -- the members role ----------------------------------------------------------------------------------------------


def test_an_etcd_spec_has_three_members_by_default_and_no_controllers_or_brokers() -> None:
    spec = spec_from_dict(_etcd())
    assert (spec.nodes.controllers, spec.nodes.broker_sets, spec.nodes.members) == ((), (), ("m1", "m2", "m3"))
    assert spec.nodes.all == ("m1", "m2", "m3")


def test_members_as_a_count_or_as_names() -> None:
    assert spec_from_dict(_etcd(nodes={"members": 5})).nodes.members == ("m1", "m2", "m3", "m4", "m5")
    assert spec_from_dict(_etcd(nodes={"members": ["n1", "n2", "n3"]})).nodes.all == ("n1", "n2", "n3")


@pytest.mark.parametrize(("nodes", "key"), [
    ({"members": 0}, "nodes.members"),
    ({"members": ["n1", "N2"]}, "nodes.members[1]"),
    ({"controllers": 3}, "nodes.controllers"),
    ({"broker_sets": {"count": 1}}, "nodes.broker_sets"),
    ({"members": 3, "masters": 1}, "nodes.masters"),
])
def test_bad_members_and_roles_etcd_does_not_declare_are_refused_by_key(nodes: dict[str, object], key: str) -> None:
    with pytest.raises(SpecError) as info:
        spec_from_dict(_etcd(nodes=nodes), file="e.yaml")
    assert info.value.key == key


def test_our_cluster_declares_no_members_and_the_counter_only_members() -> None:
    with pytest.raises(SpecError) as info:
        spec_from_dict({"name": "t", "seed": 1, "nodes": {"members": 3}})
    assert info.value.key == "nodes.members" and "controllers" in str(info.value)
    counter = spec_from_dict({"name": "t", "seed": 1, "system": "counter", "workloads": ["counter"]})
    assert (counter.nodes.controllers, counter.nodes.members) == ((), ("m1", "m2", "m3"))


def test_a_resolved_etcd_spec_loads_back_and_ours_has_no_members_key() -> None:
    spec = spec_from_dict(_etcd(nodes={"members": ["n1", "n2", "n3"]}))
    doc = yaml.safe_load(resolved_yaml(spec))
    assert doc["system"] == "etcd" and doc["nodes"]["members"] == ["n1", "n2", "n3"]
    assert spec_from_dict(doc, file="test.yaml") == spec_from_dict(doc, file="test.yaml")
    assert spec_from_dict(doc).nodes == spec.nodes
    ours = yaml.safe_load(resolved_yaml(load_spec(ROOT / "examples" / "queue-partition.yaml", {"seed": 3})))
    assert set(ours["nodes"]) == {"controllers", "broker_sets"}


def test_the_nodes_override_names_the_members() -> None:
    raw = apply_overrides(_etcd(), {"nodes": "a1,a2,a3"})
    assert spec_from_dict(raw).nodes.members == ("a1", "a2", "a3")


# -- selectors over members ----------------------------------------------------------------------------------------

MEMBERS = Topology((), (), ("m1", "m2", "m3"))


@pytest.mark.parametrize(("selector", "size"), [("one", 1), ("minority", 1), ("majority", 2), ("all", 3),
                                                ("members:majority", 2), ("members", 3)])
def test_random_subsets_and_the_members_pool_draw_from_the_members(selector: str, size: int) -> None:
    nodes = resolve(selector, MEMBERS, [], random.Random(1))
    assert len(nodes) == size and set(nodes) <= {"m1", "m2", "m3"}


def test_primaries_over_members_is_the_leading_member_and_waits_when_none_leads() -> None:
    assert resolve("primaries", MEMBERS, ["m2"], random.Random(0)) == ["m2"]
    assert resolve("primaries+one", MEMBERS, ["m2"], random.Random(0))[0] in {"m1", "m2", "m3"}
    with pytest.raises(RoleUnavailable):
        resolve("primaries", MEMBERS, [], random.Random(0))
    validate("primaries", MEMBERS)
    assert roles_of(["m1", "m2"], MEMBERS, ["m2"]) == {"m1": "member-follower", "m2": "member-leader"}
    assert roles_of(["m1"], MEMBERS, []) == {"m1": "member"}


def test_our_roles_still_need_our_nodes() -> None:
    with pytest.raises(SelectorError):
        validate("masters", MEMBERS)
    with pytest.raises(SelectorError):
        validate("controller-leader", MEMBERS)
    ours = Topology(("c1", "c2", "c3"), (("b1", "b2", "b3"),), selectors=SELECTORS)
    assert ours.all == ("c1", "c2", "c3", "b1", "b2", "b3")
    assert resolve("primaries", ours, ["c2", "b1"], random.Random(0)) == ["b1", "c2"]


# -- the adapter and validation ------------------------------------------------------------------------------------


def test_the_etcd_adapter_offers_what_its_db_implements() -> None:
    system = systems.get("etcd")
    assert system.roles == ("members",)
    assert system.capabilities == {"kill", "pause", "network", "primaries", "log-files", "register-client"}
    spec = spec_from_dict(_etcd())
    db = system.make_db(spec, system.options(spec.cluster))
    assert isinstance(db, EtcdDB) and isinstance(db, DB) and db.spec is spec
    for cap in system.capabilities:
        protocol = CAPABILITIES[cap].protocol
        assert protocol is None or isinstance(db, protocol), cap


@pytest.mark.parametrize("name", ["etcd.yaml", "etcd-serializable.yaml"])
def test_the_etcd_examples_validate(name: str) -> None:
    """The examples run 90 s of faults, so that a run takes at most 3 minutes (issue 29)."""
    spec = load_spec(ROOT / "examples" / name)
    validate_spec(spec)
    assert (spec.system, spec.nodes.members, spec.time_limit_s) == ("etcd", ("m1", "m2", "m3"), 90.0)
    assert set(spec.nemesis.packages) == {"partition", "kill", "pause"}
    assert spec.workloads[0].options["read_mode"] == ("serializable" if "serializable" in name else "linearizable")


def test_the_etcd_examples_have_the_shape_a_stale_read_needs_and_differ_only_in_read_mode() -> None:
    """A stale serializable read is seen only if some worker reads from a member cut off from a majority that keeps
    taking writes: workers on every member alike, partitions that cut one member off, faults that last seconds."""
    lin, ser = (load_spec(ROOT / "examples" / n) for n in ("etcd.yaml", "etcd-serializable.yaml"))
    assert ser.concurrency % len(ser.nodes.members) == 0 and ser.concurrency // len(ser.nodes.members) >= 2
    assert set(ser.nemesis.options["partition"]["kinds"]) <= {"isolate", "random-halves"}
    assert "primaries" not in ser.nemesis.targets and ser.nemesis.interval_s >= 5
    for field in ("concurrency", "rate", "time_limit_s", "nemesis"):
        assert getattr(lin, field) == getattr(ser, field), field
    assert {**lin.workloads[0].options, "read_mode": "serializable"} == ser.workloads[0].options


@pytest.mark.parametrize(("raw", "key", "words"), [
    ({"name": "t", "seed": 1, "workloads": ["register"]}, "workloads[0].name", ["register-client", "'splitbrain'"]),
    ({"name": "t", "seed": 1, "system": "counter", "workloads": ["register"]}, "workloads[0].name",
     ["register-client", "'counter'"]),
    (_etcd(nemesis={"packages": ["packet"]}), "nemesis.packages", ["node-helpers"]),
    (_etcd(nemesis={"packages": ["clock"]}), "nemesis.packages", ["clock-admin or clock-faketime", "'etcd'"]),
    (_etcd(nemesis={"packages": ["protocol-crash"]}), "nemesis.packages", ["failpoints"]),
])
def test_what_etcd_or_the_workload_cannot_serve_is_refused_by_key(raw: dict[str, object], key: str,
                                                                 words: list[str]) -> None:
    with pytest.raises(SpecError) as info:
        validate_spec(spec_from_dict(raw, file="s.yaml"))
    assert info.value.key == key
    for w in words:
        assert w in str(info.value)


def test_splitbrain_test_exits_2_on_a_register_spec_for_our_cluster(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "r.yaml"
    spec.write_text(yaml.safe_dump({"name": "r", "workloads": ["register"]}), encoding="utf-8")
    assert cli.main(["test", str(spec), "--results", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err
    assert "workloads[0].name" in err and "register-client" in err and "Traceback" not in err
    assert not (tmp_path / "results" / "r").exists()


def test_our_cluster_offers_no_register_client() -> None:
    spec = spec_from_dict({"name": "t", "seed": 1})
    db = systems.get("splitbrain").make_db(spec, systems.get("splitbrain").options(spec.cluster))
    assert not isinstance(db, RegisterClients)
    assert "register-client" not in systems.get("splitbrain").capabilities
