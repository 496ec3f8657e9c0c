"""The LOCAL control backend: every node is a Linux network namespace on this machine.

Topology of one run (prefix ``sbXXXX``, unique per run so parallel runs never collide)::

    host ── bridge sbXXXXbr (10.77.S.254/24) ─┬─ veth sbXXXXv0 ── ns sbXXXX-c1: eth0 10.77.S.1
                                              ├─ veth sbXXXXv1 ── ns sbXXXX-c2: eth0 10.77.S.2
                                              └─ ...

* Addresses exist only on interfaces we create (the bridge and the namespaces' eth0); the
  harness reaches nodes through the bridge address.  Each namespace has its own iptables/tc for
  the nemeses.
* The one host-level change: when ``br_netfilter`` is loaded, frames crossing a bridge traverse
  the host's iptables FORWARD chain (policy DROP on docker hosts), which would cut every
  node-to-node link.  We insert ``FORWARD -i <bridge> -o <bridge> -j ACCEPT`` -- scoped to our
  bridge, recorded in the state file, removed by cleanup (docker does the same for docker0).
* Processes start inside their namespace (``ip netns exec``) in their own session, with
  stdout+stderr appended to a log file; each node has a directory ``<root>/<node>/``.
* Everything created (namespaces, veths, bridge, the FORWARD rule, processes with their start times and
  argv, the ``SPLITBRAIN_RUN_ID`` environment marker every node process carries) is recorded in a JSON
  state file under :data:`STATE_DIR` *before* it is created, with the run's *owner*
  (:mod:`harness.control.owner`: kind, pid + start time, results directory, cluster record).  Only pids
  whose start time still matches are ever signalled.
* A helper that must mount something for a node (the lazy store file system, ``cluster.store_fs: lazyfs``) runs
  outside the namespaces (:meth:`LocalRemote.spawn_host`: ``ip netns exec`` would hide its mount from everyone
  else); every way a run is removed unmounts whatever is mounted under its root first
  (:mod:`harness.control.mounts`), so no mount outlives its run.
* Ownership decides who may remove a run: :meth:`LocalRemote.close` removes its own; a supervisor process
  (:mod:`harness.control.supervisor`, started with the run) saves the node logs into the run's results
  directory, marks it ``ended: killed`` and removes everything within about a second when the owner dies
  without closing (SIGKILL); :func:`cleanup_all` with ``only_orphans`` removes only runs whose owner is gone
  for good (:func:`harness.control.owner.orphan_reason`) -- never a live run or a kept cluster
  (:meth:`LocalRemote.keep_as_cluster`).

Needs root (CAP_NET_ADMIN); otherwise :class:`NotPermitted` suggests the docker backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.control.base import CommandFailed, ControlError, ExecResult, NotPermitted
from harness.control.mounts import mounts_under, unmount
from harness.control.owner import make_owner, orphan_reason, process_alive
from harness.control.supervisor import launch, reap

__all__ = ["RUN_ID_ENV", "STATE_DIR", "LocalRemote", "cleanup_all", "cleanup_state", "orphans"]

STATE_DIR = Path(os.environ.get("SPLITBRAIN_LOCAL_STATE_DIR", "/tmp/splitbrain-local"))
RUN_ID_ENV = "SPLITBRAIN_RUN_ID"  # set in every node process's environment: which run it belongs to
_SUBNET_BASE = "10.77"
_MAX_NODES = 250
# Machine-wide (whatever the state dir): two runs choosing a subnet at once must not pick the same one.
_SUBNET_LOCK = Path("/run/lock" if Path("/run/lock").is_dir() else "/tmp") / "splitbrain-local-subnets.lock"


def _run(argv: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    if check and res.returncode != 0:
        raise ControlError(f"local backend: {' '.join(argv)!r} failed with exit {res.returncode}: {res.stderr.strip()}")
    return res


def _fw_rule(bridge: str) -> list[str]:
    return ["-i", bridge, "-o", bridge, "-m", "comment", "--comment", "splitbrain-local", "-j", "ACCEPT"]


def _proc_starttime(pid: int) -> int | None:
    """The start time of the running process ``pid`` (clock ticks after boot, ``/proc/<pid>/stat`` field 22), or
    None once it is gone: no such pid, or a zombie that is all that is left of its thread group.

    A zombie with other threads is not gone.  When a multithreaded process (an Erlang VM) is SIGKILLed, its main
    thread can exit, and ``stat`` say ``Z``, while another thread still tears down the address space and only then
    closes the files, its listening sockets among them: for tens of ms on an idle machine, longer on a loaded one,
    the kernel still accepts connections on them (a RabbitMQ broker "killed" that way still took AMQP connections,
    docs/systems.md).  ``waitpid`` does not reap such a leader either, until the last thread is gone.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    if fields and fields[0] == "Z" and _threads(pid) <= 1:
        return None  # a zombie, and no thread of it is still exiting: dead
    return int(fields[19]) if len(fields) > 19 else None


