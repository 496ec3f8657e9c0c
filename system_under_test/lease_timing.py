"""The broker lease and the intervals derived from it: one home for the timing defaults every part shares.

The lease (KIP-631's session) bounds how long a controller trusts a broker it has not heard from, and how long a
broker trusts itself without a controller's reply.  Failure detection -- and so every failover -- takes about one
lease, so the lease is the first figure of failover time (bench/failover.py).  The controllers, the brokers, the
harness's cluster options, the simulator and the workloads that model a broker all start from
:data:`DEFAULT_LEASE_TIMEOUT_MS`; the heartbeat and scan intervals follow from the lease unless set.

Why 1 s (it was 2 s until 2026-11-28): cutting a master off from everyone had writes back at p99 2.14 s with a
2-s lease and 1.14 s with a 1-s lease, and a 10-minute healthy run under load at 1 s saw no master change and
no fencing (docs/broker.md, *Failover under a partition*).  Four heartbeats per lease leave three to lose before
a broker is declared dead.
"""

from __future__ import annotations

__all__ = ["DEFAULT_LEASE_TIMEOUT_MS", "heartbeat_interval_for", "scan_interval_for"]

DEFAULT_LEASE_TIMEOUT_MS = 1000

MAX_INTERVAL_MS = 500  # no derived interval is longer: a longer lease gains nothing from rarer heartbeats
MIN_INTERVAL_MS = 10


def heartbeat_interval_for(lease_timeout_ms: int) -> int:
    """How often a broker heartbeats when not told: a quarter of the lease, 10..500 ms."""
    return max(MIN_INTERVAL_MS, min(MAX_INTERVAL_MS, lease_timeout_ms // 4))


def scan_interval_for(lease_timeout_ms: int) -> int:
    """How often the controller leader scans leases when not told: an eighth of the lease, 10..500 ms.

    A master's failure is detected at most one scan after its lease runs out, so a fixed 500 ms added up to a
    quarter of a 2-s lease to every failover (bench/failover.py); the scan walks the lease table of every
    broker set, microseconds of work."""
    return max(MIN_INTERVAL_MS, min(MAX_INTERVAL_MS, lease_timeout_ms // 8))
