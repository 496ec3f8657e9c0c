"""``--bug non-atomic-meta`` (broker): ``.broker.meta`` is written in place in two halves.  The broker-ids
workload's lane for ``broker.meta.before_rename`` crashes a fresh broker between the halves; the torn file makes
the restart refuse to start (``restart-refused``).  The unbroken cluster passes the same seed and lanes: every
crashed broker comes back with its id on a changed address.  Needs root and iproute2 (skipped otherwise)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.testing.run_workload import NEEDS_NAMESPACES, run_workload

pytestmark = [pytest.mark.integration, NEEDS_NAMESPACES]

SEED = 380
# lanes for the first 7 failpoints: up to broker.meta.before_rename (index 6)
# the run ends once every lane has run; 90 s is only a ceiling for a slow host
OPTIONS = {"failpoints": 7, "lanes": 3, "virtual_sets": 1, "real_sets": 1, "spawn_timeout_s": 12.0,
           "stop_after_lanes": True}


@pytest.mark.timeout(180)
@pytest.mark.parametrize("bugs", [[], ["non-atomic-meta"]], ids=["correct", "non-atomic-meta"])
def test_torn_meta_is_caught_and_the_atomic_writer_survives_every_crash(tmp_path: Path, bugs: list[str]) -> None:
    out = run_workload(tmp_path, workload="broker-ids", options=OPTIONS, seed=SEED, cluster={"bugs": bugs},
                       broker_sets={"count": 1, "replicas": 1}, time_limit_s=90.0, op_timeout_s=15.0,
                       rate=10.0, concurrency=4)
    checks = out.results["checkers"]
    restarts = checks["restarts"]
    print(restarts, checks["invariants"], checks["stats"])
    crashes = restarts["stats"]["crashes"]
    assert crashes.get("broker.meta.before_rename", {}).get("hit") == 1, crashes
    if not bugs:
        assert restarts["valid"] is True, restarts
        assert sum(c["hit"] for c in crashes.values()) == 7 and checks["invariants"]["valid"] is True, checks
        assert checks["invariants"]["stats"]["by_kind"].get("broker-id", 0) >= 14, checks["invariants"]
        assert out.valid is True, out.results
    else:
        assert restarts["valid"] is False, restarts
        assert restarts["anomaly_counts"].get("restart-refused", 0) >= 1, restarts
        assert out.exit_code == 1
