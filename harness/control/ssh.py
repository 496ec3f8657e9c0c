"""The SSH control backend: every node is a host reached over SSH (paramiko).

Nodes come from the spec or a nodes file (:func:`load_nodes_file`, :func:`load_nodes_settings`)::

    python: /usr/bin/python3   # the interpreter on the nodes (default python3)
    install: true              # build this project's wheel and pip-install it on every node first (default)
    defaults: {user: root, port: 22, key_file: ~/.ssh/id_ed25519, sudo: false}
    nodes:
      c1: {host: 10.0.0.11}
      c2: db-2                 # a host name or a ~/.ssh/config alias
      c3: {host: db-3, user: admin, sudo: true, password: secret}

* Authentication: the key file if given, else the SSH agent and the usual ``~/.ssh/id_*`` keys;
  a password if given.  ``~/.ssh/config`` aliases are resolved (HostName, User, Port,
  IdentityFile) when no explicit value overrides them.
* ``sudo: true`` wraps every command in ``sudo -n`` (or ``sudo -S`` with ``sudo_password``).
* Commands run under ``timeout -s KILL``; daemons start with ``setsid nohup`` and a pid file
  (``<log_path>.pid``); their start time (``/proc/<pid>/stat`` field 22) is recorded and checked
  before every signal, so a reused pid is never signalled.  :meth:`SshRemote.close` kills them.
* Files go over SFTP.  An argv whose first element is the harness's own interpreter
  (``sys.executable``) runs with the node's ``python`` instead (default ``python3``).

Starting, signalling and watching processes by script is shared with the docker backend
(:mod:`harness.control.shell`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import yaml

from harness.control.base import ControlError, ExecResult
from harness.control.shell import ShellProcesses, finish_exec, node_argv

if TYPE_CHECKING:
    from harness.revisions import SutBuild

__all__ = [
    "NodesFileError", "NodesSettings", "SshRemote", "SshTarget", "load_nodes_file", "load_nodes_settings",
    "resolve_target", "shell_command",
]

def shell_command(
    argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
    timeout_s: float | None = None,
) -> str:
    """One POSIX shell command line running ``argv`` in ``cwd`` with ``env`` added, under ``timeout``."""
    parts = list(argv)
    if timeout_s is not None:
        parts = ["timeout", "-s", "KILL", f"{max(timeout_s, 0.1):g}", *parts]
    if env:
        for k in env:
            if not k.replace("_", "a").isalnum() or k[0].isdigit():
                raise ControlError(f"environment variable name {k!r} is not a valid shell identifier")
        parts = ["env", *(f"{k}={v}" for k, v in env.items()), *parts]
    cmd = shlex.join(parts)
    return f"cd {shlex.quote(cwd)} && {cmd}" if cwd else cmd


class NodesFileError(ControlError, ValueError):
    """A nodes file or node entry is malformed (names the file or node, the value and what was expected)."""


@dataclass(frozen=True)
class SshTarget:
    """How to reach one node."""

    host: str
    port: int = 22
    user: str = "root"
    key_file: str | None = None
    password: str | None = None
    sudo: bool = False
    sudo_password: str | None = None

    def __post_init__(self) -> None:
        if not self.host or any(c.isspace() for c in self.host):
            raise ValueError(f"SshTarget: host must be a non-empty name or address, got {self.host!r}")
        if not 1 <= self.port <= 65535:
            raise ValueError(f"SshTarget {self.host}: port must be 1..65535, got {self.port}")

    def describe(self) -> str:
        auth = "key " + self.key_file if self.key_file else ("password" if self.password else "agent/default keys")
        return f"{self.user}@{self.host}:{self.port} ({auth}{', sudo' if self.sudo else ''})"


_TARGET_KEYS = ("host", "port", "user", "key_file", "password", "sudo", "sudo_password")


def resolve_target(node: str, raw: Any, *, defaults: Mapping[str, Any] | None = None,
                   ssh_config_text: str = "") -> SshTarget:
    """Build a node's target from a host string or a mapping, filling gaps from ``~/.ssh/config``
    (given as text) and then ``defaults``.  Explicit values beat the ssh config, which beats defaults."""
    import paramiko

    fields: dict[str, Any] = {"host": raw} if isinstance(raw, str) else dict(raw or {})
    unknown = set(fields) - set(_TARGET_KEYS)
    if unknown or not fields.get("host"):
        raise NodesFileError(f"ssh node {node}: expected a host string or a mapping with 'host' and optional "
                           f"{list(_TARGET_KEYS[1:])}; got {raw!r}")
    cfg = paramiko.SSHConfig.from_text(ssh_config_text).lookup(str(fields["host"])) if ssh_config_text else {}
    merged: dict[str, Any] = {k: v for k, v in (defaults or {}).items() if v is not None}
    if cfg.get("user"):
        merged["user"] = cfg["user"]
    if cfg.get("port"):
        merged["port"] = int(cfg["port"])
    if cfg.get("identityfile"):
        merged["key_file"] = cfg["identityfile"][0]
    merged.update({k: v for k, v in fields.items() if v is not None})
    merged["host"] = cfg.get("hostname", fields["host"]) if "hostname" in cfg else fields["host"]
    if merged.get("key_file"):
        merged["key_file"] = os.path.expanduser(str(merged["key_file"]))
    try:
        return SshTarget(**{**merged, "port": int(merged.get("port", 22)), "sudo": bool(merged.get("sudo", False))})
    except (TypeError, ValueError) as exc:
        raise NodesFileError(f"ssh node {node}: {exc}") from None


_FILE_KEYS = ("nodes", "defaults", "python", "install")


@dataclass(frozen=True)
class NodesSettings:
    """A nodes file's settings besides the targets."""

    python: str = "python3"
    install: bool = True


