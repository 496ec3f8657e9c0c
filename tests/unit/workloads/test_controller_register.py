"""The controller-register workload's pure parts: options, the seeded generator (stale alters pin epochs it has
seen superseded) and the linearizability checker wiring."""

from __future__ import annotations

import random
from typing import Any

import pytest

from checker.history import Op
from harness import generator as g
from harness.spec import SpecError, spec_from_dict
from workloads import registry
from workloads.controller_register import LinearizableChecker, RegisterGen, RegisterOptions
from workloads.models import ControllerMetadata

SPEC = spec_from_dict({"name": "r", "nodes": {"controllers": 3, "broker_sets": []}, "seed": 1}, file="<test>")


def ctx(options: dict[str, Any]) -> registry.WorkloadContext:
    return registry.WorkloadContext(spec=SPEC, db=None, options=options, seed=1)


def test_builds_on_a_controller_only_cluster() -> None:
    wl = registry.build("controller-register", ctx({"broker_sets": 3}))
    assert wl.fs == {"read", "elect", "alter"}
    assert set(wl.checkers) == {"linearizable", "stats"}
    assert wl.extra["sets"] == ("vreg-0", "vreg-1", "vreg-2")


@pytest.mark.parametrize(("options", "key"), [
    ({"broker_sets": 0}, "broker_sets"), ({"replicas": 1}, "replicas"), ({"read_fraction": 2}, "read_fraction"),
    ({"read_fraction": 0.9, "elect_fraction": 0.2}, "elect_fraction"), ({"lease_ms": 10}, "lease_ms"),
    ({"readers": 1}, "readers"),
], ids=["no-sets", "one-replica", "fraction", "fractions-sum", "short-lease", "unknown-key"])
def test_bad_options_name_the_key(options: dict[str, Any], key: str) -> None:
    with pytest.raises(SpecError) as err:
        registry.build("controller-register", ctx(options))
    assert err.value.key == f"workloads[0].options.{key}"


def gen(**kw: Any) -> RegisterGen:
    return RegisterGen(("vreg-0", "vreg-1"), ("c1", "c2", "c3"), RegisterOptions(**kw))


def test_generator_is_deterministic_by_seed() -> None:
    def run(seed: int) -> list[dict[str, Any]]:
        return g.simulate(g.clients(g.limit(200, gen())), seed=seed, client_threads=4, latency_ns=100)

    a, b = run(3), run(3)
    assert a == b and a != run(4)
    invokes = [op for op in a if op["type"] == "invoke"]
    assert {op["f"] for op in invokes} == {"read", "elect", "alter"}
    vias = {op["value"]["via"] for op in invokes if op["f"] == "read"}
    assert vias == {None, "c1", "c2", "c3"}
    assert all(1 <= op["value"]["broker_id"] <= 3 for op in invokes if op["f"] == "elect")


def read_done(set_epoch: int, master: int = 1) -> dict[str, Any]:
    return {"type": "ok", "process": 0, "f": "read",
            "value": {"broker_set": "vreg-0", "via": None, "master_id": master, "master_epoch": 1,
                      "sync_state_set": [1], "sync_state_set_epoch": set_epoch}}


def test_stale_alters_pin_an_observed_superseded_state_of_the_same_master() -> None:
    c = g.make_context(1, seed=1, nemesis=False)
    g0 = gen(read_fraction=0.0, elect_fraction=0.0, stale_alter_fraction=1.0)
    assert g0._stale_state("vreg-0") is None
    g1 = g0.update(c, read_done(1)).update(c, read_done(1)).update(c, read_done(2))
    assert g1.seen["vreg-0"] == ((1, 1, (1,), 1), (1, 1, (1,), 2))
    assert g1._stale_state("vreg-0") == (1, 1, (1,), 1)
    alters = [g1.op(c._replace(rng=random.Random(s)))[0]["value"] for s in range(20)]
    pinned = [a for a in alters if a["broker_set"] == "vreg-0"]
    assert pinned and all(a["master_epoch"] == 1 and a["sync_state_set_epoch"] == 1 and 1 in a["sync_state_set"]
                          for a in pinned)
    assert all("master_epoch" not in a for a in alters if a["broker_set"] == "vreg-1")  # nothing seen there
    other_master = g1.update(c, read_done(3, master=2))
    assert other_master._stale_state("vreg-0") is None  # no older state with master 2


def op(i: int, t: str, p: int, f: str, v: Any) -> Op:
    return Op(i, i * 10, t, p, f, v)


def test_linearizable_checker_judges_only_its_fs() -> None:
    inv = {"broker_set": "vreg-0", "via": "c2"}
    ok = {**inv, "master_id": 1, "master_epoch": 1, "sync_state_set": [1], "sync_state_set_epoch": 1}
    stale = {**ok, "sync_state_set_epoch": 0}
    checker = LinearizableChecker(ControllerMetadata(), time_limit_s=5)
    good = [op(0, "invoke", 0, "read", inv), op(1, "ok", 0, "read", ok), op(2, "invoke", 1, "send", {}),
            op(3, "ok", 1, "send", {}), Op(4, 40, "info", "nemesis", "start-partition", None)]
    res = checker.check({}, good, {})
    assert res.valid is True and res.stats["ops"] == 2 and not res.anomalies
    bad = checker.check({}, [op(0, "invoke", 0, "read", inv), op(1, "ok", 0, "read", stale)], {})
    assert bad.valid is False and "set_epoch=0" in bad.stats["explanation"]
    # a failure is also an anomaly, so every summary (CLI, JUnit, run list) names it; its ops are the failing op
    [anomaly] = bad.anomalies["nonlinearizable"]
    assert anomaly.ops == (1,) and "set_epoch=0" in anomaly.explanation
    assert bad.stats["failure_window"]["calls"]
    assert checker.check({}, [d.to_dict() for d in good], {}).valid is True
