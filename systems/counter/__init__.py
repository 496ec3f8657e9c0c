"""The counter self-test's service as a system adapter (``system: counter``).

One unreplicated counter process per node (:mod:`harness.testing.counter_service`): the harness's own smoke test
of a machine (``splitbrain selftest``), which used to run only by calling its nodes controllers of our cluster with
zero broker sets.  Its nodes still sit in the spec's ``controllers`` role (the ``nodes:`` map has no other yet), but
it declares that role alone, so a counter spec needs no ``broker_sets``.  It offers what its DB implements: kill,
pause, its log files and clock faults through libfaketime (``clock-faketime``: the service is Python, so its wall
clock moves); a spec asking it for any other fault is refused at validation.

Not yet: the ``counter`` workload is built by :mod:`harness.testing.run_counter` itself, not by the workload
registry, so ``splitbrain test`` cannot run a counter spec; the spec loads and its nemesis packages are checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.testing.counter import CounterDB
from systems.options import PlainOptions, plain_options

__all__ = ["SYSTEM", "CounterSystem"]


@dataclass(frozen=True)
class CounterSystem:
    name: str = "counter"
    roles: tuple[str, ...] = ("controllers",)
    capabilities: frozenset[str] = frozenset({"kill", "pause", "log-files", "clock-faketime"})
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
