"""Redis with Sentinel as a system under test: the building blocks (see README.md beside this file).

* :mod:`systems.redis.config` -- the pure core: options, redis.conf and sentinel.conf, reply parsing, which
  errors are definite.
* :mod:`systems.redis.db` -- ``RedisDB``: one server and one sentinel per node, with kill, pause, primaries and
  log files.
* :mod:`systems.redis.client` -- ``RedisQueueClient``: Redis Streams through the local sentinel's master.
* :mod:`systems.redis.system` -- the adapter (``system: redis``): members, capabilities, ``make_db``.

The workload (``generic-queue``, :mod:`workloads.generic_queue`) and its total-queue judgement
(:mod:`checker.total_queue`) are generic.
"""
