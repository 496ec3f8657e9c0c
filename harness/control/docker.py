"""The DOCKER control backend: every node is a container of ``splitbrain/node`` (docker SDK), or of the system's
own ``splitbrain/node-<system>`` when the system under test needs Debian packages the node image lacks
(:func:`harness.images.image_for_system`, chosen by ``harness.commands._backend.open_remote``).

Topology of one run (prefix ``sbXXXXXX``, unique per run so parallel runs never collide)::

    harness (host) ── docker bridge network sbXXXXXX-net ─┬─ container sbXXXXXX-c1 (hostname/alias c1)
                                                         ├─ container sbXXXXXX-c2
                                                         └─ ...

* Each container runs ``sleep infinity`` under docker's init (which reaps orphans), with
  ``NET_ADMIN`` so the nemeses can use iptables/tc inside it.  No ``SYS_TIME``: clock faults are
  per process -- the clock nemesis sets each cluster process's own clock (``system_under_test/clock.py``)
  over the admin RPC ADMIN_CLOCK_SET -- never the shared kernel clock.
* The repository is bind-mounted read-only at the same path (``mount_repo``) so the harness's
  ``cwd=REPO_ROOT, PYTHONPATH=REPO_ROOT`` commands run the working tree, with the image's venv
  (``/opt/splitbrain``) providing the dependencies; the harness's own interpreter path in an argv
  becomes the node's ``python3`` (:func:`harness.control.shell.node_argv`).
* ``exec`` runs under ``timeout -s KILL``; ``spawn`` starts ``setsid nohup`` in the background,
  appending to a log file inside the container, and records the pid's start time so a signal
  never reaches a reused pid.  Files move with ``put_archive``/``get_archive``.
* Everything carries the labels ``splitbrain.backend=docker``, ``splitbrain.run=<prefix>``, the
  owner's pid/start time and results directory: :func:`cleanup_all` (``only_orphans``: nobody answers
  for the run, :func:`harness.control.owner.orphan_reason`) removes containers then networks by label,
  after a crash too.  The labels are the state; a run kept as a cluster (labels cannot change) also has
  a claim file (:meth:`DockerRemote.keep_as_cluster`) naming its cluster record.  Clean-up never touches
  a container without our labels, nor another live run's.
* A dying harness: :meth:`DockerRemote.create` writes a small state file under :data:`STATE_DIR` (prefix,
  owner, nodes, and later the run directory -- what labels cannot hold, since they never change) and starts
  the run's supervisor (:mod:`harness.control.supervisor`, shared with the local backend).  If the owner dies
  without :meth:`DockerRemote.close` (SIGKILL), the supervisor copies the nodes' ``*.log`` into
  ``<run dir>/nodes/<node>/`` (:func:`save_container_logs`), marks the run ``ended: killed`` and removes the
  containers and network carrying this run's *and this owner's* labels (:func:`remove_owned_run`, filter
  :func:`owned_filter`).  A run handed over to a cluster record loses its state file: the supervisor leaves it.

Needs a reachable docker engine and the node image (``splitbrain images build``).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import io
import json
import os
import re
import secrets
import tarfile
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from typing import Any

from harness.control.base import ControlError, ExecResult, NotPermitted
from harness.control.owner import make_owner, orphan_reason, process_alive, read_claim, remove_claim, write_claim
from harness.control.shell import ShellProcesses, finish_exec, node_argv, parse_proc_stat
from harness.control.supervisor import launch, reap

__all__ = ["LABEL_BACKEND", "LABEL_RUN", "NODE_ROOT", "STATE_DIR", "DockerRemote", "cleanup_all", "cleanup_run",
           "default_image", "log_destination", "owned_filter", "remove_owned_run", "save_container_logs"]

LABEL_BACKEND = "splitbrain.backend"
LABEL_RUN = "splitbrain.run"
LABEL_OWNER = "splitbrain.owner"  # "<pid>:<start time>" of the harness process
LABEL_NODE = "splitbrain.node"
LABEL_RESULTS = "splitbrain.results"  # the owner's results directory
NODE_ROOT = "/srv/splitbrain"
# The supervisor's view of each live docker run (<prefix>.json); the labels stay the ownership record.
STATE_DIR = Path(os.environ.get("SPLITBRAIN_DOCKER_STATE_DIR", "/tmp/splitbrain-docker"))
REPO_ROOT = Path(__file__).resolve().parents[2]
_PARALLEL = 8
_NODE_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")


def default_image() -> str:
    from harness.images import REPO_ROOT as root
    from harness.images import node_image_tag, project_version

    return node_image_tag(project_version((root / "pyproject.toml").read_text(encoding="utf-8")))


def _client() -> Any:
    try:
        docker = importlib.import_module("docker")  # the SDK (mypy would see the repo's docker/ dir)
        client = docker.from_env(timeout=120, max_pool_size=32)
        client.ping()
        return client
    except Exception as exc:
        raise NotPermitted(f"the docker backend cannot reach the docker engine ({exc}); start dockerd, check "
                           "DOCKER_HOST and permissions on /var/run/docker.sock, or use `backend: local`") from None


def _own_start() -> str:
    try:
        stat = Path(f"/proc/{os.getpid()}/stat").read_text()
    except OSError:
        return "?"
    parsed = parse_proc_stat(stat)
    return str(parsed[1]) if parsed else "?"


def _pmap(fn: Any, items: Sequence[Any]) -> list[Any]:
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=min(_PARALLEL, len(items))) as pool:
        return list(pool.map(fn, items))


def owned_filter(prefix: str, owner_label: str) -> dict[str, list[str]]:
    """The docker label filter selecting exactly one run's containers and network: backend, run *and* owner.

    Raises:
        ValueError: an empty prefix or owner label (it would widen the filter to other runs or owners).
    """
    if not prefix or not owner_label or "=" in prefix or "=" in owner_label:
        raise ValueError(f"docker backend: a run prefix and owner label are needed to select one run's containers "
                         f"(got prefix {prefix!r}, owner {owner_label!r})")
    return {"label": [f"{LABEL_BACKEND}=docker", f"{LABEL_RUN}={prefix}", f"{LABEL_OWNER}={owner_label}"]}


def log_destination(run_dir: str | Path, node: str, path: str) -> Path | None:
    """Where node ``node``'s log file ``path`` (as listed in its container) is saved: ``<run_dir>/nodes/<node>/
    <name>``.  None for anything but a plain ``*.log`` file name of a valid node -- never outside that folder."""
    name = PurePosixPath(path).name
    if not _NODE_RE.match(node) or not name.endswith(".log") or "\x00" in name:
        return None
    return Path(run_dir) / "nodes" / node / name


def _write_state(path: Path, state: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1), encoding="utf-8")
    os.replace(tmp, path)


class DockerRemote(ShellProcesses):
    """A :class:`harness.control.base.Remote` over docker containers.  Create with :meth:`create`."""

    def __init__(self, client: Any, prefix: str, network: str, containers: Mapping[str, Any],
                 addresses: Mapping[str, str], *, python: str) -> None:
        self.client = client
        self.prefix = prefix
        self.network = network
        self.containers = dict(containers)
        self.addresses = dict(addresses)
        self.python = python
        self.pids: dict[tuple[str, int], int] = {}  # (node, pid) -> start time
        self.state: dict[str, Any] = {}
        self.state_path: Path | None = None  # the supervisor's view of the run (None: not supervised)
        self._supervisor: Any = None

    # -- lifecycle ----------------------------------------------------------------------------------

    @classmethod
    async def create(
        cls, nodes: Sequence[str], *, image: str | None = None, prefix: str | None = None, mount_repo: bool = True,
        python: str = "python3", env: Mapping[str, str] | None = None, ssh_authorized_key: str | None = None,
        owner: Mapping[str, Any] | None = None, supervise: bool = True, state_dir: Path | None = None,
    ) -> DockerRemote:
        """Create a private bridge network and one container per node (started in parallel).

        Args:
            owner: who answers for the run (default: this process, kind ``run``; see :mod:`.owner`).
            supervise: start the supervisor that saves logs and removes the run if this process dies without
                :meth:`close` (its state file goes to ``state_dir``, default :data:`STATE_DIR`).

        Raises:
            NotPermitted: the engine is unreachable.
            ControlError: the image is missing (says how to build it) or a container failed to start
                (everything created so far is removed).
        """
        if not nodes or len(set(nodes)) != len(nodes) or not all(_NODE_RE.match(n) for n in nodes):
            raise ControlError(f"docker backend: need distinct node names made of a-z, 0-9, '.', '_', '-' "
                               f"(usable as host names), got {list(nodes)}")
        return await asyncio.to_thread(cls._create_sync, list(nodes), image or default_image(), prefix, mount_repo,
                                       python, dict(env or {}), ssh_authorized_key, dict(owner or make_owner()),
                                       (state_dir or STATE_DIR) if supervise else None)

    @classmethod
    def _create_sync(cls, nodes: list[str], image: str, prefix: str | None, mount_repo: bool, python: str,
                     env: dict[str, str], ssh_key: str | None, owner: dict[str, Any],
                     state_dir: Path | None) -> DockerRemote:
        client = _client()
        try:
            client.images.get(image)
        except Exception:
            raise ControlError(f"docker backend: image {image} is not in the engine; build it with "
                               "`splitbrain images build` (no registry is assumed)") from None
        prefix = prefix or f"sb{secrets.token_hex(3)}"
        owner_label = f"{os.getpid()}:{_own_start()}"
        labels = {LABEL_BACKEND: "docker", LABEL_RUN: prefix, LABEL_OWNER: owner_label,
                  LABEL_RESULTS: str(owner.get("results_dir") or "")}
        state = {"backend": "docker", "prefix": prefix, "owner": owner, "owner_label": owner_label,
                 "nodes": {n: {"container": f"{prefix}-{n}"} for n in nodes}, "node_root": NODE_ROOT,
                 "run_dir": None}
        state_path, supervisor = None, None
        if state_dir is not None and owner.get("pid") == os.getpid() and owner.get("start") is not None:
            state_path = state_dir / f"{prefix}.json"  # recorded and watched before anything exists
            _write_state(state_path, state)
            supervisor = launch(state_path)
        env = {**env, "SPLITBRAIN_RUN_ID": prefix}
        net_name = f"{prefix}-net"
        if ssh_key:
            env = {**env, "SPLITBRAIN_SSH_AUTHORIZED_KEY": ssh_key}
        volumes = {str(REPO_ROOT): {"bind": str(REPO_ROOT), "mode": "ro"}} if mount_repo else {}
        try:
            client.networks.create(net_name, driver="bridge", labels=labels, check_duplicate=True)

            def start(node: str) -> Any:
                from docker.types import EndpointConfig

                return client.containers.run(
                    image, ["sh", "-c", f"mkdir -p {NODE_ROOT}/{node} && exec sleep infinity"],
                    name=f"{prefix}-{node}", hostname=node, detach=True, init=True, cap_add=["NET_ADMIN"],
                    labels={**labels, LABEL_NODE: node}, environment=env, volumes=volumes, network=net_name,
                    networking_config={net_name: EndpointConfig(version=client.api._version, aliases=[node])},
                )

            containers = dict(zip(nodes, _pmap(start, nodes)))
            addresses = {}
            for node, c in containers.items():
                c.reload()
                addresses[node] = c.attrs["NetworkSettings"]["Networks"][net_name]["IPAddress"]
                if not addresses[node]:
                    raise ControlError(f"docker backend: container for {node} got no address on {net_name}")
        except BaseException as exc:
            cleanup_run(prefix, client=client)
            if state_path is not None:
                state_path.unlink(missing_ok=True)  # the supervisor sees the run closed and exits
            if supervisor is not None:
                with contextlib.suppress(Exception):
                    supervisor.wait(5)
            if isinstance(exc, ControlError) or not isinstance(exc, Exception):
                raise
            raise ControlError(f"docker backend: creating {len(nodes)} containers from {image} failed: {exc}") from exc
        remote = cls(client, prefix, net_name, containers, addresses, python=python)
        remote.state, remote.state_path, remote._supervisor = state, state_path, supervisor
        return remote

    @property
    def run_id(self) -> str:
        return self.prefix

    def note_run_dir(self, run_dir: str | Path) -> None:
        """Where this run's results go: the supervisor saves node logs there (and marks it killed) if we die."""
        self.state["run_dir"] = str(Path(run_dir).resolve())
        if self.state_path is not None:
            _write_state(self.state_path, self.state)

    def keep_as_cluster(self, record: str | Path, results_dir: str | Path) -> None:
        """Hand the run over to a cluster record: an orphan only once that record is gone; the supervisor
        leaves it alone (its state file says ``cluster``, then is removed: the claim is the record now)."""
        owner = make_owner(kind="cluster", record=str(Path(record).resolve()),
                           results_dir=str(Path(results_dir).resolve()))
        write_claim(self.prefix, owner)
        if self.state_path is not None:
            _write_state(self.state_path, {**self.state, "owner": owner})
            self.state_path.unlink(missing_ok=True)

    async def close(self) -> None:
        """Remove our containers (their processes die with them) and the network; the supervisor exits."""
        await asyncio.to_thread(cleanup_run, self.prefix, client=self.client)
        remove_claim(self.prefix)
        if self.state_path is not None:
            self.state_path.unlink(missing_ok=True)
        self.containers.clear()
        if self._supervisor is not None:
            await reap(self._supervisor)
            self._supervisor = None

    # -- plumbing -----------------------------------------------------------------------------------

    def _container(self, node: str) -> Any:
        try:
            return self.containers[node]
        except KeyError:
            raise ControlError(f"docker backend: unknown node {node!r}; nodes: {sorted(self.containers)}") from None

    def _exec_sync(self, node: str, argv: Sequence[str], env: Mapping[str, str] | None, cwd: str | None) -> ExecResult:
        c = self._container(node)
        api = self.client.api
        try:
            ex = api.exec_create(c.id, list(argv), environment=dict(env or {}) or None, workdir=cwd, stdout=True,
                                 stderr=True)
            out, err = api.exec_start(ex["Id"], demux=True)
            code = api.exec_inspect(ex["Id"]).get("ExitCode")
        except Exception as exc:  # docker.errors.* (container gone, bad workdir, engine down)
            raise ControlError(f"on {node}: docker exec of {' '.join(argv)!r} failed: {exc}") from None
        return ExecResult(-1 if code is None else int(code), (out or b"").decode(errors="replace"),
                          (err or b"").decode(errors="replace"))

    async def _sh(self, node: str, script: str, args: Sequence[str], timeout_s: float = 30.0) -> ExecResult:
        return await asyncio.wait_for(
            asyncio.to_thread(self._exec_sync, node, ["sh", "-c", script, "sh", *args], None, None), timeout_s)

    # -- Remote -------------------------------------------------------------------------------------

    def address(self, node: str) -> str:
        self._container(node)
        return self.addresses[node]

    def node_dir(self, node: str) -> Path:
        self._container(node)
        return Path(NODE_ROOT) / node

    _label = "docker backend"

    def _default_cwd(self, node: str) -> str:
        return str(self.node_dir(node))

    async def exec(
        self, node: str, argv: Sequence[str], *, timeout_s: float = 30.0, env: Mapping[str, str] | None = None,
        cwd: str | None = None, check: bool = False,
    ) -> ExecResult:
        full = ["timeout", "-s", "KILL", f"{max(timeout_s, 0.1):g}", *node_argv(argv, self.python)]
        t0 = time.monotonic()
        try:
            result = await asyncio.wait_for(asyncio.to_thread(self._exec_sync, node, full, env, cwd), timeout_s + 15)
        except TimeoutError:
            raise ControlError(f"on {node}: {' '.join(argv)!r}: docker exec gave no result within "
                               f"{timeout_s + 15:.0f}s") from None
        return finish_exec(node, argv, result, elapsed_s=time.monotonic() - t0, timeout_s=timeout_s, check=check)

    async def upload(self, node: str, local_path: str, remote_path: str) -> None:
        c = self._container(node)
        dest = PurePosixPath(remote_path)
        await self.exec(node, ["mkdir", "-p", str(dest.parent)], check=True)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(local_path, arcname=dest.name, recursive=False)
        ok = await asyncio.to_thread(c.put_archive, str(dest.parent), buf.getvalue())
        if not ok:
            raise ControlError(f"on {node}: uploading {local_path} to {remote_path} failed")

    async def download(self, node: str, remote_path: str, local_path: str) -> None:
        c = self._container(node)

        def get() -> None:
            import docker.errors

            try:
                data = _read_file(c, remote_path)
            except docker.errors.NotFound:
                raise ControlError(f"on {node}: no such file {remote_path}") from None
            if data is None:
                raise ControlError(f"on {node}: {remote_path} is not a regular file")
            Path(local_path).parent.mkdir(parents=True, exist_ok=True)
            Path(local_path).write_bytes(data)

        await asyncio.to_thread(get)

    # -- extras (nemeses, tests) -------------------------------------------------------------------

    async def sh(self, node: str, script: str, *, timeout_s: float = 30.0, check: bool = True) -> ExecResult:
        """Run a shell snippet on ``node`` (``sh -c``)."""
        return await self.exec(node, ["sh", "-c", script], timeout_s=timeout_s, check=check)


