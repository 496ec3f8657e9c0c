"""RabbitMQ as a system adapter: ``system: rabbitmq``, one broker per node of the spec's ``members`` role.

Its options are the spec's ``cluster: {system_options: {...}}`` (:func:`systems.rabbitmq.config.parse_options`):

* ``queue_type`` -- ``quorum`` (the default: Raft, a publish is confirmed once a majority has it) or ``mirrored``
  (classic queues mirrored to every node, the configuration Jepsen's 2014 analysis found losing confirmed messages
  under partitions); :data:`systems.rabbitmq.config.QUEUE_TYPES`;
* ``partition_handling`` -- RabbitMQ's ``cluster_partition_handling``, ``autoheal`` by default;
* ``net_ticktime_s`` -- the Erlang distribution's tick time, 4 s by default.

A bad key or value is refused on ``cluster.system_options.<key>`` before anything starts (exit 2).  The only other
``cluster:`` key it takes is ``version`` (a label): :func:`systems.options.plain_options`.

``system: rabbitmq-mirrored`` is the same adapter under a second name whose default queue type is ``mirrored``, so
the specs written before the queue type was an option mean what they meant; a spec may still set ``queue_type``
under either name.  Both names run in one docker node image, ``splitbrain/node-rabbitmq`` (``image_name``).

It offers what :class:`systems.rabbitmq.db.RabbitDB` really does:

* ``kill`` and ``pause`` -- SIGKILL and restart on the same data, SIGSTOP/SIGCONT of the broker's VM;
* ``network`` -- brokers talk over their nodes' addresses (Erlang distribution and epmd), so the partition
  nemesis's iptables rules cut them;
* ``log-files`` -- each broker's console log;
* ``queue-client`` -- send/poll/drain over AMQP with publisher confirms and manual acks (the ``generic-queue``
  workload).

Not offered: ``primaries`` (a leader or master per queue, not per cluster; see the DB's docstring),
clock-admin, failpoints, store-files, registration, event-observation, node-helpers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from systems.options import PlainOptions, plain_options
from systems.rabbitmq.config import RabbitOptions, parse_options
from systems.rabbitmq.db import RabbitDB

__all__ = ["MIRRORED", "OFFERED", "SYSTEM", "RabbitSystem"]

OFFERED = frozenset({"kill", "pause", "network", "log-files", "queue-client"})
"""What the adapter offers, under either name (see the module docstring)."""


@dataclass(frozen=True)
class RabbitSystem:
    """The RabbitMQ adapter (see the module docstring); ``default_queue_type`` is what a spec that sets no
    ``queue_type`` gets, the one thing its two names differ in."""

    name: str = "rabbitmq"
    default_queue_type: str = "quorum"
    roles: tuple[str, ...] = ("members",)
    capabilities: frozenset[str] = OFFERED
    node_packages: tuple[str, ...] = ("rabbitmq-server",)
    """Debian's ``rabbitmq-server`` (Erlang comes with it): what a docker run's node image carries beyond the base
    one (:func:`harness.images.ensure_system_image`)."""
    image_name: str = "rabbitmq"
    """The docker node image both names run in, ``splitbrain/node-rabbitmq`` (:func:`harness.images.image_name`):
    the queue type is a setting of the same brokers, not another system to install."""

    def settings(self, options: Any, *, file: str = "<spec>") -> RabbitOptions:
        """The RabbitMQ settings in ``options`` (what :meth:`options` returned; its ``system_options`` map).

        Raises:
            SpecError: a bad RabbitMQ option, on ``cluster.system_options.<key>``.
        """
        raw = getattr(options, "system_options", None) or {}
        return parse_options(raw, file=file, default_queue_type=self.default_queue_type)

    def options(self, raw: Mapping[str, Any], *, file: str = "<spec>") -> PlainOptions:
        """The spec's ``cluster:`` map: ``version`` and ``system_options`` (:func:`systems.options.plain_options`),
        the latter checked here as RabbitMQ's settings (:meth:`settings`), so a bad one is refused before anything
        starts.

        Raises:
            SpecError: ``cluster.<key>`` for a key other than those two, ``cluster.system_options.<key>`` for a bad
                RabbitMQ option.
        """
        plain = plain_options(raw, file=file, system=self.name)
        self.settings(plain, file=file)
        return plain

    def make_db(self, spec: Any, options: Any) -> RabbitDB:
        """A cluster of the spec's members with the spec's queue type and settings (``spec``: a TestSpec;
        ``options``: what :meth:`options` returned).

        Raises:
            SpecError: a bad RabbitMQ option (``cluster.system_options.<key>``).
        """
        s = self.settings(options, file=getattr(spec, "source", "<spec>"))
        return RabbitDB(queue_type_name=s.queue_type, partition_handling=s.partition_handling,
                        net_ticktime_s=s.net_ticktime_s, spec=spec)


SYSTEM = RabbitSystem()
MIRRORED = RabbitSystem(name="rabbitmq-mirrored", default_queue_type="mirrored")
"""``system: rabbitmq-mirrored``: the same adapter, mirrored queues unless ``queue_type`` says otherwise."""
