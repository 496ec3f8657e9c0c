"""``RedisDB``: one Redis server and one Sentinel per node of the test, started through the test's Remote.

Implements the harness's DB protocol and the optional :class:`~harness.protocols.Kill`, ``Pause``, ``Primary``,
``LogFiles`` and ``QueueClients`` (see ``harness/protocols.py``), plus what the process nemesis calls beyond
``Kill`` (``terminate``, ``alive``, ``wait_ready``), as :class:`systems.etcd.db.EtcdDB` does.

Layout of a node (``remote.node_dir(node)``): ``redis.conf`` and ``redis.data/`` (the append-only file), its log
``redis.log``; ``sentinel.conf`` (Sentinel rewrites it), ``sentinel/`` and ``sentinel.log``.  Redis listens on the
node's address at 6379, Sentinel at 26379.  The first node of ``test["nodes"]`` is the master at setup, every
other node a replica of it (``replicaof``); every sentinel monitors that master under the name ``sb`` with a
majority quorum (:mod:`systems.redis.config`).

Faults hit the Redis server, not its sentinel: ``kill`` SIGKILLs it and ``start`` restarts it on its data and its
config, which Redis rewrote when Sentinel last changed its role; ``pause`` stops it.  A partition cuts both.

Readiness.  ``setup`` waits until the node's server answers PING, a replica's link to the master is up, and its
sentinel sees the master, every replica and every other sentinel -- so a test starts with a Sentinel quorum able
to fail over.  ``start`` (after ``kill``) waits only until the server answers: its master may be down.  A process
that exits or misses the bound raises :class:`RedisStartError` naming the node, what was awaited, what was last
seen and the tail of its log.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from harness.node_processes import NodeProcesses
from systems.redis.client import RedisQueueClient
from systems.redis.config import (
    MASTER_NAME,
    REDIS_PORT,
    SENTINEL_PORT,
    RedisOptions,
    redis_conf,
    replication_role,
    sentinel_conf,
    wait_count,
)

__all__ = ["RedisDB", "RedisStartError"]



class RedisStartError(RuntimeError):
    """A server or sentinel did not come up (the message names the node, what was awaited, and its log tail)."""


Probe = Callable[[dict[str, Any], str], Awaitable[str | None]]


class RedisDB:
    """One Redis server and one sentinel per node of ``test["nodes"]`` (see the module docstring).

    Args:
        options: the replication and Sentinel settings (:class:`systems.redis.config.RedisOptions`).
        spec: the run's :class:`harness.spec.TestSpec`; the nemeses read the topology from ``db.spec``, and its
            member count says how many replicas ``wait_replicas: all`` means.
    """

    exactly_once = False
    """Redis streams promise nothing about duplicates (a retried XADD appends again): at-least-once at best."""
    log = True
    """A stream is a log: XREAD does not remove entries and the drain (XRANGE - +) reads every one."""

    def __init__(self, *, options: RedisOptions | None = None, spec: Any = None, binary: str = "redis-server",
                 sentinel_binary: str = "redis-sentinel", start_timeout_s: float = 30.0) -> None:
        self.spec = spec
        self.options = options or RedisOptions()
        self.binary = binary
        self.sentinel_binary = sentinel_binary
        self.start_timeout_s = start_timeout_s
        self.servers = NodeProcesses("redis server", error=RedisStartError)
        self.sentinels = NodeProcesses("redis sentinel", error=RedisStartError)

    @property
    def pids(self) -> dict[str, int]:
        """node -> pid of its redis-server."""
        return self.servers.pids

    @property
    def sentinel_pids(self) -> dict[str, int]:
        """node -> pid of its redis-sentinel."""
        return self.sentinels.pids

    # -- paths -----------------------------------------------------------------------------------------

    def _dir(self, test: dict[str, Any], node: str) -> Path:
        return Path(test["remote"].node_dir(node))

    def log_path(self, test: dict[str, Any], node: str) -> Path:
        return self._dir(test, node) / "redis.log"

    def sentinel_log_path(self, test: dict[str, Any], node: str) -> Path:
        return self._dir(test, node) / "sentinel.log"

    def _ip(self, test: dict[str, Any], node: str) -> str:
        return str(test["remote"].address(node))

    def members(self) -> int:
        """How many Redis nodes the spec has (3 without a spec)."""
        members = getattr(getattr(self.spec, "nodes", None), "members", ())
        return len(members) or 3

    # -- DB ----------------------------------------------------------------------------------------------

    async def setup(self, test: dict[str, Any], node: str) -> None:
        """Fresh config and data, then the server and the sentinel; returns once the node is part of a Sentinel
        deployment that can fail over (see the module docstring)."""
        remote, d = test["remote"], self._dir(test, node)
        await remote.exec(node, ["rm", "-rf", str(d / "redis.data"), str(d / "sentinel")], check=True)
        await remote.exec(node, ["mkdir", "-p", str(d / "redis.data"), str(d / "sentinel")], check=True)
        first = test["nodes"][0]
        master_ip = None if node == first else self._ip(test, first)
        ip, n = self._ip(test, node), len(test["nodes"])
        await self._write(test, node, d / "redis.conf",
                          redis_conf(ip, str(d / "redis.data"), master_ip=master_ip, o=self.options))
        await self._write(test, node, d / "sentinel.conf",
                          sentinel_conf(ip, str(d / "sentinel"), master_ip=self._ip(test, first), nodes=n,
                                        o=self.options))
        await self.start(test, node)
        await self.sentinels.spawn(test, node, [self.sentinel_binary, str(d / "sentinel.conf")],
                                   log_path=str(self.sentinel_log_path(test, node)), if_alive="spawn")
        if master_ip is not None:
            await self._wait(test, node, "replicating from its master", self._replicating, self.servers)
        await self._wait(test, node, "a sentinel seeing the whole deployment", self._sentinel_ready, self.sentinels,
                         log=self.sentinel_log_path(test, node))

    async def teardown(self, test: dict[str, Any], node: str) -> None:
        """Stop the sentinel and the server (TERM, then KILL after 3 s) and remove their data; logs stay."""
        await self.sentinels.stop(test, node, grace_s=3.0)
        await self.servers.stop(test, node, grace_s=3.0)
        d = self._dir(test, node)
        await test["remote"].exec(node, ["rm", "-rf", str(d / "redis.data"), str(d / "sentinel")], check=True)

    async def _write(self, test: dict[str, Any], node: str, path: Path, text: str) -> None:
        fd, local = tempfile.mkstemp(prefix="splitbrain-redis-", suffix=".conf")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            await test["remote"].upload(node, local, str(path))
        finally:
            os.unlink(local)

    # -- Kill --------------------------------------------------------------------------------------------

    async def start(self, test: dict[str, Any], node: str) -> None:
        """Start the server on its data and config (a no-op if it runs); returns once it answers PING."""
        if await self.servers.alive(test, node):
            return
        conf = str(self._dir(test, node) / "redis.conf")
        await self.servers.spawn(test, node, [self.binary, conf], log_path=str(self.log_path(test, node)))
        await self._wait(test, node, "answering PING", self._answering, self.servers)

    async def kill(self, test: dict[str, Any], node: str) -> None:
        """SIGKILL the server and wait until it is gone."""
        await self.servers.stop(test, node, grace_s=0.0)

    async def terminate(self, test: dict[str, Any], node: str) -> None:
        """SIGTERM (and SIGCONT, should it be paused): Redis's own shutdown; ``alive`` says when it is over."""
        await self.servers.terminate(test, node)

    async def alive(self, test: dict[str, Any], node: str) -> bool:
        return await self.servers.alive(test, node)

    async def wait_ready(self, test: dict[str, Any], node: str, timeout_s: float | None = None) -> None:
        """Until the server answers PING.

        Raises:
            TimeoutError: not within ``timeout_s`` (default ``start_timeout_s``), naming the node.
        """
        try:
            await self._wait(test, node, "answering PING", self._answering, self.servers,
                             timeout_s=timeout_s or self.start_timeout_s)
        except (RedisStartError, TimeoutError) as exc:
            raise TimeoutError(f"redis on {node} not ready: {exc}") from None

    # -- Pause -------------------------------------------------------------------------------------------

    async def pause(self, test: dict[str, Any], node: str) -> None:
        await self.servers.pause(test, node)

    async def resume(self, test: dict[str, Any], node: str) -> None:
        await self.servers.resume(test, node)

    # -- Primary -----------------------------------------------------------------------------------------

    async def primaries(self, test: dict[str, Any]) -> list[str]:
        """The nodes whose server says ``role:master`` (INFO replication); servers silent for 1 s are left out.
        During a partition the old master and the promoted replica both say it."""
        roles = await asyncio.gather(*(self.role(test, n) for n in test["nodes"]), return_exceptions=True)
        return [n for n, r in zip(test["nodes"], roles) if r == "master"]

    async def role(self, test: dict[str, Any], node: str, *, timeout_s: float = 1.0) -> str | None:
        """The node's ``role`` from INFO replication (raises on no answer)."""
        async with _connect(self._ip(test, node), REDIS_PORT, timeout_s) as r:
            return replication_role(await r.info("replication"))

    # -- LogFiles ----------------------------------------------------------------------------------------

    def log_files(self, test: dict[str, Any], node: str) -> Mapping[str, str]:
        """Both logs, and both configs as Redis and Sentinel last rewrote them (the roles they ended with)."""
        d = self._dir(test, node)
        return {str(d / name): name for name in ("redis.log", "sentinel.log", "redis.conf", "sentinel.conf")}

    # -- QueueClients ------------------------------------------------------------------------------------

    def queue_client(self, *, timeout_s: float) -> RedisQueueClient:
        """A Redis Streams client (:mod:`systems.redis.client`) that WAITs as the options say."""
        return RedisQueueClient(timeout_s=timeout_s, wait=wait_count(self.options, self.members()),
                                wait_timeout_ms=self.options.wait_timeout_ms)

    # -- internals ---------------------------------------------------------------------------------------

    async def _answering(self, test: dict[str, Any], node: str) -> str | None:
        try:
            async with _connect(self._ip(test, node), REDIS_PORT, 1.0) as r:
                await r.ping()
        except Exception as exc:
            return f"PING: {type(exc).__name__}: {exc}"
        return None

    async def _replicating(self, test: dict[str, Any], node: str) -> str | None:
        try:
            async with _connect(self._ip(test, node), REDIS_PORT, 1.0) as r:
                info = await r.info("replication")
        except Exception as exc:
            return f"INFO replication: {type(exc).__name__}: {exc}"
        if info.get("role") == "slave" and info.get("master_link_status") == "up":
            return None
        return f"role {info.get('role')}, master_link_status {info.get('master_link_status')}"

    async def _sentinel_ready(self, test: dict[str, Any], node: str) -> str | None:
        n = len(test["nodes"])
        try:
            async with _connect(self._ip(test, node), SENTINEL_PORT, 1.0) as s:
                state = await s.execute_command("SENTINEL", "MASTER", MASTER_NAME)
        except Exception as exc:
            return f"SENTINEL MASTER {MASTER_NAME}: {type(exc).__name__}: {exc}"
        if isinstance(state, list):  # RESP2: a flat list of names and values
            state = dict(zip(state[::2], state[1::2]))
        if not isinstance(state, Mapping):
            return f"SENTINEL MASTER {MASTER_NAME}: {state!r}"
        replicas, others = int(state.get("num-slaves", 0)), int(state.get("num-other-sentinels", 0))
        if replicas >= n - 1 and others >= n - 1 and "s_down" not in str(state.get("flags", "")):
            return None
        return f"sees {replicas} replicas and {others} other sentinels (flags {state.get('flags')})"

    async def _wait(self, test: dict[str, Any], node: str, what: str, probe: Probe, procs: NodeProcesses, *,
                    log: Path | None = None, timeout_s: float | None = None) -> None:
        """Until ``probe`` sees the node ready; RedisStartError naming the node and ending with the log's tail if
        the process (tracked by ``procs``) exits or ``timeout_s`` (default ``start_timeout_s``) passes."""
        await procs.wait_until(test, node, lambda: probe(test, node), what, timeout_s=timeout_s or self.start_timeout_s,
                               log_path=str(log or self.log_path(test, node)), where=self._ip(test, node),
                               interval_s=0.2)


class _connect:
    """``async with _connect(ip, port, timeout_s) as r``: a one-off connection, closed on exit."""

    def __init__(self, ip: str, port: int, timeout_s: float) -> None:
        self.r = Redis(host=ip, port=port, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
                       decode_responses=True, retry=Retry(NoBackoff(), 0))

    async def __aenter__(self) -> Redis:
        return self.r

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.r.aclose()
        except Exception:  # closing a connection that never opened may fail; nothing is left either way
            pass
