"""``splitbrain test`` on a short Redis spec: the seam end to end (spec -> adapter -> RedisDB with its
``cluster.system_options``, the generic-queue workload on Redis Streams, partition / kill / pause nemeses with
``primaries`` resolving to the node that says ``role:master``, the total-queue judgement, results.json, logs).

Asserts what the run created (exit code, results.json and its verdict fields, the collected logs), not how fast it
ran or which verdict Redis earned.  Skips when not root, without iproute2, or without redis-server and
redis-sentinel (Debian packages; scripts/setup.sh).
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
    pytest.mark.skipif(shutil.which("redis-server") is None or shutil.which("redis-sentinel") is None,
                       reason="needs redis-server and redis-sentinel (Debian packages; scripts/setup.sh)"),
]

SPEC = {
    "name": "redis-short", "system": "redis", "backend": "local", "nodes": {"members": 3},
    "cluster": {"system_options": {"down_after_ms": 1500, "failover_timeout_ms": 4000}},
    "workloads": [{"name": "generic-queue", "options": {"queues": 2}}],
    "nemesis": {"packages": ["partition", "kill", "pause"], "interval_s": 4, "targets": ["primaries", "one"],
                "options": {"partition": {"kinds": ["isolate"], "targets": ["primaries"]}}},
    "concurrency": 6, "rate": 30, "time_limit_s": 20, "phases": {"recovery_s": 8, "final_drain_s": 10}, "seed": 5,
}


def test_splitbrain_test_runs_a_redis_spec_and_writes_a_verdict(tmp_path: Path) -> None:
    spec = tmp_path / "redis-short.yaml"
    spec.write_text(yaml.safe_dump(SPEC), encoding="utf-8")
    results = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "test", str(spec), "--results", str(results),
                           "--quiet"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = [p for p in (results / "redis-short").glob("*/results.json") if not p.parent.is_symlink()]
    assert len(runs) == 1, proc.stdout[-2000:]
    doc = json.loads(runs[0].read_text(encoding="utf-8"))
    assert doc["valid"] in (True, False, "unknown")
    assert (doc["valid"] is True) == (proc.returncode == 0)
    stats = doc["checkers"]["generic-queue/total-queue"]["stats"]
    assert stats["log"] is True and stats["acknowledged"] > 0 and stats["drained_queues"] == ["q0", "q1"]
    assert stats["lost"] == doc["checkers"]["generic-queue/total-queue"]["anomaly_counts"].get("lost-write", 0)
    resolved = yaml.safe_load((runs[0].parent / "test.yaml").read_text(encoding="utf-8"))
    assert resolved["system"] == "redis" and resolved["cluster"]["system_options"]["down_after_ms"] == 1500
    for n in ("m1", "m2", "m3"):
        logs = runs[0].parent / "nodes" / n
        assert (logs / "redis.log").stat().st_size > 0 and (logs / "sentinel.log").stat().st_size > 0
