"""Who owns a backend run's machine resources, and when they become orphans that anyone may remove.

Vocabulary:

* a *run* is one backend instance (the namespaces or containers of one test run or one ``cluster up``); its
  *id* is the backend prefix (``sbXXXX``), unique on the machine;
* its *owner* says who answers for it: ``kind`` (``run``: a harness process that removes it when it ends;
  ``cluster``: left running on purpose, answered for by a cluster record file), the owner process's ``pid``
  and ``start`` time (clock ticks since boot, so a reused pid is never mistaken for the owner), the
  ``results_dir`` the run writes to, the cluster ``record`` path (kind ``cluster``), the ``uid`` and when it
  was ``created``;
* an *orphan* is a run nobody answers for any more: a ``run`` whose owner process is gone (SIGKILLed harness
  whose supervisor died too), or a ``cluster`` whose record file is gone (its results directory was deleted).

:func:`orphan_reason` is the one rule, pure (the process and file checks are injected); the backends store the
owner with what they create (the local state file, the docker labels plus :func:`write_claim` for a cluster)
and only ever sweep orphans by this rule -- never a live run's or a kept cluster's resources.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["CLAIMS_DIR", "KINDS", "make_owner", "orphan_reason", "proc_start", "process_alive", "read_claim",
           "remove_claim", "write_claim"]

KINDS = ("run", "cluster")
# Claims of docker runs kept as clusters (docker labels cannot change after a container exists).
CLAIMS_DIR = Path(os.environ.get("SPLITBRAIN_CLAIMS_DIR", "/tmp/splitbrain-claims"))


def proc_start(pid: int) -> int | None:
    """The start time of a live (non-zombie) process in clock ticks, or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    if not fields or fields[0] == "Z":
        return None
    return int(fields[19]) if len(fields) > 19 else None


def process_alive(pid: Any, start: Any) -> bool:
    """Whether process ``pid`` still runs *and* is the same process (its start time matches)."""
    return isinstance(pid, int) and start is not None and proc_start(pid) == start


def make_owner(*, kind: str = "run", results_dir: str | None = None, record: str | None = None,
               pid: int | None = None) -> dict[str, Any]:
    """The owner of a run created by this process (``pid`` defaults to ours)."""
    if kind not in KINDS:
        raise ValueError(f"owner kind {kind!r}: expected one of {KINDS}")
    pid = os.getpid() if pid is None else pid
    return {
        "kind": kind, "pid": pid, "start": proc_start(pid), "results_dir": results_dir, "record": record,
        "uid": os.getuid(), "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }


def orphan_reason(owner: Mapping[str, Any] | None, *, alive: Callable[[Any, Any], bool],
                  exists: Callable[[str], bool]) -> str | None:
    """Why a run is an orphan, or None while someone answers for it (pure: ``alive(pid, start)`` and
    ``exists(path)`` are injected).

    A ``cluster`` outlives its launcher by design, so only its record decides; a ``run`` lives as long as
    its owner process.  An owner that cannot be read is not proof of anything: it is an orphan only when its
    ``pid``/``start`` (if any) are not alive.
    """
    if not owner:
        return "no owner recorded"
    if owner.get("kind") == "cluster":
        record = owner.get("record")
        if record and exists(str(record)):
            return None
        return f"its cluster record {record} is gone"
    if alive(owner.get("pid"), owner.get("start")):
        return None
    return f"its owner process {owner.get('pid')} is gone"


def _claim_path(run_id: str, claims_dir: Path | None) -> Path:
    return (claims_dir or CLAIMS_DIR) / f"{run_id}.json"


def write_claim(run_id: str, owner: Mapping[str, Any], *, claims_dir: Path | None = None) -> Path:
    """Record ``owner`` for ``run_id`` (a docker run kept as a cluster); atomic replace."""
    path = _claim_path(run_id, claims_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(dict(owner), indent=1), encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_claim(run_id: str, *, claims_dir: Path | None = None) -> dict[str, Any] | None:
    try:
        doc = json.loads(_claim_path(run_id, claims_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def remove_claim(run_id: str, *, claims_dir: Path | None = None) -> None:
    _claim_path(run_id, claims_dir).unlink(missing_ok=True)
