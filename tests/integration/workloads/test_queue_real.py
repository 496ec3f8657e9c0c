"""The queue workload against real controllers and brokers (local network namespaces).

With safe settings, isolating the master must lose nothing (valid, everything drained); with the same seed
and schedule under unsafe settings (no all-ack, unclean election) the harness must detect the lost sends.
Seeds fixed and printed.  Needs root and iproute2 (skipped otherwise).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from harness import generator as g
from harness.control.local import LocalRemote
from harness.runner import RunOutcome, TestParts, run_test
from harness.spec import spec_from_dict
from nemesis import packages
from systems.splitbrain.db import SplitbrainDB
from systems.splitbrain.options import cluster_options
from workloads import registry

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None, reason="needs root and iproute2"),
]


def run_queue(tmp: Path, *, seed: int, cluster: dict[str, Any], nemesis: list[str], targets: list[str],
              time_limit_s: float, interval_s: float = 3.0, schedule: Any = None) -> RunOutcome:
    print(f"queue seed={seed} cluster={cluster} nemesis={nemesis}")
    spec = spec_from_dict({
        "name": "queue", "backend": "local", "nodes": {"controllers": 3, "broker_sets": {"count": 1, "replicas": 3}},
        "cluster": cluster, "workloads": [{"name": "queue", "options": {"queues_per_set": 2}}],
        "nemesis": {"packages": nemesis, "interval_s": interval_s, "targets": targets},
        "concurrency": 4, "rate": 40, "time_limit_s": time_limit_s,
        "phases": {"recovery_s": 3.0, "final_drain_s": 15.0}, "seed": seed}, file="<test>")

    async def main() -> RunOutcome:
        remote = await LocalRemote.create(list(spec.nodes.all), state_dir=tmp / "state")
        try:
            db = SplitbrainDB(spec, cluster_options(spec.cluster))
            wl = registry.build("queue", registry.WorkloadContext(spec, db, spec.workloads[0].options, spec.seed))
            nem = packages.build(db, nemesis, interval_s=spec.nemesis.interval_s, targets=spec.nemesis.targets,
                                 seed=spec.seed)
            parts = TestParts(client=wl.client, checkers=wl.checkers,
                              generator=g.clients(g.pace(spec.rate, wl.generator, seed=spec.seed),
                                                  schedule if schedule is not None else nem.generator),
                              db=db, nemesis=nem.nemesis, heal_generator=nem.heal,
                              final_generator=wl.final_generator)
            return await run_test(spec, parts, results_root=str(tmp / "results"), remote=remote,
                                  install_signal_handlers=False, op_timeout_s=5.0, heal_limit_s=20.0)
        finally:
            await remote.close()

    return asyncio.run(main())


# The master is cut off from everyone (controllers and slaves) for 4 s out of every 5.5 s.
ISOLATE_MASTER = g.cycle([g.sleep(1.5), {"f": "start-partition", "value": {"kind": "isolate-master"}}, g.sleep(4.0),
                          {"f": "stop-partition"}])


@pytest.mark.timeout(60)
def test_safe_settings_lose_nothing_when_the_master_is_isolated(tmp_path: Path) -> None:
    out = run_queue(tmp_path, seed=22, cluster={}, nemesis=["partition"], targets=["one"], time_limit_s=12.0,
                    schedule=ISOLATE_MASTER)
    q = out.results["checkers"]["queue"]
    assert q["valid"] is True, q
    st = q["stats"]
    assert st["acknowledged"] > 50 and st["drained"] is True and st["lost"] == 0, st
    assert st["settings"] == "safe" and out.valid is True, out.results
    load = out.results["load"]  # every worker had its share, so every node it is bound to did too
    assert load["max_worker_share"] <= 1.5 and len(load["ops_per_node"]) == 4, load


@pytest.mark.timeout(60)
def test_unsafe_settings_lose_writes_of_an_isolated_master_and_the_harness_sees_it(tmp_path: Path) -> None:
    # Without all-ack and with unclean election, the isolated master acknowledges sends no slave has; the
    # controller elects a slave, and the old master's acknowledged sends are gone.
    unsafe = {"all_ack_in_sync_state_set": False, "enable_elect_unclean_master": True}
    out = run_queue(tmp_path, seed=22, cluster=unsafe, nemesis=["partition"], targets=["one"], time_limit_s=12.0,
                    schedule=ISOLATE_MASTER)
    q = out.results["checkers"]["queue"]
    assert q["stats"]["settings"] == "unsafe"
    assert q["valid"] is False, q
    assert q["stats"]["lost"] > 0 or q["anomaly_counts"].get("inconsistent-offsets", 0) > 0, q
    assert out.exit_code == 1
