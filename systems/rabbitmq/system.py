"""RabbitMQ as system adapters: ``system: rabbitmq`` (quorum queues) and ``system: rabbitmq-mirrored`` (classic
queues mirrored to every node), one broker per node of the spec's ``members`` role.

The two differ only in how the workload's queues are declared (:data:`systems.rabbitmq.config.QUEUE_TYPES`);
both run ``cluster_partition_handling = autoheal`` and ``net_ticktime`` 4 s.  The queue type is a system name; it
was chosen before the per-system option hook (``cluster.system_options``, which the Redis adapter reads) existed,
and could move there.

Both offer what :class:`systems.rabbitmq.db.RabbitDB` really does:

* ``kill`` and ``pause`` -- SIGKILL and restart on the same data, SIGSTOP/SIGCONT of the broker's VM;
* ``network`` -- brokers talk over their nodes' addresses (Erlang distribution and epmd), so the partition
  nemesis's iptables rules cut them;
* ``log-files`` -- each broker's console log;
* ``queue-client`` -- send/poll/drain over AMQP with publisher confirms and manual acks (the ``generic-queue``
  workload).

Not offered: ``primaries`` (a leader or master per queue, not per cluster; see the DB's docstring),
clock-admin, failpoints, store-files, registration, event-observation, node-helpers.  Its ``cluster:`` map takes only
``version`` (a label) and ``system_options`` (which it ignores): :func:`systems.options.plain_options`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from systems.options import PlainOptions, plain_options
from systems.rabbitmq.db import RabbitDB

__all__ = ["MIRRORED", "OFFERED", "SYSTEM", "RabbitSystem"]

OFFERED = frozenset({"kill", "pause", "network", "log-files", "queue-client"})
"""What both adapters offer (see the module docstring)."""


@dataclass(frozen=True)
class RabbitSystem:
    name: str = "rabbitmq"
    queue_type: str = "quorum"
    roles: tuple[str, ...] = ("members",)
    capabilities: frozenset[str] = OFFERED
    node_packages: tuple[str, ...] = ("rabbitmq-server",)
    """Debian's ``rabbitmq-server`` (Erlang comes with it): what a docker run's node image carries beyond the base
    one (:func:`harness.images.ensure_system_image`)."""

    def options(self, raw: Mapping[str, Any], *, file: str = "<spec>") -> PlainOptions:
        """The spec's ``cluster:`` map: ``version`` and ``system_options`` only (:func:`systems.options.plain_options`;
        SpecError on ``cluster.<key>`` for any other key)."""
        return plain_options(raw, file=file, system=self.name)

    def make_db(self, spec: Any, options: Any) -> RabbitDB:
        """A cluster of the spec's members declaring this adapter's queue type (``spec``: a TestSpec)."""
        return RabbitDB(queue_type_name=self.queue_type, spec=spec)


SYSTEM = RabbitSystem()
MIRRORED = RabbitSystem(name="rabbitmq-mirrored", queue_type="mirrored")
