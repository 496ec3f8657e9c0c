"""Third-party systems on the docker backend, through the real CLI: ``splitbrain test`` of a short etcd spec
(linearizable reads under kills and partitions), a short Redis + Sentinel spec (``examples/redis-wait.yaml``'s
safe settings under partitions of the master) and a short RabbitMQ spec (quorum queues under partitions), each in
containers of its system's node image (``splitbrain/node-<system>``: the node image plus the packages the adapter
declares, built on demand; the node image alone carries none of those daemons).

Asserts what the runs created (exit code, verdict, the checker's stats, the collected logs) and that faults took
effect; the verdicts are the ones the same shapes earn on the local backend
(docs/systems.md).  Skips only when no docker engine is reachable, as the other docker end-to-end tests do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.images import ensure_system_image

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]
REPO = Path(__file__).resolve().parents[2]

ETCD = {
    "name": "etcd-docker", "system": "etcd", "backend": "docker", "nodes": {"members": 3},
    "workloads": [{"name": "register", "options": {"read_mode": "linearizable", "keys": 3, "values": 10}}],
    "nemesis": {"packages": ["partition", "kill"], "interval_s": 5, "targets": ["one"],
                "options": {"partition": {"kinds": ["isolate", "random-halves"], "targets": ["one"]}}},
    "concurrency": 6, "rate": 30, "time_limit_s": 35, "phases": {"recovery_s": 5, "final_drain_s": 5}, "seed": 7,
}

REDIS = {
    "name": "redis-docker", "system": "redis", "backend": "docker", "nodes": {"members": 3},
    "cluster": {"system_options": {"wait_replicas": "all", "wait_timeout_ms": 1000, "min_replicas_to_write": 1,
                                   "min_replicas_max_lag_s": 5, "down_after_ms": 2500, "failover_timeout_ms": 6000}},
    "workloads": [{"name": "generic-queue", "options": {"queues": 2, "send_fraction": 0.6, "max_poll": 16,
                                                        "timeout_s": 2.0}}],
    "nemesis": {"packages": ["partition"], "interval_s": 8, "targets": ["primaries"],
                "options": {"partition": {"kinds": ["isolate"], "targets": ["primaries"]}}},
    "concurrency": 6, "rate": 30, "time_limit_s": 35, "phases": {"recovery_s": 15, "final_drain_s": 15}, "seed": 1,
}

RABBITMQ = {
    "name": "rabbitmq-docker", "system": "rabbitmq", "backend": "docker", "nodes": {"members": 3},
    "workloads": [{"name": "generic-queue", "options": {"queues": 2, "send_fraction": 0.75, "max_poll": 2,
                                                        "timeout_s": 2.0}}],
    "nemesis": {"packages": ["partition"], "interval_s": 10, "targets": ["one"],
                "options": {"partition": {"kinds": ["isolate", "random-halves"], "targets": ["one"]}}},
    "concurrency": 6, "rate": 30, "time_limit_s": 35, "phases": {"recovery_s": 20, "final_drain_s": 30}, "seed": 1,
}


def _system_image(system: str) -> str:
    t0 = time.monotonic()
    report = ensure_system_image(system)
    assert report is not None
    print(f"[e2e] {report.describe()} (fixture {time.monotonic() - t0:.1f} s)")
    return report.image


def _run(spec: dict[str, Any], tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    path = tmp_path / f"{spec['name']}.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    results = tmp_path / "results"
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "test", str(path), "--results", str(results),
                           "--quiet"], capture_output=True, text=True, cwd=REPO, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    print(f"[e2e] {spec['name']}: exit {proc.returncode} in {time.monotonic() - t0:.1f} s")
    runs = [p.parent for p in (results / spec["name"]).glob("*/results.json") if not p.parent.is_symlink()]
    assert len(runs) == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, runs[0]


def _effective_faults(run: Path) -> list[str]:
    history = [json.loads(line) for line in (run / "history.jsonl").read_text(encoding="utf-8").splitlines()]
    return [op["fault"] for op in history if op["process"] == "nemesis" and op["type"] != "invoke"
            and op.get("effective") is True]


def test_etcd_on_docker_is_linearizable_under_kills_and_partitions(node_image: str, tmp_path: Path) -> None:
    image = _system_image("etcd")
    proc, run = _run(ETCD, tmp_path)
    doc = json.loads((run / "results.json").read_text(encoding="utf-8"))
    checker = doc["checkers"]["register/linearizable"]
    assert proc.returncode == 0 and doc["valid"] is True, (proc.returncode, checker, proc.stderr[-3000:])
    assert set(checker["stats"]["keys"]) <= {"r0", "r1", "r2"} and checker["stats"]["keys"]
    assert doc["counts"]["ok"] > 100, doc["counts"]
    assert _effective_faults(run), "no kill or partition took effect"
    for n in ("m1", "m2", "m3"):
        assert (run / "nodes" / n / "etcd.log").stat().st_size > 0
    assert image.startswith("splitbrain/node-etcd:")


def test_redis_with_wait_on_docker_loses_nothing_under_master_partitions(node_image: str, tmp_path: Path) -> None:
    _system_image("redis")
    proc, run = _run(REDIS, tmp_path)
    doc = json.loads((run / "results.json").read_text(encoding="utf-8"))
    checker = doc["checkers"]["generic-queue/total-queue"]
    assert proc.returncode == 0 and doc["valid"] is True, (proc.returncode, checker, proc.stderr[-3000:])
    stats = checker["stats"]
    assert stats["acknowledged"] > 50 and stats["lost"] == 0 and stats["drained_queues"] == ["q0", "q1"], stats
    assert _effective_faults(run), "no partition took effect"
    for n in ("m1", "m2", "m3"):
        assert (run / "nodes" / n / "redis.log").stat().st_size > 0
        assert (run / "nodes" / n / "sentinel.log").stat().st_size > 0


def test_rabbitmq_quorum_queues_on_docker_lose_nothing_under_partitions(node_image: str, tmp_path: Path) -> None:
    """The broker's files (cookie, configs) reach the container through the Remote, not the harness's disk."""
    _system_image("rabbitmq")
    proc, run = _run(RABBITMQ, tmp_path)
    doc = json.loads((run / "results.json").read_text(encoding="utf-8"))
    checker = doc["checkers"]["generic-queue/total-queue"]
    assert proc.returncode == 0 and doc["valid"] is True, (proc.returncode, checker, proc.stderr[-3000:])
    stats = checker["stats"]
    assert stats["acknowledged"] > 50 and stats["lost"] == 0, stats
    assert _effective_faults(run), "no partition took effect"
    assert all((run / "nodes" / n / "rabbitmq.log").stat().st_size > 0 for n in ("m1", "m2", "m3"))
