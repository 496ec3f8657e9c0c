"""Issue 20's integration test: guided mode finds the unclean-election loss on the local backend, within its
budget, for a fixed seed -- real processes, no schedule written for the bug.

Settings: ``enable_elect_unclean_master: true`` with all-ack on, the queue workload, and the same nemesis
packages and selectors a random run would use (``partition`` and ``kill``, default partition kinds).  Random
faults rarely line up the loss (cut the slaves off, wait for the SyncStateSet to shrink to the master, kill the
master, let an out-of-sync slave be elected); the guided policy reacts to the observed shrink.  With the policy
that aims at the master on the quiet (d776fab), 2 of 2 runs of this spec (seed 1) found the loss within the 90 s
of main phase budgeted here (20-24 lost writes each); the policy before it, 4 of 4 (seed 1 twice, seeds 4, 5).
The loss shows as ``lost-write`` or, when a consumer had read a truncated record, ``inconsistent-offsets``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import cli
from nemesis.schedule import parse as parse_schedule
from nemesis.targets import Topology
from systems.splitbrain.selectors import SELECTORS

pytestmark = [pytest.mark.integration, pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]

SEED = 1
BUDGET_S = 90


def _spec(tmp_path: Path) -> Path:
    doc: dict[str, Any] = {
        "name": "guided-unclean", "backend": "local",
        "nodes": {"controllers": 3, "broker_sets": {"count": 1, "replicas": 3}},
        "cluster": {"enable_elect_unclean_master": True, "all_ack_in_sync_state_set": True},
        "workloads": [{"name": "queue", "options": {"queues_per_set": 4}}],
        "nemesis": {"packages": ["partition", "kill"], "interval_s": 4,
                    "targets": ["masters", "slaves", "slaves:one", "controller-leader"]},
        "concurrency": 4, "rate": 40, "time_limit_s": BUDGET_S, "phases": {"recovery_s": 3, "final_drain_s": 15},
        "seed": SEED,
    }
    path = tmp_path / "guided-unclean.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.timeout(420)
def test_guided_mode_finds_the_unclean_election_loss(tmp_path: Path) -> None:
    results = tmp_path / "results"
    code = cli.main(["test", str(_spec(tmp_path)), "--nemesis-mode", "guided", "--results", str(results), "--quiet"])
    (run,) = [p for p in (results / "guided-unclean").iterdir() if p.is_dir() and not p.is_symlink()]
    doc = json.loads((run / "results.json").read_text())
    print(f"seed={SEED} run={run} valid={doc['valid']} anomalies={doc.get('anomaly_counts')}")

    # the loss was found.  An out-of-sync slave elected master truncates records the old master had
    # acknowledged and reuses their offsets: when no consumer read a truncated record first it is a
    # ``lost-write``; when one did (the record was read, then its offset came back holding another value) the
    # same loss shows as ``inconsistent-offsets`` instead (CI at 67b13e5 saw 157 of those and no lost-write).
    assert code == 1 and doc["valid"] is False
    assert doc["nemesis_mode"] == "guided"
    counts = doc.get("anomaly_counts") or {}
    assert counts.get("lost-write", 0) + counts.get("inconsistent-offsets", 0) > 0, counts

    # ... by faults the policy chose during the run, recorded as an ordinary schedule equal to what ran
    topo = Topology(("c1", "c2", "c3"), (("b1-1", "b1-2", "b1-3"),), selectors=SELECTORS)  # our pools
    steps = parse_schedule(yaml.safe_load((run / "schedule.yaml").read_text()), topo)
    ops = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines() if line.strip()]
    ran = [(o["f"], o.get("value")) for o in ops if o.get("process") == "nemesis" and o.get("type") == "invoke"]
    assert [(s.f, s.value) for s in steps] == ran[:len(steps)]
    assert all(0 <= s.at_s < BUDGET_S for s in steps)
    assert {"start-partition", "kill"} <= {s.f for s in steps}
