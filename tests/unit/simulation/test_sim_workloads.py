"""The simulated ``broker-ids`` and ``membership`` workloads: judged by the checkers a real run of them gets, named
in docs/simulation.md's workload table, recording their ops in ranges of processes of their own, and absent when
``--workloads`` leaves them out."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from harness.sim_check import WORKLOAD_CHECKERS, check_run
from harness.spec import spec_from_dict
from system_under_test.sim import SIM_WORKLOADS, SimConfig, run
from system_under_test.sim.admin import ALLOC_PROCESSES, MEMBERSHIP_PROCESSES
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
            assert op["process"] >= MEMBERSHIP_PROCESSES, op
        elif op["process"] != "nemesis":
            assert op["process"] < ALLOC_PROCESSES, op
    assert {"broker-ids/linearizable", "membership/membership"} <= set(check_run(r))
    only_queue = run(SimConfig(seed=4, seconds=10, workloads=("queue",)))
    assert not {op["f"] for op in only_queue.history} & {"apply-id", "bounce", "stale-heartbeat"}
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
