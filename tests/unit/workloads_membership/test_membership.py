"""The membership workload's pure parts: the generator (one lifecycle op at a time, a stale heartbeat after each
bounce) and the anomaly rules, each shown firing and not firing."""

from __future__ import annotations

from typing import Any

import pytest

from harness import generator as g
from harness.spec import SpecError, spec_from_dict
from workloads import registry
from workloads.membership import LIFECYCLE_FS, MembershipChecker, MembershipGen, MembershipOptions, leave_record


def test_generator_keeps_one_lifecycle_op_in_flight_and_replays_epochs_after_bounces() -> None:
    gen = MembershipGen(("m0", "m1", "m2"), MembershipOptions())
    ops = g.simulate(g.limit(120, gen), seed=7, client_threads=3, nemesis=False, latency_ns=1000)
    in_flight, most, last_bounced = 0, 0, None
    for op in ops:
        if op["f"] not in LIFECYCLE_FS:
            continue
        if op["type"] == "invoke":
            in_flight += 1
            most = max(most, in_flight)
            if last_bounced is not None:
                assert op["f"] == "stale-heartbeat" and op["value"]["slot"] == last_bounced
            last_bounced = op["value"]["slot"] if op["f"] in ("bounce", "leave") else None
        else:
            in_flight -= 1
    assert most == 1
    assert {op["f"] for op in ops} >= {"bounce", "stale-heartbeat", "read-members"}


def ok(i: int, f: str, value: dict[str, Any]) -> dict[str, Any]:
    return {"index": i, "time": i, "type": "ok", "process": 0, "f": f, "value": value}


@pytest.mark.parametrize(("op", "anomaly"), [
    (ok(0, "bounce", {"slot": "m0", "before": {"broker_id": 1, "broker_epoch": 5},
                      "after": {"broker_id": 1, "broker_epoch": 5}}), "bounce-kept-epoch"),
    (ok(0, "bounce", {"slot": "m0", "before": {"broker_id": 1, "broker_epoch": 5},
                      "after": {"broker_id": 2, "broker_epoch": 9}}), "bounce-changed-id"),
    (ok(0, "bounce", {"slot": "m0", "before": {"broker_id": 1, "broker_epoch": 5},
                      "after": {"broker_id": 1, "broker_epoch": 9}}), None),
    (ok(0, "leave", {"broker_id": 2, "was_master": True, "exited": True, "others": 2, "master_after": 2}),
     "shutdown-kept-mastership"),
    (ok(0, "leave", {"broker_id": 2, "was_master": True, "exited": True, "others": 0, "master_after": 2}), None),
    (ok(0, "leave", {"broker_id": 2, "was_master": True, "exited": True, "others": 2, "master_after": 1}), None),
    # recorded by the unmutated control (mutants-run1, 20261127T213754.064Z, op 913): the leaving process
    # reported no id and the set had no master before or after; the old record said was_master (None == None)
    (ok(913, "leave", {"slot": "m1", "broker_id": None, "was_master": True, "exited": True, "others": 2,
                       "master_after": None, "master_epoch_after": 3}), None),
    (ok(0, "stale-heartbeat", {"broker_id": 1, "stale_epoch": 3, "current_epoch": 7, "refused": False}),
     "stale-epoch-accepted"),
    (ok(0, "stale-heartbeat", {"broker_id": 1, "stale_epoch": 3, "current_epoch": 7, "refused": True}), None),
    (ok(0, "pause-write", {"paused": 1, "paused_epoch": 2, "controller": {"master_id": 3, "master_epoch": 3},
                           "acked": True}), "fenced-broker-acked"),
    (ok(0, "pause-write", {"paused": 1, "paused_epoch": 2, "controller": {"master_id": 1, "master_epoch": 2},
                           "acked": True}), None),
    (ok(0, "pause-write", {"paused": 1, "paused_epoch": 2, "controller": {"master_id": 3, "master_epoch": 3},
                           "acked": False}), None),
], ids=["kept-epoch", "changed-id", "bounce-ok", "kept-mastership", "sole-broker", "moved", "unknown-id-no-master",
        "stale-accepted",
        "stale-refused", "fenced-acked", "still-master", "fenced-refused"])
def test_anomaly_rules(op: dict[str, Any], anomaly: str | None) -> None:
    res = MembershipChecker().check({}, [op], {})
    if anomaly is None:
        assert res.valid is True, res.anomalies
    else:
        assert res.valid is False and list(res.anomalies) == [anomaly]


@pytest.mark.parametrize(("mine", "master_before", "master_after", "was_master", "anomaly"), [
    ({"broker_id": 2}, 2, 2, True, "shutdown-kept-mastership"),
    ({"broker_id": 2}, 2, 1, True, None),
    ({"broker_id": 2}, 2, None, True, None),
    ({"broker_id": 2}, 1, 1, False, None),
    ({"broker_id": None}, None, None, False, None),
    ({}, None, None, False, None),
    ({}, 2, 2, False, None),
    ({"broker_id": True}, True, True, False, None),
], ids=["kept", "moved", "cleared", "was-slave", "unregistered-no-master", "no-answer-no-master",
        "no-answer-master-named", "bool-is-no-id"])
def test_leave_record_needs_an_id_to_call_a_broker_master(mine: dict[str, Any], master_before: Any,
                                                         master_after: Any, was_master: bool,
                                                         anomaly: str | None) -> None:
    v = leave_record(mine, {"master_id": master_before}, {"master_id": master_after, "master_epoch": 4},
                     exited=True, others=2)
    assert v["was_master"] is was_master and v["master_before"] == master_before
    res = MembershipChecker().check({}, [ok(0, "leave", {"slot": "m1", **v})], {})
    assert (list(res.anomalies) == [anomaly]) if anomaly else res.valid is True


def test_builder_needs_broker_nodes_and_valid_options() -> None:
    bare = spec_from_dict({"name": "r", "nodes": {"controllers": 3, "broker_sets": []}, "seed": 1}, file="<t>")
    with pytest.raises(SpecError):
        registry.build("membership", registry.WorkloadContext(spec=bare, db=None, options={}, seed=1))
    spec = spec_from_dict({"name": "r", "nodes": {"controllers": 3, "broker_sets": {"count": 1, "replicas": 2}},
                           "seed": 1}, file="<t>")
    wl = registry.build("membership", registry.WorkloadContext(spec=spec, db=None, options={"brokers": 3}, seed=1))
    assert wl.extra["slots"] == ["m0", "m1", "m2"] and set(wl.checkers) == {"membership", "invariants", "stats"}
    with pytest.raises(SpecError):
        registry.build("membership", registry.WorkloadContext(spec=spec, db=None, options={"brokers": 1}, seed=1))
