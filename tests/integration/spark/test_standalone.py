"""``--master spark://...`` on a real standalone Spark cluster (a master and one worker started from pyspark's own
jars on 127.0.0.1): ingest and report run there, and nothing is left behind -- no ``splitbrain-spark-*``
temporary directory, no application still running on the cluster."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.testing.spark_daemons import start_master
from spark_analysis.synth import generate

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _state(ui_port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as r:
        return dict(json.loads(r.read()))


def _wait(what: str, ui_port: int, ok: Any, timeout_s: float = 90.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = _state(ui_port)
            if ok(last):
                return last
        except (OSError, ValueError) as exc:  # not answering yet, or not JSON yet
            last = exc
        time.sleep(0.5)
    raise AssertionError(f"standalone cluster: {what} not seen within {timeout_s} s; last state: {last!r}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    pyspark = pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("no java on PATH (scripts/setup.sh installs openjdk-17-jre-headless)")
    home = Path(pyspark.__file__).parent
    base = tmp_path_factory.mktemp("standalone")
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1"}
    spark_class = str(home / "bin" / "spark-class")
    procs = []
    try:
        master, port, ui = start_master(spark_class, env, base / "master.log")  # the ports Spark really bound
        procs.append(master)
        _wait("the master's web UI", ui, lambda s: "url" in s)
        with open(base / "worker.log", "wb") as log:
            procs.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}", "--host",
                 "127.0.0.1", "--cores", "2", "--memory", "1g", "--webui-port", str(_free_port()),
                 "--work-dir", str(base / "work")], env=env, stdout=log, stderr=subprocess.STDOUT))
        _wait("one alive worker", ui, lambda s: s.get("aliveworkers") == 1)
        yield {"url": f"spark://127.0.0.1:{port}", "ui": ui, "env": env}
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def test_ingest_and_report_on_a_standalone_master_leave_nothing_behind(
        cluster: dict[str, Any], tmp_path: Path) -> None:
    corpus = generate(tmp_path / "results", runs=12, ops=80, seed=3)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**cluster["env"], "TMPDIR": str(tmpdir)}
    cli = [sys.executable, "-m", "harness.cli", "spark"]
    for args in (["ingest", str(tmp_path / "results"), "--out", str(tmp_path / "w")],
                 ["report", "--warehouse", str(tmp_path / "w"), "--out", str(tmp_path / "dash"), "--min-runs", "2"]):
        done = subprocess.run([*cli, *args, "--master", cluster["url"]], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads((tmp_path / "dash" / "dashboard.json").read_text())
    assert sorted(r[0] for r in data["runs"]["rows"]) == sorted(r.run_id for r in corpus.runs)
    assert sorted(p.name for p in tmpdir.iterdir() if p.name.startswith("splitbrain-spark-")) == []
    state = _wait("both applications finished and every core free", cluster["ui"],
                  lambda s: not s["activeapps"] and all(w["coresused"] == 0 for w in s["workers"]))
    assert [a["name"] for a in state["completedapps"]].count("splitbrain-spark") >= 2
