"""Our own controller-and-broker cluster as a system adapter: the default system of every spec.

This first step only routes construction through the registry: the DB is still
:class:`harness.cluster.SplitbrainDB` and the options still :class:`harness.cluster.ClusterOptions` (parsed from the
spec's ``cluster:`` map by :func:`harness.cluster.cluster_options`).  Moving that code, its bug and port tables,
the admin RPC for clocks, failpoints and events, and its role selectors here is a later step of issue 29.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.protocols import CAPABILITIES

if TYPE_CHECKING:
    from harness.cluster import SplitbrainDB

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

    def make_db(self, spec: Any, options: Any) -> SplitbrainDB:
        """``spec``: a :class:`harness.spec.TestSpec`; ``options``: its :class:`harness.cluster.ClusterOptions`."""
        from harness.cluster import SplitbrainDB

        return SplitbrainDB(spec, options)


SYSTEM = SplitbrainSystem()
