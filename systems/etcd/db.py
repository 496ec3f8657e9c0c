"""``EtcdDB``: a static etcd cluster of the test's nodes, one member per node, started through the test's Remote.

Implements the harness's DB protocol and the optional :class:`~harness.protocols.Kill`, ``Pause``, ``Primary``,
``LogFiles`` and ``RegisterClients`` (see ``harness/protocols.py``), plus what the process nemesis calls beyond
``Kill`` (``terminate``, ``alive``, ``wait_ready``), so the ``kill`` and ``pause`` packages run against it.
Each member is named after its node, listens on the node's address (``remote.address(node)``; client port 2379,
peer port 2380) and keeps its data in ``<node_dir>/etcd.data`` and its log in ``<node_dir>/etcd.log``.  The
cluster is bootstrapped statically (``--initial-cluster`` lists every node of ``test["nodes"]``), so no discovery
service is involved.

Readiness.  ``setup`` starts the member and waits until its ``/health`` says true, which needs a leader, i.e. a
quorum of members started: the runner sets up every node at once, as a static bootstrap requires.  ``start``
(the restart after ``kill``) waits only until the member listens on its client port: a member restarted while
its quorum is down cannot become healthy, and a nemesis restarting members one by one must not block on that.
A member that exits or does not get there in time is an error naming the node, the address, what was last
seen and the tail of its log.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from harness.node_processes import NodeProcesses
from systems.etcd.client import CLIENT_PORT, EtcdRegisterClient, post_json
from systems.etcd.wire import EtcdError  # what ``status`` raises

__all__ = ["PEER_PORT", "EtcdDB", "EtcdError", "EtcdStartError", "member_argv"]

PEER_PORT = 2380


class EtcdStartError(RuntimeError):
    """A member did not come up (the message names the node, what was awaited, and ends with its log tail)."""


def member_argv(node: str, addrs: Mapping[str, str], data_dir: str, *, binary: str = "etcd",
                client_port: int = CLIENT_PORT, peer_port: int = PEER_PORT, token: str = "splitbrain-etcd",
                extra: Sequence[str] = ()) -> list[str]:
    """The command line of ``node``'s member in a static cluster of ``addrs`` (node -> address, every member).

    Pure, so the flags are unit-tested.  On a restart etcd takes the membership from its data dir and ignores
    the ``--initial-*`` flags, so the same command line serves setup and restart.

    Raises:
        ValueError: ``node`` is not one of ``addrs``.
    """
    if node not in addrs:
        raise ValueError(f"etcd: node {node!r} is not in the cluster {sorted(addrs)}")
    ip = addrs[node]
    cluster = ",".join(f"{n}=http://{a}:{peer_port}" for n, a in addrs.items())
    return [
        binary, "--name", node, "--data-dir", data_dir,
        "--listen-client-urls", f"http://{ip}:{client_port}", "--advertise-client-urls", f"http://{ip}:{client_port}",
        "--listen-peer-urls", f"http://{ip}:{peer_port}", "--initial-advertise-peer-urls", f"http://{ip}:{peer_port}",
        "--initial-cluster", cluster, "--initial-cluster-state", "new", "--initial-cluster-token", token,
        "--logger", "zap", "--log-outputs", "stderr", *extra,
    ]


class EtcdDB:
    """One etcd member per node of ``test["nodes"]`` (see the module docstring).

    Args:
        binary: the etcd executable on the nodes (Debian's ``etcd-server`` installs ``etcd``).
        start_timeout_s: bound of each readiness wait.
        extra_args: more etcd flags for every member (e.g. ``--heartbeat-interval``).
        spec: the run's :class:`harness.spec.TestSpec` when built by the adapter (:mod:`systems.etcd.system`);
            the nemeses read the topology from ``db.spec``.
    """

    def __init__(self, *, binary: str = "etcd", client_port: int = CLIENT_PORT, peer_port: int = PEER_PORT,
                 start_timeout_s: float = 20.0, token: str = "splitbrain-etcd",
                 extra_args: Sequence[str] = (), spec: Any = None) -> None:
        self.spec = spec
        self.binary = binary
        self.client_port = client_port
        self.peer_port = peer_port
        self.start_timeout_s = start_timeout_s
        self.token = token
        self.extra_args = tuple(extra_args)
        self.procs = NodeProcesses("etcd member", error=EtcdStartError)

    @property
    def pids(self) -> dict[str, int]:
        """node -> pid of its member (:class:`~harness.node_processes.NodeProcesses` tracks them)."""
        return self.procs.pids

    # -- paths and addresses -------------------------------------------------------------------------

    def _dir(self, test: dict[str, Any], node: str) -> Path:
        return Path(test["remote"].node_dir(node))

    def log_path(self, test: dict[str, Any], node: str) -> Path:
        return self._dir(test, node) / "etcd.log"

    def data_dir(self, test: dict[str, Any], node: str) -> Path:
        return self._dir(test, node) / "etcd.data"

    def client_url(self, test: dict[str, Any], node: str) -> str:
        return f"http://{test['remote'].address(node)}:{self.client_port}"

    def _argv(self, test: dict[str, Any], node: str) -> list[str]:
        addrs = {n: test["remote"].address(n) for n in test["nodes"]}
        return member_argv(node, addrs, str(self.data_dir(test, node)), binary=self.binary,
                           client_port=self.client_port, peer_port=self.peer_port, token=self.token,
                           extra=self.extra_args)

    # -- DB ------------------------------------------------------------------------------------------

    async def setup(self, test: dict[str, Any], node: str) -> None:
        """A fresh member (any old data dir removed), healthy: part of a cluster with a leader."""
        await test["remote"].exec(node, ["rm", "-rf", str(self.data_dir(test, node))], check=True)
        await self.start(test, node)
        await self._wait_healthy(test, node)

    async def teardown(self, test: dict[str, Any], node: str) -> None:
        """Stop the member (TERM, then KILL after 3 s) and remove its data dir; the log stays for collection."""
        await self.procs.stop(test, node, grace_s=3.0)
        await test["remote"].exec(node, ["rm", "-rf", str(self.data_dir(test, node))], check=True)

    # -- Kill ----------------------------------------------------------------------------------------

    async def start(self, test: dict[str, Any], node: str) -> None:
        """Start the member on its existing data (a no-op if it runs); returns once it listens for clients."""
        if await self.procs.alive(test, node):
            return
        await self.procs.spawn(test, node, self._argv(test, node), log_path=str(self.log_path(test, node)),
                               if_alive="spawn")
        await self._wait(test, node, "listening on its client port", self._listening)

    async def kill(self, test: dict[str, Any], node: str) -> None:
        """SIGKILL the member and wait until it is gone (so a restart does not find its files still held)."""
        await self.procs.stop(test, node, grace_s=0.0)

    async def terminate(self, test: dict[str, Any], node: str) -> None:
        """SIGTERM (and SIGCONT, should it be paused): etcd's own shutdown; ``alive`` says when it is over."""
        await self.procs.terminate(test, node)

    async def alive(self, test: dict[str, Any], node: str) -> bool:
        """Whether the member's process runs (paused counts as running)."""
        return await self.procs.alive(test, node)

    async def wait_ready(self, test: dict[str, Any], node: str, timeout_s: float | None = None) -> None:
        """Until the member listens for clients (as ``start`` waits; see the module docstring for why not healthy).

        Raises:
            TimeoutError: not listening within ``timeout_s`` (default ``start_timeout_s``), naming the node.
        """
        try:
            await asyncio.wait_for(self._wait(test, node, "listening on its client port", self._listening),
                                   timeout_s or self.start_timeout_s)
        except (EtcdStartError, TimeoutError) as exc:
            raise TimeoutError(f"etcd member {node} not ready: {exc}") from None

    # -- RegisterClients -----------------------------------------------------------------------------

    def register_client(self, *, read_mode: str, timeout_s: float) -> EtcdRegisterClient:
        """A per-key register client (:mod:`systems.etcd.client`) on this cluster's client port."""
        return EtcdRegisterClient(self.client_port, read_mode=read_mode, timeout_s=timeout_s)

    # -- Pause ---------------------------------------------------------------------------------------

    async def pause(self, test: dict[str, Any], node: str) -> None:
        await self.procs.pause(test, node)

    async def resume(self, test: dict[str, Any], node: str) -> None:
        await self.procs.resume(test, node)

    # -- Primary -------------------------------------------------------------------------------------

    async def primaries(self, test: dict[str, Any]) -> list[str]:
        """The nodes whose member says it is the leader (``/v3/maintenance/status``: its own id is the leader
        id).  Members that do not answer within 1 s are left out; during a partition two may claim it."""
        statuses = await asyncio.gather(*(self.status(test, n, timeout_s=1.0) for n in test["nodes"]),
                                        return_exceptions=True)
        out = []
        for node, st in zip(test["nodes"], statuses):
            if isinstance(st, Mapping):
                me, leader = st.get("header", {}).get("member_id"), st.get("leader")
                if leader not in (None, "0") and me == leader:
                    out.append(node)
        return out

    async def status(self, test: dict[str, Any], node: str, *, timeout_s: float = 1.0) -> Mapping[str, Any]:
        """The member's ``/v3/maintenance/status`` reply.  Raises EtcdError if it does not give one."""
        async with httpx.AsyncClient(base_url=self.client_url(test, node), timeout=timeout_s) as http:
            return await post_json(http, "/v3/maintenance/status", {})

    # -- LogFiles ------------------------------------------------------------------------------------

    def log_files(self, test: dict[str, Any], node: str) -> Mapping[str, str]:
        return {str(self.log_path(test, node)): "etcd.log"}

    # -- internals -----------------------------------------------------------------------------------

    async def _listening(self, test: dict[str, Any], node: str) -> str | None:
        """None once the client port accepts a connection, else what was seen."""
        try:
            _, writer = await asyncio.wait_for(
                asyncio.open_connection(test["remote"].address(node), self.client_port), 1.0)
        except (OSError, TimeoutError) as exc:
            return f"connect: {type(exc).__name__}: {exc}"
        writer.close()
        return None

    async def _healthy(self, test: dict[str, Any], node: str) -> str | None:
        """None once ``/health`` says true, else what was seen."""
        try:
            async with httpx.AsyncClient(base_url=self.client_url(test, node), timeout=1.0) as http:
                resp = await http.get("/health")
        except httpx.HTTPError as exc:
            return f"/health: {type(exc).__name__}: {exc}"
        if resp.status_code == 200 and '"true"' in resp.text:
            return None
        return f"/health: HTTP {resp.status_code} {resp.text.strip()[:200]}"

    async def _wait(self, test: dict[str, Any], node: str, what: str,
                    probe: Callable[[dict[str, Any], str], Awaitable[str | None]]) -> None:
        await self.procs.wait_until(test, node, lambda: probe(test, node), what, timeout_s=self.start_timeout_s,
                                    log_path=str(self.log_path(test, node)), where=self.client_url(test, node))

    async def _wait_healthy(self, test: dict[str, Any], node: str) -> None:
        await self._wait(test, node, "healthy", self._healthy)
