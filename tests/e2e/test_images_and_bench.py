"""`splitbrain images build` reuses the built image quickly, and bench/cluster_up.py measures 9
containers up and the real cluster ready on both backends (figures printed with their targets;
the test checks the bench works, it does not gate on the machine's speed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
REPO = Path(__file__).resolve().parents[2]


def test_images_build_cli_reuses_existing_images(node_image: str) -> None:
    res = subprocess.run([sys.executable, "-m", "harness.cli", "images", "build"], capture_output=True, text=True,
                         timeout=120, cwd=REPO)
    assert res.returncode == 0, res.stderr
    assert f"node {node_image} (reused)" in res.stdout


def test_images_build_rejects_a_missing_base(node_image: str) -> None:
    res = subprocess.run([sys.executable, "-m", "harness.cli", "images", "build", "--base", "nosuch/image:1"],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert res.returncode == 2 and "--base nosuch/image:1: the engine has no such image" in res.stderr


def test_cluster_up_bench_measures_containers_and_the_real_cluster(node_image: str) -> None:
    res = subprocess.run([sys.executable, str(REPO / "bench" / "cluster_up.py"), "--json"], capture_output=True,
                         text=True, timeout=280, cwd=REPO)
    out = json.loads(res.stdout)
    print(out)
    figures, targets = out["figures"], out["targets"]
    assert figures["nodes"] == 9 and figures["image_reused"] is True
    for key in ("docker_cluster_up_s", "local_splitbrain_ready_s", "docker_splitbrain_ready_s"):
        assert 0 < figures[key] < 120 and key in targets, out  # measured (a failed setup raises instead)
    assert res.returncode == (0 if out["meets_targets"] else 1)
