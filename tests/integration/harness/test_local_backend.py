"""The runner on the local netns backend with the counter system: a real run (``splitbrain selftest`` and
``splitbrain test examples/counter.yaml``), Ctrl-C, crash cleanup.

Needs root and iproute2 (skipped otherwise).  Each test uses its own state directory, so it only
ever sees and removes what it created, and it asserts only about the namespaces, processes and firewall
rules its own state file names: other runs on the same machine may come and go meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from checker.history import pair_ops, read_jsonl
from harness.control.base import CommandFailed, ControlError
from harness.control.local import LocalRemote, cleanup_all
from harness.spec import spec_from_dict

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None, reason="needs root and iproute2"),
]
REPO = Path(__file__).resolve().parents[3]


def netns_exists(name: str) -> bool:
    """Whether this one namespace exists (never a listing of the machine's namespaces)."""
    return subprocess.run(["ip", "netns", "pids", name], capture_output=True).returncode == 0


def fw_rule_present(bridge: str) -> bool:
    """Whether the FORWARD rule for our own bridge is still there (``iptables -C`` checks just that rule)."""
    from harness.control.local import _fw_rule

    return subprocess.run(["iptables", "-w", "-C", "FORWARD", *_fw_rule(bridge)], capture_output=True).returncode == 0


def wait_gone(pids: list[int], timeout_s: float = 10.0) -> bool:
    """Wait (bounded) until none of ``pids`` runs; a bound for hangs, not a speed."""
    deadline = time.monotonic() + timeout_s
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(alive(p) for p in pids)


def watch_state(state_dir: Path, out: dict[str, set[str]], stop: threading.Event) -> None:
    """Remember every namespace the run's state files name while it runs (the files vanish at clean-up)."""
    while not stop.is_set():
        for f in state_dir.glob("*.json"):
            with contextlib.suppress(OSError, ValueError):
                out.setdefault("netns", set()).update(n["netns"] for n in json.loads(f.read_text())["nodes"].values())
        stop.wait(0.05)


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def run_counter(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "SPLITBRAIN_LOCAL_STATE_DIR": str(tmp_path / "state"), "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "harness.testing.run_counter", "--results", str(tmp_path / "results"), "--quiet",
         "--seed", "5", *args],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


@pytest.mark.timeout(90)
def test_counter_run_writes_a_valid_results_dir(tmp_path: Path) -> None:
    seen: dict[str, set[str]] = {}
    stop = threading.Event()
    watcher = threading.Thread(target=watch_state, args=(tmp_path / "state", seen, stop), daemon=True)
    watcher.start()
    proc = run_counter(tmp_path, "--time-limit", "5", "--concurrency", "3", "--rate", "100")
    try:
        out, _ = proc.communicate(timeout=80)
    finally:
        stop.set()
        watcher.join()
    assert proc.returncode == 0, out
    run = (tmp_path / "results" / "latest").resolve()
    ops = read_jsonl(run / "history.jsonl")
    pairs = pair_ops(ops)
    assert len(pairs) > 10 and all(c is not None for _, c in pairs)  # it did work (how much is the machine's speed)
    assert {c.type for _, c in pairs if c} == {"ok"}
    assert max(o.time for o in ops) > 5e9 * 0.9  # the main phase really ran for ~5 s
    results = json.loads((run / "results.json").read_text())
    assert results["valid"] is True and results["seed"] == 5
    assert results["checkers"]["counter/counter"]["stats"]["reads"] > 0
    spec = spec_from_dict(yaml.safe_load((run / "test.yaml").read_text()))
    assert spec.seed == 5 and spec.concurrency == 3
    assert (spec.system, spec.nodes.members, [w.name for w in spec.workloads]) == ("counter", ("m1",), ["counter"])
    assert "listening" in (run / "nodes" / "m1" / "counter.log").read_text()
    assert (run / "junit.xml").exists() and (run / "timeline.html").exists()  # the path `splitbrain test` takes
    assert seen.get("netns") and not any(netns_exists(ns) for ns in seen["netns"])
    assert not list((tmp_path / "state").glob("*.json"))


@pytest.mark.timeout(120)
def test_splitbrain_test_runs_the_counter_example_with_pauses_to_a_valid_verdict(tmp_path: Path) -> None:
    """``splitbrain test examples/counter.yaml``: the counter system as a spec like any other (its workload from
    the registry, its pauses from the nemesis packages), judged, with a results dir a repro can start from."""
    env = {**os.environ, "SPLITBRAIN_LOCAL_STATE_DIR": str(tmp_path / "state"), "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "test", "examples/counter.yaml", "--time-limit", "12", "--seed", "2",
         "--results", str(tmp_path / "results"), "--quiet"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=110)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "valid   counter/counter" in proc.stdout, proc.stdout
    run = (tmp_path / "results" / "counter" / "latest").resolve()
    results = json.loads((run / "results.json").read_text())
    assert results["valid"] is True and results["seed"] == 2
    assert results["checkers"]["counter/counter"]["stats"]["reads"] > 10
    ops = read_jsonl(run / "history.jsonl")
    pauses = [o for o in ops if o.process == "nemesis" and o.f == "pause" and o.type != "invoke"]
    assert pauses and all(o.value == ["m1"] for o in pauses), pauses
    after_resume = [o for o in ops if o.is_client and o.type == "ok" and o.time > max(
        o2.time for o2 in ops if o2.process == "nemesis" and o2.f == "resume")]
    assert after_resume, "no op completed ok after the last resume: the clients did not reconnect"
    spec = spec_from_dict(yaml.safe_load((run / "test.yaml").read_text()))
    assert (spec.system, spec.nodes.members) == ("counter", ("m1",))
    assert (run / "timeline.html").exists() and (run / "schedule.yaml").exists()
    assert not list((tmp_path / "state").glob("*.json"))


@pytest.mark.timeout(90)
def test_sigint_leaves_a_checkable_history_and_nothing_running(tmp_path: Path) -> None:
    proc = run_counter(tmp_path, "--time-limit", "60", "--concurrency", "4", "--rate", "200")
    history = None
    state_pids: list[int] = []
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        latest = tmp_path / "results" / "latest" / "history.jsonl"
        states = list((tmp_path / "state").glob("*.json"))
        if latest.exists() and latest.stat().st_size > 2000 and states:
            history = latest.resolve()
            state_doc = json.loads(states[0].read_text())
            state_pids = [int(p) for p in state_doc["pids"]]
            namespaces = {n["netns"] for n in state_doc["nodes"].values()}
            break
        time.sleep(0.1)
    assert history is not None and state_pids, "the run never started"
    assert all(alive(p) for p in state_pids)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=40)
    assert proc.returncode == 2, out  # interrupted: verdict unknown
    ops = read_jsonl(history)
    assert all(c is not None for _, c in pair_ops(ops))
    results = json.loads((history.parent / "results.json").read_text())
    assert results["interrupted"] is True and results["valid"] == "unknown"
    assert max(o.time for o in ops) < 60e9  # stopped before its 60 s time limit
    assert not any(netns_exists(ns) for ns in namespaces)
    assert wait_gone(state_pids)
    assert not list((tmp_path / "state").glob("*.json"))


