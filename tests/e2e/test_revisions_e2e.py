"""Another revision of the cluster on the docker and ssh backends: a throwaway commit (git plumbing; work tree,
index and refs untouched) whose controllers log a marker; its nodes must run that commit -- from the revision's node
image on docker, from the copy installed on every host over ssh -- while the harness runs this checkout."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.revisions import commit_with_changes

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
REPO = Path(__file__).resolve().parents[2]


def _sibling(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"_e2e_{name}", Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _marked_revision() -> tuple[str, str]:
    marker = f"REVISION-MARKER-{secrets.token_hex(4)}"
    path = "system_under_test/controller/server.py"
    text = subprocess.run(["git", "-C", str(REPO), "show", f"HEAD:{path}"], capture_output=True, text=True,
                          check=True).stdout
    old = '"controller %s listening on %s (data %s)"'
    assert old in text
    sha = commit_with_changes({path: text.replace(old, f'"controller %s listening on %s (data %s) {marker}"')
                               .encode()}, message="test: a marked revision")
    return sha, marker


def _check_run(results_root: Path, name: str, sha: str, marker: str, controllers: list[str]) -> None:
    run = next((results_root / name).glob("2*"))
    for c in controllers:
        assert marker in (run / "nodes" / c / "node.log").read_text(encoding="utf-8"), c
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    assert results["valid"] is True, results.get("anomaly_counts")
    assert results["provenance"]["sut"]["revision"] == sha and results["provenance"]["sut"]["build"] == "revision"


def test_a_revision_runs_from_its_own_node_image_on_docker(node_image: str, tmp_path: Path) -> None:
    sha, marker = _marked_revision()
    spec = tmp_path / "rev-docker.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "rev-docker", "backend": "docker", "nodes": {"controllers": 3, "broker_sets": {"count": 1,
                                                                                             "replicas": 2}},
        "workloads": [{"name": "queue", "options": {"queues_per_set": 2}}], "nemesis": {"packages": []},
        "concurrency": 2, "rate": 20, "time_limit_s": 5, "phases": {"recovery_s": 1, "final_drain_s": 10}}))
    env = {**os.environ, "SPLITBRAIN_SUT_CACHE": str(tmp_path / "cache")}
    res = subprocess.run([sys.executable, "-m", "harness.cli", "test", str(spec), "--sut-revision", sha,
                          "--results", str(tmp_path / "results"), "--quiet"], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=800, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    _check_run(tmp_path / "results", "rev-docker", sha, marker, ["c1", "c2", "c3"])
    import docker

    image = docker.from_env().images.get(f"splitbrain/node:sut-{sha[:12]}")
    assert image.labels["splitbrain.sut-revision"] == sha


def test_a_revision_is_installed_on_every_ssh_host(node_image: str, tmp_path: Path) -> None:
    ssh = _sibling("test_ssh_backend")  # its sshd-in-containers helpers
    VENV_PYTHON, _keypair, _sshd_nodes = ssh.VENV_PYTHON, ssh._keypair, ssh._sshd_nodes
    sha, marker = _marked_revision()
    key_file, pub = _keypair(tmp_path)
    names = ["c1", "c2", "c3", "b1", "b2"]
    hosts = asyncio.run(_sshd_nodes(node_image, [f"h-{n}" for n in names], pub))
    try:
        nodes_file = tmp_path / "nodes.yaml"
        nodes_file.write_text(yaml.safe_dump({
            "python": VENV_PYTHON, "install": True, "defaults": {"user": "root", "key_file": key_file},
            "nodes": {n: {"host": hosts.address(f"h-{n}")} for n in names}}))
        spec = tmp_path / "rev-ssh.yaml"
        spec.write_text(yaml.safe_dump({
            "name": "rev-ssh", "backend": "ssh", "nodes": {"controllers": names[:3], "broker_sets": [names[3:]]},
            "workloads": [{"name": "queue", "options": {"queues_per_set": 2}}], "nemesis": {"packages": []},
            "concurrency": 2, "rate": 20, "time_limit_s": 5, "phases": {"recovery_s": 1, "final_drain_s": 10}}))
        env = {**os.environ, "SPLITBRAIN_SUT_CACHE": str(tmp_path / "cache")}
        res = subprocess.run([sys.executable, "-m", "harness.cli", "test", str(spec), "--sut-revision", sha,
                              "--nodes-file", str(nodes_file), "--results", str(tmp_path / "results"), "--quiet"],
                             capture_output=True, text=True, env=env, cwd=REPO, timeout=800,
                             stdin=subprocess.DEVNULL)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        _check_run(tmp_path / "results", "rev-ssh", sha, marker, names[:3])
    finally:
        asyncio.run(hosts.close())
