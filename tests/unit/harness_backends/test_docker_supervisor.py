"""A dying harness on the docker backend, without an engine: the supervisor's decision, the label filter that
confines it to one run and one owner, where saved logs go, and the docker edge against a fake client.
(The real thing, a SIGKILLed `splitbrain test` on containers, is tests/e2e/test_dying_harness_docker.py.)"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.control import docker, owner, supervisor
from harness.control.docker import (
    LABEL_BACKEND,
    LABEL_NODE,
    LABEL_OWNER,
    LABEL_RUN,
    DockerRemote,
    log_destination,
    owned_filter,
    remove_owned_run,
    save_container_logs,
)
from harness.control.supervisor import next_action

DEAD = {"kind": "run", "pid": 2**22 + 7, "start": 1}  # above the kernel's pid limit: never alive


# -- the decision (shared with the local backend) ----------------------------------------------------

@given(state=st.one_of(st.none(), st.fixed_dictionaries({}, optional={
    "backend": st.sampled_from(["docker", "local"]),
    "owner": st.fixed_dictionaries({}, optional={"kind": st.sampled_from(["run", "cluster", "other"])})})),
    owner_alive=st.booleans())
def test_next_action_property(state: dict[str, Any] | None, owner_alive: bool) -> None:
    """Closed -> exit; a live owner -> wait; a dead owner -> clean, unless the run is a kept cluster.
    The backend never changes the decision."""
    action = next_action(state, owner_alive=owner_alive)
    if state is None:
        assert action == "exit"
    elif owner_alive:
        assert action == "wait"
    else:
        kept = (state.get("owner") or {}).get("kind") == "cluster"
        assert action == ("exit" if kept else "clean")


# -- which containers: this run's and this owner's, nothing else ----------------------------------------

def test_owned_filter_names_backend_run_and_owner() -> None:
    assert owned_filter("sbab12cd", "123:456") == {
        "label": [f"{LABEL_BACKEND}=docker", f"{LABEL_RUN}=sbab12cd", f"{LABEL_OWNER}=123:456"]}


@pytest.mark.parametrize(("prefix", "owner_label"), [("", "1:2"), ("sb1", ""), ("sb=1", "1:2"), ("sb1", "1=2")],
                         ids=["no-prefix", "no-owner", "prefix-with-equals", "owner-with-equals"])
def test_owned_filter_refuses_what_would_widen_it(prefix: str, owner_label: str) -> None:
    with pytest.raises(ValueError, match="prefix and owner label"):
        owned_filter(prefix, owner_label)


@given(prefix=st.text(max_size=12), owner_label=st.text(max_size=12))
def test_owned_filter_always_pins_all_three_labels(prefix: str, owner_label: str) -> None:
    try:
        labels = owned_filter(prefix, owner_label)["label"]
    except ValueError:
        return
    assert labels == [f"{LABEL_BACKEND}=docker", f"{LABEL_RUN}={prefix}", f"{LABEL_OWNER}={owner_label}"]
    assert all(label.count("=") == 1 for label in labels)  # no value can smuggle in another key


# -- where saved logs go ------------------------------------------------------------------------------

@pytest.mark.parametrize(("node", "path", "saved_as"), [
    ("c1", "/srv/splitbrain/c1/node.log", "nodes/c1/node.log"),
    ("b-1.2", "/srv/splitbrain/b-1.2/faketime.log", "nodes/b-1.2/faketime.log"),
    ("c1", "/srv/splitbrain/c1/store/commitlog", None),
    ("c1", "/srv/splitbrain/c1/", None),
    ("c1", "/srv/splitbrain/c1/..", None),
    ("../c1", "/srv/splitbrain/c1/node.log", None),
    ("C1", "/srv/splitbrain/C1/node.log", None),
], ids=["node-log", "other-log", "not-a-log", "a-directory", "dot-dot", "bad-node", "upper-case-node"])
def test_log_destination(tmp_path: Path, node: str, path: str, saved_as: str | None) -> None:
    dest = log_destination(tmp_path, node, path)
    assert dest == (tmp_path / saved_as if saved_as else None)


@given(node=st.text(max_size=8), path=st.text(max_size=40))
def test_log_destination_never_leaves_the_nodes_folder(node: str, path: str) -> None:
    run_dir = Path("/run-dir")
    dest = log_destination(run_dir, node, path)
    if dest is not None:
        assert dest.parent == run_dir / "nodes" / node and dest.name.endswith(".log")
        assert ".." not in dest.relative_to(run_dir).parts


# -- the docker edge against a fake engine ----------------------------------------------------------------

def _tar(name: str, data: bytes) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class _Exec:
    def __init__(self, exit_code: int, output: bytes) -> None:
        self.exit_code, self.output = exit_code, output


class _Container:
    def __init__(self, node: str, files: dict[str, bytes], *, broken: bool = False) -> None:
        self.name, self.labels, self.files = f"sbx-{node}", {LABEL_NODE: node}, files
        self.broken, self.removed = broken, False

    def exec_run(self, argv: list[str]) -> _Exec:
        if self.broken:
            raise RuntimeError("container is gone")
        assert argv[0] == "find"
        return _Exec(0, "".join(f"{p}\n" for p in self.files).encode())

    def get_archive(self, path: str) -> tuple[list[bytes], dict[str, Any]]:
        return [_tar(Path(path).name, self.files[path])], {}

    def remove(self, force: bool, v: bool) -> None:
        self.removed = True


class _Network:
    def __init__(self) -> None:
        self.name, self.removed = "sbx-net", False

    def remove(self) -> None:
        self.removed = True


class _Client:
    """Answers ``list`` only to the exact owned filter of run ``sbx`` / owner ``7:9``; records every filter."""

    def __init__(self, containers: list[_Container]) -> None:
        self.owned, self.network = containers, _Network()
        self.filters: list[Any] = []
        self.containers, self.networks = self, _Networks(self)

    def list(self, all: bool = False, filters: Any = None) -> list[Any]:
        self.filters.append(filters)
        return self.owned if filters == owned_filter("sbx", "7:9") else []


class _Networks:
    def __init__(self, client: _Client) -> None:
        self.client = client

    def list(self, filters: Any = None) -> list[Any]:
        self.client.filters.append(filters)
        return [self.client.network] if filters == owned_filter("sbx", "7:9") else []


def _state(run_dir: Path | None, **extra: Any) -> dict[str, Any]:
    return {"backend": "docker", "prefix": "sbx", "owner": DEAD, "owner_label": "7:9", "node_root": "/srv/splitbrain",
            "nodes": {"c1": {}, "c2": {}, "c3": {}}, "run_dir": str(run_dir) if run_dir else None, **extra}


def test_save_container_logs_copies_only_logs_of_the_runs_nodes(tmp_path: Path) -> None:
    client = _Client([
        _Container("c1", {"/srv/splitbrain/c1/node.log": b"last words\n", "/srv/splitbrain/c1/x.bin": b"no"}),
        _Container("c2", {}, broken=True),  # its trouble must not cost the others their logs
        _Container("c3", {"/srv/splitbrain/c3/node.log": b"c3\n"}),
        _Container("zz", {"/srv/splitbrain/zz/node.log": b"not a node of this run\n"}),
    ])
    saved = save_container_logs(_state(tmp_path), client=client)
    assert sorted(saved) == [str(tmp_path / "nodes" / "c1" / "node.log"), str(tmp_path / "nodes" / "c3" / "node.log")]
    assert (tmp_path / "nodes" / "c1" / "node.log").read_bytes() == b"last words\n"
    assert not (tmp_path / "nodes" / "zz").exists()
    assert client.filters == [owned_filter("sbx", "7:9")]


def test_save_container_logs_needs_a_run_dir(tmp_path: Path) -> None:
    client = _Client([_Container("c1", {"/srv/splitbrain/c1/node.log": b"x"})])
    assert save_container_logs(_state(None), client=client) == []
    assert save_container_logs(_state(tmp_path / "gone"), client=client) == []
    assert client.filters == []


def test_remove_owned_run_removes_only_by_the_owned_filter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(owner, "CLAIMS_DIR", tmp_path / "claims")
    client = _Client([_Container("c1", {})])
    removed = remove_owned_run(_state(tmp_path), client=client)
    assert removed == ["container sbx-c1", "network sbx-net"] and client.owned[0].removed and client.network.removed
    assert client.filters == [owned_filter("sbx", "7:9")] * 2
    with pytest.raises(ValueError):  # no owner label recorded: nothing is selected at all
        remove_owned_run(_state(tmp_path, owner_label=""), client=client)
    assert len(client.filters) == 2


# -- the supervisor shell on a docker state file (the docker edge stubbed) -------------------------------

def _stub_edge(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []

    def record(step: str) -> Any:
        def edge(state: Any) -> list[str]:
            calls.append(step)
            return []

        return edge

    monkeypatch.setattr(docker, "save_container_logs", record("save"))
    monkeypatch.setattr(docker, "remove_owned_run", record("remove"))
    return calls


def test_supervisor_saves_marks_and_removes_a_docker_run_whose_owner_died(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _stub_edge(monkeypatch)
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_text(json.dumps({"seed": 3}))
    state_path = tmp_path / "sbx.json"
    state_path.write_text(json.dumps(_state(run)))
    assert supervisor.supervise(state_path) == "cleaned"
    assert calls == ["save", "remove"] and not state_path.exists()
    doc = json.loads((run / "results.json").read_text())
    assert doc["ended"] == "killed" and doc["valid"] == "unknown" and doc["seed"] == 3


def test_supervisor_leaves_a_docker_run_kept_as_a_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _stub_edge(monkeypatch)
    state_path = tmp_path / "sbx.json"
    state_path.write_text(json.dumps(_state(tmp_path, owner={**DEAD, "kind": "cluster"})))
    assert supervisor.supervise(state_path) == "kept as a cluster"
    assert calls == [] and not state_path.exists()  # the claim file answers for it now


def _remote(tmp_path: Path) -> DockerRemote:
    remote = DockerRemote(None, "sbx", "sbx-net", {"c1": object()}, {"c1": "10.0.0.2"}, python="python3")
    remote.state, remote.state_path = _state(None), tmp_path / "state" / "sbx.json"
    remote.state_path.parent.mkdir()
    remote.state_path.write_text(json.dumps(remote.state))
    return remote


def test_remote_records_the_run_dir_and_hands_over_to_a_cluster(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(owner, "CLAIMS_DIR", tmp_path / "claims")
    remote = _remote(tmp_path)
    assert remote.state_path is not None
    remote.note_run_dir(tmp_path / "run")
    assert json.loads(remote.state_path.read_text())["run_dir"] == str((tmp_path / "run").resolve())
    remote.keep_as_cluster(tmp_path / "rec.json", tmp_path)
    assert not remote.state_path.exists()  # the supervisor sees the run closed and exits
    claim = owner.read_claim("sbx", claims_dir=tmp_path / "claims")
    assert claim is not None and claim["kind"] == "cluster"
    assert claim["record"] == str((tmp_path / "rec.json").resolve())
