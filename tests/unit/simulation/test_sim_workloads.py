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
        elif op["f"] in ("bounce", "stale-heartbeat", "read-members"):
            assert op["process"] >= MEMBERSHIP_PROCESSES, op
        elif op["process"] != "nemesis":
            assert op["process"] < ALLOC_PROCESSES, op
    assert {"broker-ids/linearizable", "membership/membership"} <= set(check_run(r))
    only_queue = run(SimConfig(seed=4, seconds=10, workloads=("queue",)))
    assert not {op["f"] for op in only_queue.history} & {"apply-id", "bounce", "stale-heartbeat"}
    assert not any("/" in name for name in check_run(only_queue))
