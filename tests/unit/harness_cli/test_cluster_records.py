"""Cluster records under <results>/.clusters and the `cluster` verbs that only read them; public surfaces."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from harness import cli
from harness.commands._clusters import list_records, record_path, remove_record, write_record


def _record(name: str, nodes: dict[str, str]) -> dict[str, object]:
    return {"name": name, "backend": "local", "token": "t", "controllers": [], "local_state": "/nonexistent.json",
            "nodes": {n: {"role": "controller", "address": "10.0.0.1", "dir": "/x", "pid": None, "log": log}
                      for n, log in nodes.items()}}


def test_write_list_remove(tmp_path: Path) -> None:
    write_record(tmp_path, _record("b", {"c1": "/l"}))
    write_record(tmp_path, _record("a", {"c1": "/l"}))
    (tmp_path / ".clusters" / "junk.json").write_text("{not json")
    assert [r["name"] for r in list_records(tmp_path)] == ["a", "b"]
    remove_record(tmp_path, "a")
    assert not record_path(tmp_path, "a").exists()
    assert [r["name"] for r in list_records(tmp_path)] == ["b"]


def test_logs_prints_the_tail_of_the_right_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "node.log"
    log.write_text("".join(f"line {i}\n" for i in range(50)))
    write_record(tmp_path, _record("x", {"c1": str(log)}))
    assert cli.main(["cluster", "logs", "c1", "--results", str(tmp_path), "-n", "3"]) == 0
    assert capsys.readouterr().out.splitlines() == ["line 47", "line 48", "line 49"]
    assert cli.main(["cluster", "logs", "c9", "--results", str(tmp_path)]) == 2
    assert "c9" in capsys.readouterr().err
    write_record(tmp_path, _record("y", {"c1": str(log)}))
    assert cli.main(["cluster", "logs", "c1", "--results", str(tmp_path)]) == 2
    assert "--name" in capsys.readouterr().err
    assert cli.main(["cluster", "logs", "c1", "--name", "y", "--results", str(tmp_path), "-n", "1"]) == 0


def test_down_of_unknown_cluster_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_record(tmp_path, _record("x", {"c1": "/l"}))
    assert cli.main(["cluster", "down", "nope", "--results", str(tmp_path)]) == 2
    assert "nope" in capsys.readouterr().err and record_path(tmp_path, "x").exists()


def test_status_without_clusters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["cluster", "status", "--results", str(tmp_path)]) == 0
    assert "no recorded clusters" in capsys.readouterr().out
    assert cli.main(["cluster", "status", "named", "--results", str(tmp_path)]) == 2


def test_serve_refuses_missing_results_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["serve", "--results", str(tmp_path / "none"), "--port", "0"]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["harness.commands", "harness.web", "harness.commands._parts",
                                  "harness.commands._runs", "harness.commands._backend", "harness.web.index",
                                  "harness.runs", "harness.junit",
                                  "harness.web.pages", "harness.web.server", "harness.testing.probe"])
def test_all_names_exist(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__all__ and all(hasattr(module, n) for n in module.__all__)


@pytest.mark.parametrize("command", ["test", "analyze", "repro", "test-all", "cluster", "serve"])
def test_subcommands_are_registered(command: str) -> None:
    module = importlib.import_module(cli.command_module(command))
    assert callable(module.configure) and callable(module.run)


def test_unknown_backend_module_is_a_clear_error() -> None:
    from harness.commands._backend import BackendUnavailable, backend_module

    with pytest.raises(BackendUnavailable, match="expected one of"):
        backend_module("kubernetes")


def test_missing_backend_module_says_not_available_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.commands import _backend

    monkeypatch.setitem(_backend._MODULES, "docker", "harness.control.no_such_backend")
    with pytest.raises(_backend.BackendUnavailable, match="'docker' not available yet"):
        _backend.backend_module("docker")


def test_only_a_db_holding_what_a_record_needs_is_recorded() -> None:
    import systems
    from harness.commands._clusters import recordable
    from harness.spec import spec_from_dict

    ours = spec_from_dict({"name": "r", "nodes": {"controllers": 1, "broker_sets": {"count": 0}}}, file="<t>")
    db = systems.get("splitbrain").make_db(ours, systems.get("splitbrain").options({}, file="<t>"))
    assert recordable(ours, db) is db
    counter = spec_from_dict({"name": "c", "system": "counter", "nodes": {"members": 1},
                              "workloads": ["counter"]}, file="<t>")
    other = systems.get("counter").make_db(counter, systems.get("counter").options({}, file="<t>"))
    with pytest.raises(TypeError, match="system 'counter': its running cluster cannot be recorded"):
        recordable(counter, other)


@pytest.mark.parametrize(("system", "words"), [
    ("counter", "system 'counter' cannot tell it from a record"),
    ("no-such-system", "status unknown"),
])
def test_status_asks_the_recorded_systems_adapter(system: str, words: str) -> None:
    """`cluster status` asks the record's system (systems.ReportsRecordStatus); one that cannot tell, or that is
    not installed, gets a line saying so instead of our cluster's quorum question."""
    import asyncio

    from harness.commands.cluster import _status

    assert words in asyncio.run(_status({**_record("x", {}), "system": system}))


def test_our_adapter_reports_a_recorded_clusters_quorum() -> None:
    import systems

    assert isinstance(systems.get("splitbrain"), systems.ReportsRecordStatus)
    assert not isinstance(systems.get("etcd"), systems.ReportsRecordStatus)
