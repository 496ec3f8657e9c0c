"""Records of clusters left running (``splitbrain cluster up``, ``test --leave-running``).

One JSON file per cluster under ``<results>/.clusters/<name>.json`` holds everything a later process needs to
find it again: backend, token, each node's address, directory, pid and log file, and the backend's own handle
(the local backend's state file, the docker run prefix).  The file is written after the cluster is up and
removed by ``cluster down``.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.spec import TestSpec, resolved_yaml

__all__ = ["CLUSTERS_DIR", "cluster_record", "list_records", "record_path", "remove_record", "write_record"]

CLUSTERS_DIR = ".clusters"


def record_path(results_root: str | Path, name: str) -> Path:
    return Path(results_root) / CLUSTERS_DIR / f"{name}.json"


def cluster_record(spec: TestSpec, remote: Any, db: Any) -> dict[str, Any]:
    """The JSON-ready record of a running cluster (see the module docstring)."""
    nodes: dict[str, Any] = {}
    for n in spec.nodes.all:
        d = str(remote.node_dir(n))
        nodes[n] = {"role": db.role(n), "address": remote.address(n), "dir": d, "pid": db.pids.get(n),
                    "log": str(Path(d) / "node.log")}
    rec: dict[str, Any] = {
        "name": spec.name, "backend": spec.backend, "token": db.token, "spec_yaml": resolved_yaml(spec),
        "controllers": list(db.controller_addrs({"remote": remote})), "nodes": nodes,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), "launcher_pid": os.getpid(),
    }
    if spec.backend == "local":
        rec["local_state"] = str(remote.state_path)
    elif spec.backend == "docker":
        rec["docker_prefix"] = remote.prefix
    return rec


def write_record(results_root: str | Path, record: Mapping[str, Any]) -> Path:
    path = record_path(results_root, str(record["name"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def list_records(results_root: str | Path) -> list[dict[str, Any]]:
    """Every readable cluster record, sorted by name (unreadable files are skipped)."""
    out = []
    for f in sorted((Path(results_root) / CLUSTERS_DIR).glob("*.json")):
        try:
            rec = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict) and "name" in rec:
            out.append(rec)
    return out


def remove_record(results_root: str | Path, name: str) -> None:
    record_path(results_root, name).unlink(missing_ok=True)
