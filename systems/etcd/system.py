"""etcd as a system adapter (``system: etcd``): one etcd member per node of the spec's ``members`` role.

It offers what :class:`systems.etcd.db.EtcdDB` really does:

* ``kill`` and ``pause`` -- SIGKILL and restart on the same data dir, SIGSTOP/SIGCONT;
* ``network`` -- members talk over their nodes' addresses, so the partition nemesis's iptables rules cut them
  (it needs nothing else of a system; the packet nemesis is left out: without ``sch_netem`` it runs its shaper
  as ``db.python -m nemesis.netqueue``, the ``node-helpers`` capability, which this adapter has not tried);
* ``primaries`` -- the members that say they lead (``/v3/maintenance/status``), so ``primaries`` resolves to the
  etcd leader;
* ``log-files`` -- each member's ``etcd.log``;
* ``register-client`` -- per-key registers over the v3 JSON gateway, linearizable or serializable reads (the
  ``register`` workload).

Not offered: clock-admin, failpoints, store-files, registration, event-observation, node-helpers.  The spec's
``cluster:`` map takes only ``version`` (a label) and ``system_options`` (which it ignores):
:func:`systems.options.plain_options`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from systems.etcd.db import EtcdDB
from systems.options import PlainOptions, plain_options

__all__ = ["SYSTEM", "EtcdSystem"]


@dataclass(frozen=True)
class EtcdSystem:
    name: str = "etcd"
    roles: tuple[str, ...] = ("members",)
    capabilities: frozenset[str] = frozenset({"kill", "pause", "network", "primaries", "log-files",
                                              "register-client"})
    node_packages: tuple[str, ...] = ("etcd-server",)
    """Debian's etcd server (``/usr/bin/etcd``): what a docker run's node image carries beyond the base one
    (:func:`harness.images.ensure_system_image`)."""

    def options(self, raw: Mapping[str, Any], *, file: str = "<spec>") -> PlainOptions:
        """The spec's ``cluster:`` map: ``version`` and ``system_options`` only (:func:`systems.options.plain_options`;
        SpecError on ``cluster.<key>`` for any other key)."""
        return plain_options(raw, file=file, system=self.name)

    def make_db(self, spec: Any, options: Any) -> EtcdDB:
        """A static cluster of the spec's members (``spec``: a :class:`harness.spec.TestSpec`)."""
        return EtcdDB(spec=spec)


SYSTEM = EtcdSystem()
