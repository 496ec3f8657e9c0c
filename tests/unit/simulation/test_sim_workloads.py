"""The simulated ``broker-ids``, ``membership`` and ``controller-register`` workloads: judged by the checkers a real
run of them gets, named in docs/simulation.md's workload table, recording their ops in ranges of processes of their
own, and absent when ``--workloads`` leaves them out."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from harness.spec import spec_from_dict
from system_under_test.client.register_requests import INITIAL_STATE, REGISTER_FS, observed_state
from system_under_test.controller import requests as controller_requests
from system_under_test.sim import SIM_WORKLOADS, SimConfig, run
from system_under_test.sim.admin import ALLOC_PROCESSES, MEMBERSHIP_PROCESSES, REGISTER_PROCESSES, SETUP_WRONG_STATE
from system_under_test.sim.cluster import SimCluster
from system_under_test.sim.faults import DEFAULT_FAULTS
from systems.splitbrain.sim.check import WORKLOAD_CHECKERS, check_run
from workloads import registry

DOC = Path(__file__).resolve().parents[3] / "docs" / "simulation.md"
SPEC = spec_from_dict({"name": "r", "nodes": {"controllers": 3, "broker_sets": {"count": 1, "replicas": 2}},
                       "seed": 1}, file="<t>")


def test_each_simulated_workload_gets_the_checkers_of_its_real_builder() -> None:
    """Same names and same checker classes as the builder in ``workloads/`` gives a real run (but the lanes'
    ``restarts``: lanes are not simulated, the simulation's own ``restarts`` judges its crashed brokers)."""
    for name in SIM_WORKLOADS:
        if name == "queue":
            continue
        options = {"failpoints": 0} if name == "broker-ids" else {}
        real = registry.build(name, registry.WorkloadContext(spec=SPEC, db=None, options=options, seed=1)).checkers
        sim = WORKLOAD_CHECKERS[name]
        assert set(sim) == set(real) - {"restarts"}, name
        assert {k: type(c) for k, c in sim.items()} == {k: type(real[k]) for k in sim}, name
        if name == "controller-register":  # the same model as the builder's, for the simulated (safe) settings
            assert sim["linearizable"].model.describe() == real["linearizable"].model.describe()


def test_the_docs_workload_table_names_every_workload_and_checker() -> None:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Workloads"):text.index("## What runs the production code")]
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `([a-z-]+)` \|.*$", section, re.M)}
    assert set(rows) == set(SIM_WORKLOADS)
    for name, checkers in WORKLOAD_CHECKERS.items():
        for checker in checkers:
            assert f"`{name}/{checker}`" in rows[name], (name, checker)


def test_the_admin_clients_record_their_ops_in_their_own_processes_and_only_when_chosen() -> None:
    r = run(SimConfig(seed=4, seconds=10))
    by = Counter((op["f"], op["type"]) for op in r.history)
    for f in ("next-id", "apply-id", "read-ids", "bounce", "stale-heartbeat", "read-members"):
        assert by[(f, "ok")] >= 1, (f, by)
    for op in r.history:
        if op["f"] in ("next-id", "apply-id", "read-ids"):
            assert ALLOC_PROCESSES <= op["process"] < MEMBERSHIP_PROCESSES, op
        elif op["f"] in ("bounce", "leave", "pause-write", "stale-heartbeat", "read-members"):
            assert MEMBERSHIP_PROCESSES <= op["process"] < REGISTER_PROCESSES, op
        elif op["f"] in REGISTER_FS:
            assert op["process"] >= REGISTER_PROCESSES, op
        elif op["process"] != "nemesis":
            assert op["process"] < ALLOC_PROCESSES, op
    assert {"broker-ids/linearizable", "membership/membership"} <= set(check_run(r))
    only_queue = run(SimConfig(seed=4, seconds=10, workloads=("queue",)))
    assert not {op["f"] for op in only_queue.history} & {"apply-id", "bounce", "stale-heartbeat", *REGISTER_FS}
    assert not any("/" in name for name in check_run(only_queue))


def test_leave_and_pause_write_are_recorded_as_the_real_client_records_them() -> None:
    """A ``leave`` is a controlled shutdown through the production cores (``broker/shutdown.py`` on the broker,
    ``requests.decide`` on the controller): the process exits on the controller's confirmation, well before
    the core's own wait runs out, a leaving master hands mastership to another broker, and the slot comes back
    under a new broker epoch (its stale heartbeat is refused).  A ``pause-write``'s paused master is deposed
    and refuses the write.  Values carry the real client's keys (``leave_record``, ``_pause_write``)."""
    from system_under_test.broker.shutdown import SHUTDOWN_WAIT_MS

    r = run(SimConfig(seed=4, seconds=30))
    invoked: dict[int, int] = {}
    leaves, pauses, stale_after_leave = [], [], []
    last_lifecycle = None
    for op in r.history:
        if op["type"] == "invoke":
            invoked[op["process"]] = op["time"]
            continue
        if op["f"] == "leave" and op["type"] == "ok":
            leaves.append((op["value"], (op["time"] - invoked[op["process"]]) // 1_000_000))
        elif op["f"] == "pause-write" and op["type"] == "ok":
            pauses.append(op["value"])
        elif op["f"] == "stale-heartbeat" and op["type"] == "ok" and last_lifecycle == "leave":
            stale_after_leave.append(op["value"])
        if op["f"] in ("bounce", "leave", "pause-write"):
            last_lifecycle = op["f"]
    assert leaves and pauses and stale_after_leave
    for v, took_ms in leaves:
        assert set(v) == {"slot", "broker_id", "master_before", "was_master", "exited", "others", "master_after",
                          "master_epoch_after"}, v
        assert v["exited"] and took_ms < SHUTDOWN_WAIT_MS, (v, took_ms)
        if v["was_master"]:
            assert v["master_after"] not in (None, v["broker_id"]), v
    assert any(v["was_master"] for v, _ in leaves), "seed 4 has a leaving master"
    assert all(v["refused"] for v in stale_after_leave)
    for v in pauses:
        assert v.get("skipped") or (v["acked"] is False and v["controller"]["master_epoch"] > v["paused_epoch"]), v
    assert check_run(r)["membership/membership"].valid is True


def _register_ops(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [op for op in history if op["f"] in REGISTER_FS and op["process"] != "nemesis"]


def test_controller_register_runs_and_is_judged_like_a_real_run() -> None:
    """The virtual sets are set up (broker 1 first master), every op kind completes ok and refused, pinned alters
    to superseded epochs are refused as fenced, and the real workload's linearizability checker judges it valid."""
    r = run(SimConfig(seed=3, seconds=20))
    assert r.stats["register_setup"] == "ok"
    ops = _register_ops(r.history)
    by = Counter((op["f"], op["type"]) for op in ops)
    for f in sorted(REGISTER_FS):
        assert by[(f, "ok")] >= 3, (f, by)
    assert by[("elect", "fail")] >= 1 and by[("read", "fail")] >= 1, by  # refused designations, follower reads
    fenced = [op for op in ops if op["f"] == "alter" and op["type"] == "fail" and "master_epoch" in op["value"]]
    assert any("CONTROLLER_FENCED_" in op["error"] for op in fenced), fenced[:3]
    # the setup left both sets in the model's initial state: the first op on each set starts from it
    first = {op["value"]["broker_set"]: op for op in reversed(ops) if op["type"] == "ok"}
    assert set(first) == {"vreg-0", "vreg-1"}
    for op in first.values():
        if op["f"] == "read":
            assert observed_state("read", op["value"]) == INITIAL_STATE, op
    results = check_run(r)
    lin = results["controller-register/linearizable"]
    assert lin.valid is True and lin.stats["ops"] == len(ops), lin.stats
    assert results["controller-register/stats"].valid is True


@pytest.mark.parametrize("seed", [0, 1])
def test_no_epoch_fencing_is_caught_by_controller_register(seed: int) -> None:
    r = run(SimConfig(seed=seed, seconds=10, bugs=frozenset({"no-epoch-fencing"})))
    lin = check_run(r)["controller-register/linearizable"]
    assert lin.valid is False and "nonlinearizable" in lin.anomalies
    assert "must be fenced" in lin.stats["explanation"] or "cannot linearize" in lin.stats["explanation"]


def test_a_designation_outside_the_sync_state_set_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test-only controller whose election policy grants any designated replica (what the
    ``elect-designate-unchecked`` mutant does): the simulated client designates replicas outside the set, and the
    checker names one such election."""
    real_elect = controller_requests.elect

    def designate_unchecked(sss: Any, everyone: Any, old: Any, prefer: int | None, *args: Any) -> int | None:
        return prefer if prefer is not None else real_elect(sss, everyone, old, prefer, *args)

    monkeypatch.setattr(controller_requests, "elect", designate_unchecked)
    r = run(SimConfig(seed=2, seconds=10, faults=DEFAULT_FAULTS))
    lin = check_run(r)["controller-register/linearizable"]
    assert lin.valid is False, lin.stats
    assert "is not in the sync-state set" in lin.stats["explanation"] or "is already master" in lin.stats[
        "explanation"], lin.stats["explanation"]


def test_the_controller_register_client_draws_from_its_own_rng_after_the_nemesis() -> None:
    """Adding the workload leaves the nemesis's stream as it was (its RNG is drawn first), and the client's op
    choices come from an RNG of its own, not the world's."""
    without = SimCluster(SimConfig(seed=9, workloads=("queue", "broker-ids", "membership")))
    with_it = SimCluster(SimConfig(seed=9))
    assert without.nemesis.rng.getstate() == with_it.nemesis.rng.getstate()
    assert with_it.register is not None and without.register is None
    assert with_it.register.rng is not with_it.world.rng
    assert with_it.register.rng.getstate() != with_it.nemesis.rng.getstate()


def test_controller_register_ops_replay_byte_for_byte() -> None:
    a, b = (_register_ops(run(SimConfig(seed=11, seconds=8)).history) for _ in range(2))
    assert len(a) > 20 and repr(a) == repr(b)


def test_a_wrong_state_after_the_first_election_is_a_setup_anomaly(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test-only state machine whose election keeps the old SyncStateSet (the ``sm-elect-keeps-sync-state-set``
    mutant): the first election of broker 1 leaves the set empty, the setup reads it and stops, as the real setup
    raises, and the run is invalid through ``controller-register/setup`` -- not only through stats of no ops."""
    real_replace = dataclasses.replace

    def keep_set(obj: Any, /, **changes: Any) -> Any:  # only an election changes these three at once
        if {"sync_state_set", "master_id", "master_epoch"} <= set(changes):
            changes["sync_state_set"] = obj.sync_state_set
        return real_replace(obj, **changes)

    monkeypatch.setattr(dataclasses, "replace", keep_set)
    r = run(SimConfig(seed=1, seconds=3, faults=()))
    assert r.setup_errors["controller-register"][0] == SETUP_WRONG_STATE
    assert not _register_ops(r.history)
    setup = check_run(r)["controller-register/setup"]
    assert setup.valid is False and SETUP_WRONG_STATE in setup.anomalies
    assert "starts in (1, 1, (), 1)" in setup.anomalies[SETUP_WRONG_STATE][0].explanation


def test_the_setup_is_recorded_ok_and_adds_no_result_when_it_finishes() -> None:
    r = run(SimConfig(seed=1, seconds=3, faults=()))
    assert r.setup_errors == {} and r.stats["register_setup"] == "ok"
    assert "controller-register/setup" not in check_run(r)
