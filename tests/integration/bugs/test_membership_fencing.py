"""The membership workload against real brokers: bounced brokers get a new broker epoch and keep their id, a
controlled shutdown of the master moves mastership first, a paused (fenced) master acknowledges nothing once
superseded, and a heartbeat with a stale broker epoch is refused.  ``--bug no-epoch-fencing`` (controller) makes
the stale heartbeat go through: ``stale-epoch-accepted``.  Needs root and iproute2 (skipped otherwise)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.testing.run_workload import NEEDS_NAMESPACES, run_workload

pytestmark = [pytest.mark.integration, NEEDS_NAMESPACES]

SEED = 5


@pytest.mark.timeout(60)
@pytest.mark.parametrize("bugs", [[], ["no-epoch-fencing"]], ids=["correct", "no-epoch-fencing"])
def test_membership_changes_keep_ids_bump_epochs_and_fence(tmp_path: Path, bugs: list[str]) -> None:
    out = run_workload(tmp_path, workload="membership", options={"brokers": 3}, seed=SEED,
                       cluster={"bugs": bugs}, broker_sets={"count": 1, "replicas": 1}, time_limit_s=25.0,
                       op_timeout_s=20.0, rate=5.0, concurrency=2)
    checks = out.results["checkers"]
    m = checks["membership"]
    print(m, checks["invariants"], checks["stats"])
    done = m["stats"]["ok_by_f"]
    assert done.get("bounce", 0) + done.get("leave", 0) >= 3, m
    if not bugs:
        assert m["valid"] is True and checks["invariants"]["valid"] is True, checks
        assert out.valid is True, out.results
    else:
        assert m["anomaly_counts"].get("stale-epoch-accepted", 0) >= 1, m
        assert out.exit_code == 1
