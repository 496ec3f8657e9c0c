"""`splitbrain test | analyze | serve | cluster` for real: controllers in network namespaces, partition + kill
nemeses, the probe workload (harness.testing.probe), HTTP on 127.0.0.1 port 0."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import cli
from harness.control.local import STATE_DIR
from harness.testing.probe import probe_workload
from harness.web import make_server

pytestmark = [pytest.mark.integration, pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def _probe_workload() -> Iterator[None]:
    with probe_workload():
        yield


def _spec(tmp_path: Path, **fields: Any) -> Path:
    doc: dict[str, Any] = {
        "name": "cli-int", "backend": "local", "nodes": {"controllers": 3, "broker_sets": {"count": 0}},
        "workloads": ["cli-probe"], "nemesis": {"packages": ["partition", "kill"], "interval_s": 2, "targets": ["one"]},
        "concurrency": 2, "rate": 20, "time_limit_s": 10, "phases": {"recovery_s": 1, "final_drain_s": 3},
        "seed": 11, "cluster": {"election_ticks": 6},
    }
    doc.update(fields)
    path = tmp_path / f"{doc['name']}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _our_state_files() -> list[Path]:
    out = []
    for f in STATE_DIR.glob("*.json"):
        try:
            if json.loads(f.read_text()).get("owner_pid") == os.getpid():
                out.append(f)
        except (OSError, ValueError):
            continue
    return out


def _running(pid: int) -> bool:
    """Alive and not a zombie (a killed child of this process may await reaping)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[0] != "Z"


