"""The pure core of the Redis adapter: its options, the two config files of a node, and reading Redis's replies.

Redis replicates asynchronously: a master acknowledges a write before any replica has it.  Sentinel (one per node
here) watches the master and, when a quorum of sentinels cannot reach it for ``down-after-milliseconds``, promotes
a replica.  The old master, cut off on its side of a partition, keeps acknowledging writes from the clients that
still reach it; when the partition heals a sentinel makes it a replica of the new master, and it drops what it had
taken alone (Jepsen, "Redis" 2013 and "Asynchronous replication with failover" 2014; the Redis docs say so too).

The options (the spec's ``cluster: {system_options: {...}}``, :func:`parse_options`) choose what to measure:

* ``wait_replicas`` -- after each XADD the client sends ``WAIT <n> <wait_timeout_ms>`` and acknowledges the send
  only if ``n`` replicas confirmed it (``"all"``: every other node); fewer is an ``info`` send (it happened on the
  master, it may or may not survive).  0 (default): no WAIT, plain asynchronous replication.
* ``min_replicas_to_write`` / ``min_replicas_max_lag_s`` -- the master refuses writes (``NOREPLICAS``) unless that
  many replicas acknowledged replication within the lag: an isolated master stops taking writes after at most the
  lag.  0 (default): never refuses.
* ``down_after_ms`` / ``failover_timeout_ms`` -- Sentinel's timing, low so that a failover fits in a short run.

Everything here is pure (text in, text out), so the configs and the reply parsing are unit-tested without a server.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.errors import SpecError

__all__ = [
    "MASTER_NAME", "REDIS_PORT", "SENTINEL_PORT", "RedisOptions", "is_definite", "master_addr", "parse_options",
    "quorum", "redis_conf", "replication_role", "sentinel_conf", "wait_count",
]

REDIS_PORT = 6379
SENTINEL_PORT = 26379
MASTER_NAME = "sb"
"""The name the sentinels monitor the master under (``SENTINEL get-master-addr-by-name sb``)."""


@dataclass(frozen=True)
class RedisOptions:
    """See the module docstring; :func:`parse_options` builds one from the spec."""

    wait_replicas: int | str = 0  # an int, or "all" (every other node)
    wait_timeout_ms: int = 1000
    min_replicas_to_write: int = 0
    min_replicas_max_lag_s: int = 10
    down_after_ms: int = 2500
    failover_timeout_ms: int = 6000


_FIELDS: dict[str, tuple[int, int, str]] = {
    "wait_replicas": (0, 8, "an integer in [0, 8] or \"all\" (replicas that must confirm each send; 0: no WAIT)"),
    "wait_timeout_ms": (1, 60_000, "milliseconds in [1, 60000] (how long one WAIT waits)"),
    "min_replicas_to_write": (0, 8, "an integer in [0, 8] (Redis's min-replicas-to-write; 0: off)"),
    "min_replicas_max_lag_s": (1, 600, "seconds in [1, 600] (Redis's min-replicas-max-lag)"),
    "down_after_ms": (100, 60_000, "milliseconds in [100, 60000] (Sentinel's down-after-milliseconds)"),
    "failover_timeout_ms": (1000, 600_000, "milliseconds in [1000, 600000] (Sentinel's failover-timeout)"),
}


def parse_options(raw: Mapping[str, Any], *, file: str = "<spec>", nodes: int = 3) -> RedisOptions:
    """:class:`RedisOptions` from ``cluster.system_options`` of a spec with ``nodes`` Redis nodes.

    Raises:
        SpecError: an unknown key or a bad value, naming ``cluster.system_options.<key>`` and what is allowed;
            asking more replicas than there are other nodes is refused too (it could never be met).
    """
    values: dict[str, Any] = {}
    for key, value in raw.items():
        where = f"cluster.system_options.{key}"
        if key not in _FIELDS:
            raise SpecError(file, where, value, f"a Redis option; known: {sorted(_FIELDS)}")
        lo, hi, allowed = _FIELDS[key]
        if key == "wait_replicas" and value == "all":
            values[key] = value
            continue
        if type(value) is not int or not lo <= value <= hi:
            raise SpecError(file, where, value, allowed)
        if key in ("wait_replicas", "min_replicas_to_write") and value > nodes - 1:
            raise SpecError(file, where, value, f"at most {nodes - 1}: the other nodes are the only replicas")
        values[key] = value
    return RedisOptions(**values)


def wait_count(o: RedisOptions, nodes: int) -> int:
    """How many replicas a send waits for (``all``: every node but the master)."""
    return nodes - 1 if o.wait_replicas == "all" else int(o.wait_replicas)


def quorum(nodes: int) -> int:
    """The sentinels that must agree the master is down: a majority of them (one per node)."""
    return nodes // 2 + 1


def redis_conf(ip: str, data_dir: str, *, master_ip: str | None, o: RedisOptions, port: int = REDIS_PORT) -> str:
    """redis.conf of a node listening on ``ip``: a replica of ``master_ip`` when given, else the first master.

    Persistence is an append-only file fsynced every second, so a killed node restarts on its data; the file is
    rewritten by Redis itself (``CONFIG REWRITE``, which Sentinel sends after it changes a node's role), so a
    restart keeps the role Sentinel gave the node.
    """
    lines = [
        f"bind {ip}", f"port {port}", "protected-mode no", "daemonize no", 'logfile ""', f"dir {data_dir}",
        "appendonly yes", "appendfsync everysec", 'save ""',
        "repl-timeout 5", "repl-ping-replica-period 1",
        f"min-replicas-to-write {o.min_replicas_to_write}", f"min-replicas-max-lag {o.min_replicas_max_lag_s}",
    ]
    if master_ip is not None:
        lines.append(f"replicaof {master_ip} {port}")
    return "\n".join(lines) + "\n"


def sentinel_conf(ip: str, work_dir: str, *, master_ip: str, nodes: int, o: RedisOptions,
                  port: int = SENTINEL_PORT, redis_port: int = REDIS_PORT) -> str:
    """sentinel.conf of the sentinel on ``ip`` (Sentinel rewrites it as it learns the others and new masters)."""
    return "\n".join([
        f"bind {ip}", f"port {port}", "protected-mode no", "daemonize no", 'logfile ""', f"dir {work_dir}",
        f"sentinel monitor {MASTER_NAME} {master_ip} {redis_port} {quorum(nodes)}",
        f"sentinel down-after-milliseconds {MASTER_NAME} {o.down_after_ms}",
        f"sentinel failover-timeout {MASTER_NAME} {o.failover_timeout_ms}",
        f"sentinel parallel-syncs {MASTER_NAME} 1",
    ]) + "\n"


def replication_role(info: Mapping[str, Any] | str) -> str | None:
    """``master`` / ``slave`` from ``INFO replication`` (a parsed mapping or its text), None if it does not say."""
    if isinstance(info, Mapping):
        role = info.get("role")
        return str(role) if role is not None else None
    for line in info.splitlines():
        if line.startswith("role:"):
            return line.split(":", 1)[1].strip()
    return None


def master_addr(reply: Any) -> tuple[str, int] | None:
    """(ip, port) from ``SENTINEL get-master-addr-by-name``'s reply (None: the sentinel knows no master)."""
    if isinstance(reply, Sequence) and not isinstance(reply, str | bytes) and len(reply) == 2:
        ip, port = reply
        ip = ip.decode() if isinstance(ip, bytes) else str(ip)
        try:
            return ip, int(port)
        except (TypeError, ValueError):
            return None
    return None


def is_definite(exc: BaseException) -> bool:
    """Whether a failed write certainly did not happen: Redis refused it with an error reply (any of redis-py's
    ``ResponseError`` family: ``READONLY`` from a replica, ``NOREPLICAS`` under min-replicas-to-write ...; Redis
    sends these instead of executing), it was still loading its data, or the connection was never made
    (``Error 111 connecting to``, ``Timeout connecting to``).  A timeout or a connection lost after sending is
    not: the write may have been executed.  By class name along the MRO, so this stays free of redis-py."""
    names = {c.__name__ for c in type(exc).__mro__}
    if names & {"ResponseError", "BusyLoadingError", "AuthenticationError"}:
        return True
    return "connecting to" in str(exc)