def _threads(pid: int) -> int:
    """How many threads of ``pid``'s group the kernel still lists (0 once the pid is gone)."""
    try:
        return sum(1 for _ in Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return 0


def _write_state(path: Path, state: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1), encoding="utf-8")
    os.replace(tmp, path)


def _used_subnets(state_dir: Path) -> set[int]:
    used = set()
    for f in state_dir.glob("*.json"):
        with contextlib.suppress(Exception):
            used.add(int(json.loads(f.read_text())["subnet"]))
    out = _run(["ip", "-4", "-o", "addr", "show"], check=False).stdout
    for m in re.finditer(rf"inet {re.escape(_SUBNET_BASE)}\.(\d+)\.", out):
        used.add(int(m.group(1)))
    return used


class LocalRemote:
    """A :class:`harness.control.base.Remote` over network namespaces.  Create with :meth:`create`."""

    def __init__(self, state: dict[str, Any], state_path: Path) -> None:
        self.state = state
        self.state_path = state_path
        self.root = Path(state["root"])
        self._popen: dict[int, subprocess.Popen[bytes]] = {}
        self._supervisor: subprocess.Popen[bytes] | None = None

    # -- lifecycle ----------------------------------------------------------------------------------

    @classmethod
    async def create(
        cls, nodes: Sequence[str], *, state_dir: Path | None = None, root: str | None = None, prefix: str | None = None,
        owner: Mapping[str, Any] | None = None, supervise: bool = True,
    ) -> LocalRemote:
        """Create a bridge and one namespace per node.

        Args:
            owner: who answers for the run (default: this process, kind ``run``; see :mod:`.owner`).
            supervise: start the supervisor that cleans up if this process dies without :meth:`close`.

        Raises:
            NotPermitted: not root, or ``ip`` is missing.
            ControlError: a namespace/link command failed (everything created so far is removed).
        """
        if os.geteuid() != 0:
            raise NotPermitted(
                "the local backend creates network namespaces and needs root (CAP_NET_ADMIN); "
                "run as root, or use `backend: docker` in the spec (or --backend docker)"
            )
        if shutil.which("ip") is None:
            raise NotPermitted("the local backend needs iproute2's `ip` command; install iproute2 or use docker")
        if not 1 <= len(nodes) <= _MAX_NODES or len(set(nodes)) != len(nodes):
            raise ControlError(f"local backend: need 1..{_MAX_NODES} distinct node names, got {list(nodes)}")
        remote = await asyncio.to_thread(cls._create_sync, list(nodes), state_dir or STATE_DIR, root, prefix,
                                         dict(owner or make_owner()))
        if supervise:
            remote.start_supervisor()
        return remote

    @classmethod
    def _create_sync(cls, nodes: list[str], state_dir: Path, root: str | None, prefix: str | None,
                     owner: dict[str, Any]) -> LocalRemote:
        state_dir.mkdir(parents=True, exist_ok=True)
        prefix = prefix or f"sb{secrets.token_hex(2)}"
        state_path = state_dir / f"{prefix}.json"
        if state_path.exists():
            raise ControlError(f"local backend: prefix {prefix} is in use ({state_path})")
        with open(_SUBNET_LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the bridge holds the subnet's address
            return cls._create_locked(nodes, state_dir, root, prefix, state_path, owner)

    @classmethod
    def _create_locked(cls, nodes: list[str], state_dir: Path, root: str | None, prefix: str,
                       state_path: Path, owner: dict[str, Any]) -> LocalRemote:
        free = sorted(set(range(1, 255)) - _used_subnets(state_dir))
        if not free:
            raise ControlError(f"local backend: no free {_SUBNET_BASE}.X.0/24 subnet; run `splitbrain cluster down`")
        subnet = free[0]
        root_dir = root or tempfile.mkdtemp(prefix=f"{prefix}-", dir=str(state_dir))
        state: dict[str, Any] = {
            "prefix": prefix, "owner_pid": owner["pid"], "owner_start": owner["start"], "owner": owner,
            "subnet": subnet, "bridge": f"{prefix}br", "root": root_dir, "nodes": {}, "pids": {},
            "env": {RUN_ID_ENV: prefix}, "iptables": [], "run_dir": None,
        }
        for i, node in enumerate(nodes):
            ip = f"{_SUBNET_BASE}.{subnet}.{i + 1}"
            state["nodes"][node] = {"netns": f"{prefix}-{node}", "veth": f"{prefix}v{i}", "ip": ip}
        _write_state(state_path, state)  # recorded before anything exists, so a crash here is cleanable
        remote = cls(state, state_path)
        try:
            br = state["bridge"]
            _run(["ip", "link", "add", br, "type", "bridge"])
            if shutil.which("iptables"):
                state["fw_rule"] = True
                state["iptables"] = [{"table": "filter", "chain": "FORWARD", "rule": _fw_rule(br)}]
                _write_state(state_path, state)
                _run(["iptables", "-w", "-I", "FORWARD", "1", *_fw_rule(br)])
            _run(["ip", "addr", "add", f"{_SUBNET_BASE}.{subnet}.254/24", "dev", br])
            _run(["ip", "link", "set", br, "up"])
            for node, n in state["nodes"].items():
                ns, veth = n["netns"], n["veth"]
                _run(["ip", "netns", "add", ns])
                _run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
                _run(["ip", "link", "set", veth, "master", br, "up"])
                _run(["ip", "-n", ns, "addr", "add", f"{n['ip']}/24", "dev", "eth0"])
                _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
                _run(["ip", "-n", ns, "link", "set", "lo", "up"])
                (Path(root_dir) / node).mkdir(parents=True, exist_ok=True)
        except BaseException:
            cleanup_state(state_path)
            raise
        return remote

    # -- ownership -----------------------------------------------------------------------------------

    @property
    def run_id(self) -> str:
        return str(self.state["prefix"])

    def start_supervisor(self) -> None:
        """Start :mod:`harness.control.supervisor` for this run: its own session, no inherited pipes, so
        neither a Ctrl-C to our process group nor a caller waiting for our output is held up by it."""
        self._supervisor = launch(self.state_path)
        self.state["supervisor"] = {"pid": self._supervisor.pid, "start": _proc_starttime(self._supervisor.pid)}
        _write_state(self.state_path, self.state)

    def note_run_dir(self, run_dir: str | Path) -> None:
        """Where this run's results go: the supervisor saves node logs there (and marks it killed) if we die."""
        self.state["run_dir"] = str(run_dir)
        _write_state(self.state_path, self.state)

    def keep_as_cluster(self, record: str | Path, results_dir: str | Path) -> None:
        """Hand the run over to a cluster record (``cluster up``, ``--leave-running``): from now on it is an
        orphan only when that record is gone, and the supervisor leaves it alone when we exit."""
        self.state["owner"] = make_owner(kind="cluster", record=str(Path(record).resolve()),
                                         results_dir=str(Path(results_dir).resolve()))
        _write_state(self.state_path, self.state)

    async def close(self) -> None:
        """Kill every process we started and remove namespaces, bridge and state file."""
        for p in self._popen.values():
            with contextlib.suppress(Exception):
                p.kill()
        await asyncio.to_thread(cleanup_state, self.state_path)
        for p in self._popen.values():
            with contextlib.suppress(Exception):
                p.wait(timeout=5)
        self._popen.clear()
        if self._supervisor is not None:
            await reap(self._supervisor)
            self._supervisor = None

    # -- Remote -------------------------------------------------------------------------------------

    def _ns(self, node: str) -> str:
        try:
            return str(self.state["nodes"][node]["netns"])
        except KeyError:
            raise ControlError(f"local backend: unknown node {node!r}; nodes: {sorted(self.state['nodes'])}") from None

    def address(self, node: str) -> str:
        self._ns(node)
        return str(self.state["nodes"][node]["ip"])

    def node_dir(self, node: str) -> Path:
        self._ns(node)
        return self.root / node

    def _env(self, env: Mapping[str, str] | None) -> dict[str, str]:
        return {**os.environ, **(env or {}), RUN_ID_ENV: self.run_id}

    async def exec(
        self, node: str, argv: Sequence[str], *, timeout_s: float = 30.0, env: Mapping[str, str] | None = None,
        cwd: str | None = None, check: bool = False,
    ) -> ExecResult:
        full = ["ip", "netns", "exec", self._ns(node), *argv]
        proc = await asyncio.create_subprocess_exec(
            *full, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=self._env(env), cwd=cwd,
            start_new_session=True,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            raise ControlError(f"on {node}: {' '.join(argv)!r} did not finish within {timeout_s}s (killed)") from None
        result = ExecResult(proc.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace"))
        if check and result.exit_code != 0:
            raise CommandFailed(node, argv, result)
        return result

    async def spawn(
        self, node: str, argv: Sequence[str], *, log_path: str, env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> int:
        ns = self._ns(node)
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            p = subprocess.Popen(
                ["ip", "netns", "exec", ns, *argv], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=self._env(env), cwd=cwd, start_new_session=True,
            )
        self._popen[p.pid] = p
        self.state["pids"][str(p.pid)] = {"node": node, "start": _proc_starttime(p.pid), "argv": list(argv)}
        _write_state(self.state_path, self.state)
        return p.pid

    def _tracked(self, node: str, pid: int) -> dict[str, Any]:
        info = self.state["pids"].get(str(pid))
        if info is None or info["node"] != node:
            raise ControlError(f"local backend: pid {pid} was not started on {node} by this run")
        return dict(info)

    async def signal(self, node: str, pid: int, sig: int) -> None:
        info = self._tracked(node, pid)
        if _proc_starttime(pid) != info["start"]:
            return  # exited (and maybe reused): never signal a stranger
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)

    async def is_alive(self, node: str, pid: int) -> bool:
        info = self._tracked(node, pid)
        p = self._popen.get(pid)
        if p is not None and p.poll() is not None:
            return False
        return _proc_starttime(pid) == info["start"] and info["start"] is not None

    async def spawn_host(self, node: str, argv: Sequence[str], *, log_path: str) -> int:
        """Start a helper daemon for ``node`` in this machine's mount namespace, outside the node's network
        namespace: ``ip netns exec`` gives each command a private mount namespace, so a mount made inside it (the
        lazy store file system, :mod:`nemesis.lazyfs`) would be seen by nobody else.  Tracked like a node process
        (``signal``, ``is_alive``, killed by :meth:`close` and the supervisor); the mounts it makes under the run's
        root are removed by :func:`cleanup_state`."""
        self._ns(node)
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            p = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 env=self._env(None), start_new_session=True)
        self._popen[p.pid] = p
        self.state["pids"][str(p.pid)] = {"node": node, "start": _proc_starttime(p.pid), "argv": list(argv),
                                          "host": True}
        _write_state(self.state_path, self.state)
        return p.pid

    async def unmount_host(self, node: str, path: str) -> bool:
        """Remove a mount :meth:`spawn_host`'s daemon made (lazily; no-op if not mounted); returns whether it was."""
        self._ns(node)
        return await asyncio.to_thread(unmount, path)

    async def upload(self, node: str, local_path: str, remote_path: str) -> None:
        self._ns(node)
        Path(remote_path).parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(shutil.copy2, local_path, remote_path)

    async def download(self, node: str, remote_path: str, local_path: str) -> None:
        self._ns(node)
        Path(local_path).parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(shutil.copy2, remote_path, local_path)


def save_orphan_logs(state: Mapping[str, Any]) -> list[str]:
    """Copy each node's ``*.log`` (local backend: ``<root>/<node>/``) into ``<run_dir>/nodes/<node>/``; returns the
    files copied."""
    run_dir = state.get("run_dir")
    if not run_dir or not Path(run_dir).is_dir():
        return []
    copied = []
    for node in state.get("nodes", {}):
        src_dir = Path(str(state.get("root", ""))) / node
        for src in sorted(src_dir.glob("*.log")) if src_dir.is_dir() else []:
            dest = Path(run_dir) / "nodes" / node / src.name
            with contextlib.suppress(OSError):
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dest)
                copied.append(str(dest))
    return copied


def remove_orphan(state: Mapping[str, Any], state_path: Path) -> None:
    """Remove a run whose harness died (called by its supervisor): everything its state file records."""
    cleanup_state(state_path)


def cleanup_state(state_path: Path) -> list[str]:
    """Remove everything one state file records; returns what was removed (for logs)."""
    try:
        state = json.loads(Path(state_path).read_text())
    except (OSError, ValueError):
        return []
    removed = []
    for pid_s, info in state.get("pids", {}).items():
        pid = int(pid_s)
        if info.get("start") is not None and _proc_starttime(pid) == info["start"]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            removed.append(f"pid {pid}")
    for n in state.get("nodes", {}).values():
        ns = n["netns"]
        pids = _run(["ip", "netns", "pids", ns], check=False).stdout.split()
        for p in pids:  # anything else still inside our namespace
            with contextlib.suppress(ProcessLookupError, ValueError, PermissionError):
                os.kill(int(p), signal.SIGKILL)
        if _run(["ip", "netns", "del", ns], check=False).returncode == 0:
            removed.append(f"netns {ns}")
        _run(["ip", "link", "del", n["veth"]], check=False)
    if _run(["ip", "link", "del", state.get("bridge", "")], check=False).returncode == 0:
        removed.append(f"bridge {state['bridge']}")
    if state.get("fw_rule"):
        for _ in range(10):  # delete every copy (idempotent, bounded)
            if _run(["iptables", "-w", "-D", "FORWARD", *_fw_rule(state["bridge"])], check=False).returncode != 0:
                break
            removed.append(f"iptables FORWARD rule for {state['bridge']}")
    root = state.get("root", "")
    for mount in mounts_under(root) if root else []:  # before the root goes: rmtree must not walk into a mount
        if unmount(mount):
            removed.append(f"mount {mount}")
    if root and Path(root).is_dir() and Path(root).parent == Path(state_path).parent:
        shutil.rmtree(root, ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        Path(state_path).unlink()
    return removed


def _orphan_reason(state: Mapping[str, Any]) -> str | None:
    owner = state.get("owner") or {"kind": "run", "pid": state.get("owner_pid"), "start": state.get("owner_start")}
    return orphan_reason(owner, alive=process_alive, exists=lambda p: Path(p).exists())


def orphans(*, state_dir: Path | None = None) -> list[tuple[Path, str]]:
    """(state file, why) of every recorded run nobody answers for (see :func:`harness.control.owner.orphan_reason`).
    A state file that cannot be read is skipped: it may be one being written right now."""
    out: list[tuple[Path, str]] = []
    for f in sorted((state_dir or STATE_DIR).glob("*.json")):
        try:
            state = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        reason = _orphan_reason(state) if isinstance(state, dict) else None
        if reason:
            out.append((f, reason))
    return out


def cleanup_all(*, state_dir: Path | None = None, only_orphans: bool = False) -> list[str]:
    """Clean every recorded run (``only_orphans``: only the orphans, by :func:`orphans`)."""
    removed: list[str] = []
    if only_orphans:
        files = [f for f, _ in orphans(state_dir=state_dir)]
    else:
        files = sorted((state_dir or STATE_DIR).glob("*.json"))
    for f in files:
        removed += cleanup_state(f)
    return removed
