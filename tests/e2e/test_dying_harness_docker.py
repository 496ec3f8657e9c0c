"""A SIGKILLed harness on the docker backend: within a few seconds its run's supervisor has saved the node logs
into the run directory, marked the run ``ended: killed`` (and ``analyze`` works on it) and removed the run's
containers and network.

The test looks only at what its own run created: the state file in its own state directory names the run's
prefix and owner label, and every docker query filters on exactly those labels (other runs may come and go).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import cli
from harness.control.docker import cleanup_run, default_image, owned_filter
from harness.images import docker_client
from harness.testing.probe import probe_workload
from harness.testing.wait import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
REPO = Path(__file__).resolve().parents[2]
PROBE = ("import sys; from harness.testing.probe import register_probe_workload as r; r(); "
         "from harness import cli; sys.exit(cli.main(sys.argv[1:]))")


def _owned(prefix: str, owner_label: str) -> list[str]:
    """Names of the containers and networks carrying this run's and this owner's labels."""
    client = docker_client()
    flt = owned_filter(prefix, owner_label)
    return [c.name for c in client.containers.list(all=True, filters=flt)] + \
        [n.name for n in client.networks.list(filters=flt)]


def test_sigkilled_harness_on_docker_leaves_logs_a_killed_run_and_no_containers(node_image: str,
                                                                                 tmp_path: Path) -> None:
    assert node_image == default_image()  # what `splitbrain test --backend docker` will start
    state_dir, results = tmp_path / "state", tmp_path / "results"
    spec = tmp_path / "dock-kill.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "dock-kill", "backend": "docker", "nodes": {"controllers": 1, "broker_sets": {"count": 0}},
        "workloads": ["cli-probe"], "nemesis": None, "concurrency": 2, "rate": 20, "time_limit_s": 120,
        "phases": {"recovery_s": 0, "final_drain_s": 1}, "seed": 3, "cluster": {"election_ticks": 6},
    }))
    env = {**os.environ, "SPLITBRAIN_DOCKER_STATE_DIR": str(state_dir)}
    proc = subprocess.Popen([sys.executable, "-c", PROBE, "test", str(spec), "--results", str(results), "--quiet"],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state: dict[str, Any] = {}
    try:
        wait_until(lambda: any(p.stat().st_size > 500 for p in results.glob("dock-kill/*/history.jsonl"))
              or proc.poll() is not None, 150, "the run's main phase")
        assert proc.poll() is None, f"the harness exited early with {proc.returncode}"
        [state_file] = list(state_dir.glob("*.json"))
        state = json.loads(state_file.read_text())
        prefix, owner_label, run = state["prefix"], state["owner_label"], Path(state["run_dir"])
        assert state["owner"]["pid"] == proc.pid and run.parent == (results / "dock-kill").resolve()
        assert sorted(_owned(prefix, owner_label)) == [f"{prefix}-c1", f"{prefix}-net"]

        proc.send_signal(signal.SIGKILL)
        t_kill = time.monotonic()
        proc.wait(10)
        wait_until(lambda: not state_file.exists() and not _owned(prefix, owner_label), 30,
              f"the supervisor to remove run {prefix}")
        print(f"[e2e] run {prefix} saved and removed {time.monotonic() - t_kill:.1f} s after the SIGKILL")
        assert (run / "nodes" / "c1" / "node.log").stat().st_size > 0  # saved before the container went
        doc = json.loads((run / "results.json").read_text())
        assert doc["ended"] == "killed" and doc["valid"] == "unknown"

        with probe_workload():
            code = cli.main(["analyze", str(run), "--no-plots"])
        assert code == 2  # re-checked, and a killed run is never reported valid
        doc = json.loads((run / "results.json").read_text())
        assert doc["ended"] == "killed" and doc["history_ops"] > 0 and doc["checkers"]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for f in [] if state else state_dir.glob("*.json"):  # failed before reading it: still only our run
            state = json.loads(f.read_text())
        if state.get("prefix") and state.get("owner_label"):
            cleanup_run(state["prefix"], owner_label=state["owner_label"])  # only ours, whatever happened
