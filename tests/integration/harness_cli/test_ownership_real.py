"""Ownership for real (local backend, network namespaces): `cluster down` removes only the caller's clusters,
`--all-orphans` only what nobody answers for, and a SIGKILLed harness leaves nothing running for long.

Every test checks only the namespaces, processes and files its own runs recorded; other runs on the machine
may come and go meanwhile.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import cli
from harness.testing.probe import probe_workload
from harness.testing.wait import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]
REPO = Path(__file__).resolve().parents[3]
PROBE = ("import sys; from harness.testing.probe import register_probe_workload as r; r(); "
         "from harness import cli; sys.exit(cli.main(sys.argv[1:]))")


@pytest.fixture(autouse=True)
def _probe_workload() -> Iterator[None]:
    with probe_workload():
        yield


def _spec(tmp_path: Path, name: str, **fields: Any) -> Path:
    doc: dict[str, Any] = {
        "name": name, "backend": "local", "nodes": {"controllers": 1, "broker_sets": {"count": 0}},
        "workloads": ["cli-probe"], "nemesis": None, "concurrency": 2, "rate": 20, "time_limit_s": 60,
        "phases": {"recovery_s": 0, "final_drain_s": 1}, "seed": 3, "cluster": {"election_ticks": 6},
    }
    doc.update(fields)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[0] != "Z"


def _netns_exists(name: str) -> bool:
    return subprocess.run(["ip", "netns", "pids", name], capture_output=True).returncode == 0


def _up(tmp_path: Path, name: str, results: Path) -> dict[str, Any]:
    """`cluster up` in a child process (as a user would: the launcher exits, the cluster stays)."""
    res = subprocess.run([sys.executable, "-c", PROBE, "cluster", "up", str(_spec(tmp_path, name)),
                          "--results", str(results)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "export SPLITBRAIN_CONTROLLERS=" in res.stdout and "export SPLITBRAIN_TOKEN=" in res.stdout
    return dict(json.loads((results / ".clusters" / f"{name}.json").read_text()))


def _state(rec: dict[str, Any]) -> dict[str, Any]:
    return dict(json.loads(Path(rec["local_state"]).read_text()))


@pytest.mark.timeout(180)
def test_down_removes_only_the_callers_clusters_and_orphans_only_what_nobody_owns(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    a = _up(tmp_path, "own-a", mine)
    b = _up(tmp_path, "own-b", theirs)
    try:
        b_pid, b_ns = b["nodes"]["c1"]["pid"], [n["netns"] for n in _state(b)["nodes"].values()]
        assert _state(a)["owner"]["kind"] == "cluster" and _running(a["nodes"]["c1"]["pid"])
        assert cli.main(["cluster", "down", "--results", str(mine), "--all-orphans"]) == 0
        wait_until(lambda: not _running(a["nodes"]["c1"]["pid"]), 10, "own-a's controller to die", poll_s=0.05)
        assert not Path(a["local_state"]).exists()
        # Another results dir's cluster survives a plain `down` and `--all-orphans`: its record owns it.
        assert _running(b_pid) and all(_netns_exists(n) for n in b_ns)
        capsys.readouterr()
        assert cli.main(["admin", "--results", str(theirs), "--json", "metadata"]) == 0  # finds it by itself
        assert json.loads(capsys.readouterr().out)[0]["leader_id"] == "c1"
        # Its record gone (results dir deleted): now it is an orphan anyone may remove.
        (theirs / ".clusters" / "own-b.json").unlink()
        assert cli.main(["cluster", "down", "--results", str(mine), "--all-orphans"]) == 0
        assert f"orphan {_state_id(b)}" in capsys.readouterr().out
        wait_until(lambda: not _running(b_pid), 10, "own-b's controller to die", poll_s=0.05)
        assert not any(_netns_exists(n) for n in b_ns) and not Path(b["local_state"]).exists()
    finally:
        for results, rec in ((mine, a), (theirs, b)):
            if Path(rec["local_state"]).exists():
                from harness.control.local import cleanup_state

                cleanup_state(Path(rec["local_state"]))
            (results / ".clusters" / f"{rec['name']}.json").unlink(missing_ok=True)


def _state_id(rec: dict[str, Any]) -> str:
    return Path(rec["local_state"]).stem


@pytest.mark.timeout(180)
def test_sigkilled_harness_leaves_logs_a_killed_run_and_nothing_running(tmp_path: Path) -> None:
    state_dir, results = tmp_path / "state", tmp_path / "results"
    env = {**os.environ, "SPLITBRAIN_LOCAL_STATE_DIR": str(state_dir)}
    proc = subprocess.Popen([sys.executable, "-c", PROBE, "test", str(_spec(tmp_path, "own-kill")), "--results",
                             str(results), "--quiet"], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: any(p.stat().st_size > 500 for p in results.glob("own-kill/*/history.jsonl")), 90,
                   "the run's main phase", poll_s=0.05)
        [state_file] = list(state_dir.glob("*.json"))
        state = json.loads(state_file.read_text())
        pids = [int(p) for p in state["pids"]]
        namespaces = [n["netns"] for n in state["nodes"].values()]
        assert pids and all(_running(p) for p in pids) and state["run_dir"]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        wait_until(lambda: not any(_running(p) for p in pids), 15, "the node processes to die with the harness",
                   poll_s=0.05)
        wait_until(lambda: not state_file.exists(), 15, "the supervisor to remove the run", poll_s=0.05)
        assert not any(_netns_exists(n) for n in namespaces)
        run = Path(state["run_dir"])
        assert (run / "nodes" / "c1" / "node.log").stat().st_size > 0  # saved before the namespace went
        doc = json.loads((run / "results.json").read_text())
        assert doc["ended"] == "killed" and doc["valid"] == "unknown"
        code = cli.main(["analyze", str(run), "--no-plots"])
        assert code == 2  # re-checked, and a killed run is never reported valid
        doc = json.loads((run / "results.json").read_text())
        assert doc["ended"] == "killed" and doc["history_ops"] > 0 and doc["checkers"]
    finally:
        if proc.poll() is None:
            proc.kill()
        from harness.control.local import cleanup_all

        cleanup_all(state_dir=state_dir)
