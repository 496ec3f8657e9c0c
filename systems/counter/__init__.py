"""The counter self-test's service as a system adapter (``system: counter``), like any other.

One unreplicated counter process per node of the ``members`` role: the harness's own smoke test of a machine.
``splitbrain test examples/counter.yaml`` runs it as it runs etcd, and ``splitbrain selftest`` builds such a spec
and runs it the same way (:mod:`harness.testing.run_counter`).  It offers what its DB implements: kill, pause, its
log files, clock faults through libfaketime (``clock-faketime``: the service is Python, so its wall clock moves)
and a counter client (``counter-client``, the generic ``counter`` workload, :mod:`workloads.counter`); a spec
asking it for any other fault or workload is refused at validation.

Parts: :mod:`.service` (the process, our wire protocol with test-only request codes), :mod:`.client` (its client)
and :mod:`.db` (:class:`~systems.counter.db.CounterDB`, one service per node through the test's Remote).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from systems.counter.db import CounterDB
from systems.options import PlainOptions, plain_options

__all__ = ["SYSTEM", "CounterSystem"]


@dataclass(frozen=True)
class CounterSystem:
    name: str = "counter"
    roles: tuple[str, ...] = ("members",)
    capabilities: frozenset[str] = frozenset({"kill", "pause", "log-files", "clock-faketime", "counter-client"})
    port: int = 7400

    def options(self, raw: Mapping[str, Any], *, file: str = "<spec>") -> PlainOptions:
        """The spec's ``cluster:`` map: ``version`` and ``system_options`` only (:func:`systems.options.plain_options`;
        SpecError on ``cluster.<key>`` for any other key)."""
        return plain_options(raw, file=file, system=self.name)

    def make_db(self, spec: Any, options: Any) -> CounterDB:
        """One counter service per node, each under libfaketime; its options (``version``, ``system_options``) mean
        nothing to it."""
        return CounterDB(self.port, spec=spec)


SYSTEM = CounterSystem()
