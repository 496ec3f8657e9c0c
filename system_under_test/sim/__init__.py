"""The whole cluster in a seeded simulation: the production cores on a simulated network, disk and clock.

See ``docs/simulation.md``.  :func:`run` plays one :class:`SimConfig` and returns a :class:`SimRun` (history,
node events, executed fault schedule); ``systems/splitbrain/sim/check.py`` judges it with the checkers of a real run.
"""

from system_under_test.sim.cluster import (
    BROKER_BUGS,
    CONTROLLER_BUGS,
    DEFAULT_WORKLOADS,
    SIM_BUGS,
    SIM_WORKLOADS,
    SimCluster,
    SimConfig,
    SimRun,
    run,
)
from system_under_test.sim.faults import DEFAULT_FAULTS, FAULT_KINDS

__all__ = [
    "BROKER_BUGS", "CONTROLLER_BUGS", "DEFAULT_FAULTS", "DEFAULT_WORKLOADS", "FAULT_KINDS", "SIM_BUGS", "SIM_WORKLOADS",
    "SimCluster", "SimConfig", "SimRun", "run",
]