@pytest.mark.timeout(60)
def test_remote_cross_namespace_exec_and_errors(tmp_path: Path) -> None:
    async def go() -> None:
        remote = await LocalRemote.create(["n1", "n2"], state_dir=tmp_path / "state")
        try:
            ns = {n["netns"] for n in remote.state["nodes"].values()}
            assert all(netns_exists(n) for n in ns)
            res = await remote.exec("n1", ["ip", "-4", "-o", "addr", "show", "eth0"], check=True)
            assert remote.address("n1") in res.stdout
            log = str(remote.node_dir("n1") / "svc.log")
            pid = await remote.spawn("n1", [sys.executable, "-m", "systems.counter.service", "--host",
                                            "0.0.0.0", "--port", "7411"], log_path=log, cwd=str(REPO),
                                     env={"PYTHONPATH": str(REPO)})
            probe = ("import socket,time\nfor i in range(100):\n  try:\n"
                     f"    socket.create_connection(('{remote.address('n1')}', 7411), 1).close(); print('ok'); break\n"
                     "  except OSError: time.sleep(0.1)\n")
            res = await remote.exec("n2", [sys.executable, "-c", probe], timeout_s=20)
            assert res.stdout.strip() == "ok", res.describe()
            # The service is not reachable on n2's own loopback: namespaces really are separate.
            res = await remote.exec("n2", [sys.executable, "-c",
                                           "import socket\ntry:\n socket.create_connection(('127.0.0.1',7411),1)\n"
                                           " print('reached')\nexcept OSError:\n print('refused')"])
            assert res.stdout.strip() == "refused"
            assert await remote.is_alive("n1", pid)
            await remote.signal("n1", pid, signal.SIGTERM)
            for _ in range(100):
                if not await remote.is_alive("n1", pid):
                    break
                await asyncio.sleep(0.05)
            assert not await remote.is_alive("n1", pid)
            with pytest.raises(CommandFailed, match="exit 3"):
                await remote.exec("n1", ["sh", "-c", "exit 3"], check=True)
            with pytest.raises(ControlError, match="did not finish"):
                await remote.exec("n1", ["sleep", "5"], timeout_s=0.3)
            with pytest.raises(ControlError, match="not started on n2"):
                await remote.signal("n2", pid, signal.SIGKILL)
            with pytest.raises(ControlError, match="unknown node"):
                remote.address("n9")
            dest = tmp_path / "copy.log"
            await remote.download("n1", log, str(dest))
            assert "listening" in dest.read_text()
        finally:
            await remote.close()
        assert not any(netns_exists(n["netns"]) for n in remote.state["nodes"].values())

    asyncio.run(go())


