"""``--bug reuse-broker-id`` (controller): ApplyBrokerId of an id above the next one bumps the next id by one
only, and accepts free ids below it.  The broker-ids workload's allocator ops catch it (GetNextBrokerId returns
an id that is not the next one / a stale id is applied); the unbroken cluster passes the same seed.
Needs root and iproute2 (skipped otherwise)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.testing.run_workload import NEEDS_NAMESPACES, run_workload

pytestmark = [pytest.mark.integration, NEEDS_NAMESPACES]

SEED = 631
OPTIONS = {"failpoints": 0, "virtual_sets": 2, "apply_fraction": 0.5, "read_fraction": 0.2}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("bugs", [[], ["reuse-broker-id"]], ids=["correct", "reuse-broker-id"])
def test_allocator_linearizability_separates_the_bug_from_the_correct_controller(tmp_path: Path,
                                                                                  bugs: list[str]) -> None:
    out = run_workload(tmp_path, workload="broker-ids", options=OPTIONS, seed=SEED, cluster={"bugs": bugs},
                       broker_sets={"count": 0, "replicas": 1}, time_limit_s=8.0)
    checks = out.results["checkers"]
    lin = checks["linearizable"]
    assert checks["stats"]["stats"]["by_f"]["apply-id"]["ok"] > 20, checks["stats"]
    if not bugs:
        assert lin["valid"] is True, lin
        assert checks["invariants"]["valid"] is True, checks["invariants"]
        assert out.valid is True, out.results
    else:
        assert lin["valid"] is False, lin
        text = str(lin)
        assert "GetNextBrokerId returned" in text or "was applied but" in text, lin
        assert out.exit_code == 1