def _get(port: int, path: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read().decode("utf-8", errors="replace")
    finally:
        conn.close()


@pytest.mark.timeout(80)
def test_test_analyze_serve_end_to_end(tmp_path: Path) -> None:
    results, junit = tmp_path / "results", tmp_path / "ci" / "junit.xml"
    code = cli.main(["test", str(_spec(tmp_path)), "--results", str(results), "--quiet", "--junit", str(junit)])
    assert code == 0
    run = (results / "latest").resolve()
    for f in ("history.jsonl", "results.json", "test.yaml", "junit.xml", "latency.png", "rate.png", "timeline.html"):
        assert (run / f).stat().st_size > 0, f
    for node in ("c1", "c2", "c3"):
        assert (run / "nodes" / node / "node.log").stat().st_size > 0
    history = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    nemesis_fs = {op["f"] for op in history if op["process"] == "nemesis"}
    assert nemesis_fs & {"start-partition", "kill"}, nemesis_fs
    assert any(op["f"] == "read-meta" and op["type"] == "ok" for op in history)
    doc = json.loads((run / "results.json").read_text())
    assert doc["valid"] is True and doc["seed"] == 11 and doc["perf"]["windows"]
    assert "cli-probe/leader" in junit.read_text()
    assert _our_state_files() == []  # namespaces, bridge and processes are gone

    assert cli.main(["analyze", "--results", str(results), "--no-plots"]) == 0
    assert "analyzed_at" in json.loads((run / "results.json").read_text())

    srv = make_server(results, "127.0.0.1", 0)
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    try:
        port = int(srv.server_address[1])
        status, page = _get(port, "/")
        assert status == 200 and f"/run/cli-int/{run.name}/" in page
        status, page = _get(port, f"/run/cli-int/{run.name}/")
        assert status == 200 and "latency.png" in page and "timeline.html" in page and "nodes/c1/node.log" in page
        assert _get(port, f"/files/cli-int/{run.name}/rate.png")[0] == 200
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.mark.timeout(80)
def test_off_a_terminal_the_status_lines_name_the_faults_in_words(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Not on a terminal (stderr captured): plain status lines whose faults are words -- the killed and the
    isolated node by name while they are in effect, none after the heal -- and never a repr."""
    spec = _spec(tmp_path, name="cli-int-words", time_limit_s=6, nemesis={"schedule": [
        {"at_s": 1, "f": "kill", "value": "one"},
        {"at_s": 2, "f": "start-partition", "value": {"kind": "isolate", "targets": "one"}}]})
    cli.main(["test", str(spec), "--results", str(tmp_path / "results")])  # valid or not: the lines are the point
    status = [line for line in capsys.readouterr().err.splitlines() if line.startswith("[splitbrain] phase ")]
    main_done = [line for line in status if line.startswith("[splitbrain] phase main ") and line.endswith("(done)")]
    assert len(main_done) == 1, status
    assert re.search(r"\| faults: kill c\d \| isolate c\d \(done\)$", main_done[0]), main_done
    heal_done = [line for line in status if line.startswith("[splitbrain] phase heal ") and line.endswith("(done)")]
    assert heal_done and heal_done[0].endswith("| faults: none (done)"), status  # start and stop-partition ran
    reprs = [line for line in status if set("{}[]'") & set(line.removeprefix("[splitbrain] "))]
    assert not reprs, reprs


@pytest.mark.timeout(60)
def test_sigint_stops_the_run_and_cleans_up(tmp_path: Path) -> None:
    spec = _spec(tmp_path, name="cli-int-sigint", time_limit_s=60, nemesis={"packages": ["kill"], "interval_s": 1})
    results = tmp_path / "results"
    code = ("import sys; from harness.testing.probe import register_probe_workload as r; r(); "
            "from harness import cli; sys.exit(cli.main(sys.argv[1:]))")
    proc = subprocess.Popen([sys.executable, "-c", code, "test", str(spec), "--results", str(results), "--quiet"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # not inherited SIG_IGN
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not list(results.glob("cli-int-sigint/*/history.jsonl")):
            time.sleep(0.2)
        time.sleep(4)  # in the main phase
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=40)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, out  # interrupted: never valid
    doc = json.loads((results / "latest" / "results.json").read_text())
    assert doc["interrupted"] is True and doc["valid"] == "unknown"
    for f in STATE_DIR.glob("*.json"):  # the child's namespaces are gone
        assert json.loads(f.read_text()).get("owner_pid") != proc.pid


@pytest.mark.timeout(60)
def test_cluster_up_status_logs_down(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = _spec(tmp_path, name="cli-int-cluster", nodes={"controllers": 1, "broker_sets": {"count": 0}})
    results = str(tmp_path / "results")
    assert cli.main(["cluster", "up", str(spec), "--results", results]) == 0
    record = json.loads((tmp_path / "results" / ".clusters" / "cli-int-cluster.json").read_text())
    pid = record["nodes"]["c1"]["pid"]
    try:
        assert _running(pid)
        assert cli.main(["cluster", "up", str(spec), "--results", results]) == 2  # already recorded
        capsys.readouterr()
        assert cli.main(["cluster", "status", "--results", results]) == 0
        out = capsys.readouterr().out
        assert "leader=c1" in out and "alive" in out
        assert cli.main(["cluster", "logs", "c1", "--results", results, "-n", "5"]) == 0
        assert capsys.readouterr().out.strip()
    finally:
        assert cli.main(["cluster", "down", "cli-int-cluster", "--results", results]) == 0
    deadline = time.monotonic() + 5
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(pid)
    assert not Path(record["local_state"]).exists()
    assert not (tmp_path / "results" / ".clusters" / "cli-int-cluster.json").exists()


@pytest.mark.timeout(60)
def test_test_all_matrix_table_and_junit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    quick = {"nodes": {"controllers": 1, "broker_sets": {"count": 0}}, "time_limit_s": 2, "nemesis": None,
             "phases": {"recovery_s": 0, "final_drain_s": 2}}
    a = _spec(tmp_path, name="cli-int-a", **quick)
    b = _spec(tmp_path, name="cli-int-b", seed=99, **quick)
    junit = tmp_path / "all.xml"
    code = cli.main(["test-all", str(a), str(b), "--results", str(tmp_path / "results"), "--quiet",
                     "--junit", str(junit)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "cli-int-a.yaml" in out and "cli-int-b.yaml" in out and "2 runs: 2 valid" in out and "99" in out
    xml = junit.read_text()
    assert xml.count("<testsuite ") == 2 and 'failures="0"' in xml


@pytest.mark.timeout(60)
def test_leave_running_is_recorded_for_cluster_down(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = _spec(tmp_path, name="cli-int-leave", nodes={"controllers": 1, "broker_sets": {"count": 0}},
                 time_limit_s=1, nemesis=None, phases={"recovery_s": 0, "final_drain_s": 1}, test_count=2)
    results = str(tmp_path / "results")
    assert cli.main(["test", str(spec), "--results", results, "--quiet", "--leave-running"]) == 0
    out = capsys.readouterr().out
    assert "seed=11" in out and "seed=12" in out and out.count("cluster left running") == 1  # only the last
    assert "splitbrain runs" in out  # the summary table of several runs
    assert len(list((tmp_path / "results" / "cli-int-leave").glob("2*"))) == 2
    record_file = tmp_path / "results" / ".clusters" / "cli-int-leave.json"
    record = json.loads(record_file.read_text())
    pid = record["nodes"]["c1"]["pid"]
    try:
        assert _running(pid)
        assert [str(f) for f in _our_state_files()] == [record["local_state"]]  # the first run's backend is gone
        capsys.readouterr()
        assert cli.main(["cluster", "status", "cli-int-leave", "--results", results]) == 0
        assert "leader=c1" in capsys.readouterr().out
    finally:
        assert cli.main(["cluster", "down", "cli-int-leave", "--results", results]) == 0
    deadline = time.monotonic() + 5
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(pid) and not record_file.exists() and _our_state_files() == []
