"""Ownership: who answers for a run, what counts as an orphan, and what `cluster down` / the supervisor /
`admin --cluster` may touch.  Pure rules and file-level behaviour; no namespaces (see the integration tests)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from harness import cli
from harness.commands import cluster as cluster_cmd
from harness.commands._clusters import ClusterNotFound, find_cluster, write_record
from harness.control import local
from harness.control.local import save_orphan_logs
from harness.control.owner import make_owner, orphan_reason
from harness.control.supervisor import mark_killed, next_action

REPO = Path(__file__).resolve().parents[3]


def _alive_if(pid_alive: bool) -> Any:
    return lambda pid, start: pid_alive


@pytest.mark.parametrize(("owner", "alive", "record_exists", "orphan"), [
    ({"kind": "run", "pid": 10, "start": 5}, True, False, False),
    ({"kind": "run", "pid": 10, "start": 5}, False, False, True),
    ({"kind": "run", "pid": 10, "start": 5}, False, True, True),  # a record never keeps a plain run
    ({"kind": "cluster", "pid": 10, "start": 5, "record": "r.json"}, False, True, False),  # launcher gone: normal
    ({"kind": "cluster", "pid": 10, "start": 5, "record": "r.json"}, True, False, True),
    ({"kind": "cluster", "record": None}, True, True, True),
    (None, True, True, True),
], ids=["run-live", "run-dead", "run-dead-with-file", "cluster-recorded", "cluster-record-gone",
        "cluster-without-record", "no-owner"])
def test_orphan_rule(owner: Any, alive: bool, record_exists: bool, orphan: bool) -> None:
    reason = orphan_reason(owner, alive=_alive_if(alive), exists=lambda p: record_exists)
    assert (reason is not None) is orphan


@pytest.mark.parametrize(("state", "owner_alive", "action"), [
    (None, False, "exit"),  # closed normally: the state file is gone
    ({"owner": {"kind": "run"}}, True, "wait"),
    ({"owner": {"kind": "run"}}, False, "clean"),
    ({"owner": {"kind": "cluster"}}, False, "exit"),  # `cluster up` exits by design
    ({}, False, "clean"),
])
def test_supervisor_decision(state: Any, owner_alive: bool, action: str) -> None:
    assert next_action(state, owner_alive=owner_alive) == action


def _state(tmp_path: Path, name: str, owner: dict[str, Any]) -> Path:
    f = tmp_path / "state" / f"{name}.json"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps({"prefix": name, "owner": owner, "nodes": {}, "pids": {}}))
    return f


def test_local_orphans_only_names_runs_nobody_answers_for(tmp_path: Path) -> None:
    record = tmp_path / "results" / ".clusters" / "kept.json"
    record.parent.mkdir(parents=True)
    record.write_text("{}")
    _state(tmp_path, "live", make_owner())  # this test process: alive
    _state(tmp_path, "dead", {"kind": "run", "pid": 2**22 + 7, "start": 1})
    _state(tmp_path, "kept", make_owner(kind="cluster", record=str(record)))
    _state(tmp_path, "lost", make_owner(kind="cluster", record=str(tmp_path / "gone.json")))
    (tmp_path / "state" / "half.json").write_text("{not json")  # being written: left alone
    found = {f.stem: why for f, why in local.orphans(state_dir=tmp_path / "state")}
    assert set(found) == {"dead", "lost"}
    assert "owner process" in found["dead"] and "record" in found["lost"]


def test_supervisor_saves_logs_and_marks_the_run_killed(tmp_path: Path) -> None:
    root, run = tmp_path / "root", tmp_path / "results" / "t" / "20260101T000000.000Z"
    (root / "c1").mkdir(parents=True)
    run.mkdir(parents=True)
    (root / "c1" / "node.log").write_text("last words\n")
    (root / "c1" / "data.bin").write_text("not a log")
    state = {"root": str(root), "nodes": {"c1": {}, "c2": {}}, "run_dir": str(run)}
    assert save_orphan_logs(state) == [str(run / "nodes" / "c1" / "node.log")]
    assert (run / "nodes" / "c1" / "node.log").read_text() == "last words\n"
    (run / "results.json").write_text(json.dumps({"valid": True, "seed": 3}))
    mark_killed(run, 1234)
    doc = json.loads((run / "results.json").read_text())
    assert doc["ended"] == "killed" and doc["valid"] == "unknown" and doc["seed"] == 3 and "1234" in doc["crashed"]


def _record(tmp_path: Path, results: Path, name: str, *, alive: bool) -> dict[str, Any]:
    state = tmp_path / f"{name}-state.json"
    if alive:
        state.write_text("{}")
    rec = {"name": name, "backend": "local", "token": f"tok-{name}", "controllers": ["127.0.0.1:9"],
           "local_state": str(state), "nodes": {"c1": {"role": "controller", "address": "127.0.0.1", "dir": "/x",
                                                       "pid": os.getpid() if alive else None, "log": "/x/node.log"}}}
    write_record(results, rec)
    return rec


def test_down_without_name_touches_only_this_results_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    _record(tmp_path, mine, "a", alive=False)
    _record(tmp_path, theirs, "b", alive=False)
    removed: list[str] = []
    monkeypatch.setattr(cluster_cmd, "_remove_cluster", lambda rec: removed.append(rec["name"]) or [])

    def no_sweep() -> list[str]:
        raise AssertionError("a plain `cluster down` must not sweep the machine")

    monkeypatch.setattr(cluster_cmd, "_remove_orphans", no_sweep)
    assert cli.main(["cluster", "down", "--results", str(mine)]) == 0
    assert removed == ["a"]
    assert not (mine / ".clusters" / "a.json").exists() and (theirs / ".clusters" / "b.json").exists()
    assert "already gone" in capsys.readouterr().out


def test_find_cluster_by_name_and_the_only_running_one(tmp_path: Path) -> None:
    results = tmp_path / "results"
    with pytest.raises(ClusterNotFound, match="no running cluster"):
        find_cluster(results, None)
    _record(tmp_path, results, "old", alive=False)
    _record(tmp_path, results, "new", alive=True)
    assert find_cluster(results, None)["name"] == "new"
    assert find_cluster(results, "old")["name"] == "old"
    with pytest.raises(ClusterNotFound, match="recorded: \\['new', 'old'\\]"):
        find_cluster(results, "nope")
    _record(tmp_path, results, "other", alive=True)
    with pytest.raises(ClusterNotFound, match="pass --cluster NAME"):
        find_cluster(results, None)


def test_admin_uses_the_record_of_the_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    _record(tmp_path, results, "x", alive=True)
    monkeypatch.delenv("SPLITBRAIN_CONTROLLERS", raising=False)
    code = cli.main(["admin", "--results", str(results), "--timeout-s", "0.5", "metadata"])
    assert code == 1  # it found the record and asked its (closed) address: unreachable, not "no controllers"
    assert "127.0.0.1:9" in capsys.readouterr().err
    assert cli.main(["admin", "--results", str(results), "--cluster", "nope", "metadata"]) == 2
    assert "no cluster 'nope'" in capsys.readouterr().err


def test_cluster_up_prints_exports_that_admin_reads() -> None:
    rec = {"controllers": ["10.77.1.1:9101", "10.77.1.2:9101"], "token": "abc"}
    assert cluster_cmd.exports(rec) == ["export SPLITBRAIN_CONTROLLERS=10.77.1.1:9101,10.77.1.2:9101",
                                        "export SPLITBRAIN_TOKEN=abc"]


def test_compose_control_node_knows_the_controllers_and_token() -> None:
    doc = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    env = doc["services"]["control"]["environment"]
    controllers = [s for s, svc in doc["services"].items() if "controller" in (svc.get("command") or [])]
    assert sorted(env["SPLITBRAIN_CONTROLLERS"].split(",")) == sorted(f"{c}:9101" for c in controllers)
    assert env["SPLITBRAIN_TOKEN_FILE"] == "/run/secrets/cluster_token"
    assert "cluster_token" in (doc["services"]["control"].get("secrets") or doc["x-node"]["secrets"])


@given(kind=st.sampled_from(["run", "cluster"]), alive=st.booleans(), exists=st.booleans(),
       record=st.one_of(st.none(), st.text(min_size=1, max_size=5)))
def test_orphan_rule_property(kind: str, alive: bool, exists: bool, record: str | None) -> None:
    """A run lives exactly as long as its owner process; a kept cluster exactly as long as its record."""
    owner = {"kind": kind, "pid": 1, "start": 1, "record": record}
    orphan = orphan_reason(owner, alive=_alive_if(alive), exists=lambda p: exists) is not None
    assert orphan is (not (record and exists) if kind == "cluster" else not alive)
