"""ControllerConfig: the options of one controller node's pure core.

Every field documents what it does, what it trades off, and which other fields it constrains;
``__post_init__`` enforces those constraints and raises :class:`ConfigError` naming the field, the
value received and the allowed range.  :func:`ControllerConfig.critical_options` lists the options
that must be identical on every controller of a quorum (a leader change must not change the
semantics of elections or leases); the formation code compares them across peers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from system_under_test.controller.errors import ConfigError
from system_under_test.lease_timing import DEFAULT_LEASE_TIMEOUT_MS, scan_interval_for

_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")

LEASE_TIMEOUT_RANGE_MS = (100, 600_000)
SCAN_INTERVAL_RANGE_MS = (10, 60_000)


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    """Options of the controller core.

    Attributes:
        cluster_name: name of the cluster this controller quorum manages (1-64 chars of
            ``[A-Za-z0-9_.-]``).  Recorded with every broker set; must match on every controller.
        enable_elect_unclean_master: when True an election may pick a live broker *outside* the
            SyncStateSet if no set member is electable (RIP-44 ``enableElectUncleanMaster``).
            Trade-off: availability over durability -- the new master may lack committed messages,
            which are then lost.  Default False.  Critical: must match on every controller.
        lease_timeout_ms: KIP-631 session length granted to a broker when its heartbeat does not ask
            for one.  A broker whose last heartbeat is older than its lease is fenced by the leader's
            scan and, if it was master, replaced.  Shorter = faster failover but more spurious fencing
            under GC pauses / packet loss.  Range 100..600000; must exceed ``scan_interval_ms``.
            Critical: must match on every controller.
        scan_interval_ms: how often the leader runs :func:`scan` (fence expired leases, re-elect
            dead masters).  Detection delay is at most lease + scan interval.  Shorter = faster
            failover, more CPU.  Range 10..60000 and strictly less than ``lease_timeout_ms``.  The node's
            command line derives it from the lease (:func:`scan_interval_for`) unless given.
        notify_broker_role_changed: push NOTIFY_BROKER_ROLE_CHANGED to live brokers after an
            election (brokers also poll GetReplicaInfo, so False only delays role changes).
    """

    cluster_name: str
    enable_elect_unclean_master: bool = False
    lease_timeout_ms: int = DEFAULT_LEASE_TIMEOUT_MS
    scan_interval_ms: int = scan_interval_for(DEFAULT_LEASE_TIMEOUT_MS)
    notify_broker_role_changed: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.cluster_name, str) or not _NAME_RE.match(self.cluster_name):
            raise ConfigError(
                f"ControllerConfig.cluster_name must be 1-64 chars of [A-Za-z0-9_.-], got {self.cluster_name!r}"
            )
        for name in ("enable_elect_unclean_master", "notify_broker_role_changed"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ConfigError(f"ControllerConfig.{name} must be a bool (true/false), got {value!r}")
        _check_int_range("lease_timeout_ms", self.lease_timeout_ms, LEASE_TIMEOUT_RANGE_MS)
        _check_int_range("scan_interval_ms", self.scan_interval_ms, SCAN_INTERVAL_RANGE_MS)
        if self.scan_interval_ms >= self.lease_timeout_ms:
            raise ConfigError(
                f"ControllerConfig.scan_interval_ms={self.scan_interval_ms} must be < lease_timeout_ms="
                f"{self.lease_timeout_ms} (the scan must run at least once per lease); lower the interval"
            )

    def critical_options(self) -> dict[str, Any]:
        """Options that must be identical on every controller (compared by cluster formation)."""
        return {
            "cluster_name": self.cluster_name,
            "enable_elect_unclean_master": self.enable_elect_unclean_master,
            "lease_timeout_ms": self.lease_timeout_ms,
        }

    def describe(self) -> str:
        return (
            f"ControllerConfig(cluster={self.cluster_name} unclean={self.enable_elect_unclean_master} "
            f"lease={self.lease_timeout_ms}ms scan={self.scan_interval_ms}ms notify={self.notify_broker_role_changed})"
        )


def _check_int_range(name: str, value: Any, bounds: tuple[int, int]) -> None:
    lo, hi = bounds
    if type(value) is not int or not lo <= value <= hi:
        raise ConfigError(f"ControllerConfig.{name} must be an int in [{lo}, {hi}], got {value!r}")
