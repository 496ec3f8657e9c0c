"""Our cluster's options: the spec's ``cluster:`` map of a ``system: splitbrain`` spec, and its bug table.

:func:`cluster_options` validates the map before anything starts (it is :meth:`SplitbrainSystem.options`, the
adapter's parser, :mod:`systems`); an unknown key or a bad value raises ``SpecError`` naming ``cluster.<key>``.
:data:`KNOWN_BUGS` lists the deliberate bugs (``cluster.bugs``, the nodes' ``--bug`` switches), split by the node
command that owns each (:data:`CONTROLLER_BUGS`, :data:`BROKER_BUGS`).  :data:`SAFE_DEFAULTS` are the options whose
defaults are the safe settings (the release gate's *safety* cells, :func:`harness.gate_outcome.cell_kind`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.errors import SpecError
from system_under_test.lease_timing import DEFAULT_LEASE_TIMEOUT_MS
from systems.options import VERSION_WHAT, check_version

__all__ = ["BROKER_BUGS", "CONTROLLER_BUGS", "KNOWN_BUGS", "SAFE_DEFAULTS", "STORE_FS", "ClusterOptions",
           "cluster_options"]

CONTROLLER_BUGS = frozenset({"stale-read", "no-epoch-fencing", "reuse-broker-id", "slow-failover"})
BROKER_BUGS = frozenset({"ack-before-replication", "non-atomic-meta"})
KNOWN_BUGS = CONTROLLER_BUGS | BROKER_BUGS


SAFE_DEFAULTS: Mapping[str, Any] = {"bugs": (), "enable_elect_unclean_master": False,
                                    "all_ack_in_sync_state_set": True}
"""The options whose defaults are the safe settings; any other value makes anomalies expected."""


@dataclass(frozen=True)
class ClusterOptions:
    """Options of the cluster under test (the spec's ``cluster:`` map).

    Attributes:
        cluster_name: cluster name of controllers and brokers.
        lease_timeout_ms: broker lease (KIP-631 session); shorter = faster failover, more fencing.
        enable_elect_unclean_master: allow electing a broker outside the SyncStateSet (unsafe).
        all_ack_in_sync_state_set: a send is acked only when every SyncStateSet member has it (safe).
        flush: ``sync`` (fsync before ack) or ``async``.
        dirty_recovery: ``raft`` lets a quorum restart after every controller was killed (the
            harness kills whole quorums on purpose); ``manual`` is the seed's strict rule.
        tick_interval_ms / election_ticks: controller Raft timing.
        bugs: deliberately broken behaviours (``--bug`` switches) for proving the checkers work.
        extra_controller_args / extra_broker_args: passed through verbatim.
        version: a label only (e.g. ``0.3.0-rc1``), never passed to the nodes: results.json records it as the
            run's ``cluster_version`` so the Spark warehouse and ``splitbrain spark gate`` can group runs by
            release (:mod:`harness.provenance`); without it the package version is recorded.
        store_fs: ``plain`` (the broker's store directory is a plain directory) or ``lazyfs``: each broker's store
            is mounted through the lazy file system (:mod:`nemesis.lazyfs`) before the broker starts, so writes
            not yet fsynced live only in its memory and ``lose-unfsynced`` really drops them (docs/nemeses.md,
            *Disks*).  Local backend only; :func:`harness.commands._parts.validate_spec` refuses it elsewhere.
        revision: a git revision of this repository whose cluster code the nodes run (``--sut-revision``), while
            clients, nemeses and checkers stay the harness's; None runs the harness's own checkout.  Resolved to
            a full sha and built before the run (:mod:`harness.revisions`, which also says how wire
            compatibility is checked); the resolved spec in ``test.yaml`` holds the sha.
    """

    cluster_name: str = "splitbrain"
    lease_timeout_ms: int = DEFAULT_LEASE_TIMEOUT_MS
    enable_elect_unclean_master: bool = False
    all_ack_in_sync_state_set: bool = True
    flush: str = "sync"
    dirty_recovery: str = "raft"
    tick_interval_ms: int = 50
    election_ticks: int = 4
    bugs: tuple[str, ...] = ()
    extra_controller_args: tuple[str, ...] = ()
    extra_broker_args: tuple[str, ...] = ()
    version: str | None = None
    revision: str | None = None
    store_fs: str = "plain"

    @property
    def unsafe_settings(self) -> tuple[str, ...]:
        """The options of :data:`SAFE_DEFAULTS` set away from their safe default (a planted bug, unclean
        elections, acks before every in-sync replica has the write): where anomalies are expected, so the release
        gate compares their rate instead of treating one as proof of a bug (:func:`harness.gate_outcome.cell_kind`)."""
        out = []
        for name, safe in SAFE_DEFAULTS.items():
            value = getattr(self, name)
            if (tuple(value) if isinstance(value, list | tuple) else value) != safe:
                out.append(name)
        return tuple(out)


STORE_FS = ("plain", "lazyfs")

_CHECKS: dict[str, tuple[type, str]] = {
    "cluster_name": (str, "1-64 chars of [A-Za-z0-9_.-]"),
    "lease_timeout_ms": (int, "100..600000"),
    "enable_elect_unclean_master": (bool, "true or false"),
    "all_ack_in_sync_state_set": (bool, "true or false"),
    "flush": (str, "sync or async"),
    "dirty_recovery": (str, "raft or manual"),
    "tick_interval_ms": (int, "5..1000"),
    "election_ticks": (int, "2..100"),
    "bugs": (list, "a list of bug names"),
    "extra_controller_args": (list, "a list of strings"),
    "extra_broker_args": (list, "a list of strings"),
    "version": (str, VERSION_WHAT),
    "revision": (str, "a git revision of this repository (a sha, tag, branch or e.g. HEAD~2)"),
    "store_fs": (str, "plain or lazyfs"),
}


def cluster_options(raw: Mapping[str, Any], *, file: str = "<spec>") -> ClusterOptions:
    """Validate the spec's ``cluster:`` map.

    Raises:
        SpecError: naming ``cluster.<key>``, the value and what is allowed.
    """
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "bugs" and isinstance(value, list):
            unknown = sorted(set(map(str, value)) - KNOWN_BUGS)
            if unknown:
                raise SpecError(file, "cluster.bugs", unknown, f"bug names from {sorted(KNOWN_BUGS)}")
        if key not in _CHECKS:
            raise SpecError(file, f"cluster.{key}", value, f"one of {sorted(_CHECKS)}")
        typ, allowed = _CHECKS[key]
        if typ is int and (type(value) is not int):
            raise SpecError(file, f"cluster.{key}", value, allowed)
        if typ is not int and not isinstance(value, typ):
            raise SpecError(file, f"cluster.{key}", value, allowed)
        values[key] = tuple(str(v) for v in value) if typ is list else value
    ranges = {"lease_timeout_ms": (100, 600_000), "tick_interval_ms": (5, 1000), "election_ticks": (2, 100)}
    for key, (lo, hi) in ranges.items():
        if key in values and not lo <= values[key] <= hi:
            raise SpecError(file, f"cluster.{key}", values[key], _CHECKS[key][1])
    if "revision" in values:
        from harness.revisions import RevisionError, parse_revision_text

        try:
            parse_revision_text(values["revision"], where="cluster.revision")
        except RevisionError:
            raise SpecError(file, "cluster.revision", values["revision"], _CHECKS["revision"][1]) from None
    if "version" in values:
        check_version(values["version"], file=file)
    if values.get("flush", "sync") not in ("sync", "async"):
        raise SpecError(file, "cluster.flush", values["flush"], "sync or async")
    if values.get("store_fs", "plain") not in STORE_FS:
        raise SpecError(file, "cluster.store_fs", values["store_fs"], _CHECKS["store_fs"][1])
    if values.get("dirty_recovery", "raft") not in ("raft", "manual"):
        raise SpecError(file, "cluster.dirty_recovery", values["dirty_recovery"], "raft or manual")
    return ClusterOptions(**values)
