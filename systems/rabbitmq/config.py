"""The pure core of the RabbitMQ adapter: queue types, node names, config files, environment, and how an AMQP
outcome becomes a completion.  Nothing here starts a process or opens a socket, so all of it is unit-tested.

Queue types (:data:`QUEUE_TYPES`, one row each) are what the safe and the unsafe configuration differ in:

* ``quorum`` -- a quorum queue (Raft, ``x-queue-type: quorum``): a publish is confirmed once a majority of the
  queue's members wrote it, and a member cut off from the majority cannot confirm anything.
* ``mirrored`` -- a classic queue mirrored to every node by a policy (``ha-mode: all``, ``ha-sync-mode:
  automatic``), the configuration Jepsen's 2014 RabbitMQ analysis found losing publisher-confirmed messages
  under partitions: each side of a partition promotes its own master and confirms publishes alone, and when the
  partition heals the side that loses (``cluster_partition_handling``, :data:`PARTITION_HANDLING`) restarts and
  throws its queue contents away.

A spec chooses among them, and sets the two cluster-wide settings, with ``cluster: {system_options: {...}}``
(:func:`parse_options`, :class:`RabbitOptions`): ``queue_type``, ``partition_handling`` and ``net_ticktime_s``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import SpecError

__all__ = [
    "AMQP_PORT", "OPTION_KEYS", "PARTITION_HANDLING", "QUEUE_TYPES", "NET_TICKTIME_RANGE_S", "QueueType",
    "RabbitOptions", "advanced_config", "node_env", "node_name", "parse_options", "policy_argv", "queue_type",
    "rabbitmq_conf",
]

AMQP_PORT = 5672

PARTITION_HANDLING = ("autoheal", "pause_minority", "ignore")
"""RabbitMQ's ``cluster_partition_handling`` modes this adapter lets a DB use (``pause_if_all_down`` needs a
node list and is not offered)."""


@dataclass(frozen=True)
class QueueType:
    """One way to declare the workload's queues.

    Attributes:
        name: how the adapter and the docs spell it.
        arguments: the ``queue.declare`` arguments (every queue is durable).
        policy: a policy set once on the cluster before the workload starts, as ``(name, pattern, definition)``,
            or None.
        means: one sentence for the docs and errors.
    """

    name: str
    arguments: Mapping[str, Any]
    policy: tuple[str, str, Mapping[str, Any]] | None = None
    means: str = ""


QUEUE_TYPES: Mapping[str, QueueType] = {q.name: q for q in (
    QueueType("quorum", {"x-queue-type": "quorum"},
              means="quorum queues (Raft): a publish is confirmed once a majority of the queue's members has it"),
    QueueType("mirrored", {"x-queue-type": "classic"},
              policy=("splitbrain-ha-all", "^q", {"ha-mode": "all", "ha-sync-mode": "automatic"}),
              means="classic queues mirrored to every node (ha-mode all): each side of a partition confirms alone"),
)}


def queue_type(name: str) -> QueueType:
    """The row of ``name``.

    Raises:
        ValueError: an unknown queue type (names the known ones).
    """
    try:
        return QUEUE_TYPES[name]
    except (KeyError, TypeError):
        raise ValueError(f"rabbitmq: queue type must be one of {sorted(QUEUE_TYPES)}, got {name!r}") from None


NET_TICKTIME_RANGE_S = (1, 600)
"""The ``net_ticktime`` values :func:`advanced_config` writes, in seconds."""


@dataclass(frozen=True)
class RabbitOptions:
    """What a spec sets of a RabbitMQ cluster (``cluster.system_options``; :func:`parse_options`).

    Attributes:
        queue_type: how the workload's queues are declared, a row of :data:`QUEUE_TYPES`.  The one setting the
            safe and the unsafe example differ in: ``quorum`` confirms a publish once a majority has it,
            ``mirrored`` lets each side of a partition confirm alone.
        partition_handling: RabbitMQ's ``cluster_partition_handling`` (:data:`PARTITION_HANDLING`).  ``autoheal``
            restarts the losing side of a healed partition and throws its copy of each mirrored queue away (the
            loss the unsafe example finds); ``pause_minority`` stops the minority's brokers during the partition,
            so no side confirms alone (it lost nothing in the one experiment the README reports) but the minority's
            clients get no service; ``ignore`` leaves a split cluster split after the heal.
        net_ticktime_s: the Erlang distribution's tick time: a node cut off from another is declared down within
            about this many seconds.  Short enough that a test's partitions are noticed (the default, 60 s, outlasts
            them); much shorter and a loaded machine's scheduling pauses look like partitions.
    """

    queue_type: str = "quorum"
    partition_handling: str = "autoheal"
    net_ticktime_s: int = 4


OPTION_KEYS: Mapping[str, str] = {
    "queue_type": f"one of {', '.join(QUEUE_TYPES)}",
    "partition_handling": f"one of {', '.join(PARTITION_HANDLING)} (RabbitMQ's cluster_partition_handling)",
    "net_ticktime_s": f"an int of seconds, {NET_TICKTIME_RANGE_S[0]}..{NET_TICKTIME_RANGE_S[1]}",
}
"""The keys of ``cluster.system_options`` a RabbitMQ spec may set, and what each takes (:class:`RabbitOptions`)."""


def parse_options(raw: Mapping[str, Any], *, file: str = "<spec>",
                  default_queue_type: str = "quorum") -> RabbitOptions:
    """:class:`RabbitOptions` from a spec's ``cluster.system_options``; ``default_queue_type`` is the adapter's
    (``system: rabbitmq`` declares quorum queues unless told otherwise, ``system: rabbitmq-mirrored`` mirrored
    ones).

    Raises:
        SpecError: an unknown key or a bad value, naming ``cluster.system_options.<key>``, the value and what the
            key takes (:data:`OPTION_KEYS`).
    """
    values: dict[str, Any] = {"queue_type": default_queue_type}
    for key, value in raw.items():
        where = f"cluster.system_options.{key}"
        if key not in OPTION_KEYS:
            raise SpecError(file, where, value, f"a RabbitMQ option: one of {', '.join(OPTION_KEYS)}")
        if key == "net_ticktime_s":
            lo, hi = NET_TICKTIME_RANGE_S
            ok = type(value) is int and lo <= value <= hi  # not a bool, not a float
        else:
            ok = isinstance(value, str) and value in (QUEUE_TYPES if key == "queue_type" else PARTITION_HANDLING)
        if not ok:
            raise SpecError(file, where, value, OPTION_KEYS[key])
        values[key] = value
    return RabbitOptions(**values)


def node_name(address: str) -> str:
    """The Erlang node name of the broker listening on ``address`` (long names: ``rabbit@<ip>``)."""
    return f"rabbit@{address}"


def rabbitmq_conf(address: str, peers: Sequence[str], *, partition_handling: str = "autoheal",
                  amqp_port: int = AMQP_PORT) -> str:
    """``rabbitmq.conf`` of the node on ``address`` in a cluster of ``peers`` (every node's address, its own too).

    Peer discovery is ``classic_config`` listing every node, so a node started after the first one joins it
    without a CLI call; ``guest`` may log in from outside the node's loopback (the clients run on the host);
    logs go to the console, which the DB sends to one file per node.

    Raises:
        ValueError: ``address`` is not in ``peers``, or an unknown ``partition_handling``.
    """
    if address not in peers:
        raise ValueError(f"rabbitmq: address {address!r} is not one of the peers {list(peers)}")
    if partition_handling not in PARTITION_HANDLING:
        raise ValueError(f"rabbitmq: partition_handling must be one of {list(PARTITION_HANDLING)}, "
                         f"got {partition_handling!r}")
    lines = [
        f"listeners.tcp.default = {address}:{amqp_port}",
        "loopback_users.guest = false",
        f"cluster_partition_handling = {partition_handling}",
        "cluster_formation.peer_discovery_backend = classic_config",
        *(f"cluster_formation.classic_config.nodes.{i} = {node_name(p)}" for i, p in enumerate(peers, 1)),
        "log.console = true",
        "log.console.level = info",
        "log.file = false",
    ]
    return "\n".join(lines) + "\n"


def advanced_config(*, net_ticktime_s: int = 4) -> str:
    """``advanced.config``: the Erlang distribution's ``net_ticktime``, so that a node cut off from another is
    declared down within about that many seconds (the default, 60 s, outlasts a test's partitions)."""
    lo, hi = NET_TICKTIME_RANGE_S
    if type(net_ticktime_s) is not int or not lo <= net_ticktime_s <= hi:
        raise ValueError(f"rabbitmq: net_ticktime_s must be {lo}..{hi}, got {net_ticktime_s!r}")
    return f"[{{kernel, [{{net_ticktime, {net_ticktime_s}}}]}}].\n"


def node_env(base: Path, address: str) -> dict[str, str]:
    """The environment of every RabbitMQ command for the node on ``address`` whose files live under ``base``.

    ``HOME`` holds the shared Erlang cookie, read by the server and by ``rabbitmqctl`` alike;
    ``RUNNING_UNDER_SYSTEMD`` makes the start script ``exec`` the VM instead of waiting on it in a shell, so the
    pid the backend tracks is the broker's own (a signal reaches it, and SIGSTOP pauses it)."""
    return {
        "HOME": str(base / "home"),
        "RABBITMQ_NODENAME": node_name(address),
        "RABBITMQ_USE_LONGNAME": "true",
        "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
        "RABBITMQ_LOG_BASE": str(base / "log"),
        "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq.conf"),
        "RABBITMQ_ADVANCED_CONFIG_FILE": str(base / "advanced.config"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
        "RABBITMQ_CONF_ENV_FILE": str(base / "rabbitmq-env.conf"),
        "RABBITMQ_PID_FILE": str(base / "rabbitmq.pid"),
        "RUNNING_UNDER_SYSTEMD": "true",
        "ERL_EPMD_PORT": "4369",
    }


def policy_argv(ctl: str, address: str, qtype: QueueType) -> list[str] | None:
    """The ``rabbitmqctl`` command that sets ``qtype``'s policy through the node on ``address``, or None."""
    if qtype.policy is None:
        return None
    name, pattern, definition = qtype.policy
    return [ctl, "-n", node_name(address), "--longnames", "set_policy", "--apply-to", "queues", name, pattern,
            json.dumps(dict(definition), sort_keys=True)]
