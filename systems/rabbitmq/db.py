"""``RabbitDB``: a RabbitMQ cluster of the test's nodes, one broker per node, started through the test's Remote.

Implements the harness's DB protocol and the optional ``Kill``, ``Pause``, ``LogFiles`` and ``QueueClients``
(``queue_client``), plus what the process nemesis calls beyond ``Kill`` (``terminate``, ``alive``,
``wait_ready``).  Debian's ``rabbitmq-server`` (3.10) on Debian's Erlang (25).

Each node's files live under ``<node_dir>/rabbitmq/``: its own ``rabbitmq.conf`` (:func:`config.rabbitmq_conf`:
AMQP on the node's address, ``classic_config`` peer discovery listing every node, the partition-handling mode),
``advanced.config`` (``net_ticktime``, so a cut link is noticed in seconds), an empty plugin list, the mnesia
and Raft data, and ``home/.erlang.cookie``, the cookie every node shares.  The broker is ``rabbit@<address>``
with long names.  Each node runs its own ``epmd`` (Erlang's port mapper), started by the DB and tracked like
the broker, so nothing is left behind when the run ends; the broker's console log is ``<node_dir>/rabbitmq.log``.

Cluster formation.  The first node of ``test["nodes"]`` (the seed) boots alone; every other node waits until the
seed takes AMQP connections and then starts, finds the seed through peer discovery and joins it.  Two nodes
booting at once could each form a cluster of one that never merges, which this order rules out.  The seed's
``setup`` then waits (``rabbitmqctl await_online_nodes``) until every node is in, and sets the queue type's policy
(mirrored queues: ``ha-mode: all``), so when the runner's setups are done the cluster is whole.

Restarts.  ``start`` (after ``kill``) starts the broker on its data and waits until it takes AMQP connections.  A
node restarted while it cannot reach the others waits for them before it listens (mnesia), so a restart during a
partition can take until the partition heals; the wait is bounded by ``start_timeout_s``.  A broker that exits or
misses the bound is a :class:`RabbitStartError` naming the node, what was awaited and the tail of its log.

``primaries`` is not offered: RabbitMQ has a leader (quorum) or master (mirrored) per queue, not per cluster, and
the workload has several queues; asking needs ``rabbitmqctl``, an Erlang VM start per question.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from harness.node_processes import NodeProcesses
from systems.rabbitmq.client import RabbitQueueClient
from systems.rabbitmq.config import (
    AMQP_PORT,
    advanced_config,
    node_env,
    node_name,
    policy_argv,
    queue_type,
    rabbitmq_conf,
)

__all__ = ["EPMD_PORT", "RabbitDB", "RabbitStartError"]

EPMD_PORT = 4369
COOKIE = "SPLITBRAINRABBITMQCOOKIE"
SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
"""Debian's start script itself: ``/usr/sbin/rabbitmq-server`` switches to the ``rabbitmq`` user, whose HOME and
files are the system's, not the node's."""
CTL = "/usr/lib/rabbitmq/bin/rabbitmqctl"


class RabbitStartError(RuntimeError):
    """A broker did not come up, or did not go away when killed (the message names the node and what was awaited;
    a start's ends with its log tail)."""


class RabbitDB:
    """One RabbitMQ broker per node of ``test["nodes"]`` (see the module docstring).

    Args:
        queue_type_name: ``quorum`` or ``mirrored`` (:data:`systems.rabbitmq.config.QUEUE_TYPES`).
        partition_handling: RabbitMQ's ``cluster_partition_handling``; ``autoheal`` by default.
        net_ticktime_s: the Erlang distribution's tick time.
        start_timeout_s: bound of each readiness wait.
        spec: the run's :class:`harness.spec.TestSpec` when built by the adapter; the nemeses read the topology
            from ``db.spec``.
    """

    def __init__(self, *, queue_type_name: str = "quorum", partition_handling: str = "autoheal",
                 net_ticktime_s: int = 4, amqp_port: int = AMQP_PORT, start_timeout_s: float = 90.0,
                 server: str = SERVER, ctl: str = CTL, spec: Any = None) -> None:
        self.qtype = queue_type(queue_type_name)
        self.partition_handling = partition_handling
        self.net_ticktime_s = net_ticktime_s
        self.amqp_port = amqp_port
        self.start_timeout_s = start_timeout_s
        self.server = server
        self.ctl = ctl
        self.spec = spec
        self.brokers = NodeProcesses("rabbitmq broker", error=RabbitStartError)
        self.epmds = NodeProcesses("epmd", error=RabbitStartError)

    @property
    def pids(self) -> dict[str, int]:
        """node -> pid of its broker."""
        return self.brokers.pids

    @property
    def epmd_pids(self) -> dict[str, int]:
        """node -> pid of its epmd."""
        return self.epmds.pids

    # -- paths -----------------------------------------------------------------------------------------

    def base(self, test: dict[str, Any], node: str) -> Path:
        return Path(test["remote"].node_dir(node)) / "rabbitmq"

    def log_path(self, test: dict[str, Any], node: str) -> Path:
        return Path(test["remote"].node_dir(node)) / "rabbitmq.log"

    def _env(self, test: dict[str, Any], node: str) -> dict[str, str]:
        return node_env(self.base(test, node), test["remote"].address(node))

    def _files(self, test: dict[str, Any], node: str) -> dict[Path, str]:
        """The node's files: path -> content (the cookie, ``rabbitmq.conf``, ``advanced.config``, the plugins)."""
        base, remote = self.base(test, node), test["remote"]
        peers = [remote.address(n) for n in test["nodes"]]
        return {
            base / "home" / ".erlang.cookie": COOKIE,
            base / "rabbitmq.conf": rabbitmq_conf(remote.address(node), peers,
                                                  partition_handling=self.partition_handling,
                                                  amqp_port=self.amqp_port),
            base / "advanced.config": advanced_config(net_ticktime_s=self.net_ticktime_s),
            base / "enabled_plugins": "[].\n",
        }

    async def _write_files(self, test: dict[str, Any], node: str) -> None:
        """Put the node's files on the node through the Remote (a container's or host's file system is not the
        harness's: writing ``node_dir`` paths here worked on the local backend only)."""
        remote, files = test["remote"], self._files(test, node)
        for path, text in files.items():
            fd, local = tempfile.mkstemp(prefix="splitbrain-rabbitmq-")
            try:
                with os.fdopen(fd, "w") as f:
                    f.write(text)
                await remote.upload(node, local, str(path))
            finally:
                os.unlink(local)
        cookie = self.base(test, node) / "home" / ".erlang.cookie"
        await remote.exec(node, ["chmod", "400", str(cookie)], check=True)  # Erlang refuses a cookie others read

    # -- DB --------------------------------------------------------------------------------------------

    async def setup(self, test: dict[str, Any], node: str) -> None:
        """A fresh broker (any old files removed) in a cluster of every node; see the module docstring."""
        remote = test["remote"]
        await remote.exec(node, ["rm", "-rf", str(self.base(test, node))], check=True)
        await self._write_files(test, node)
        await self._start_epmd(test, node)
        seed = test["nodes"][0]
        if node != seed:
            await self._wait(test, seed, "taking AMQP connections (the seed, before its peers start)",
                             self._listening)
        await self.start(test, node)
        if node == seed:
            await self._ctl(test, node, [self.ctl, "-n", node_name(remote.address(node)), "--longnames",
                                         "await_online_nodes", str(len(test["nodes"])),
                                         "--timeout", str(int(self.start_timeout_s))], "every node joined")
            argv = policy_argv(self.ctl, remote.address(node), self.qtype)
            if argv is not None:
                await self._ctl(test, node, argv, f"policy of {self.qtype.name} queues set")

    async def teardown(self, test: dict[str, Any], node: str) -> None:
        """Stop the broker (TERM, then KILL after 5 s) and its epmd, and remove its files; the log stays."""
        await self.brokers.stop(test, node, grace_s=5.0)
        await self.epmds.stop(test, node)
        await test["remote"].exec(node, ["rm", "-rf", str(self.base(test, node))], check=True)

    # -- Kill ------------------------------------------------------------------------------------------

    async def start(self, test: dict[str, Any], node: str) -> None:
        """Start the broker on its existing data (a no-op if it runs); returns once it takes AMQP connections."""
        await self.brokers.spawn(test, node, [self.server], log_path=str(self.log_path(test, node)),
                                 env=self._env(test, node))
        await self._wait(test, node, "taking AMQP connections", self._listening)

    async def kill(self, test: dict[str, Any], node: str) -> None:
        """SIGKILL the broker, wait until its process is gone, and check that its AMQP port no longer takes
        connections.

        The VM's main thread can exit before its other threads, which close the listening sockets last; the
        backends count the process as running until every thread is gone (``harness.control.local._proc_starttime``),
        and the port check here makes sure no kill that left a listener behind passes for one that took effect
        (a ``start`` would then see the old socket and call a broker ready that never bound the port).

        Raises:
            RabbitStartError: the process outlived SIGKILL by 5 s, or its port still took connections 5 s later.
        """
        await self.brokers.stop(test, node, grace_s=0.0)
        deadline = time.monotonic() + 5.0
        while await self._listening(test, node) is None:
            if time.monotonic() > deadline:
                raise RabbitStartError(
                    f"rabbitmq broker {node} ({test['remote'].address(node)}:{self.amqp_port}) killed, but the port "
                    "still takes connections 5 s later: another process holds it")
            await asyncio.sleep(0.05)

    async def terminate(self, test: dict[str, Any], node: str) -> None:
        """SIGTERM (and SIGCONT, should it be paused): RabbitMQ's own shutdown; ``alive`` says when it is over."""
        await self.brokers.terminate(test, node)

    async def alive(self, test: dict[str, Any], node: str) -> bool:
        """Whether the broker's process runs (paused counts as running)."""
        return await self.brokers.alive(test, node)

    async def wait_ready(self, test: dict[str, Any], node: str, timeout_s: float | None = None) -> None:
        """Until the broker takes AMQP connections.

        Raises:
            TimeoutError: not within ``timeout_s`` (default ``start_timeout_s``), naming the node.
        """
        try:
            await asyncio.wait_for(self._wait(test, node, "taking AMQP connections", self._listening),
                                   timeout_s or self.start_timeout_s)
        except (RabbitStartError, TimeoutError) as exc:
            raise TimeoutError(f"rabbitmq broker {node} not ready: {exc}") from None

    # -- OperatorRecovery -------------------------------------------------------------------------------

    async def recover(self, test: dict[str, Any], node: str) -> str | None:
        """After the recovery wait: a broker that takes no AMQP connections is brought back as an operator would.

        Its process gone: started on its data.  Its Erlang VM running but taking no connections -- autoheal stopped
        the losing side's app and, when a second heal overlapped the first, never started it again (RabbitMQ
        3.10.8 here; docs/systems.md) -- the broker is restarted on its data (TERM, 5 s, KILL, start): ``rabbitmqctl
        start_app`` on such a node was tried first and hung for 120 s, the VM still in its unfinished autoheal.
        Either way it waits until the broker takes connections (``start_timeout_s``).
        """
        if await self._listening(test, node) is None:
            return None
        if not await self.alive(test, node):
            await self.start(test, node)
            return "its broker process had exited; started it on its data"
        await self.brokers.stop(test, node, grace_s=5.0)
        await self.start(test, node)
        return ("its Erlang VM ran but took no AMQP connections (autoheal stopped the rabbit app and did not start "
                "it again); restarted the broker on its data")

    # -- Pause -----------------------------------------------------------------------------------------

    async def pause(self, test: dict[str, Any], node: str) -> None:
        await self.brokers.pause(test, node)

    async def resume(self, test: dict[str, Any], node: str) -> None:
        await self.brokers.resume(test, node)

    # -- LogFiles, QueueClients ---------------------------------------------------------------------

    def log_files(self, test: dict[str, Any], node: str) -> Mapping[str, str]:
        return {str(self.log_path(test, node)): "rabbitmq.log"}

    def queue_client(self, *, timeout_s: float) -> RabbitQueueClient:
        """A queue client (:mod:`systems.rabbitmq.client`) declaring this DB's queue type.

        A whole drain is bounded by ``3 * timeout_s + 6`` s, below the generic-queue workload's drain op timeout
        (``4 * timeout_s + 10``), so that the client, not the runner, ends a drain that does not finish (as a
        ``fail``, with nothing acked); one basic.get per message drains about 600 messages a second here."""
        return RabbitQueueClient(self.amqp_port, queue_type_name=self.qtype.name, timeout_s=timeout_s,
                                 drain_bound_s=3 * timeout_s + 6)

    # -- internals -------------------------------------------------------------------------------------

    async def _start_epmd(self, test: dict[str, Any], node: str) -> None:
        """The node's own epmd, in the foreground so it is tracked (a broker would otherwise start a daemon one
        that outlives the run)."""
        remote = test["remote"]
        await self.epmds.spawn(test, node, ["epmd", "-port", str(EPMD_PORT)],
                               log_path=str(self.base(test, node) / "epmd.log"), if_alive="spawn")
        deadline = time.monotonic() + 10.0
        while await self._port_open(remote.address(node), EPMD_PORT) is not None:
            if time.monotonic() > deadline or not await remote.is_alive(node, self.epmd_pids[node]):
                raise RabbitStartError(f"rabbitmq: epmd on {node} not listening on {EPMD_PORT} within 10 s")
            await asyncio.sleep(0.05)

    async def _ctl(self, test: dict[str, Any], node: str, argv: list[str], what: str) -> None:
        res = await test["remote"].exec(node, argv, env=self._env(test, node), timeout_s=self.start_timeout_s + 30)
        if res.exit_code != 0:
            raise RabbitStartError(
                f"rabbitmq broker {node}: not {what}: {' '.join(argv[4:])} exited {res.exit_code}: "
                f"{(res.stdout + res.stderr).strip()[-600:]}\n{self.log_path(test, node)} ends with:\n"
                f"{await self._log_tail(test, node)}")

    @staticmethod
    async def _port_open(address: str, port: int) -> str | None:
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(address, port), 1.0)
        except (OSError, TimeoutError) as exc:
            return f"connect {address}:{port}: {type(exc).__name__}: {exc}"
        writer.close()
        return None

    async def _listening(self, test: dict[str, Any], node: str) -> str | None:
        """None once the AMQP port accepts a connection, else what was seen."""
        return await self._port_open(test["remote"].address(node), self.amqp_port)

    async def _wait(self, test: dict[str, Any], node: str, what: str,
                    probe: Callable[[dict[str, Any], str], Awaitable[str | None]]) -> None:
        remote = test["remote"]
        deadline = time.monotonic() + self.start_timeout_s
        last = "not probed yet"
        while True:
            seen = await probe(test, node)
            if seen is None:
                return
            last = seen
            pid = self.pids.get(node)
            dead = pid is not None and not await remote.is_alive(node, pid)
            if dead or time.monotonic() > deadline:
                why = "exited" if dead else f"not {what} after {self.start_timeout_s:g} s"
                raise RabbitStartError(f"rabbitmq broker {node} ({remote.address(node)}:{self.amqp_port}) {why} "
                                       f"(last seen: {last}); {self.log_path(test, node)} ends with:\n"
                                       f"{await self._log_tail(test, node)}")
            await asyncio.sleep(0.2)

    async def _log_tail(self, test: dict[str, Any], node: str) -> str:
        return await self.brokers.log_tail(test, node, str(self.log_path(test, node)))
