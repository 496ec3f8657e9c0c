"""``splitbrain test`` on a short etcd spec: the seam end to end (spec -> adapter -> EtcdDB, the register workload,
kill/pause/partition nemeses with ``primaries`` resolving to the etcd leader, the per-key checker, results.json).

Asserts what the run created (exit code, results.json and its verdict fields), not how fast it ran or which verdict
etcd earned.  Skips when not root, without iproute2, or without etcd (Debian ``etcd-server``; scripts/setup.sh).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None, reason="needs root and iproute2"),
    pytest.mark.skipif(shutil.which("etcd") is None,
                       reason="needs etcd (Debian package etcd-server; scripts/setup.sh installs it)"),
]

SPEC = {
    "name": "etcd-short", "system": "etcd", "backend": "local", "nodes": {"members": 3},
    "workloads": [{"name": "register", "options": {"read_mode": "linearizable", "keys": 2}}],
    "nemesis": {"packages": ["partition", "kill", "pause"], "interval_s": 3, "targets": ["one", "primaries"],
                "options": {"partition": {"kinds": ["random-halves", "isolate"]}}},
    "concurrency": 4, "rate": 30, "time_limit_s": 20, "phases": {"recovery_s": 3, "final_drain_s": 5}, "seed": 11,
}


def _run(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[Path]]:
    spec = tmp_path / "etcd-short.yaml"
    spec.write_text(yaml.safe_dump(SPEC), encoding="utf-8")
    results = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "test", str(spec), "--results", str(results),
                           "--quiet", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    return proc, [p for p in (results / "etcd-short").glob("*/results.json") if not p.parent.is_symlink()]


def test_splitbrain_test_runs_an_etcd_spec_and_writes_a_verdict(tmp_path: Path) -> None:
    proc, runs = _run(tmp_path)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    assert len(runs) == 1, proc.stdout[-2000:]
    doc = json.loads(runs[0].read_text(encoding="utf-8"))
    assert doc["valid"] in (True, False, "unknown")
    assert (doc["valid"] is True) == (proc.returncode == 0)
    keys = doc["checkers"]["register/linearizable"]["stats"]["keys"]
    assert set(keys) <= {"r0", "r1"} and keys
    resolved = yaml.safe_load((runs[0].parent / "test.yaml").read_text(encoding="utf-8"))
    assert resolved["system"] == "etcd" and resolved["nodes"]["members"] == ["m1", "m2", "m3"]
    assert {p.name for p in (runs[0].parent / "nodes").iterdir()} == {"m1", "m2", "m3"}
    assert all((runs[0].parent / "nodes" / n / "etcd.log").exists() for n in ("m1", "m2", "m3"))


def test_guided_mode_watches_etcd_from_outside(tmp_path: Path) -> None:
    """etcd reports no events of its own: guided mode runs on who leads (asked every round) and the clients'
    outcomes, and writes the schedule it chose."""
    proc, runs = _run(tmp_path, "--nemesis-mode", "guided")
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    assert len(runs) == 1, proc.stdout[-2000:]
    run = runs[0].parent
    events = [json.loads(line) for line in (run / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    gained = [e for e in events if e["kind"] == "primary-change" and e["change"] == "gained"]
    assert gained and {e["node"] for e in gained} <= {"m1", "m2", "m3"}
    assert any(e["kind"] == "client-outcome" for e in events)
    doc = json.loads(runs[0].read_text(encoding="utf-8"))
    assert doc["nemesis_mode"] == "guided" and doc["coverage"]["points"] > 0
    steps = yaml.safe_load((run / "schedule.yaml").read_text(encoding="utf-8"))
    assert steps and all(s["f"] in {"start-partition", "stop-partition", "kill", "start", "pause", "resume"}
                         for s in steps)
