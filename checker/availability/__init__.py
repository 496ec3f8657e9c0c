"""Availability as a verdict: writes must resume within a bound under every fault that leaves them possible.

A run states what it expects (``checker: {availability: {...}}`` in the spec; defaults derived from the broker
lease: :mod:`._expect`).  :func:`check_availability` judges a history against it:

* while a fault leaves a controller quorum and an electable in-sync replica reachable (decided from the
  nemesis ops' recorded targets and grudges plus the topology: :mod:`._faults`, :mod:`._reach`), each
  workload's writes (one table, :data:`WORKLOAD_OPS`) must resume within ``write_resume_s``;
* after the final heal, every workload's ops must resume within ``final_resume_s``.

A breach is an ``unavailable`` anomaly naming the fault window, how long the clients waited and the last errors
they saw; whatever the checker cannot decide from the history it does not claim, and says why in ``stats``.
Per-fault recovery figures stay in :mod:`checker.perf` (figures, not a verdict).
"""

from checker.availability._check import ANOMALY, Call, Wait, check_availability, longest_wait, write_calls
from checker.availability._expect import (
    CONTROLLER_BOUND_S,
    EXPECTATION_KEYS,
    LEASES,
    MARGIN_S,
    ExpectationError,
    Expectations,
    default_bound_s,
    resolve,
    validate_options,
)
from checker.availability._faults import NEMESIS_EFFECTS, Effect, FaultState, Piece, fault_pieces
from checker.availability._reach import Reach, Topology, controller_groups, reach
from checker.availability._writes import (
    BROKER_SET,
    CONTROLLERS,
    WORKLOAD_OPS,
    WorkloadOps,
    WritePath,
    broker_set_of,
    owner_of,
)

__all__ = [
    "ANOMALY", "BROKER_SET", "CONTROLLER_BOUND_S", "CONTROLLERS", "EXPECTATION_KEYS", "LEASES", "MARGIN_S",
    "NEMESIS_EFFECTS", "WORKLOAD_OPS",
    "Call", "Effect", "ExpectationError", "Expectations", "FaultState", "Piece", "Reach", "Topology", "Wait",
    "WorkloadOps", "WritePath", "broker_set_of", "check_availability", "controller_groups", "default_bound_s",
    "fault_pieces", "longest_wait", "owner_of", "reach", "resolve", "validate_options", "write_calls",
]