def cleanup_run(prefix: str, *, client: Any = None, owner_label: str | None = None) -> list[str]:
    """Remove the containers and network of one run (by label; with ``owner_label``, only if that owner's:
    :func:`owned_filter`); returns what was removed."""
    client = client or _client()
    flt = owned_filter(prefix, owner_label) if owner_label is not None else {
        "label": [f"{LABEL_BACKEND}=docker", f"{LABEL_RUN}={prefix}"]}
    removed: list[str] = []

    def rm(c: Any) -> str:
        with contextlib.suppress(Exception):
            c.remove(force=True, v=True)
        return f"container {c.name}"

    removed += _pmap(rm, client.containers.list(all=True, filters=flt))
    for n in client.networks.list(filters=flt):
        with contextlib.suppress(Exception):
            n.remove()
            removed.append(f"network {n.name}")
    return removed


def _read_file(container: Any, path: str) -> bytes | None:
    """The bytes of one regular file in a container (``get_archive``), or None if it is not one."""
    stream, _ = container.get_archive(path)
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
        member = next((m for m in tar.getmembers() if m.isfile()), None)
        src = tar.extractfile(member) if member else None
        return src.read() if src is not None else None


def save_container_logs(state: Mapping[str, Any], *, client: Any = None) -> list[str]:
    """Copy each node's ``*.log`` (``<node_root>/<node>/`` in its container) into ``<run_dir>/nodes/<node>/``.

    Only containers carrying the run's and the owner's labels are read; a node whose container is gone or
    answers nothing is skipped.  Returns the files written.
    """
    run_dir, prefix, owner_label = state.get("run_dir"), state.get("prefix"), state.get("owner_label")
    if not run_dir or not Path(run_dir).is_dir() or not prefix or not owner_label:
        return []
    client = client or _client()
    root = str(state.get("node_root") or NODE_ROOT)

    def save(container: Any) -> list[str]:
        node = (container.labels or {}).get(LABEL_NODE, "")
        if node not in state.get("nodes", {}):
            return []
        found = container.exec_run(["find", f"{root}/{node}", "-maxdepth", "1", "-type", "f", "-name", "*.log"])
        copied = []
        for path in (found.output or b"").decode(errors="replace").splitlines() if found.exit_code == 0 else []:
            dest = log_destination(run_dir, node, path)
            with contextlib.suppress(Exception):
                data = _read_file(container, path) if dest is not None else None
                if dest is not None and data is not None:
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    dest.write_bytes(data)
                    copied.append(str(dest))
        return copied

    def guarded(container: Any) -> list[str]:
        try:
            return save(container)
        except Exception:  # one container's trouble must not cost the other nodes' logs
            return []

    containers = client.containers.list(all=True, filters=owned_filter(str(prefix), str(owner_label)))
    return [f for files in _pmap(guarded, containers) for f in files]


