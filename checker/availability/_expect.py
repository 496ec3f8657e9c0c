"""What availability a run expects: the bounds the availability checker judges a history against.

A spec states them under ``checker: {availability: {...}}`` (every key optional):

* ``enabled`` (default true) -- false turns the verdict off: the run gets no ``availability`` checker;
* ``write_resume_s`` -- while a fault leaves a controller quorum and an electable in-sync replica reachable,
  a workload's writes must resume within this many seconds;
* ``final_resume_s`` -- after the final heal, every workload's ops must resume within this many seconds
  (counted from when the clients next tried, so the recovery wait the runner inserts is not counted);
* ``settle_s`` -- how long a broker set must have been whole (every replica up and linked to its peers and
  to every controller, no fault the checker cannot model) before its SyncStateSet is taken to hold every
  replica.  Under safe settings a slave that is up, linked and caught up is added back to the set; this is
  the time allowed for that.

Defaults are derived from the cluster's broker lease (``cluster.lease_timeout_ms``, 1000 ms by default,
:mod:`system_under_test.lease_timing`): ``write_resume_s = final_resume_s = LEASES * lease + MARGIN_S``
(2 x 1 s + 4 s = 6 s; 8 s for a 2-s lease) and ``settle_s = SETTLE_LEASES * lease + SETTLE_MARGIN_S``
(1 s + 2 s = 3 s); writes to the controllers never below :data:`CONTROLLER_BOUND_S`.
Why that much, for a correct cluster under safe settings, in the worst case of one failover:

* the controller sees a dead master's lease run out after one lease, its scan runs every eighth of a lease,
  and it re-elects at once (ElectMaster, applied in one Raft round trip, pushed to the brokers);
* a master cut off from the controllers serves until its own lease runs out and fences itself, so clients
  see errors from then; a paused (or, in simulation, silently dead) master holds the clients' sends until
  their timeout (3-5 s), and a worker starts nothing meanwhile;
* the clients find the new master after a failed send (one GetReplicaInfo), and a shrink of the
  SyncStateSet waits ``ha_max_time_slave_not_catchup_ms`` (3 s).

One lease plus these few seconds is what a correct cluster needs (measured on this cluster: 0.6-3.0 s for a
killed, paused, isolated or controller-cut master at a 2-s lease; 1.0 s for a killed master at 1 s, and 5.1 s
in simulation where the clients' sends to the dead master waited out their 5-s timeout; docs/anomalies.md,
``unavailable``).  The margin is mostly those lease-independent timeouts, so the bound cannot shrink with the
lease much further: ``3 x lease + 2 s`` (5 s at 1 s) called correct simulated runs unavailable.  A failover
that waits several leases is outside the bound at a 2-s lease (the ``slow-failover`` bug: six, 12 s), but at a
1-s lease six leases (5.9 s measured) are about what the clients' timeouts cost anyway: that bug's test runs at a
2-s lease (docs/bugs.md).  A replica that returns is added back to the SyncStateSet within a second once caught
up (0.03-0.6 s measured), so one lease and two seconds of calm is ample to take the set as whole again.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CONTROLLER_BOUND_S", "EXPECTATION_KEYS", "LEASES", "MARGIN_S", "SETTLE_LEASES", "SETTLE_MARGIN_S",
    "ExpectationError", "Expectations", "default_bound_s", "default_settle_s", "resolve", "validate_options",
]

CONTROLLER_BOUND_S = 8.0
"""The least default ``write_resume_s`` for writes to the controllers (``controller-register``, ``broker-ids``):
their failover is a Raft election and the clients' request timeouts and retries, none of which follows the broker
lease, so their bound does not shrink with it.  8 s is the bound they were judged by at the old 2-s lease; a correct
simulated run (seed 1165 of the mutation bench's swarm search: a controller killed, the virtual broker sets'
writes refused for 7.0 s while the clients moved on) needed more than the 6 s a 1-s lease gives.  A spec's own
``write_resume_s`` applies to both paths."""
LEASES = 2.0  # leases in the default bound (see the module docstring)
MARGIN_S = 4.0  # seconds on top of them
SETTLE_LEASES = 1.0  # leases in the default settle time
SETTLE_MARGIN_S = 2.0
MAX_BOUND_S = 3600.0
EXPECTATION_KEYS = ("enabled", "write_resume_s", "final_resume_s", "settle_s")
_BOUNDS = ("write_resume_s", "final_resume_s", "settle_s")


class ExpectationError(ValueError):
    """A bad ``checker.availability`` option: ``key`` (under ``checker.availability``), the value, what is allowed."""

    def __init__(self, key: str, value: Any, allowed: str) -> None:
        super().__init__(f"checker.availability.{key}: got {value!r}; expected {allowed}")
        self.key, self.value, self.allowed = key, value, allowed


def default_bound_s(lease_timeout_ms: int) -> float:
    """``LEASES * lease + MARGIN_S`` in seconds: the default of every bound (see the module docstring)."""
    if isinstance(lease_timeout_ms, bool) or not isinstance(lease_timeout_ms, int) or lease_timeout_ms <= 0:
        raise ExpectationError("lease_timeout_ms", lease_timeout_ms, "a positive number of milliseconds")
    return round(LEASES * lease_timeout_ms / 1000.0 + MARGIN_S, 3)


def default_settle_s(lease_timeout_ms: int) -> float:
    """``SETTLE_LEASES * lease + SETTLE_MARGIN_S`` in seconds: the default ``settle_s``."""
    default_bound_s(lease_timeout_ms)  # the same check of the lease
    return round(SETTLE_LEASES * lease_timeout_ms / 1000.0 + SETTLE_MARGIN_S, 3)


def _bound(key: str, value: Any) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not 0 < value <= MAX_BOUND_S:
        raise ExpectationError(key, value, f"a number of seconds in (0, {MAX_BOUND_S:g}]")
    return float(value)


def validate_options(raw: Any) -> dict[str, Any]:
    """The spec's ``checker.availability`` mapping, checked and cleaned (missing keys stay missing).

    Raises:
        ExpectationError: an unknown key (naming the known ones), a non-boolean ``enabled`` or a bound that is
            not a positive number of seconds.
    """
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ExpectationError("", raw, f"a mapping with keys {list(EXPECTATION_KEYS)}")
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in EXPECTATION_KEYS:
            raise ExpectationError(str(key), value, f"a known key; known: {list(EXPECTATION_KEYS)}")
        if key == "enabled":
            if not isinstance(value, bool):
                raise ExpectationError(key, value, "true or false")
            out[key] = value
        else:
            out[key] = _bound(key, value)
    return out


@dataclass(frozen=True, slots=True)
class Expectations:
    """The resolved bounds (seconds) and where their defaults came from (``lease_timeout_ms``)."""

    write_resume_s: float
    final_resume_s: float
    settle_s: float
    lease_timeout_ms: int
    derived: tuple[str, ...] = ()  # the keys that took the lease-derived default
    controller_write_resume_s: float | None = None  # writes to the controllers (None: write_resume_s)

    def __post_init__(self) -> None:
        for key in _BOUNDS:
            _bound(key, getattr(self, key))
        if self.controller_write_resume_s is not None:
            _bound("write_resume_s", self.controller_write_resume_s)

    def write_bound_s(self, to_controllers: bool) -> float:
        """The write bound of a path: the broker sets' ``write_resume_s``, or the controllers' (see
        :data:`CONTROLLER_BOUND_S`)."""
        if to_controllers and self.controller_write_resume_s is not None:
            return self.controller_write_resume_s
        return self.write_resume_s

    def to_dict(self) -> dict[str, Any]:
        return {"write_resume_s": self.write_resume_s, "controller_write_resume_s": self.write_bound_s(True),
                "final_resume_s": self.final_resume_s, "settle_s": self.settle_s,
                "lease_timeout_ms": self.lease_timeout_ms, "derived_from_lease": list(self.derived)}

    def describe(self) -> str:
        how = f" (defaults from lease {self.lease_timeout_ms} ms: {', '.join(self.derived)})" if self.derived else ""
        ctl = self.write_bound_s(True)
        to_ctl = f" ({ctl:g} s for writes to the controllers)" if ctl != self.write_resume_s else ""
        return (f"writes resume within {self.write_resume_s:g} s{to_ctl} under a fault that leaves a quorum and an "
                f"in-sync replica; every workload within {self.final_resume_s:g} s of the final heal; settle "
                f"{self.settle_s:g} s{how}")


def resolve(options: Mapping[str, Any], *, lease_timeout_ms: int) -> Expectations | None:
    """The expectations of a run: ``options`` (validated by :func:`validate_options`) over the lease-derived
    defaults; None when ``enabled`` is false.

    Raises:
        ExpectationError: as :func:`validate_options`, or a lease that is not a positive integer.
    """
    clean = validate_options(options)
    if not clean.get("enabled", True):
        return None
    default = default_bound_s(lease_timeout_ms)
    derived = tuple(k for k in _BOUNDS if k not in clean)
    defaults = {"write_resume_s": default, "final_resume_s": default, "settle_s": default_settle_s(lease_timeout_ms)}
    controllers = clean["write_resume_s"] if "write_resume_s" in clean else max(default, CONTROLLER_BOUND_S)
    return Expectations(**{k: clean.get(k, defaults[k]) for k in _BOUNDS}, lease_timeout_ms=lease_timeout_ms,
                        derived=derived, controller_write_resume_s=controllers)
