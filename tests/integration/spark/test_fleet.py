"""``splitbrain test-all --master spark://...`` on a real standalone Spark cluster started here (a master and two
workers from pyspark's own jars, bound to 127.0.0.1 on free ports, one core each, stopped at the end): real runs
(the ``cli-probe`` workload against one controller in network namespaces), each a Spark task, each ingested into a
warehouse as it finishes; then a worker killed mid-run, whose run is retried on the other worker with the same seed
while the lost attempt's directory is marked and counted nowhere.

The kill test comes last: it leaves the module's cluster with one worker.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.testing.spark_daemons import start_master, started_port
from harness.testing.wait import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]

ROOT = Path(__file__).resolve().parents[3]
# test-all in a process of its own (its Spark driver must not meet the test session's local Spark), with the
# test-only probe workload registered there and in every child the executors start.
DRIVER = ("import sys; from harness.testing.probe import register_probe_workload as r; r(); "
          "from harness import cli, fleet; "
          "fleet.CHILD_COMMAND = (sys.executable, '-c', " + repr(
              "import sys; from harness.testing.probe import register_probe_workload as r; r(); "
              "from harness import cli; sys.exit(cli.main(sys.argv[1:]))") + "); "
          "sys.exit(cli.main(sys.argv[1:]))")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _json(ui_port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as r:
        return dict(json.loads(r.read()))


def _alive_workers(ui_port: int) -> int:
    try:
        return int(_json(ui_port).get("aliveworkers", 0))
    except (OSError, ValueError):  # not answering yet, or not JSON yet
        return -1


@dataclass
class Standalone:
    url: str
    master_ui: int
    env: dict[str, str]
    workers: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)  # worker UI port -> process


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    pyspark = pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("no java on PATH (scripts/setup.sh installs openjdk-17-jre-headless)")
    home = Path(pyspark.__file__).parent
    base = tmp_path_factory.mktemp("fleet-standalone")
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1"}
    spark_class = str(home / "bin" / "spark-class")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        master, port, ui = start_master(spark_class, env, base / "master.log")  # the ports Spark really bound
        procs.append(master)
        cluster = Standalone(f"spark://127.0.0.1:{port}", ui, env)
        wait_until(lambda: _alive_workers(ui) == 0, timeout_s=120, what="the master's web UI")
        for n in (1, 2):
            with open(base / f"worker{n}.log", "wb") as log:
                proc = subprocess.Popen(
                    [spark_class, "org.apache.spark.deploy.worker.Worker", cluster.url, "--host", "127.0.0.1",
                     "--cores", "1", "--memory", "1536m", "--webui-port", str(_free_port()), "--work-dir",
                     str(base / f"work{n}")], env=env, stdout=log, stderr=subprocess.STDOUT)
            procs.append(proc)
            cluster.workers[started_port(base / f"worker{n}.log", "WorkerUI", proc)] = proc
        wait_until(lambda: _alive_workers(ui) == 2, timeout_s=120, what="two alive workers")
        yield cluster
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _spec(tmp_path: Path, name: str, **fields: Any) -> Path:
    doc: dict[str, Any] = {
        "name": name, "backend": "local", "nodes": {"controllers": 1, "broker_sets": {"count": 0}},
        "workloads": ["cli-probe"], "nemesis": None, "concurrency": 2, "rate": 20, "time_limit_s": 2,
        "phases": {"recovery_s": 0, "final_drain_s": 1}, "cluster": {"election_ticks": 6},
    }
    doc.update(fields)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _ingested(warehouse: Path) -> list[str]:
    import pyarrow.parquet as pq

    return sorted(str(x) for x in pq.read_table(warehouse / "ingested", columns=["run_id"]).column("run_id"))


def _run_id(run_dir: Path) -> str:
    return f"{run_dir.parent.name}/{run_dir.name}"


@pytest.mark.timeout(240)
def test_a_matrix_runs_as_spark_tasks_and_every_run_is_ingested(standalone: Standalone, tmp_path: Path) -> None:
    specs = [_spec(tmp_path, "fleet-a", seed=11, test_count=2), _spec(tmp_path, "fleet-b", seed=21, test_count=2)]
    results, warehouse, junit = tmp_path / "results", tmp_path / "warehouse", tmp_path / "all.xml"
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, "test-all", *map(str, specs), "--master", standalone.url, "--results",
         str(results), "--warehouse", str(warehouse), "--junit", str(junit)],
        cwd=ROOT, env=standalone.env, capture_output=True, text=True, timeout=220)
    out = done.stdout
    assert done.returncode == 0, (out[-3000:], done.stderr[-3000:])
    assert "4 runs: 4 valid, 0 invalid, 0 unknown, 0 crashed" in out
    runs = sorted(p for name in ("fleet-a", "fleet-b") for p in (results / name).glob("2*"))
    seeds = sorted(json.loads((r / "results.json").read_text())["seed"] for r in runs)
    assert seeds == [11, 12, 21, 22]  # every cell x seed ran once, as its own task
    assert len(re.findall(r"\[splitbrain\] done \d: .* exit 0 on \S+ \(executor \d+\)", out)) == 4
    assert _ingested(warehouse) == sorted(_run_id(r) for r in runs)  # each ingested as it finished
    assert "4 of 4 runs ingested (ok=4)" in out
    assert junit.read_text().count("<testsuite ") == 4


@pytest.mark.timeout(300)
def test_a_run_on_a_killed_worker_is_retried_with_its_seed_and_its_lost_attempt_counted_nowhere(
        standalone: Standalone, tmp_path: Path) -> None:
    spec = _spec(tmp_path, "fleet-kill", seed=7, time_limit_s=10)
    results, warehouse, junit = tmp_path / "results", tmp_path / "warehouse", tmp_path / "all.xml"
    with open(tmp_path / "driver.out", "w") as out:
        driver = subprocess.Popen(
            [sys.executable, "-c", DRIVER, "test-all", str(spec), "--master", standalone.url, "--results",
             str(results), "--warehouse", str(warehouse), "--junit", str(junit), "--quiet"],
            cwd=ROOT, env=standalone.env, stdout=out, stderr=subprocess.STDOUT)
    try:
        first_log: list[Path] = []

        def first_attempt_running() -> bool:
            first_log[:] = list(results.glob(".fleet/*/0-1.log"))
            return bool(first_log) and "[splitbrain] test fleet-kill seed=7 -> " in first_log[0].read_text()

        wait_until(first_attempt_running, timeout_s=150, what="the first attempt's run to start")
        executor = re.search(r"\(executor (\d+)\)", first_log[0].read_text().splitlines()[0])
        assert executor is not None
        hosting = [ui for ui in standalone.workers
                   if any(str(e.get("id")) == executor.group(1) for e in _json(ui).get("executors", []))]
        assert len(hosting) == 1, hosting
        standalone.workers.pop(hosting[0]).kill()  # the worker JVM dies at once, like its host
        assert driver.wait(timeout=240) == 0, (tmp_path / "driver.out").read_text()[-3000:]
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    text = (tmp_path / "driver.out").read_text()
    assert "1 runs: 1 valid, 0 invalid, 0 unknown, 0 crashed" in text  # one row: the lost attempt is not a run
    fleet_dir = first_log[0].parent
    second = (fleet_dir / "0-2.log").read_text()
    assert f"(executor {executor.group(1)})" not in second.splitlines()[0]  # retried on the other worker
    runs = sorted((results / "fleet-kill").glob("2*"))
    assert len(runs) == 2
    lost = [r for r in runs if (r / "lost-attempt.json").exists()]
    kept = [r for r in runs if r not in lost]
    assert len(lost) == 1 and len(kept) == 1
    mark = json.loads((lost[0] / "lost-attempt.json").read_text())
    assert (mark["attempt"], mark["retried_by_attempt"]) == (1, 2)
    assert yaml.safe_load((lost[0] / "test.yaml").read_text())["seed"] == 7  # the same seed, twice
    assert json.loads((kept[0] / "results.json").read_text())["seed"] == 7
    assert "attempt(s) lost with their host, marked: " + str(lost[0]) in text
    assert _ingested(warehouse) == [_run_id(kept[0])]
    assert junit.read_text().count("<testsuite ") == 1
    from spark_analysis.ingest import discover_runs

    assert [r.run_id for r in discover_runs([results])] == [_run_id(kept[0])]  # what spark ingest/gate would see
