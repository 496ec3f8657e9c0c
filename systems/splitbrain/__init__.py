"""Our own controller-and-broker cluster as a system adapter: the default system of every spec.

Everything that is only this cluster's lives in this package, not in the harness:

* :mod:`.options` -- its ``cluster:`` options (:class:`~.options.ClusterOptions`, parsed by
  :func:`~.options.cluster_options`, which is this adapter's :meth:`SplitbrainSystem.options`) and its bug table;
* :mod:`.db` -- :class:`~.db.SplitbrainDB`, its ports, and the capability protocols it implements (the admin RPC
  for clocks, failpoints and events, registration through extra brokers);
* :mod:`.extra_brokers` -- broker processes started beside the spec's cluster (the ``registration`` capability);
* :mod:`.store_tool` -- the node-side tool that knows the commit log's format (the disk nemesis);
* :mod:`.local_cluster`, :mod:`.local_broker_set` -- controllers and brokers as plain local processes (the
  ``demo`` command, :mod:`.demo`, integration tests and benchmarks).

* :mod:`.selectors` -- its selector pools (``controller-leader``, ``masters``, ``broker-set-N``...), which the
  generic :mod:`nemesis.targets` resolves from this adapter's ``selectors``.

This module imports none of the above but the pure selectors at import time: the registry loads it to read the
adapter's name, roles, capabilities and selectors, and the DB is imported when one is made.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.protocols import CAPABILITIES
from nemesis.targets import Selectors
from systems.splitbrain.selectors import SELECTORS

if TYPE_CHECKING:
    from harness.provenance import SutSource
    from harness.revisions import RevisionSystem
    from systems.splitbrain.db import SplitbrainDB
    from systems.splitbrain.options import ClusterOptions

__all__ = ["SYSTEM", "SplitbrainSystem"]


@dataclass(frozen=True)
class SplitbrainSystem:
    """Offers every capability but the generic clients and ``clock-faketime``: each nemesis
    package was written against this cluster, and its own workloads (queue, controller-register, ...) speak its
    protocol; it has no generic register or queue client (its ``queue`` workload judges offsets the generic one
    treats as opaque), and its clocks are set over its admin RPC (``clock-admin``), not through libfaketime."""

    name: str = "splitbrain"
    roles: tuple[str, ...] = ("controllers", "broker_sets")
    capabilities: frozenset[str] = frozenset(CAPABILITIES) - {"register-client", "queue-client", "counter-client",
                                                              "clock-faketime"}
    selectors: Selectors = SELECTORS

    def options(self, raw: Mapping[str, Any], *, file: str = "<spec>") -> ClusterOptions:
        """The spec's ``cluster:`` map as :class:`~.options.ClusterOptions`.

        Raises:
            SpecError: naming ``cluster.<key>``, the value and what is allowed.
        """
        from systems.splitbrain.options import cluster_options

        return cluster_options(raw, file=file)

    def make_db(self, spec: Any, options: Any) -> SplitbrainDB:
        """``spec``: a :class:`harness.spec.TestSpec`; ``options``: what :meth:`options` returned for it."""
        from systems.splitbrain.db import SplitbrainDB

        return SplitbrainDB(spec, options)

    async def record_status(self, record: Mapping[str, Any]) -> str:
        """Its controller quorum's leader, asked of the recorded controllers (``splitbrain cluster status``:
        :class:`systems.ReportsRecordStatus`)."""
        from systems.splitbrain.db import quorum_status

        return await quorum_status(list(record.get("controllers") or []), record.get("token"))

    @property
    def revisions(self) -> RevisionSystem:
        """Its part of building another git revision's nodes (``cluster.revision``: :mod:`harness.revisions`)."""
        from systems.splitbrain.revision import REVISIONS

        return REVISIONS

    @property
    def sut_source(self) -> SutSource:
        """Where this cluster's code came from, for a run's provenance (:func:`harness.provenance.sut_source_of`):
        the version and git revision of the ``system_under_test`` package.  Imported here, not at module import,
        because every node command imports this package and must start fast."""
        from systems.splitbrain.revision import REVISIONS

        return REVISIONS


SYSTEM = SplitbrainSystem()
