"""Redis with Sentinel as a system adapter (``system: redis``): one Redis server and one sentinel per node of the
spec's ``members`` role.

It offers what :class:`systems.redis.db.RedisDB` really does:

* ``kill`` and ``pause`` -- SIGKILL and restart of a node's Redis server on its data and config, SIGSTOP/SIGCONT
  (its sentinel keeps running);
* ``network`` -- servers and sentinels talk over their nodes' addresses, so the partition nemesis cuts them;
* ``primaries`` -- the nodes whose server says ``role:master``, so ``isolate`` with ``targets: [primaries]`` cuts
  the master off from the majority (the fault of Jepsen's Redis finding);
* ``log-files`` -- each node's ``redis.log``, ``sentinel.log`` and both configs as last rewritten;
* ``queue-client`` -- Redis Streams (the ``generic-queue`` workload, :mod:`systems.redis.client`).

Its options are the spec's ``cluster: {system_options: {...}}`` (:func:`systems.redis.config.parse_options`:
WAIT after each send, min-replicas-to-write, Sentinel timing); refused on ``cluster.system_options.<key>``.  The
only other ``cluster:`` key it takes is ``version`` (a label): :func:`systems.options.plain_options`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from systems.options import PlainOptions, plain_options
from systems.redis.config import parse_options
from systems.redis.db import RedisDB

__all__ = ["SYSTEM", "RedisSystem"]


@dataclass(frozen=True)
class RedisSystem:
    name: str = "redis"
    roles: tuple[str, ...] = ("members",)
    capabilities: frozenset[str] = frozenset({"kill", "pause", "network", "primaries", "log-files", "queue-client"})
    node_packages: tuple[str, ...] = ("redis-server", "redis-sentinel")
    """Debian's ``redis-server`` and ``redis-sentinel``: what a docker run's node image carries beyond the base one
    (:func:`harness.images.ensure_system_image`)."""

    def options(self, raw: Mapping[str, Any], *, file: str = "<spec>") -> PlainOptions:
        """The spec's ``cluster:`` map: ``version`` and ``system_options`` only (:func:`systems.options.plain_options`;
        SpecError on ``cluster.<key>`` for any other key)."""
        return plain_options(raw, file=file, system=self.name)

    def make_db(self, spec: Any, options: Any) -> RedisDB:
        """A Sentinel deployment of the spec's members with ``options.system_options`` (``options``: what
        :meth:`options` returned, a :class:`systems.options.PlainOptions`).

        Raises:
            SpecError: a bad Redis option (``cluster.system_options.<key>``).
        """
        raw = getattr(options, "system_options", None) or {}
        members = len(getattr(getattr(spec, "nodes", None), "members", ())) or 3
        return RedisDB(options=parse_options(raw, file=getattr(spec, "source", "<spec>"), nodes=members), spec=spec)


SYSTEM = RedisSystem()
