"""`splitbrain images build` reuses the built image quickly, and bench/cluster_up.py meets its
target: 9 containers up with a working exec within 15 s."""

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


def test_cluster_up_bench_meets_target(node_image: str) -> None:
    res = subprocess.run([sys.executable, str(REPO / "bench" / "cluster_up.py"), "--json"], capture_output=True,
                         text=True, timeout=240, cwd=REPO)
    out = json.loads(res.stdout)
    print(out)
    assert out["figures"]["nodes"] == 9 and out["figures"]["image_reused"] is True
    assert out["figures"]["docker_cluster_up_s"] <= out["targets"]["docker_cluster_up_s"], out
    assert res.returncode == 0 and out["meets_targets"] is True
