"""The ``registration-crash`` nemesis + the broker-ids checkers: with ``--bug non-atomic-meta`` the crash between
the two halves of the in-place ``.broker.meta`` write leaves a torn file and the restart is refused
(``restart-refused``; the nemesis records the torn file); the unbroken cluster comes back from every crash with
its id on a changed address.  Needs root and iproute2 (skipped otherwise)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import generator as g
from harness.testing.run_workload import NEEDS_NAMESPACES, run_workload

pytestmark = [pytest.mark.integration, NEEDS_NAMESPACES]

SEED = 86
POINTS = ["broker.apply_broker_id.after_reply", "broker.meta.before_rename", "broker.meta.after_rename",
          "broker.register.after_reply"]
WALK = [g.sleep(0.5), *({"f": "registration-crash", "value": {"failpoint": fp}} for fp in POINTS)]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("bugs", [[], ["non-atomic-meta"]], ids=["correct", "non-atomic-meta"])
def test_nemesis_walk_finds_the_torn_meta(tmp_path: Path, bugs: list[str]) -> None:
    out = run_workload(tmp_path, workload="broker-ids", options={"failpoints": 0, "virtual_sets": 1}, seed=SEED,
                       cluster={"bugs": bugs}, broker_sets={"count": 1, "replicas": 1}, time_limit_s=22.0,
                       nemesis=["registration-crash"], schedule=WALK, rate=10.0)
    checks = out.results["checkers"]
    restarts = checks["restarts"]
    walks = [json.loads(line) for line in out.run_dir.history.read_text().splitlines()
             if '"registration-crash"' in line and '"invoke"' not in line]
    print(restarts, [(w["value"]["failpoint"], w["value"].get("restart")) for w in walks])
    assert [w["value"]["failpoint"] for w in walks] == POINTS
    assert all(w["value"]["crash"]["hit"] for w in walks), walks
    torn = walks[1]["value"]["crash"]["files"]
    if not bugs:
        assert restarts["valid"] is True and checks["invariants"]["valid"] is True, checks
        assert all(isinstance(w["value"]["restart"].get("broker_id"), int) for w in walks), walks
        assert "corrupt" not in json.dumps(torn), torn
        assert out.valid is True, out.results
    else:
        assert "corrupt" in torn.get(".broker.meta", {}), torn
        assert restarts["valid"] is False and restarts["anomaly_counts"]["restart-refused"] >= 1, restarts
        assert out.exit_code == 1