def _read_nodes_file(path: str | Path) -> Mapping[str, Any]:
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise NodesFileError(f"{path}: not valid YAML{where}: {getattr(exc, 'problem', None) or exc}") from None
    except UnicodeDecodeError as exc:
        raise NodesFileError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if not isinstance(raw, Mapping) or not isinstance(raw.get("nodes"), Mapping) or not raw["nodes"]:
        raise NodesFileError(f"{path}: expected a mapping with a non-empty 'nodes' mapping (node -> host or map)")
    unknown = sorted(set(map(str, raw)) - set(_FILE_KEYS))
    if unknown:
        raise NodesFileError(f"{path}: unknown top-level key(s) {unknown}; known: {list(_FILE_KEYS)}")
    return raw


def load_nodes_settings(path: str | Path) -> NodesSettings:
    """``python`` and ``install`` of a nodes file (NodesFileError names the key and the value)."""
    raw = _read_nodes_file(path)
    python, install = raw.get("python", "python3"), raw.get("install", True)
    if not isinstance(python, str) or not python or any(c.isspace() for c in python):
        raise NodesFileError(f"{path}: python: expected an interpreter path or name, got {python!r}")
    if not isinstance(install, bool):
        raise NodesFileError(f"{path}: install: expected true or false, got {install!r}")
    return NodesSettings(python, install)


def load_nodes_file(path: str | Path, *, ssh_config: str | Path = "~/.ssh/config") -> dict[str, SshTarget]:
    """Read a nodes file (see the module docstring) into node -> target."""
    raw = _read_nodes_file(path)
    cfg_path = Path(os.path.expanduser(str(ssh_config)))
    cfg_text = cfg_path.read_text(encoding="utf-8") if cfg_path.is_file() else ""
    return {str(n): resolve_target(str(n), v, defaults=raw.get("defaults") or {}, ssh_config_text=cfg_text)
            for n, v in raw["nodes"].items()}


