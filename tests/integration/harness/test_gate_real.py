"""``splitbrain gate`` end to end on real clusters: the baseline is this checkout's commit, each candidate a
throwaway commit made with git's plumbing (work tree, index and refs untouched) that carries a real change of the
cluster's code:

* a safety regression -- an off-by-one in the store's dispatch rule (a record that ends exactly at the confirm
  offset is not handed to consumers until a later record arrives, so the last acknowledged send is never read):
  the gate fails the cell on the first candidate run and says why, and whether the baseline showed it;
* a recovery slowdown -- the controller counts a broker as alive for two leases instead of one, so a killed
  master is replaced one lease later: no anomaly, but slower under the kill, and the gate fails on that;
* the same cluster code at another commit: the gate passes.

One cell, a written schedule (kill the master, restart it), short runs; safety cells pass after 4 clean runs
(``--min-rate 0.5 --power 0.9``) and the performance sample is 8 seed pairs (the least the comparison uses).
Each test uses its own results root and build cache and asserts only on what it made.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.revisions import commit_with_changes

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("git") is None,
                       reason="needs root, iproute2 and git"),
]
REPO = Path(__file__).resolve().parents[3]
SPEC = {
    "name": "gate-kill", "backend": "local",
    "nodes": {"controllers": 3, "broker_sets": {"count": 1, "replicas": 3}},
    "cluster": {"all_ack_in_sync_state_set": True, "enable_elect_unclean_master": False},
    "workloads": [{"name": "queue", "options": {"queues_per_set": 2}}],
    "nemesis": {"schedule": [{"at_s": 2, "f": "kill", "value": "masters"}, {"at_s": 8, "f": "start"}]},
    "concurrency": 4, "rate": 60, "time_limit_s": 10, "phases": {"recovery_s": 3, "final_drain_s": 10},
}
CELL = "gate-kill: queue x schedule"


def _head(path: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), "show", f"HEAD:{path}"], capture_output=True, text=True,
                          check=True).stdout


def _candidate(path: str, old: str, new: str, message: str) -> str:
    text = _head(path)
    assert text.count(old) == 1, f"{path} no longer holds {old!r}: update this test's regression"
    return commit_with_changes({path: text.replace(old, new).encode()}, message=message)


def _gate(tmp_path: Path, candidate: str, *extra: str) -> subprocess.CompletedProcess[str]:
    spec = tmp_path / "gate-kill.yaml"
    spec.write_text(yaml.safe_dump(SPEC), encoding="utf-8")
    env = {**os.environ, "SPLITBRAIN_SUT_CACHE": str(tmp_path / "cache")}
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "gate", "--baseline", "HEAD", "--candidate", candidate, str(spec),
         "--min-rate", "0.5", "--power", "0.9", "--perf-runs", "8", "--jobs", "2", "--results",
         str(tmp_path / "results"), "--junit", str(tmp_path / "junit.xml"), *extra],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=1500, stdin=subprocess.DEVNULL)


def test_a_safety_regression_fails_the_gate_with_the_anomaly_and_how_to_replay_it(tmp_path: Path) -> None:
    candidate = _candidate("system_under_test/broker/store/store.py",
                           "while pending and pending[0][3] + pending[0][4] <= offset:",
                           "while pending and pending[0][3] + pending[0][4] < offset:",
                           "test: dispatch stops one record short of the confirm offset")
    res = _gate(tmp_path, candidate, "--budget-runs", "12")
    out = res.stdout
    assert res.returncode == 1, out[-3000:] + res.stderr[-2000:]
    assert f"[gate] FAIL {CELL}: " in out and "definite anomaly" in out
    assert "unseen" in out and "replay: splitbrain repro" in out
    assert "never seen in the baseline" in out  # the baseline's run of the same seed finished first, and was clean
    assert "gate: FAIL" in out and CELL in out.splitlines()[-1]
    junit = (tmp_path / "junit.xml").read_text(encoding="utf-8")
    assert "<failure" in junit and "gate-kill" in junit


def test_a_recovery_slowdown_fails_the_gate_naming_the_fault_and_the_figure(tmp_path: Path) -> None:
    candidate = _candidate("system_under_test/controller/heartbeat.py",
                           "return rec is not None and rec.expires_at_ms() >= now_ms",
                           "return rec is not None and rec.expires_at_ms() + rec.lease_timeout_ms >= now_ms",
                           "test: a broker counts as alive for two leases")
    res = _gate(tmp_path, candidate, "--budget-runs", "24")
    out = res.stdout
    assert res.returncode == 1, out[-3000:] + res.stderr[-2000:]
    last = out.splitlines()[-1]
    assert last.startswith("gate: FAIL") and CELL in last and "kill" in last and "slower" in last, last
    assert "unavailable_s" in last and "definite anomaly" not in last  # no run had one: the verdict is the slowdown


def test_the_same_cluster_code_at_another_commit_passes(tmp_path: Path) -> None:
    candidate = commit_with_changes({"README.md": (_head("README.md") + "\n").encode()},
                                    message="test: the same cluster code")
    res = _gate(tmp_path, candidate, "--budget-runs", "24")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert res.stdout.splitlines()[-1].startswith("gate: PASS"), res.stdout[-1500:]
