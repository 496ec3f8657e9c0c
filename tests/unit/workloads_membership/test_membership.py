"""The membership workload's pure parts: the generator (one lifecycle op at a time, a stale heartbeat after each
bounce) and the anomaly rules, each shown firing and not firing."""

from __future__ import annotations

from typing import Any

import pytest

from harness import generator as g
from harness.spec import SpecError, spec_from_dict
from workloads import registry
from workloads.membership import LIFECYCLE_FS, MembershipChecker, MembershipGen, MembershipOptions


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
    (ok(0, "stale-heartbeat", {"broker_id": 1, "stale_epoch": 3, "current_epoch": 7, "refused": False}),
     "stale-epoch-accepted"),
    (ok(0, "stale-heartbeat", {"broker_id": 1, "stale_epoch": 3, "current_epoch": 7, "refused": True}), None),
    (ok(0, "pause-write", {"paused": 1, "paused_epoch": 2, "controller": {"master_id": 3, "master_epoch": 3},
                           "acked": True}), "fenced-broker-acked"),
    (ok(0, "pause-write", {"paused": 1, "paused_epoch": 2, "controller": {"master_id": 1, "master_epoch": 2},
                           "acked": True}), None),
    (ok(0, "pause-write", {"paused": 1, "paused_epoch": 2, "controller": {"master_id": 3, "master_epoch": 3},
                           "acked": False}), None),
], ids=["kept-epoch", "changed-id", "bounce-ok", "kept-mastership", "sole-broker", "moved", "stale-accepted",
        "stale-refused", "fenced-acked", "still-master", "fenced-refused"])
def test_anomaly_rules(op: dict[str, Any], anomaly: str | None) -> None:
    res = MembershipChecker().check({}, [op], {})
    if anomaly is None:
        assert res.valid is True, res.anomalies
    else:
        assert res.valid is False and list(res.anomalies) == [anomaly]


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
