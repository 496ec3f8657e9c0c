"""A spec is refused when it loads (harness/spec.py; exit 2 from ``splitbrain test``) if it asks its system for a
node role the system does not declare, a capability it does not offer or a pool it does not have (our cluster's
``masters`` on etcd): a selector's pool (nemesis.targets,
package options, a package's own default targets, an explicit schedule step's value), a partition kind aimed at a
role, a workload.  Each refusal names the key and what is missing."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass
from importlib.metadata import EntryPoint
from typing import Any

import pytest

import systems
from harness.protocols import CAPABILITIES, DB
from harness.spec import SpecError, spec_from_dict
from systems.options import plain_options


@dataclass(frozen=True)
class ControllersOnly:
    """A system of controllers alone that offers every capability: what it cannot serve is roles."""

    name: str = "controllers-only"
    roles: tuple[str, ...] = ("controllers",)
    capabilities: frozenset[str] = frozenset(CAPABILITIES)

    def options(self, raw: Any, *, file: str = "<spec>") -> Any:
        return plain_options(raw, file=file, system=self.name)

    def make_db(self, spec: Any, options: Any) -> DB:
        raise NotImplementedError


@pytest.fixture(autouse=True)
def controllers_only(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("spec_roles_systems_for_test")
    module.SYSTEM = ControllersOnly()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(systems, "entry_points", lambda: [
        EntryPoint("controllers-only", f"{module.__name__}:SYSTEM", systems.ENTRY_POINT_GROUP)])


WORKLOAD = {"etcd": "register", "rabbitmq": "generic-queue", "redis": "generic-queue", "counter": "counter",
            "controllers-only": "controller-register"}


def _spec(system: str, **extra: Any) -> Any:
    return spec_from_dict({"name": "t", "seed": 1, "system": system, "workloads": [WORKLOAD.get(system, "queue")],
                           **extra}, file="s.yaml")


def _kill(*targets: str) -> dict[str, Any]:
    return {"packages": ["kill"], "targets": list(targets)}


def _step(f: str, value: Any) -> dict[str, Any]:
    return {"schedule": [{"at_s": 1, "f": "kill", "value": "one"}, {"at_s": 2, "f": f, "value": value}]}


REFUSED = [
    # (id, system, spec keys, refused key, words of the reason)
    ("masters-on-etcd", "etcd", {"nemesis": _kill("one", "masters")}, "nemesis.targets[1]",
     ["'masters' is no pool of 'etcd' (its pools: controllers, members, primaries",
      "'masters' is a pool of 'splitbrain' (drawing from the node role broker_sets)"]),
    ("controllers-on-etcd", "etcd", {"nemesis": _kill("one", "controllers:one")}, "nemesis.targets[1]",
     ["pool 'controllers' needs the node role controllers", "which 'etcd' does not declare (it declares: members)"]),
    ("controller-leader-on-etcd", "etcd", {"nemesis": _kill("controller-leader")}, "nemesis.targets[0]",
     ["'controller-leader' is no pool of 'etcd'", "(drawing from the node role controllers)"]),
    ("primaries-without-leaders", "rabbitmq", {"nemesis": {"packages": ["partition"], "targets": ["primaries"]}},
     "nemesis.targets[0]", ["pool 'primaries' needs the capability primaries", "'rabbitmq' does not offer"]),
    ("primaries-on-counter", "counter", {"nemesis": _kill("primaries")}, "nemesis.targets[0]",
     ["pool 'primaries' needs the capability primaries", "'counter' does not offer"]),
    ("option-targets", "etcd", {"nemesis": {"packages": ["kill"], "targets": ["one"],
                                            "options": {"kill": {"targets": ["members:one", "slaves:one"]}}}},
     "nemesis.options.kill.targets[1]", ["'slaves' is no pool of 'etcd'"]),
    ("isolate-master-kind", "etcd", {"nemesis": {"packages": ["partition"], "targets": ["one"],
                                                 "options": {"partition": {"kinds": ["isolate", "isolate-master"]}}}},
     "nemesis.options.partition.kinds[1]",
     ["'isolate-master' is no partition kind of 'etcd' (its kinds: random-halves",
      "; 'isolate-master' is a partition kind of 'splitbrain' (aiming at 'masters')"]),
    ("isolate-controller-leader-kind", "etcd",
     {"nemesis": {"packages": ["partition"], "options": {"partition": {"kinds": ["isolate-controller-leader"]}},
                  "targets": ["one"]}},
     "nemesis.options.partition.kinds[0]", ["'isolate-controller-leader' is no partition kind of 'etcd'",
                                            "of 'splitbrain' (aiming at 'controller-leader')"]),
    ("schedule-target", "etcd", {"nemesis": _step("pause", "masters")}, "nemesis.schedule[1].value",
     ["its target 'masters'", "node role broker_sets"]),
    ("schedule-kind", "etcd", {"nemesis": _step("start-partition", {"kind": "isolate-master-from-slaves"})},
     "nemesis.schedule[1].value.kind", ["'isolate-master-from-slaves' is no partition kind of 'etcd'",
                                   "of 'splitbrain' (aiming at 'masters')"]),
    ("schedule-clock-target", "counter", {"nemesis": _step("skew-clock", {"targets": "controller-leader", "rate": 2})},
     "nemesis.schedule[1].value", ["its target 'controller-leader'", "is no pool of 'counter'"]),
    ("disk-default-targets", "controllers-only", {"nemesis": {"packages": ["disk"], "targets": ["one"]}},
     "nemesis.packages", ["'disk': its own target 'brokers:one': 'brokers' is no pool of 'controllers-only'"]),
    ("package-capability-first", "etcd", {"nemesis": {"packages": ["kill", "disk"], "targets": ["one"]}},
     "nemesis.packages", ["'disk' needs failpoints, store-files, which 'etcd' does not offer"]),
    ("controller-register-on-etcd", "etcd", {"workloads": ["controller-register"]}, "workloads[0].name",
     ["'controller-register' talks to the node role controllers", "'etcd' does not declare"]),
    ("controller-register-on-counter", "counter", {"workloads": ["controller-register"]}, "workloads[0].name",
     ["'controller-register' talks to the node role controllers", "'counter' does not declare"]),
    ("queue-on-redis", "redis", {"workloads": ["generic-queue", "queue"]}, "workloads[1].name",
     ["'queue' talks to the node role controllers, broker_sets"]),
    ("register-on-our-cluster", "splitbrain", {"workloads": ["register"]}, "workloads[0].name",
     ["needs the capability register-client"]),
]


@pytest.mark.parametrize(("system", "keys", "key", "words"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_a_spec_asking_what_its_system_cannot_serve_is_refused_on_the_key(system: str, keys: dict[str, Any], key: str,
                                                                          words: list[str]) -> None:
    with pytest.raises(SpecError) as info:
        _spec(system, **keys)
    assert info.value.key == key, str(info.value)
    for w in words:
        assert w in info.value.allowed, (w, info.value.allowed)


ACCEPTED = [
    ("members-on-etcd", "etcd", {"nemesis": {"packages": ["partition", "kill"], "targets": ["one", "members:one",
                                                                                          "primaries"]}}),
    ("default-kinds-on-etcd", "etcd", {"nemesis": {"packages": ["partition"], "targets": ["one"]}}),  # aimable only
    ("ours", "splitbrain", {"nemesis": {"packages": ["all", "protocol-crash"], "mode": "guided",
                                        "targets": ["masters+slaves:one", "controller-leader"]}}),
    ("ours-schedule", "splitbrain", {"nemesis": _step("start-partition", {"kind": "isolate-master-from-controllers"})}),
    ("controllers-only-register", "controllers-only", {"nemesis": {"packages": ["kill", "protocol-crash"],
                                                                   "targets": ["controllers:one"]}}),
    ("counter-kill", "counter", {"nemesis": _kill("members:one")}),
    # neither primaries nor event reports: guided by the clients' outcomes alone (faults.GUIDED_NEEDS is empty)
    ("guided-without-primaries", "rabbitmq", {"nemesis": {"packages": ["partition", "kill"], "mode": "guided",
                                                          "targets": ["one", "minority", "members:one"]}}),
    ("unknown-workload-left-to-the-registry", "etcd", {"workloads": ["no-such-workload"]}),
]


@pytest.mark.parametrize(("system", "keys"), [r[1:] for r in ACCEPTED], ids=[r[0] for r in ACCEPTED])
def test_what_a_system_can_serve_loads(system: str, keys: dict[str, Any]) -> None:
    assert _spec(system, **keys).system == system


def test_protocol_crash_on_a_system_without_broker_sets_walks_only_the_controller_points() -> None:
    """Its default walk leaves out the master's point where there are no broker sets, so it is not refused; named
    explicitly, the master's point is refused on the package (its own target ``masters``)."""
    spec = _spec("controllers-only", nemesis={"packages": ["protocol-crash"], "targets": ["one"]})
    assert spec.nemesis.packages == ("protocol-crash",)
    with pytest.raises(SpecError) as info:
        _spec("controllers-only", nemesis={"packages": ["protocol-crash"], "targets": ["one"], "options": {
            "protocol-crash": {"kinds": ["broker.master.after_append_before_replication"]}}})
    assert info.value.key == "nemesis.packages" and "its own target 'masters'" in info.value.allowed


