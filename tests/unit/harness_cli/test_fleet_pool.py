"""The run pool API (harness/fleet.py) on this machine, and test-all's fan-out flags.

The children are a stand-in script (no cluster) that writes a run directory as a real run does.  Streaming is shown
by order, not timing: a child that waits for a file the test creates only after it has received another run's
result can only come back second.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness import cli, fleet
from harness.fleet import LocalPool, RunRequest
from harness.testing.wait import wait_until
from spark_analysis.ingest import discover_runs
from spark_analysis.runfiles import LOST_ATTEMPT_FILE

FAKE = r'''
import json, pathlib, sys, time, yaml
argv = sys.argv[1:]
spec = yaml.safe_load(open(argv[1]))
results = pathlib.Path(argv[argv.index("--results") + 1])
dirs_file = argv[argv.index("--run-dirs-file") + 1]
if spec.get("started_file"):
    pathlib.Path(spec["started_file"]).touch()
gate = spec.get("wait_for")
deadline = time.monotonic() + 60
while gate and not pathlib.Path(gate).exists():
    if time.monotonic() > deadline:
        print("never released"); sys.exit(255)
    time.sleep(0.02)
if spec.get("crash"):
    print("harness crashed: boom"); sys.exit(255)
run = results / spec["name"] / f"2026010{spec['seed'] % 10}T000000.000Z"
run.mkdir(parents=True)
print(f"[splitbrain] test {spec['name']} seed={spec['seed']} -> {run}", flush=True)
(run / "results.json").write_text(json.dumps({"valid": True, "seed": spec["seed"], "argv": argv}))
open(dirs_file, "a").write(f"{run}\n")
print("done")
'''


@pytest.fixture
def child(tmp_path: Path) -> tuple[str, ...]:
    script = tmp_path / "fake_child.py"
    script.write_text(FAKE)
    return (sys.executable, str(script))


def _request(root: Path, name: str, seed: int, **fields: object) -> RunRequest:
    return RunRequest(f"{name} x {seed}", yaml.safe_dump({"name": name, "seed": seed, **fields}), str(root))


@pytest.mark.timeout(120)
def test_results_stream_as_runs_finish_and_runs_can_be_submitted_while_iterating(
        tmp_path: Path, child: tuple[str, ...]) -> None:
    root = tmp_path / "r"
    release, release_late = tmp_path / "release", tmp_path / "release-late"
    with LocalPool(2, child_command=child) as pool:
        slow = pool.submit(_request(root, "slow", 1, wait_for=str(release)))
        fast = pool.submit(_request(root, "fast", 2))
        seen = []
        for result in pool.completed():
            seen.append(result.index)
            if result.index == fast:
                release.touch()  # only now can the slow run finish
                late = pool.submit(RunRequest(
                    "late", yaml.safe_dump({"name": "late", "seed": 3, "wait_for": str(release_late)}), str(root),
                    ("--sut-revision", "abc123")))
            if result.index == slow:
                release_late.touch()  # the late run finishes after the slow one, whatever the machine's load
    assert seen == [fast, slow, late]
    late_dir = next((root / "late").glob("2*"))
    argv = json.loads((late_dir / "results.json").read_text())["argv"]
    assert argv[-2:] == ["--sut-revision", "abc123"]  # extra argv reaches the child untouched, last
    logs = sorted(p.name for p in (root / fleet.FLEET_DIR / pool.fleet_id).iterdir())
    assert logs == ["0-1.log", "1-1.log", "2-1.log"]
    c = pool.ledger()
    assert (len(c.records), {r.exit_code for r in c.records.values()}) == (3, {0})


@pytest.mark.timeout(60)
def test_a_crashed_harness_is_a_result_not_a_retry(tmp_path: Path, child: tuple[str, ...]) -> None:
    with LocalPool(1, child_command=child) as pool:
        pool.submit(_request(tmp_path / "r", "crash", 1, crash=True))
        [result] = list(pool.completed())
    assert (result.exit_code, result.run_dirs, result.attempts) == (255, (), 1)
    assert result.last_line == "harness crashed: boom"


@pytest.mark.timeout(60)
def test_cancel_returns_queued_runs_unstarted(tmp_path: Path, child: tuple[str, ...]) -> None:
    root = tmp_path / "r"
    with LocalPool(1, child_command=child) as pool:
        first = pool.submit(_request(root, "first", 1, wait_for=str(tmp_path / "go"),
                                     started_file=str(tmp_path / "started")))
        queued = pool.submit(_request(root, "queued", 2))
        wait_until(lambda: (tmp_path / "started").exists(), timeout_s=30, what="the first child to start")
        pool.cancel(signal_children=False)  # as after a Ctrl-C, which the running child got itself
        (tmp_path / "go").touch()
        results = {r.index: r for r in pool.completed()}
    assert results[first].exit_code == 0
    assert (results[queued].exit_code, results[queued].run_dirs) == (130, ())
    assert not (root / "queued").exists()


def test_run_dirs_in_log_reads_the_runners_line() -> None:
    text = ("[fleet] run 3 attempt 2 on vm (executor 1): a.yaml\n[splitbrain] x: seed=5 backend=local runs=1\n"
            "[splitbrain] test queue-kill seed=-5 -> /r/queue-kill/20260101T000000.000Z\nnoise -> /elsewhere\n")
    assert fleet.run_dirs_in_log(text) == ["/r/queue-kill/20260101T000000.000Z"]


def test_marking_lost_attempts_reads_their_logs_and_stays_inside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "r"
    lost, outside = root / "t" / "20260101T000000.000Z", tmp_path / "outside"
    lost.mkdir(parents=True)
    outside.mkdir()
    kept = root / "t" / "20260101T000001.000Z"
    kept.mkdir()
    fleet_dir = root / fleet.FLEET_DIR / "f1"
    fleet_dir.mkdir(parents=True)
    (fleet_dir / "4-1.log").write_text(f"[fleet] run 4 attempt 1 on hostA (executor 7): t\n"
                                       f"[splitbrain] test t seed=9 -> {lost}\n"
                                       f"[splitbrain] test t seed=9 -> {outside}\n")
    request = RunRequest("t", "name: t\nseed: 9\n", str(root))
    marked = fleet.mark_lost_attempts(fleet_dir, 4, range(1, 3), request, retried_by=3)  # attempt 2 left no log
    assert marked == [str(lost)]
    mark = json.loads((lost / LOST_ATTEMPT_FILE).read_text())
    assert (mark["attempt"], mark["host"], mark["retried_by_attempt"]) == (1, "hostA (executor 7)", 3)
    assert not (outside / LOST_ATTEMPT_FILE).exists()
    assert fleet.is_lost_attempt(lost) and not fleet.is_lost_attempt(kept)
    assert [r.run_id for r in discover_runs([root])] == ["t/20260101T000001.000Z"]  # ingest and gate skip it
    assert fleet.mark_lost_attempts(fleet_dir, 4, range(1, 3), request, retried_by=3) == [str(lost)]  # idempotent


@pytest.mark.parametrize(("master", "ok"), [
    ("local", True), ("local[2]", True), ("local[*]", True), ("local[2,3]", True),
    ("spark://127.0.0.1:7077", True), ("spark://a:7077,b:7078", True),
    ("local[0]", False), ("spark://host", False), ("spark://host:99999", False), ("yarn", False),
    ("127.0.0.1:7077", False), ("", False),
])
def test_master_forms(master: str, ok: bool) -> None:
    assert (fleet.master_syntax_problem(master) is None) is ok


def test_requests_are_validated_when_built(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="results_root must be absolute"):
        RunRequest("x", "seed: 1\n", "relative/results")
    with pytest.raises(ValueError, match="spec_yaml is empty"):
        RunRequest("x", " ", str(tmp_path))
    with pytest.raises(ValueError, match="extra_argv must be a tuple of str"):
        RunRequest("x", "seed: 1\n", str(tmp_path), ["--flag"])  # type: ignore[arg-type]


def _spec(tmp_path: Path) -> str:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"name": "flags", "backend": "local", "nodes": {"controllers": 1,
                                    "broker_sets": {"count": 0}}, "workloads": ["cli-probe"], "nemesis": None,
                                    "seed": 1, "time_limit_s": 1}))
    return str(path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(("flags", "says"), [
    (["--master", "yarn"], "--master 'yarn': expected spark://HOST:PORT"),
    (["--master", "local[2]", "--jobs", "2"], "--jobs and --master are alternatives"),
    (["--spark-conf", "spark.task.cpus=2"], "--spark-conf needs --master"),
    (["--master", "spark://127.0.0.1:{port}"], "cannot reach the Spark master at 127.0.0.1:{port}"),
    (["--results", "{file}/sub", "--jobs", "2"], "--results {file}/sub: cannot create the results directory"),
    (["--warehouse", "{file}/w", "--jobs", "2"], "--warehouse {file}/w: cannot create the warehouse directory"),
], ids=["bad-master", "jobs-and-master", "conf-without-master", "unreachable-master", "results-not-writable",
        "warehouse-not-writable"])
def test_fan_out_flags_are_refused_with_one_line_before_anything_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], says: str) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    port = _free_port()
    fill = {"port": port, "file": blocker}
    argv = ["test-all", _spec(tmp_path), "--results", str(tmp_path / "results"),
            *[f.format(**fill) for f in flags]]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says.format(**fill) in err[0], err
    assert not (tmp_path / "results" / fleet.FLEET_DIR).exists()


def test_spark_conf_must_be_key_value(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["test-all", "x.yaml", "--master", "local[1]", "--spark-conf", "task.cpus"]) == 2
    assert "is not KEY=VALUE" in capsys.readouterr().err


STARTER = r'''
import sys
from pathlib import Path
from harness.fleet import RunRequest, run_child
out = Path(sys.argv[1])
child = ("import os, signal, sys, time, pathlib; out = pathlib.Path(sys.argv[1]); "
         "signal.signal(signal.SIGTERM, lambda *a: (out.joinpath('term').write_text('x'), sys.exit(0))); "
         "out.joinpath('sid').write_text(str(os.getsid(0))); time.sleep(60)")
run_child(RunRequest("detached", "seed: 1\n", str(out)), command=(sys.executable, "-c", child, str(out)),
          log_path=out / "log", header="[fleet] run 0 attempt 1 on here: detached", detach=True)
'''


@pytest.mark.timeout(60)
def test_a_detached_child_has_its_own_session_and_is_stopped_when_its_starter_dies(tmp_path: Path) -> None:
    """What happens to a run's child when the executor's Python worker that started it dies with its host."""
    starter = subprocess.Popen([sys.executable, "-c", STARTER, str(tmp_path)], cwd=Path(__file__).resolve().parents[3])
    try:
        # the child writes the file after creating it: wait for its content, not its name
        wait_until(lambda: (tmp_path / "sid").exists() and (tmp_path / "sid").read_text().strip() != "",
                   timeout_s=30, what="the child to start")
        assert int((tmp_path / "sid").read_text()) not in (os.getsid(0), os.getsid(starter.pid))
        starter.kill()  # SIGKILL: no handler of the starter runs
        starter.wait()
        wait_until(lambda: (tmp_path / "term").exists(), timeout_s=30, what="SIGTERM to reach the orphaned child")
    finally:
        if starter.poll() is None:
            starter.kill()
            starter.wait()
