"""Cluster invariants: broker ids, masters per epoch, epoch monotonicity, fencing and ApplyBrokerId.

Inputs are *observations*, normalised from two sources into ``Observation`` records:

1. **History ops** (ok completions; the invoke supplies the op's invoke time).  Value shapes::

       f "broker-id"          {"broker_name": BS, "node": N, "broker_id": I}       # N: stable broker identity
       f "metadata-snapshot"  {"broker_name": BS, "master_broker_id": I, "master_epoch": E,
       f "replica-info"        "sync_state_set": [I...], "sync_state_set_epoch": S,
                               "broker_epochs": {"<id>": BE, ...}, "observer": "c1"}  # observer optional
       f "apply-broker-id"    {"broker_name": BS, "broker_id": I, "register_code": RC}
       f "own-id-applied"     {"broker_name": BS, "node": N, "broker_id": I}   # N's own claim of I was applied
       f "send" (ok)          op "node": N; value {"queue": "topic/BS/qid", ..., "master_epoch": E (optional)}

   The observer of a history op is ``value["observer"]`` if given, else ``"p<process>"``.
2. **Node log events** (derived from node logs by the harness), one dict each::

       {"node": N, "event": "became-master", "broker_name": BS, "master_epoch": E, "broker_id": I, "time": T}
       {"node": N, "event": "fenced" | "unfenced", "broker_name": BS, "time": T}
       {"node": N, "event": "broker-id", "broker_name": BS, "broker_id": I, "time": T}
       {"node": N, "event": "broker-epoch", "broker_name": BS, "broker_id": I, "broker_epoch": BE, "time": T}
       {"node": N, "event": "accepted-write", "broker_name": BS, "master_epoch": E, "time": T}
       {"node": N, "event": "applied-broker-id", "broker_name": BS, "broker_id": I, "register_code": RC, "time": T}
       {"node": N, "event": "own-id-applied", "broker_name": BS, "broker_id": I, "register_code": RC, "time": T}

   ``time`` is ns since test start on the history's clock.  The observer of a log event is its node.

``broker_name`` names the broker set (RocketMQ's brokerName).  The checks and their violation types are in
``INVARIANT_TYPES``: broker ids unique per broker set and stable per broker; at most one master and one writer
per (broker set, master epoch); master, sync-state set and broker epochs never decrease per observer in real
time (below what the observer saw in ops that had completed before this one was invoked: overlapping ops may
complete in either order, ``_check.check_monotonic``); no write acknowledged by a broker already fenced or by a
master already superseded when the send was invoked; each ApplyBrokerId register code applied with at most one
id and each id with at most one register code; a broker whose own claim of an id was applied holds that id from
then on (``broker-id-leaked``); a broker's own lease never counts from later than the controller leader's record
of the heartbeat that renewed it (``lease-outlives-controller``: the two lease events, paired by heartbeat ``H``,
are written by the simulator, whose time axis is exact; a real run's node logs do not carry them,
docs/anomalies.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from checker.compose import Anomaly, Result, result_from_anomalies
from checker.invariants._check import CHECKS, EVENT_CHECKS, INVARIANT_TYPES
from checker.invariants._observations import (
    KINDS,
    Observation,
    ObservationError,
    observation_from_log_event,
    observations_from_history,
)

__all__ = [
    "INVARIANT_TYPES", "KINDS", "Observation", "ObservationError", "check_cluster_events", "check_invariants",
    "collect_observations", "log_events_from_cluster_events", "observation_from_log_event",
    "observations_from_history",
]


def collect_observations(history: Iterable[Any] = (), events: Iterable[Mapping[str, Any]] = ()) -> list[Observation]:
    """History ops then log events, normalised (see the module docstring for the shapes)."""
    obs = list(observations_from_history(history))
    obs.extend(observation_from_log_event(e) for e in events)
    return obs


def log_events_from_cluster_events(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The brokers' role events a real run's observer collected (``events.jsonl``, :mod:`harness.observe`) as log
    events in the shapes above: a ``registered`` event of a node becomes its ``broker-epoch`` (a new incarnation)
    and names the broker set and id of its later ``become-master`` events, which become ``became-master``.  A
    ``become-master`` before any registration of its node is skipped (its broker set is unknown).  Pure."""
    out: list[dict[str, Any]] = []
    known: dict[str, tuple[str, int]] = {}  # node -> (broker set, broker id) of its current incarnation
    for e in events:
        node, kind, t = e.get("node"), e.get("kind"), e.get("time")
        if not isinstance(node, str) or not isinstance(t, int):
            continue
        if kind == "registered" and isinstance(e.get("broker_name"), str) and isinstance(e.get("broker_id"), int):
            known[node] = (e["broker_name"], e["broker_id"])
            out.append({"node": node, "event": "broker-epoch", "broker_name": e["broker_name"],
                        "broker_id": e["broker_id"], "broker_epoch": e.get("broker_epoch"), "time": t})
        elif kind == "become-master" and node in known and isinstance(e.get("master_epoch"), int):
            name, broker_id = known[node]
            out.append({"node": node, "event": "became-master", "broker_name": name, "master_epoch": e["master_epoch"],
                        "broker_id": broker_id, "time": t})
    return out


def check_cluster_events(events: Iterable[Mapping[str, Any]]) -> Result:
    """The invariants a real run can check over its observer's broker events alone (:data:`EVENT_CHECKS`):
    ``role-reapplied``.  The other checks stay with the workloads, which feed them history ops."""
    obs = [observation_from_log_event(e) for e in log_events_from_cluster_events(events)]
    anomalies: dict[str, list[Anomaly]] = {}
    for check in EVENT_CHECKS:
        for a in check(obs):
            anomalies.setdefault(a.type, []).append(a)
    return result_from_anomalies(anomalies, stats={"broker_role_events": len(obs)})


def check_invariants(history: Iterable[Any] = (), events: Iterable[Mapping[str, Any]] = ()) -> Result:
    """Check every cluster invariant over history ops and node log events.

    Returns:
        A Result, invalid iff some invariant was violated; ``stats`` counts observations by kind.

    Raises:
        ObservationError: an input record without the documented shape (wrap in ``check_safe``).
    """
    obs = collect_observations(history, events)
    anomalies: dict[str, list[Anomaly]] = {}
    for check in CHECKS:
        for a in check(obs):
            anomalies.setdefault(a.type, []).append(a)
    by_kind: dict[str, int] = {}
    for o in obs:
        by_kind[o.kind] = by_kind.get(o.kind, 0) + 1
    return result_from_anomalies(anomalies, stats={"observations": len(obs), "by_kind": by_kind})
