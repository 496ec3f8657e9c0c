"""The ``controller-register`` workload's requests, what each reply means to it, and the choice of its next op.

Why a core.  Two clients run this workload: the real one (``workloads/controller_register.py``, an asyncio shell
and a generator) and the simulated one (``system_under_test/sim/admin.py``'s ``SimRegister``).  Both draw the
next op with :func:`register_op`, learn from an ok op with :func:`register_seen`, build each request here and
turn each reply into the op's value here -- so an op is the same request and a reply the same history value in
a real run and in a simulated one, and the same ``ControllerMetadata`` linearizability check
(``workloads/models.py``) judges both.  The virtual brokers' registration and heartbeats (the workload's setup)
are built here for the same reason.

Words.  A *state* of a broker set is ``(master_id, master_epoch, sync_state_set, sync_state_set_epoch)`` with the
set a sorted tuple -- the model's ``MetaState``.  ``seen`` maps a set to the last distinct states ok ops
observed, oldest first (at most :data:`KEEP_STATES`).  A *pinned* alter sends epochs it observed earlier and
knows are superseded (a correct controller must fence it); a *fresh* one reads the master and epochs inside the
op (:func:`alter_sent`).

Pure: no clock, no I/O; randomness arrives as an argument.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from system_under_test.client.workload_requests import Call
from system_under_test.protocol.codes import RequestCode

if TYPE_CHECKING:
    import random

__all__ = [
    "BROKER_SETS", "ELECT_FRACTION", "FOLLOWER_READ_FRACTION", "HEARTBEAT_INTERVAL_MS", "INITIAL_STATE",
    "KEEP_STATES", "META_KEYS", "READ_FRACTION", "REGISTER_FS", "REPLICAS", "STALE_ALTER_FRACTION", "MetaState",
    "alter_call", "alter_sent", "alter_value", "elect_call", "elect_value", "meta_fields", "meta_read_value",
    "observed_state", "register_broker_call", "register_op", "register_seen", "set_names", "stale_state",
    "virtual_addr",
]

MetaState = tuple[int | None, int, tuple[int, ...], int]
"""(master_id, master_epoch, sync_state_set, sync_state_set_epoch)."""

INITIAL_STATE: MetaState = (1, 1, (1,), 1)
"""The state the workload's setup establishes (first election of broker 1) and verifies before the test."""

REGISTER_FS = frozenset({"read", "elect", "alter"})
META_KEYS = ("master_id", "master_epoch", "sync_state_set", "sync_state_set_epoch")

BROKER_SETS = 2
REPLICAS = 3
READ_FRACTION = 0.5
ELECT_FRACTION = 0.15
STALE_ALTER_FRACTION = 0.3
FOLLOWER_READ_FRACTION = 0.5
"""The workload's default options (``RegisterOptions``): sets, replicas per set, the op mix (the rest are
alters), the share of alters pinned to stale epochs, the share of reads sent to a named controller."""

HEARTBEAT_INTERVAL_MS = 250
"""How often the virtual brokers heartbeat every controller."""

KEEP_STATES = 6
"""Observed states remembered per set (stale alters pick from the older ones)."""

_IN_SET_ELECT = 0.7  # share of elections that designate a non-master member of the last observed set


def set_names(n: int) -> tuple[str, ...]:
    """The virtual broker sets ``vreg-0 .. vreg-(n-1)`` (they never collide with real ``broker-i`` sets)."""
    return tuple(f"vreg-{i}" for i in range(n))


def virtual_addr(set_index: int, replica: int) -> str:
    """The made-up address of virtual broker ``replica`` (0-based) of set ``set_index`` (no broker listens)."""
    return f"10.254.{set_index}.{replica + 1}:10911"


# ---------------------------------------------------------------------------------------------
# Requests


