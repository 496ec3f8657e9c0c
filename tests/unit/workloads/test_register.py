"""The generic register workload: its options, its generator's op mix, and the per-key verdict (pure parts)."""

from __future__ import annotations

from typing import Any

import pytest

import systems
from checker.history import Op
from checker.per_key import check_keys, check_per_key, first_failing_key, split_by_key, verdict
from harness import generator as g
from harness.generator import simulate
from harness.spec import SpecError, spec_from_dict
from systems.etcd.client import EtcdRegisterClient
from workloads import registry
from workloads.register import PerKeyLinearizable, RegisterWorkloadOptions, evidence, register_generator


def _ctx(options: dict[str, Any]) -> registry.WorkloadContext:
    spec = spec_from_dict({"name": "e", "seed": 1, "system": "etcd", "workloads": ["register"]}, file="e.yaml")
    db = systems.get("etcd").make_db(spec, systems.get("etcd").options(spec.cluster))
    return registry.WorkloadContext(spec, db, options, 1, 0)


def test_it_is_registered_and_needs_a_register_client() -> None:
    assert "register" in registry.names()
    assert registry.needs("register") == ("register-client",)
    assert registry.needs("queue") == ("splitbrain-protocol",)  # our cluster's own wire protocol


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


def _two_keys_one_stale() -> list[Op]:
    fine = [_op(0, "invoke", 0, "write", 1, "a"), _op(1, "ok", 0, "write", 1, "a"),
            _op(2, "invoke", 1, "read", None, "a"), _op(3, "ok", 1, "read", 1, "a")]
    stale = [_op(4, "invoke", 0, "write", 2, "b"), _op(5, "ok", 0, "write", 2, "b"),
             _op(6, "invoke", 0, "write", 3, "b"), _op(7, "ok", 0, "write", 3, "b"),
             _op(8, "invoke", 1, "read", None, "b"), _op(9, "ok", 1, "read", 2, "b")]
    return fine + stale


def test_the_workloads_checker_names_the_stale_key_the_read_and_the_write_it_missed() -> None:
    res = PerKeyLinearizable().check({}, _two_keys_one_stale(), {})
    assert res.valid is False
    [anomaly] = res.anomalies["nonlinearizable"]
    assert anomaly.key == "b" and anomaly.ops == (9, 7)
    assert anomaly.explanation.startswith("register b: ")
    assert "read 2" in anomaly.explanation and "write 3" in anomaly.explanation
    assert res.stats["first_failing_key"] == "b" and res.stats["explanation"] == anomaly.explanation
    assert res.stats["first_failure"]["index"] == 9 and "failure_window" in res.stats
    assert res.stats["keys"]["a"] == {"valid": True, "ops": 4}
    assert res.stats["keys"]["b"]["valid"] is False and res.stats["ops"] == 10


def test_the_first_failing_key_is_the_one_that_fails_earliest_in_the_history() -> None:
    late = [_op(i + 10, t, p, f, v, "a") for i, (t, p, f, v) in enumerate([
        ("invoke", 2, "write", 5), ("ok", 2, "write", 5), ("invoke", 2, "write", 6), ("ok", 2, "write", 6),
        ("invoke", 3, "read", None), ("ok", 3, "read", 5)])]
    results = check_keys(_two_keys_one_stale() + late, clock=lambda: 0.0)
    assert [results[k][1].valid for k in ("a", "b")] == [False, False]
    assert first_failing_key(results) == "b"
    assert verdict(results) is False
    assert first_failing_key(check_keys(_two_keys_one_stale()[:4], clock=lambda: 0.0)) is None


def test_a_valid_history_has_no_anomaly_and_every_keys_verdict() -> None:
    res = PerKeyLinearizable().check({}, _two_keys_one_stale()[:4], {})
    assert res.valid is True and res.anomalies == {} and res.error is None
    assert res.stats["keys"] == {"a": {"valid": True, "ops": 4}} and "first_failing_key" not in res.stats


def test_the_explanation_leads_with_the_read_and_the_write_it_missed_and_names_members_when_completions_do() -> None:
    plain = PerKeyLinearizable().check({}, _two_keys_one_stale(), {}).anomalies["nonlinearizable"][0]
    assert plain.explanation.startswith("register b: read 2 (#9 p1) was invoked after write 3 (#7 p0) was "
                                        "acknowledged; NOT linearizable: ")
    ops = [Op.from_dict({**op.to_dict(), "node": f"m{op.process + 1}"}) if op.type != "invoke" else op
           for op in _two_keys_one_stale()]
    res = PerKeyLinearizable().check({}, ops, {})
    [anomaly] = res.anomalies["nonlinearizable"]
    assert anomaly.explanation.startswith("register b: read 2 (#9 p1 on m2) was invoked after write 3 (#7 p0 on m1) "
                                          "was acknowledged; NOT linearizable: cannot linearize p1 ok read 2")
    assert res.stats["explanation"] == res.stats["keys"]["b"]["explanation"] == anomaly.explanation


def test_evidence_for_an_op_it_cannot_find_a_first_read_and_a_write() -> None:
    only_read = [_op(0, "invoke", 1, "read", None, "a"), _op(1, "ok", 1, "read", 4, "a")]
    assert evidence(only_read, 0) == "" and evidence(only_read, 9) == ""
    assert evidence(only_read, 1) == "read 4 (#1 p1) was invoked before any write of its key was acknowledged"
    assert evidence(_two_keys_one_stale(), 7) == "write 3 (#7 p0)"
