"""docker-compose.yml brought fully up: 3 controllers form a quorum and both broker sets register
all three brokers in their SyncStateSet, as seen by `splitbrain admin` on the control node."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
REPO = Path(__file__).resolve().parents[2]
ADMIN = ["splitbrain", "admin", "--controllers", "c1:9101,c2:9101,c3:9101", "--token-file",
         "/run/secrets/cluster_token", "--json", "sync-state-set"]


def _compose(project: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker-compose", "-p", project, "-f", str(REPO / "docker-compose.yml"), *args],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO)


def test_compose_cluster_comes_up(node_image: str) -> None:
    if shutil.which("docker-compose") is None:
        pytest.skip("docker-compose is not installed")
    project = f"sbcompose{os.getpid()}"
    try:
        up = _compose(project, "up", "-d")
        assert up.returncode == 0, up.stderr
        deadline = time.monotonic() + 90
        last = ""
        while True:
            res = _compose(project, "exec", "-T", "control", *ADMIN, timeout=60)
            last = res.stdout + res.stderr
            if res.returncode == 0:
                sets = {s["broker_name"]: s for s in json.loads(res.stdout)}
                in_set = {name: sorted(s.get("sync_state_set") or []) for name, s in sets.items()}
                if in_set.get("bs1") == [1, 2, 3] and in_set.get("bs2") == [1, 2, 3]:
                    break
            if time.monotonic() > deadline:
                logs = _compose(project, "logs", "--tail", "20").stdout
                raise AssertionError(f"cluster not formed within 90 s; last admin output:\n{last}\nlogs:\n{logs}")
            time.sleep(2)
    finally:
        _compose(project, "down", "-v", "--remove-orphans", timeout=180)
    assert _compose(project, "ps", "-q").stdout.strip() == ""