def test_our_cluster_and_the_counter_do_not_offer_each_others_workloads() -> None:
    assert "splitbrain-protocol" in systems.get("splitbrain").capabilities
    for name in ("etcd", "redis", "rabbitmq", "rabbitmq-mirrored", "counter"):
        assert "splitbrain-protocol" not in systems.get(name).capabilities, name


def test_a_package_with_default_kinds_passes_the_whole_validation_on_a_system_of_members() -> None:
    """The run's second check (validate_spec, with the packages the workloads add) knows no topology, so it leaves
    a package's defaults to the first: RabbitMQ, without primaries, takes `partition` with its default kinds."""
    from harness.commands._parts import validate_spec

    validate_spec(_spec("rabbitmq", nemesis={"packages": ["partition", "kill"], "targets": ["one"]}))


@pytest.mark.parametrize(("nodes", "workload", "refused"), [
    ({"controllers": 3, "broker_sets": {"count": 0}}, "queue", "broker_sets"),
    ({"controllers": 3, "broker_sets": {"count": 0}}, "membership", "broker_sets"),
    ({"controllers": 3, "broker_sets": {"count": 0}}, "controller-register", None),
    # it brings brokers of its own (its failpoint lanes would run on broker nodes)
    ({"controllers": 3, "broker_sets": {"count": 0}}, {"name": "broker-ids", "options": {"failpoints": 0}}, None),
    ({"controllers": 3, "broker_sets": {"count": 1}}, "queue", None),
])
def test_a_workload_whose_role_has_no_nodes_is_refused_on_its_name(nodes: dict[str, Any], workload: Any,
                                                                   refused: str | None) -> None:
    """A workload talks to the node roles it declares (workloads.registry.roles); a spec that gives one of them no
    node would run it with nobody to talk to, so validate_spec refuses it on workloads[0].name."""
    from harness.commands._parts import validate_spec

    spec = spec_from_dict({"name": "empty-role", "nodes": nodes, "workloads": [workload]})
    if refused is None:
        validate_spec(spec)
        return
    with pytest.raises(SpecError) as err:
        validate_spec(spec)
    assert err.value.key == "workloads[0].name" and f"nodes.{refused} gives it none" in str(err.value)