@pytest.mark.timeout(60)
def test_cleanup_after_a_crashed_owner(tmp_path: Path) -> None:
    """Without its supervisor (killed too), a SIGKILLed harness leaves namespaces and daemons behind;
    cleanup_all(only_orphans) removes them -- and nothing while the owner lives.  (With the supervisor the run
    cleans itself up: tests/integration/harness_cli/test_ownership_real.py.)"""
    state = tmp_path / "state"
    script = (
        "import asyncio, sys, time\n"
        "from harness.control.local import LocalRemote\n"
        "async def main():\n"
        f"    r = await LocalRemote.create(['x1', 'x2'], state_dir=__import__('pathlib').Path({str(state)!r}),\n"
        "                                 supervise=False)\n"
        "    await r.spawn('x1', ['sleep', '300'], log_path=str(r.node_dir('x1') / 'sleep.log'))\n"
        "    print('ready', flush=True)\n"
        "    time.sleep(300)\n"
        "asyncio.run(main())\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        [state_file] = list(state.glob("*.json"))
        st = json.loads(state_file.read_text())
        pids = [int(p) for p in st["pids"]]
        namespaces = {n["netns"] for n in st["nodes"].values()}
        assert cleanup_all(state_dir=state, only_orphans=True) == []  # owner alive: left alone
        proc.kill()
        proc.wait(10)
        assert all(netns_exists(n) for n in namespaces) and all(alive(p) for p in pids)
        removed = cleanup_all(state_dir=state, only_orphans=True)
        assert any(r.startswith("netns") for r in removed) and any(r.startswith("bridge") for r in removed)
        assert not any(netns_exists(n) for n in namespaces)
        assert wait_gone(pids)
        assert not list(state.glob("*.json"))
        if st.get("fw_rule"):
            assert not fw_rule_present(st["bridge"])
    finally:
        if proc.poll() is None:
            proc.kill()
        cleanup_all(state_dir=state)
