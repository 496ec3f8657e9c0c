"""Written fault schedules on the real cluster (local backend): steps run at their offsets, role selectors
resolve by role, crash-at makes controller failpoints fire, every fault is accounted for, and ``repro`` /
``shrink`` replay the executed schedule."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import cli

pytestmark = [pytest.mark.integration, pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]


def _spec(tmp_path: Path, schedule: list[dict[str, Any]], **fields: Any) -> Path:
    doc: dict[str, Any] = {
        "name": "sched-int", "backend": "local",
        "nodes": {"controllers": 3, "broker_sets": {"count": 1, "replicas": 3}},
        "workloads": [{"name": "queue", "options": {"queues_per_set": 2}}], "nemesis": {"schedule": schedule},
        "concurrency": 2, "rate": 20, "time_limit_s": 12, "phases": {"recovery_s": 1, "final_drain_s": 5},
        "seed": 5,
    }
    doc.update(fields)
    path = tmp_path / f"{doc['name']}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _run_dir(results: Path, name: str) -> Path:
    runs = sorted(p for p in (results / name).iterdir() if p.is_dir() and not p.is_symlink())
    return runs[-1]


def _nemesis_completions(run: Path) -> list[dict[str, Any]]:
    ops = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines() if line.strip()]
    return [op for op in ops if op["process"] == "nemesis" and op["type"] != "invoke"]


def test_schedule_runs_in_order_and_every_fault_is_accounted(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    schedule = [
        # armed on a slave, which sends no AlterSyncStateSet (the master does): certain not to fire.  First, while
        # every broker is up: after the kill below, `start` returns before the restarted slave listens, and a
        # step aimed at it then could not even be armed (seen in CI)
        {"at_s": 0.5, "f": "crash-at", "value": {"name": "broker.alter_sync_state_set.expand.after_reply",
                                                 "targets": "slaves:one", "timeout_s": 0.5, "trigger": "none"}},
        {"at_s": 1, "f": "crash-at", "value": {"name": "controller.before_propose", "targets": "controller-leader",
                                               "timeout_s": 8}},
        {"at_s": 2, "f": "kill", "value": "slaves:one"},
        {"at_s": 3, "f": "start"},
    ]
    results = tmp_path / "results"
    code = cli.main(["test", str(_spec(tmp_path, schedule)), "--results", str(results), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0, out
    run = _run_dir(results, "sched-int")
    planned = yaml.safe_load((run / "schedule.yaml").read_text())
    assert [s["f"] for s in planned] == ["crash-at", "crash-at", "kill", "start"]

    comps = _nemesis_completions(run)
    main = [c for c in comps if c["f"] in ("crash-at", "kill", "start")][:4]
    assert [c["f"] for c in main] == ["crash-at", "crash-at", "kill", "start"]
    missed, crash, kill, _ = main
    # the controller failpoint fired because the nemesis caused a controller write
    assert crash["effective"] is True and crash["value"]["trigger"] == "controller-write", crash
    (leader_record,) = crash["targets"]
    assert leader_record["selector"] == "controller-leader"
    assert list(leader_record["roles"].values()) == ["controller-leader"]
    assert kill["effective"] is True and list(kill["targets"][0]["roles"].values()) == ["slave"]
    # the armed slave never expands a SyncStateSet: the step is reported as not effective, with the reason
    assert missed["effective"] is False and "not reached" in missed["why"]

    doc = json.loads((run / "results.json").read_text())
    faults = doc["faults"]
    assert faults["crash-at:controller.before_propose"]["effective"] == 1
    assert faults["crash-at:broker.alter_sync_state_set.expand.after_reply"]["not_effective"] == 1
    assert any("expand.after_reply" in w for w in doc["fault_warnings"])
    assert "WARNING: fault crash-at:broker.alter_sync_state_set.expand.after_reply" in out
    junit = (run / "junit.xml").read_text()
    assert '<property name="faults"' in junit and "crash-at:controller.before_propose 1/1" in junit

    # repro writes the executed schedule, by role and pinned to the nodes
    assert cli.main(["repro", str(run), "--print-only"]) == 0
    replay = yaml.safe_load((run / "repro.yaml").read_text())
    steps = replay["nemesis"]["schedule"]
    assert [s["f"] for s in steps] == ["crash-at", "crash-at", "kill", "start"]
    assert steps[2]["value"] == "slaves:one" and abs(steps[2]["at_s"] - 2) < 8
    assert cli.main(["repro", str(run), "--print-only", "--same-nodes"]) == 0
    pinned = yaml.safe_load((run / "repro.yaml").read_text())["nemesis"]["schedule"]
    assert pinned[2]["value"] == kill["value"][0]


def test_shrink_needs_an_invalid_run_and_writes_a_runnable_schedule(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Short form: a valid run is refused (exit 2); an invalid run (made invalid by editing its results, so
    the test needs no unsafe cluster) is shrunk within a tiny budget, which writes the smallest failing
    schedule seen so far and lists the candidates tried.  The full shrink of a real loss runs in the soak
    suite and in docs/nemeses.md's figures."""
    schedule = [{"at_s": 1, "f": "pause", "value": "controller-followers:one"}, {"at_s": 2, "f": "resume"},
                {"at_s": 3, "f": "kill", "value": "slaves:one"}, {"at_s": 4, "f": "start"}]
    results = tmp_path / "results"
    spec = _spec(tmp_path, schedule, name="shrink-int", time_limit_s=6, phases={"recovery_s": 1, "final_drain_s": 3})
    assert cli.main(["test", str(spec), "--results", str(results), "--quiet"]) == 0
    run = _run_dir(results, "shrink-int")
    assert cli.main(["shrink", str(run)]) == 2
    assert "not an invalid run" in capsys.readouterr().err

    doc = json.loads((run / "results.json").read_text())
    doc.update({"valid": False, "anomaly_counts": {"lost-write": 1}})
    (run / "results.json").write_text(json.dumps(doc))
    code = cli.main(["shrink", str(run), "--runs-per-candidate", "1", "--budget-min", "0.05"])
    out = capsys.readouterr().out
    assert "2 fault unit(s)" in out and "candidate 1: 0 fault(s) [] -> passes" in out, out
    assert code == 1  # no candidate reproduced the (edited) loss: the full schedule is kept
    shrunk = yaml.safe_load((run / "shrunk.yaml").read_text())
    assert [s["f"] for s in shrunk["nemesis"]["schedule"]] == ["pause", "resume", "kill", "start"]
    assert (run / "shrink" / "candidate-1.yaml").exists()
