"""``splitbrain sim`` finds ``--bug reuse-broker-id`` and ``--bug no-epoch-fencing`` with the simulated ``broker-ids``
allocator ops, ``membership`` lifecycle ops and ``controller-register`` pinned alters, judged by those workloads'
own checkers (as in a real run), and the correct cluster passes the same seeds.

Each case is one ``splitbrain sim`` process (a sweep of fixed seeds, ``--json``), started with this checkout on
its import path and in a directory of its own.  The seeds are ones the sweep in docs/simulation.md found the bug
with; the simulation replays a seed exactly, so a seed that stops finding it is a change of behaviour."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[3]
SEEDS = (0, 1, 2)
SECONDS = "10"


def _sweep(tmp_path: Path, *extra: str) -> list[dict[str, Any]]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0"}
    argv = [sys.executable, "-m", "harness.cli", "sim", "--seed", str(SEEDS[0]), "--seeds", str(len(SEEDS)),
            "--seconds", SECONDS, "--json", "--out", str(tmp_path / "runs"), *extra]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
                          stdin=subprocess.DEVNULL)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert [d["seed"] for d in lines] == list(SEEDS), proc.stdout + proc.stderr
    assert proc.returncode == (1 if any(d["valid"] is False for d in lines) else 0), proc.stderr
    return lines


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("bug", "anomaly", "checker"), [
    ("reuse-broker-id", "nonlinearizable", "broker-ids/linearizable"),
    ("no-epoch-fencing", "stale-epoch-accepted", "membership/membership"),
    ("no-epoch-fencing", "nonlinearizable", "controller-register/linearizable"),
])
def test_the_simulated_workload_ops_find_the_bug(tmp_path: Path, bug: str, anomaly: str, checker: str) -> None:
    for d in _sweep(tmp_path, "--bug", bug):
        assert d["valid"] is False and d["anomaly_counts"].get(anomaly, 0) >= 1, d
        results = json.loads((Path(d["dir"]) / "results.json").read_text(encoding="utf-8"))
        assert results["checkers"][checker]["valid"] is False, results["checkers"][checker]


@pytest.mark.timeout(120)
def test_the_correct_cluster_passes_the_same_seeds(tmp_path: Path) -> None:
    for d in _sweep(tmp_path):
        assert d["valid"] is True, d