class SshRemote(ShellProcesses):
    """A :class:`harness.control.base.Remote` over SSH.  Create with :meth:`create`; close with :meth:`close`."""

    def __init__(self, targets: Mapping[str, SshTarget], clients: Mapping[str, Any], addresses: Mapping[str, str],
                 *, root: str, python: str) -> None:
        self.targets = dict(targets)
        self.clients = dict(clients)
        self.addresses = dict(addresses)
        self.root = PurePosixPath(root)
        self.python = python
        self.pids: dict[tuple[str, int], int] = {}  # (node, pid) -> start time

    _label = "ssh backend"

    def _default_cwd(self, node: str) -> str:
        return str(self.root / node)

    @classmethod
    async def create(
        cls, targets: Mapping[str, SshTarget], *, root: str = "/tmp/splitbrain-ssh", python: str = "python3",
        strict_host_keys: bool = False, connect_timeout_s: float = 10.0,
    ) -> SshRemote:
        """Connect to every node (in parallel) and create ``<root>/<node>`` on each.

        Raises:
            ControlError: a node is unreachable or refuses authentication (names the node and target).
        """
        if not targets:
            raise ControlError("ssh backend: no nodes given (expected node -> SshTarget)")

        def connect(node: str, t: SshTarget) -> tuple[Any, str]:
            import paramiko

            client = paramiko.SSHClient()
            if strict_host_keys:
                client.load_system_host_keys()
                client.set_missing_host_key_policy(paramiko.RejectPolicy())
            else:
                client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
            try:
                client.connect(t.host, port=t.port, username=t.user, key_filename=t.key_file, password=t.password,
                               allow_agent=True, look_for_keys=t.key_file is None, timeout=connect_timeout_s,
                               banner_timeout=connect_timeout_s, auth_timeout=connect_timeout_s)
                addr = socket.getaddrinfo(t.host, t.port, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
            except Exception as exc:
                client.close()
                raise ControlError(f"ssh backend: cannot connect to node {node} ({t.describe()}): {exc!r}") from None
            return client, str(addr)

        results: dict[str, tuple[Any, str]] = {}
        errors: list[BaseException] = []
        tasks = {n: asyncio.to_thread(connect, n, t) for n, t in targets.items()}
        for n, res in zip(tasks, await asyncio.gather(*tasks.values(), return_exceptions=True)):
            if isinstance(res, BaseException):
                errors.append(res)
            else:
                results[n] = res
        remote = cls(targets, {n: c for n, (c, _) in results.items()}, {n: a for n, (_, a) in results.items()},
                     root=root, python=python)
        if errors:
            await remote.close()
            raise errors[0]
        for n in targets:
            await remote.exec(n, ["mkdir", "-p", str(remote.root / n)], check=True)
        return remote

    async def install_project(self, wheel: str | None = None) -> dict[str, str]:
        """pip-install this project on every node (in parallel): the dependencies nodes use (not the
        analysis-only ones, e.g. pyspark; already-satisfied ones need no index), then the wheel (built here
        unless given) without dependencies, so the nodes run exactly this code.  Returns node -> version.

        Raises:
            ControlError: building the wheel or installing on a node failed (names the node, pip's stderr).
        """
        import tempfile

        from harness.images import REPO_ROOT, ImageError, build_wheel, node_requirements

        requirements = node_requirements((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
        with tempfile.TemporaryDirectory(prefix="splitbrain-wheel-") as tmp:
            if wheel is None:
                try:
                    wheel = str(build_wheel(Path(tmp)))
                except ImageError as exc:
                    raise ControlError(f"ssh backend: cannot build the project wheel: {exc}") from None
            name = Path(wheel).name

            async def one(node: str) -> str:
                dest = str(self.root / node / name)
                await self.upload(node, wheel, dest)
                pip = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
                for args in (requirements, ["--no-deps", "--force-reinstall", dest]):
                    res = await self.exec(node, [*pip, *args], timeout_s=900)
                    if res.exit_code != 0:
                        raise ControlError(f"ssh backend: installing {name} on node {node} with {self.python} "
                                           f"failed (exit {res.exit_code}): {res.stderr.strip()[-1500:]}")
                probe = await self.exec(node, [sys.executable, "-c", "import importlib.metadata as m; "
                                               "print(m.version('splitbrain'))"], timeout_s=60, check=True)
                return probe.stdout.strip()

            versions = await asyncio.gather(*(one(n) for n in self.targets))
        return dict(zip(self.targets, versions))

    async def install_revision(self, build: SutBuild) -> str:
        """Install a build of another revision of the cluster (a :class:`harness.revisions.SutBuild`) on every host,
        the way a local build is laid out: the revision's packages in ``<root>/sut-<sha12>/src`` and a venv of the
        node's ``python`` beside them whose one ``.pth`` puts that tree first and the host's own site-packages (the
        dependencies the project install left there) after it.  Nodes sharing a host share the install (a lock on
        the host serialises them; an install that is there and imports is reused); it is built in a temporary
        directory, renamed into place, then imported in isolated mode as a check.  Returns the venv's interpreter.

        Raises:
            ControlError: an upload or a step failed on a node (names the node and the step's output).
        """
        import tarfile
        import tempfile

        short = build.revision[:12]
        d = str(self.root / f"sut-{short}")
        packages = sorted(p.name for p in Path(build.source).iterdir() if (p / "__init__.py").is_file())
        pkg = build.package  # a plain package name (SutBuild checks it): where it imports from proves the install
        check = (f'"$d/venv/bin/python" -I -c "import {pkg}, harness.cli, sys; '
                 f'sys.exit(0 if {pkg}.__file__.startswith(sys.argv[1]) else 1)" "$d/src/"')
        script = (
            'set -e; d="$1"; exec 9>"$d.lock"; flock 9; '
            f'if [ -x "$d/venv/bin/python" ] && {check} 2>/dev/null; then rm -f "$3"; exit 0; fi; '
            'rm -rf "$d.tmp"; mkdir -p "$d.tmp/src"; tar -xzf "$3" -C "$d.tmp/src"; rm -f "$3"; '
            '"$2" -m venv --without-pip "$d.tmp/venv"; '
            'pth=$("$d.tmp/venv/bin/python" -I -c "import sysconfig; print(sysconfig.get_paths()[\'purelib\'])"); '
            'sites=$("$2" -I -c "import site; print(chr(10).join(site.getsitepackages()))"); '
            'printf "%s\\n%s\\n" "$d/src" "$sites" > "$pth/_splitbrain_sut.pth"; '
            f'rm -rf "$d"; mv "$d.tmp" "$d"; {check}'
        )
        with tempfile.TemporaryDirectory(prefix="splitbrain-sut-") as tmp:
            archive = Path(tmp) / f"sut-{short}.tar.gz"
            with tarfile.open(archive, "w:gz") as tar:
                for pkg in packages:
                    tar.add(Path(build.source) / pkg, arcname=pkg,
                            filter=lambda ti: None if "__pycache__" in ti.name else ti)

            async def one(node: str) -> None:
                upload = f"{d}.{node}.tar.gz"  # one per node: nodes on one host must not overwrite each other's
                await self.upload(node, str(archive), upload)
                res = await self._sh(node, script, [d, self.python, upload], limit_s=300)
                if res.exit_code != 0:
                    raise ControlError(f"ssh backend: installing revision {short} on node {node} with {self.python} "
                                       f"failed (exit {res.exit_code}): {res.stderr.strip()[-800:]}")

            await asyncio.gather(*(one(n) for n in self.targets))
        return f"{d}/venv/bin/python"

    async def close(self) -> None:
        """Kill the daemons this run started (start time checked) and close the connections."""
        for (node, pid), start in list(self.pids.items()):
            with contextlib.suppress(Exception):
                await self._signal_checked(node, pid, start, 9)
        self.pids.clear()
        for c in self.clients.values():
            with contextlib.suppress(Exception):
                c.close()
        self.clients.clear()

    # -- plumbing -----------------------------------------------------------------------------------

    def _target(self, node: str) -> SshTarget:
        try:
            return self.targets[node]
        except KeyError:
            raise ControlError(f"ssh backend: unknown node {node!r}; nodes: {sorted(self.targets)}") from None

    def _wrap(self, node: str, cmd: str) -> tuple[str, bytes]:
        t = self._target(node)
        if not t.sudo:
            return cmd, b""
        if t.sudo_password is not None:
            return f"sudo -S -p '' -- sh -c {shlex.quote(cmd)}", (t.sudo_password + "\n").encode()
        return f"sudo -n -- sh -c {shlex.quote(cmd)}", b""

    def _run_sync(self, node: str, cmd: str, limit_s: float) -> ExecResult:
        cmd, stdin = self._wrap(node, cmd)
        client = self.clients.get(node)
        if client is None:
            raise ControlError(f"ssh backend: node {node} is not connected (closed?)")
        transport = client.get_transport()
        try:
            if transport is None or not transport.is_active():
                raise ConnectionError("transport closed")
            chan = transport.open_session(timeout=10)
        except Exception as exc:  # paramiko.SSHException, EOFError, socket errors
            raise ControlError(f"on {node}: ssh session failed ({self._target(node).describe()}): {exc!r}") from None
        try:
            chan.exec_command(cmd)
            if stdin:
                chan.sendall(stdin)
            out, err = bytearray(), bytearray()
            deadline = time.monotonic() + limit_s
            while True:
                busy = False
                while chan.recv_ready():
                    out += chan.recv(65536)
                    busy = True
                while chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                    busy = True
                if chan.exit_status_ready() and not chan.recv_ready() and not chan.recv_stderr_ready():
                    break
                if time.monotonic() > deadline:
                    raise ControlError(f"on {node}: {cmd!r} gave no exit status within {limit_s:.0f}s")
                if not busy:
                    time.sleep(0.005)
            return ExecResult(chan.recv_exit_status(), out.decode(errors="replace"), err.decode(errors="replace"))
        finally:
            chan.close()

    async def _sh(self, node: str, script: str, args: Sequence[str], limit_s: float = 30.0) -> ExecResult:
        cmd = shlex.join(["sh", "-c", script, "sh", *args])
        return await asyncio.to_thread(self._run_sync, node, cmd, limit_s)

    # -- Remote -------------------------------------------------------------------------------------

    def address(self, node: str) -> str:
        self._target(node)
        return self.addresses[node]

    def node_dir(self, node: str) -> Path:
        self._target(node)
        return Path(str(self.root / node))

    async def exec(
        self, node: str, argv: Sequence[str], *, timeout_s: float = 30.0, env: Mapping[str, str] | None = None,
        cwd: str | None = None, check: bool = False,
    ) -> ExecResult:
        cmd = shell_command(node_argv(argv, self.python), env=env, cwd=cwd, timeout_s=timeout_s)
        t0 = time.monotonic()
        result = await asyncio.to_thread(self._run_sync, node, cmd, timeout_s + 15.0)
        return finish_exec(node, argv, result, elapsed_s=time.monotonic() - t0, timeout_s=timeout_s, check=check)

    def _sftp(self, node: str) -> Any:
        client = self.clients.get(node)
        if client is None:
            raise ControlError(f"ssh backend: node {node} is not connected (closed?)")
        return client.open_sftp()

    async def upload(self, node: str, local_path: str, remote_path: str) -> None:
        self._target(node)
        await self.exec(node, ["mkdir", "-p", str(PurePosixPath(remote_path).parent)], check=True)

        def put() -> None:
            with contextlib.closing(self._sftp(node)) as sftp:
                sftp.put(local_path, remote_path)
                sftp.chmod(remote_path, os.stat(local_path).st_mode & 0o7777)

        await asyncio.to_thread(put)

    async def download(self, node: str, remote_path: str, local_path: str) -> None:
        self._target(node)
        Path(local_path).parent.mkdir(parents=True, exist_ok=True)

        def get() -> None:
            with contextlib.closing(self._sftp(node)) as sftp:
                try:
                    sftp.get(remote_path, local_path)
                except OSError as exc:
                    raise ControlError(f"on {node}: cannot download {remote_path}: {exc}") from None

        await asyncio.to_thread(get)
