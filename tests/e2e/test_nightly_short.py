"""The nightly suite in CI's short form: ``examples/nightly.yaml`` (every workload under every packaged
fault, on docker) through the real CLI with a 20-second main phase.  The full matrix runs nightly with
``splitbrain test-all examples/nightly.yaml --matrix``."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
REPO = Path(__file__).resolve().parents[2]


def test_short_nightly_on_docker_is_valid_and_exercises_every_workload_and_fault_kind(
        node_image: str, tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "harness.cli", "test", str(REPO / "examples" / "nightly.yaml"),
                          "--time-limit", "20", "--seed", "20261123", "--rate", "100", "--results", str(tmp_path),
                          "--quiet"],  # CI's cost stays what it was: the spec's own rate (400) is the nightly's
                         cwd=REPO, capture_output=True, text=True, timeout=850)
    run_dir = next(tmp_path.glob("nightly/2*"))
    results = json.loads((run_dir / "results.json").read_text())
    bad = {k: v for k, v in results["checkers"].items() if isinstance(v, dict) and v.get("valid") is not True}
    assert res.returncode == 0 and results["valid"] is True, (res.returncode, bad, res.stderr[-3000:])
    assert {k.split("/")[0] for k in results["checkers"]} == {"queue", "controller-register", "broker-ids",
                                                              "membership", "availability", "cluster-events"}
    history = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    done = Counter(op["f"] for op in history if op["type"] == "ok")
    for f in ("send", "poll", "read", "next-id", "apply-id", "read-members", "drain"):
        assert done[f] > 0, (f, done)
    faults = {op["f"] for op in history if op["process"] == "nemesis" and op["type"] == "invoke"}
    assert len(faults) >= 4, faults  # several kinds of fault in 20 s, then the heal
    assert {"stop-partition", "start", "reset-clock", "stop-packet", "stop-disk"} <= faults, faults
