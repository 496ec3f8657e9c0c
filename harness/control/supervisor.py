"""The per-run supervisor: cleans up after a harness that died without closing its run (local and docker).

``python -m harness.control.supervisor STATE_FILE`` is started (:func:`launch`) by :meth:`LocalRemote.create` and
:meth:`DockerRemote.create` in its own session with no inherited pipes.  The state file is the run as its
backend recorded it: the local backend's full state (processes, namespaces, bridge, FORWARD rule), or for docker
(``"backend": "docker"``) the run's prefix, owner label and nodes -- the containers' labels are docker's state,
the file adds what labels cannot (they never change): the run directory and a hand-over to a cluster.  It waits
(a pidfd, else a 0.2 s poll) until either

* the state file is gone -- the harness closed the run normally (or handed a docker run over to a cluster
  record): nothing to do; or
* the owner process is gone while the state file remains -- the harness was SIGKILLed (or crashed past its
  ``finally``).  Unless the run was handed over to a cluster record (kind ``cluster``: ``cluster up`` exits by
  design), the supervisor then, in this order:

  1. copies every node's ``*.log`` into ``<run dir>/nodes/<node>/`` (the only copy would go with the namespaces
     or containers): the backend's ``save_orphan_logs``,
  2. marks the run directory ``ended: killed`` in ``results.json`` (verdict ``unknown``; ``analyze`` re-checks
     the history that was streamed up to the kill),
  3. removes the run (the backend's ``remove_orphan``): local, its processes, namespaces, bridge, FORWARD rule
     and state; docker, the containers and network carrying this run's *and this owner's* labels, nothing else.

So node daemons and faults (iptables/tc live in the namespaces or containers) outlive a killed harness by about a
second (docker: a few, the engine removes containers one by one).  The decision is :func:`next_action` (pure,
the same for both backends); this module's ``main`` is the shell around it.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.control.owner import process_alive

__all__ = ["launch", "mark_killed", "next_action", "reap", "supervise"]

# The backend that recorded a state file, by module name: the backends start the supervisor, so importing them
# here would make a circle.  Each offers save_orphan_logs(state) and remove_orphan(state, state_path).
_BACKENDS = {"local": "harness.control.local", "docker": "harness.control.docker"}

_POLL_S = 0.2
_REPO = Path(__file__).resolve().parents[2]


def next_action(state: Mapping[str, Any] | None, *, owner_alive: bool) -> str:
    """``wait``, ``exit`` (closed normally or kept as a cluster) or ``clean`` (owner died, run left behind)."""
    if state is None:
        return "exit"
    if owner_alive:
        return "wait"
    owner = state.get("owner") or {}
    return "exit" if owner.get("kind") == "cluster" else "clean"


def launch(state_path: Path) -> subprocess.Popen[bytes]:
    """Start the supervisor of the run recorded in ``state_path``: its own session, no inherited pipes, so
    neither a Ctrl-C to our process group nor a caller waiting for our output is held up by it."""
    return subprocess.Popen(
        [sys.executable, "-m", "harness.control.supervisor", str(state_path)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        cwd=str(_REPO), close_fds=True,
    )


async def reap(proc: subprocess.Popen[bytes]) -> None:
    """Wait (at most 5 s) for a supervisor whose run was closed -- it sees its state file gone and exits --
    then kill it if it has not: a closed run must not leave its watcher behind."""
    with contextlib.suppress(Exception):
        await asyncio.to_thread(proc.wait, 5)
    if proc.poll() is None:
        proc.kill()


def mark_killed(run_dir: str | Path, owner_pid: Any) -> None:
    """Record in ``results.json`` that the run ended because its harness was killed (verdict unknown)."""
    path = Path(run_dir) / "results.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        doc = {}
    doc = doc if isinstance(doc, dict) else {}
    doc["ended"] = "killed"
    doc["valid"] = "unknown" if doc.get("valid") is True or "valid" not in doc else doc["valid"]
    doc.setdefault("crashed", f"the harness (pid {owner_pid}) was killed before it finished; node logs were saved "
                              "by the run's supervisor; `splitbrain analyze` re-checks the recorded history")
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _read(state_path: Path) -> dict[str, Any] | None:
    for _ in range(5):  # a write in progress is replaced atomically; a vanished file means "closed"
        try:
            doc = json.loads(state_path.read_text(encoding="utf-8"))
            return doc if isinstance(doc, dict) else None
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            time.sleep(0.05)
    return None


def _wait_owner(pid: int, start: Any, state_path: Path) -> None:
    """Return when the owner is gone or the state file is; a pidfd makes the first instant."""
    fd = None
    with contextlib.suppress(OSError, AttributeError):
        fd = os.pidfd_open(pid)
    try:
        while process_alive(pid, start) and state_path.exists():
            if fd is not None:
                select.select([fd], [], [], 0.5)  # wakes at the owner's exit; the timeout notices a close
            else:
                time.sleep(_POLL_S)
    finally:
        if fd is not None:
            os.close(fd)


def supervise(state_path: Path) -> str:
    """Watch one run until it is closed or its owner dies (see the module docstring); returns what it did."""
    state = _read(state_path)
    while True:
        owner = (state or {}).get("owner") or {}
        pid, start = owner.get("pid"), owner.get("start")
        action = next_action(state, owner_alive=process_alive(pid, start))
        if action == "exit":
            if state is not None and state.get("backend") == "docker":  # its claim file owns it now
                state_path.unlink(missing_ok=True)
            return "closed" if state is None else "kept as a cluster"
        if action == "clean" or not isinstance(pid, int):
            break
        _wait_owner(pid, start, state_path)
        state = _read(state_path)  # the owner may have handed the run over (keep_as_cluster) meanwhile
    assert state is not None
    backend = importlib.import_module(_BACKENDS.get(str(state.get("backend") or "local"), _BACKENDS["local"]))
    with contextlib.suppress(Exception):  # an unreachable engine must not keep the run from being marked
        backend.save_orphan_logs(state)
    if state.get("run_dir") and Path(state["run_dir"]).is_dir():
        with contextlib.suppress(OSError):
            mark_killed(state["run_dir"], pid)
    backend.remove_orphan(state, state_path)
    return "cleaned"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m harness.control.supervisor STATE_FILE", file=sys.stderr)
        return 2
    supervise(Path(args[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
