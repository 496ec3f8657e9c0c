"""Records of clusters left running (``splitbrain cluster up``, ``test --leave-running``).

One JSON file per cluster under ``<results>/.clusters/<name>.json`` holds everything a later process needs to
find it again: backend, token, each node's address, directory, pid and log file, and the backend's own handle
(the local backend's state file, the docker run prefix), the run id and the results root it belongs to.  The
file is written after the cluster is up and removed by ``cluster down``; while it exists it *owns* the cluster
(:mod:`harness.control.owner`: a kept cluster is an orphan only once its record is gone).

:func:`find_cluster` is how ``splitbrain admin --cluster NAME`` (and its default, the only running cluster)
finds the controller addresses and the token without the user digging in these files.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.protocols import ClusterRecord
from harness.spec import TestSpec, resolved_yaml

__all__ = [
    "CLUSTERS_DIR", "ClusterNotFound", "cluster_alive", "cluster_record", "find_cluster", "list_records",
    "recordable", "record_path", "remove_record", "write_record",
]

CLUSTERS_DIR = ".clusters"


def record_path(results_root: str | Path, name: str) -> Path:
    return Path(results_root) / CLUSTERS_DIR / f"{name}.json"


def recordable(spec: TestSpec, db: object) -> ClusterRecord:
    """``db`` (the DB of ``spec``'s system) as a cluster a record can describe.

    Raises:
        TypeError: it is not a :class:`~harness.protocols.ClusterRecord` (only our cluster's DB is); names the
            system and what a record needs.
    """
    if not isinstance(db, ClusterRecord):
        raise TypeError(f"system {spec.system!r}: its running cluster cannot be recorded (its DB lacks the token, "
                        "pids, role and controller_addrs a record holds: harness.protocols.ClusterRecord)")
    return db


def cluster_record(spec: TestSpec, remote: Any, db: ClusterRecord, *,
                   results_root: str | Path = "results") -> dict[str, Any]:
    """The JSON-ready record of a running cluster (see the module docstring); ``db`` is ours (only our cluster's
    DB is a :class:`~harness.protocols.ClusterRecord`: the callers check)."""
    nodes: dict[str, Any] = {}
    for n in spec.nodes.all:
        d = str(remote.node_dir(n))
        nodes[n] = {"role": db.role(n), "address": remote.address(n), "dir": d, "pid": db.pids.get(n),
                    "log": str(Path(d) / "node.log")}
    rec: dict[str, Any] = {
        "name": spec.name, "system": spec.system, "backend": spec.backend, "token": db.token,
        "spec_yaml": resolved_yaml(spec),
        "controllers": list(db.controller_addrs({"remote": remote})), "nodes": nodes,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), "launcher_pid": os.getpid(),
        "id": getattr(remote, "run_id", None), "results": str(Path(results_root).resolve()), "uid": os.getuid(),
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


class ClusterNotFound(LookupError):
    """No (or no single) recorded cluster matches; the message lists what is recorded and what to pass."""


def cluster_alive(rec: Mapping[str, Any]) -> bool:
    """Whether a recorded cluster still exists: its local state file (local) or docker run claim (docker) is
    there and, locally, some node process still runs."""
    if rec.get("backend") == "local":
        state = rec.get("local_state")
        if not state or not Path(str(state)).exists():
            return False
        from harness.control.owner import proc_start

        return any(isinstance(n.get("pid"), int) and proc_start(n["pid"]) is not None
                   for n in (rec.get("nodes") or {}).values())
    if rec.get("backend") == "docker" and rec.get("docker_prefix"):
        from harness.control.owner import read_claim

        return read_claim(str(rec["docker_prefix"])) is not None
    return False


def find_cluster(results_root: str | Path, name: str | None) -> dict[str, Any]:
    """The record of cluster ``name`` under ``results_root``, or of the only running one when ``name`` is None.

    Raises:
        ClusterNotFound: naming the results root, the recorded clusters and what to pass.
    """
    records = list_records(results_root)
    known = [r["name"] for r in records]
    where = f"{Path(results_root) / CLUSTERS_DIR}"
    if name is not None:
        for r in records:
            if r["name"] == name:
                return r
        raise ClusterNotFound(f"no cluster {name!r} recorded under {where} (recorded: {known or 'none'}); "
                              "start one with `splitbrain cluster up SPEC`, or pass --results DIR")
    running = [r for r in records if cluster_alive(r)]
    if len(running) == 1:
        return running[0]
    if not running:
        raise ClusterNotFound(f"no running cluster recorded under {where} (recorded: {known or 'none'}); start one "
                              "with `splitbrain cluster up SPEC`, or pass --controllers and --token-file")
    raise ClusterNotFound(f"several running clusters under {where}: {[r['name'] for r in running]}; "
                          "pass --cluster NAME")