def register_broker_call(cluster_name: str, broker_set: str, broker_id: int, broker_addr: str, incarnation_id: str,
                         cluster_id: str | None) -> Call:
    """RegisterBroker: the last step of a broker's registration (after GetNextBrokerId and ApplyBrokerId)."""
    return RequestCode.CONTROLLER_REGISTER_BROKER, {
        "cluster_name": cluster_name, "broker_name": broker_set, "broker_id": broker_id, "broker_addr": broker_addr,
        "incarnation_id": incarnation_id, "cluster_id": cluster_id}


def elect_call(broker_set: str, broker_id: int | None, *, designate: bool, cluster_name: str | None) -> Call:
    """Admin ElectMaster of ``broker_set``: ``designate`` asks for ``broker_id`` itself (the ``elect`` op); without
    it the id is the requester (the setup's first election of broker 1)."""
    header: dict[str, Any] = {"broker_name": broker_set, "broker_id": broker_id, "designate": designate}
    if cluster_name:
        header["cluster_name"] = cluster_name
    return RequestCode.CONTROLLER_ELECT_MASTER, header


def alter_sent(v: Mapping[str, Any], info: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What an ``alter`` op ``v`` sends: a pinned one its own master and epochs; a fresh one the master and epochs
    of ``info`` (a GetReplicaInfo answer read inside the op) and its set plus that master.  None: a fresh alter
    whose set has no master (or no answer): nothing to alter on behalf of."""
    if "master_epoch" in v:
        return {"master_id": v["master_id"], "master_epoch": v["master_epoch"],
                "sync_state_set": sorted(v["sync_state_set"]), "sync_state_set_epoch": v["sync_state_set_epoch"]}
    if info is None or info.get("master_id") is None:
        return None
    return {"master_id": info["master_id"], "master_epoch": info["master_epoch"],
            "sync_state_set": sorted(set(v["sync_state_set"]) | {info["master_id"]}),
            "sync_state_set_epoch": info["sync_state_set_epoch"]}


def alter_call(cluster_name: str, broker_set: str, sent: Mapping[str, Any]) -> Call:
    """AlterSyncStateSet on behalf of the master named in ``sent`` (:func:`alter_sent`)."""
    return RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, {"cluster_name": cluster_name, "broker_name": broker_set,
                                                         **sent}


# ---------------------------------------------------------------------------------------------
# Replies -> values (a SUCCESS reply's header; any other code is an error the caller records)


def meta_fields(reply: Mapping[str, Any]) -> dict[str, Any]:
    """The four fields of a GetReplicaInfo (or ElectMaster) answer the model reads."""
    return {k: reply.get(k) for k in META_KEYS}


def meta_read_value(v: Mapping[str, Any], header: Mapping[str, Any]) -> dict[str, Any]:
    """``read`` ok: the invoke's value plus the state the answer shows."""
    return {**v, **meta_fields(header)}


def elect_value(v: Mapping[str, Any], header: Mapping[str, Any]) -> dict[str, Any]:
    """``elect`` ok: the invoke's value plus the reply's fields under ``reply``."""
    return {**v, "reply": meta_fields(header)}


def alter_value(v: Mapping[str, Any], sent: Mapping[str, Any], header: Mapping[str, Any]) -> dict[str, Any]:
    """``alter`` ok: the invoke's value, what was sent, and the new set epoch the controller reported."""
    return {**v, "sent": dict(sent), "new_sync_state_set_epoch": header.get("new_sync_state_set_epoch")}


# ---------------------------------------------------------------------------------------------
# The next op, and what an ok op taught


def register_op(rng: random.Random, sets: Sequence[str], controllers: Sequence[str],
                seen: Mapping[str, tuple[MetaState, ...]], *, replicas: int = REPLICAS,
                read_fraction: float = READ_FRACTION, elect_fraction: float = ELECT_FRACTION,
                stale_alter_fraction: float = STALE_ALTER_FRACTION,
                follower_read_fraction: float = FOLLOWER_READ_FRACTION) -> tuple[str, dict[str, Any]]:
    """The next op ``(f, value)`` on one of ``sets``:

    * ``read`` ``{"broker_set", "via"}`` -- ``via`` None (the leader) or, ``follower_read_fraction`` of the time,
      one of ``controllers`` by name;
    * ``elect`` ``{"broker_set", "broker_id"}`` -- mostly a non-master member of the last observed set (so
      elections often succeed), otherwise any replica ``1..replicas`` (a correct controller may refuse it);
    * ``alter`` ``{"broker_set", "sync_state_set"}`` (fresh) or, ``stale_alter_fraction`` of the time when
      ``seen`` holds a superseded state of the current master, pinned to that state's master and epochs."""
    name = sets[rng.randrange(len(sets))]
    r = rng.random()
    if r < read_fraction:
        via = None
        if controllers and rng.random() < follower_read_fraction:
            via = controllers[rng.randrange(len(controllers))]
        return "read", {"broker_set": name, "via": via}
    if r < read_fraction + elect_fraction:
        target = 1 + rng.randrange(replicas)
        states = seen.get(name, ())
        if states and rng.random() < _IN_SET_ELECT:
            master, _, sss, _ = states[-1]
            candidates = [i for i in sss if i != master]
            if candidates:
                target = candidates[rng.randrange(len(candidates))]
        return "elect", {"broker_set": name, "broker_id": target}
    members = [i for i in range(1, replicas + 1) if rng.random() < 0.5]
    value: dict[str, Any] = {"broker_set": name, "sync_state_set": members}
    stale = stale_state(seen.get(name, ()))
    if stale is not None and rng.random() < stale_alter_fraction:
        master, epoch, _, set_epoch = stale
        value = {"broker_set": name, "sync_state_set": sorted(set(members) | {master}), "master_id": master,
                 "master_epoch": epoch, "sync_state_set_epoch": set_epoch}
    return "alter", value


def stale_state(states: Sequence[MetaState]) -> MetaState | None:
    """The newest of ``states`` (oldest first) that is older than the last and has the same, non-None master --
    so a pinned alter's master is right and only its epochs are stale; None if there is none."""
    if len(states) < 2:
        return None
    latest = states[-1]
    older = [s for s in states[:-1] if s[0] == latest[0] and s[0] is not None and s != latest]
    return older[-1] if older else None


def _state(value: Mapping[str, Any]) -> MetaState | None:
    if any(k not in value for k in META_KEYS):
        return None
    master, sss = value["master_id"], value["sync_state_set"]
    if (master is not None and type(master) is not int) or not isinstance(sss, list | tuple) \
            or not all(type(i) is int for i in sss):
        return None
    try:
        return master, int(value["master_epoch"]), tuple(sorted(set(sss))), int(value["sync_state_set_epoch"])
    except (TypeError, ValueError):
        return None


def observed_state(f: Any, value: Any) -> MetaState | None:
    """The state an ok op of ``f`` with ``value`` observed: a read's answer, an ok alter's sent state with the
    next set epoch, an ok elect's reply; None if it observed none (or the value has another shape)."""
    if not isinstance(value, Mapping):
        return None
    if f == "read":
        return _state(value)
    if f == "alter" and isinstance(value.get("sent"), Mapping):
        sent = _state(value["sent"])
        return None if sent is None else (sent[0], sent[1], sent[2], sent[3] + 1)
    if f == "elect" and isinstance(value.get("reply"), Mapping):
        return _state(value["reply"])
    return None


def register_seen(seen: Mapping[str, tuple[MetaState, ...]], f: Any, value: Any
                  ) -> dict[str, tuple[MetaState, ...]] | None:
    """What an ok op taught: the new ``seen`` (the observed state appended to its set's, the last
    :data:`KEEP_STATES` kept), or None if nothing new (no state observed, or the same as the last)."""
    state = observed_state(f, value)
    if state is None:
        return None
    name = str(value.get("broker_set"))
    states = seen.get(name, ())
    if states and states[-1] == state:
        return None
    return {**seen, name: (*states, state)[-KEEP_STATES:]}
