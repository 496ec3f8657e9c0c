"""RabbitMQ as a system under test: the building blocks (see README.md beside this file).

* :mod:`systems.rabbitmq.config` -- the pure core: queue types, the spec's options (``cluster.system_options``),
  node names, config files, environment.
* :mod:`systems.rabbitmq.db` -- ``RabbitDB``: one broker per node, a cluster formed by peer discovery, with kill,
  pause and log files.
* :mod:`systems.rabbitmq.client` -- ``RabbitQueueClient``: send (publisher confirms), poll and drain (basic.get,
  manual ack) over AMQP 0-9-1.
* :mod:`systems.rabbitmq.system` -- the adapter: ``system: rabbitmq`` with ``queue_type: quorum`` (default) or
  ``mirrored``, and ``rabbitmq-mirrored``, the same adapter whose default is ``mirrored``.
"""
