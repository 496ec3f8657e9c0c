"""The generic register workload: its options, its generator's op mix, and the per-key verdict (pure parts)."""

from __future__ import annotations

from typing import Any

import pytest

import systems
from checker.history import Op
from checker.per_key import check_per_key, split_by_key
from harness import generator as g
from harness.cluster import cluster_options
from harness.generator import simulate
from harness.spec import SpecError, spec_from_dict
from systems.etcd.client import EtcdRegisterClient
from workloads import registry
from workloads.register import RegisterWorkloadOptions, register_generator


def _ctx(options: dict[str, Any]) -> registry.WorkloadContext:
    spec = spec_from_dict({"name": "e", "seed": 1, "system": "etcd", "workloads": ["register"]}, file="e.yaml")
    db = systems.get("etcd").make_db(spec, cluster_options(spec.cluster))
    return registry.WorkloadContext(spec, db, options, 1, 0)


def test_it_is_registered_and_needs_a_register_client() -> None:
    assert "register" in registry.names()
    assert registry.needs("register") == ("register-client",)
    assert registry.needs("queue") == ()


def test_it_builds_the_systems_client_in_the_read_mode_asked_for() -> None:
    wl = registry.build("register", _ctx({"read_mode": "serializable", "keys": 2, "timeout_s": 1.5}))
    assert isinstance(wl.client, EtcdRegisterClient)
    assert (wl.client.read_mode, wl.client.timeout_s) == ("serializable", 1.5)
    assert wl.fs == {"read", "write", "cas"} and set(wl.checkers) == {"linearizable", "stats"}
    assert all(t > 1.5 for t in wl.op_timeouts.values())


@pytest.mark.parametrize(("options", "key"), [
    ({"read_mode": "quorum"}, "workloads[0].options.read_mode"),
    ({"keys": 0}, "workloads[0].options.keys"),
    ({"read_weight": 0, "write_weight": 0, "cas_weight": 0}, "workloads[0].options.read_weight"),
    ({"colour": 1}, "workloads[0].options.colour"),
])
def test_bad_options_are_refused_by_key(options: dict[str, Any], key: str) -> None:
    with pytest.raises(SpecError) as info:
        registry.build("register", _ctx(options))
    assert info.value.key == key


def _ops(o: RegisterWorkloadOptions) -> list[dict[str, Any]]:
    return [op for op in simulate(g.clients(register_generator(o)), seed=3, nemesis=False, max_ops=400)
            if op["type"] == "invoke"]


def test_the_generator_draws_keys_values_and_fs_from_the_options() -> None:
    ops = _ops(RegisterWorkloadOptions(keys=2, values=3))
    assert {op["f"] for op in ops} == {"read", "write", "cas"}
    assert {op["key"] for op in ops} == {"r0", "r1"}
    assert all(op["value"] in range(3) for op in ops if op["f"] == "write")
    assert all(len(op["value"]) == 2 for op in ops if op["f"] == "cas")
    only_reads = _ops(RegisterWorkloadOptions(write_weight=0, cas_weight=0))
    assert {op["f"] for op in only_reads} == {"read"}


def _op(i: int, type_: str, process: int, f: str, value: Any, key: str) -> Op:
    return Op.from_dict({"index": i, "time": i, "type": type_, "process": process, "f": f, "value": value,
                         "key": key})


def test_a_stale_read_on_one_key_makes_the_history_invalid_and_names_the_key() -> None:
    fine = [_op(0, "invoke", 0, "write", 1, "a"), _op(1, "ok", 0, "write", 1, "a"),
            _op(2, "invoke", 1, "read", None, "a"), _op(3, "ok", 1, "read", 1, "a")]
    stale = [_op(4, "invoke", 0, "write", 2, "b"), _op(5, "ok", 0, "write", 2, "b"),
             _op(6, "invoke", 0, "write", 3, "b"), _op(7, "ok", 0, "write", 3, "b"),
             _op(8, "invoke", 1, "read", None, "b"), _op(9, "ok", 1, "read", 2, "b")]
    assert set(split_by_key(fine + stale)) == {"a", "b"}
    assert check_per_key(fine, clock=lambda: 0.0)["valid"] is True
    res = check_per_key(fine + stale, clock=lambda: 0.0)
    assert res["valid"] is False
    assert res["keys"]["a"]["valid"] is True and res["keys"]["b"]["valid"] is False
    assert "explanation" in res["keys"]["b"]