def remove_owned_run(state: Mapping[str, Any], *, client: Any = None) -> list[str]:
    """Remove the run's containers and network -- only those carrying its prefix *and* its owner's label --
    and its claim file; returns what was removed."""
    prefix = str(state.get("prefix") or "")
    removed = cleanup_run(prefix, client=client, owner_label=str(state.get("owner_label") or ""))
    remove_claim(prefix)
    return removed


def save_orphan_logs(state: Mapping[str, Any]) -> list[str]:
    """The supervisor's hook: save the node logs of a run whose harness died."""
    return save_container_logs(state)


def remove_orphan(state: Mapping[str, Any], state_path: Path) -> None:
    """The supervisor's hook: remove a run whose harness died (an unreachable engine is left to `cleanup`)."""
    with contextlib.suppress(Exception):
        remove_owned_run(state)
    state_path.unlink(missing_ok=True)


def _owner_from_label(label: str) -> dict[str, Any]:
    pid_s, _, start = label.partition(":")
    try:
        return {"kind": "run", "pid": int(pid_s), "start": int(start)}
    except ValueError:
        return {"kind": "run", "pid": None, "start": None}


def _owner_alive(owner_label: str) -> bool:
    """Whether the ``<pid>:<start>`` owner label names a live process (the same one: start times match)."""
    owner = _owner_from_label(owner_label)
    return process_alive(owner["pid"], owner["start"])


