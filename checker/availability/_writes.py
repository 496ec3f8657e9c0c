"""Which client ops are *writes*, per workload, and what a write needs to succeed: the one table.

:data:`WORKLOAD_OPS` maps a workload name (``workloads.registry``) to its op ``fs`` (the same set the workload's
client handles; ``tests/unit/checker_availability`` checks every registered workload against it), the fs that
are writes, and the *write path*: what must be reachable for a write to succeed.

* ``broker-set`` -- the write goes to one broker set's master (a queue ``send``): it needs a controller quorum
  (to fence and re-elect, and to shrink the SyncStateSet) and an electable in-sync replica of that set; the
  set is named by the op's queue (``topic/broker-N/queue-id``).
* ``controllers`` -- the write is a controller request (ElectMaster, AlterSyncStateSet, ApplyBrokerId on the
  workloads' virtual broker sets, whose leases the harness keeps alive): it needs a controller quorum only.

A workload without writes (``membership``: lifecycle ops whose refusals are their point) is not judged on
writes; all its ops still count after the final heal.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

__all__ = ["BROKER_SET", "CONTROLLERS", "WORKLOAD_OPS", "WorkloadOps", "WritePath", "broker_set_of", "owner_of"]


class WritePath(Enum):
    BROKER_SET = "broker-set"
    CONTROLLERS = "controllers"


BROKER_SET, CONTROLLERS = WritePath.BROKER_SET, WritePath.CONTROLLERS


@dataclass(frozen=True, slots=True)
class WorkloadOps:
    """One workload's ops: every ``f`` its client handles, the writes among them and what a write needs."""

    fs: frozenset[str]
    writes: frozenset[str]
    path: WritePath | None
    why: str  # why these are its writes, for the docs and the checker's stats

    def __post_init__(self) -> None:
        if not self.writes <= self.fs:
            raise ValueError(f"WorkloadOps: writes {sorted(self.writes - self.fs)} are not among fs {sorted(self.fs)}")
        if (self.path is None) != (not self.writes):
            raise ValueError(f"WorkloadOps: a path is needed exactly when there are writes (writes "
                             f"{sorted(self.writes)}, path {self.path})")


WORKLOAD_OPS: Mapping[str, WorkloadOps] = {
    "queue": WorkloadOps(
        frozenset({"send", "poll", "commit", "drain"}), frozenset({"send"}), BROKER_SET,
        "a send appends to the queue's broker set (commit only stores a consumer's position)"),
    "controller-register": WorkloadOps(
        frozenset({"read", "elect", "alter"}), frozenset({"elect", "alter"}), CONTROLLERS,
        "ElectMaster and AlterSyncStateSet change the controller's metadata (a refusal is a definite answer)"),
    "broker-ids": WorkloadOps(
        frozenset({"next-id", "apply-id", "read-ids", "crash-broker", "start-broker", "stop-broker", "read-table"}),
        frozenset({"apply-id"}), CONTROLLERS,
        "ApplyBrokerId is the allocator's write (the lanes' crash/start/stop are process lifecycle, not writes)"),
    "membership": WorkloadOps(
        frozenset({"bounce", "leave", "stale-heartbeat", "pause-write", "read-members"}), frozenset(), None,
        "lifecycle ops on extra brokers, most of them meant to be refused: no writes to judge"),
    "register": WorkloadOps(
        frozenset({"read", "write", "cas"}), frozenset(), None,
        "another system's registers (systems/): what a write needs there (a quorum of its members) has no reach "
        "model yet, so its writes are not judged while faults hold; its ops still count after the final heal"),
    "generic-queue": WorkloadOps(
        frozenset({"send", "poll", "drain"}), frozenset(), None,
        "another system's queues (systems/): what a send needs there (its master, a quorum of sentinels ...) has no "
        "reach model yet, so its sends are not judged while faults hold; its ops still count after the final heal"),
    "counter": WorkloadOps(
        frozenset({"add", "read"}), frozenset(), None,
        "the self-test's counter service (systems/counter/), one unreplicated process per node: an add needs only "
        "its own node, which has no reach model yet, so its adds are not judged while faults hold"),
}


def owner_of(f: str, among: Iterable[str] | None = None) -> str | None:
    """The workload of ``among`` (default: every workload in the table, in its order) whose client handles ``f``
    (None: none does).  Two workloads may share an ``f`` (``read``: ``controller-register`` and ``register``) but
    never in one run -- the harness refuses a spec whose workloads' fs overlap -- so a run names ``among``."""
    for name in WORKLOAD_OPS if among is None else among:
        ops = WORKLOAD_OPS.get(name)
        if ops is not None and f in ops.fs:
            return name
    return None


def broker_set_of(value: Any) -> int | None:
    """The broker set index a queue op's value names (``{"queue": "topic/broker-N/q"}`` -> N), else None."""
    queue = value.get("queue") if isinstance(value, Mapping) else None
    if not isinstance(queue, str) or queue.count("/") < 2:
        return None
    name = queue.rsplit("/", 2)[1]
    digits = name.removeprefix("broker-")
    return int(digits) if digits != name and digits.isdigit() else None