def run_orphan_reason(prefix: str, owner_label: str) -> str | None:
    """Why docker run ``prefix`` is an orphan (its claim file, else its owner label), or None."""
    owner = read_claim(prefix) or _owner_from_label(owner_label)
    return orphan_reason(owner, alive=process_alive, exists=lambda p: Path(p).exists())


def cleanup_all(*, only_orphans: bool = False) -> list[str]:
    """Remove splitbrain docker runs -- only containers and networks carrying our labels (``only_orphans``:
    only runs nobody answers for; this assumes the engine runs on this machine, so owner pids are comparable)."""
    client = _client()
    flt = {"label": f"{LABEL_BACKEND}=docker"}
    runs: dict[str, str] = {}
    for obj in [*client.containers.list(all=True, filters=flt), *client.networks.list(filters=flt)]:
        labels = obj.attrs.get("Config", {}).get("Labels") or obj.attrs.get("Labels") or {}
        if labels.get(LABEL_RUN):
            runs[labels[LABEL_RUN]] = labels.get(LABEL_OWNER, "")
    removed: list[str] = []
    for prefix, owner in sorted(runs.items()):
        if only_orphans and run_orphan_reason(prefix, owner) is None:
            continue
        removed += cleanup_run(prefix, client=client)
        remove_claim(prefix)
        (STATE_DIR / f"{prefix}.json").unlink(missing_ok=True)  # its supervisor (if any) sees it closed
    return removed

