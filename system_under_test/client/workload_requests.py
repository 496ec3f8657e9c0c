"""The controller requests of the ``broker-ids`` and ``membership`` workloads, and what each reply means to them.

Why a core.  Two clients send these ops: the real workload clients (asyncio shells in ``workloads/``) and the
simulated ones (``system_under_test/sim/admin.py``).  Both build the request here and turn the reply into the
op's value here, so an op is the same request, and a reply the same history value, in a real run and in a
simulated one -- and the same checkers (``IdAllocator`` linearizability, ``stale-epoch-accepted``) judge both.
A ``leave`` (controlled shutdown) is no single request: its value is built from what the client read around the
shutdown (:func:`leave_record`), here for the same reason (``shutdown-kept-mastership`` judges it).
The allocator ops' choice of the next op (:func:`alloc_op`, :func:`alloc_seen`) and the membership workload's
choice of its next lifecycle op (:func:`lifecycle_op`) are here for the same reason: the workloads' generators
and the simulated clients draw their ops with them.

Words.  A *call* is ``(request code, header)``.  A *value* is what an ok completion records (the invoke's value
plus what the reply said).  A value function returns None when the reply is an error the op does not expect:
the caller records it as ``fail`` if the code is definite (``protocol.codes.is_definite``) or the op only
reads, else ``info`` -- the real client by raising the ``RpcError``, the simulated one from the code.

Pure: no clock, no I/O; randomness arrives as an argument.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from system_under_test.protocol.codes import RequestCode, ResponseCode

if TYPE_CHECKING:
    import random

__all__ = [
    "ALLOC_APPLY_FRACTION", "ALLOC_READ_FRACTION", "ALLOC_READ_FS", "Call", "PAUSE_WRITE_FRACTION", "alloc_op",
    "alloc_seen", "apply_id_addr", "apply_id_call", "apply_id_value", "heartbeat_call", "leave_record", "lifecycle_op",
    "next_id_call", "next_id_value", "read_value", "replica_info_call", "stale_heartbeat_call", "stale_heartbeat_value",
]

Call = tuple[RequestCode, dict[str, Any]]
"""A request: its code and header (no body)."""

ALLOC_APPLY_FRACTION = 0.45
ALLOC_READ_FRACTION = 0.15
"""The allocator ops' default mix: apply-id, reads (the rest is next-id)."""

PAUSE_WRITE_FRACTION = 0.2
"""The membership workload's default share of ``pause-write`` lifecycle ops (its ``pause_write_fraction``
option), which the simulated membership client draws with too."""

ALLOC_READ_FS = frozenset({"next-id", "read-ids", "read-table", "read-members"})
"""Ops that only read: a failed one is ``fail`` whatever the code."""

_SUCCESS = int(ResponseCode.SUCCESS)
_MEMBER_KEYS = ("master_id", "master_addr", "master_epoch", "sync_state_set_epoch")


# ---------------------------------------------------------------------------------------------
# Requests


def next_id_call(cluster_name: str, broker_set: str) -> Call:
    """GetNextBrokerId of ``broker_set``."""
    return RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, {"cluster_name": cluster_name, "broker_name": broker_set}


def apply_id_addr(broker_id: int) -> str:
    """The address an allocator op claims with: made up, unique per id mod 250 (no broker listens on it)."""
    return f"10.253.{broker_id % 250}.1:10911"


def apply_id_call(cluster_name: str, broker_set: str, broker_id: int, register_code: str, broker_addr: str) -> Call:
    """ApplyBrokerId: claim ``broker_id`` of ``broker_set`` under ``register_code``."""
    return RequestCode.CONTROLLER_APPLY_BROKER_ID, {
        "cluster_name": cluster_name, "broker_name": broker_set, "broker_id": broker_id,
        "register_code": register_code, "broker_addr": broker_addr}


def replica_info_call(broker_name: str) -> Call:
    """GetReplicaInfo of ``broker_name`` (its master, epochs, SyncStateSet and members)."""
    return RequestCode.CONTROLLER_GET_REPLICA_INFO, {"broker_name": broker_name}


def heartbeat_call(cluster_name: str, broker_set: str, broker_id: int, broker_addr: str, broker_epoch: int,
                   lease_ms: int) -> Call:
    """A BROKER_HEARTBEAT of a broker that holds no data: its broker epoch and lease, no master epoch, no offsets
    (the ``controller-register`` workload's virtual brokers keep their leases alive with it)."""
    return RequestCode.BROKER_HEARTBEAT, {
        "cluster_name": cluster_name, "broker_name": broker_set, "broker_id": broker_id, "broker_addr": broker_addr,
        "broker_epoch": broker_epoch, "master_epoch": 0, "max_offset": 0, "confirm_offset": 0,
        "heartbeat_timeout_ms": lease_ms}


def stale_heartbeat_call(cluster_name: str, broker_set: str, broker_id: int, broker_addr: str, stale_epoch: int,
                         lease_ms: int) -> Call:
    """A BROKER_HEARTBEAT as a zombie of an earlier incarnation would send it: its old broker epoch, no master
    epoch, no offsets.  A fencing controller refuses it with STALE_BROKER_EPOCH."""
    return heartbeat_call(cluster_name, broker_set, broker_id, broker_addr, stale_epoch, lease_ms)


# ---------------------------------------------------------------------------------------------
# Replies -> values


def next_id_value(v: Mapping[str, Any], header: Mapping[str, Any]) -> dict[str, Any]:
    """``next-id`` ok: the controller's next id (a SUCCESS reply's header)."""
    return {**v, "next_broker_id": int(header["next_broker_id"])}


def apply_id_value(v: Mapping[str, Any], code: int, message: str) -> dict[str, Any] | None:
    """``apply-id``: SUCCESS is applied, CONTROLLER_BROKER_ID_INVALID a refusal (an ok op: the allocator's answer);
    any other code is None (an error, see the module docstring)."""
    if code == _SUCCESS:
        return {**v, "applied": True}
    if code == ResponseCode.CONTROLLER_BROKER_ID_INVALID:
        return {**v, "applied": False, "reason": message[:200]}
    return None


def read_value(f: str, v: Mapping[str, Any], code: int, header: Mapping[str, Any], body: Any
               ) -> dict[str, Any] | None:
    """A GetReplicaInfo read as op ``f``: ``read-ids`` (the member ids), ``read-table`` (members, master and
    epochs) or ``read-members`` (master and epochs).  An unknown broker set has no members (``read-ids`` and
    ``read-table``); any other error is None."""
    if code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST and f != "read-members":
        header, body = {}, {"brokers": []}
    elif code != _SUCCESS:
        return None
    if f == "read-members":
        return {**v, **{k: header.get(k) for k in _MEMBER_KEYS}}
    brokers = [[int(i), str(a)] for i, a in (body or {}).get("brokers", [])]
    if f == "read-ids":
        return {**v, "ids": sorted(i for i, _ in brokers)}
    return {**v, "brokers": brokers, "master_id": header.get("master_id"), "master_epoch": header.get("master_epoch"),
            "sync_state_set_epoch": header.get("sync_state_set_epoch")}


def stale_heartbeat_value(v: Mapping[str, Any], broker_id: int, stale_epoch: int, current_epoch: int, code: int
                          ) -> dict[str, Any] | None:
    """``stale-heartbeat``: accepted (SUCCESS) or refused (STALE_BROKER_EPOCH); any other code is None."""
    if code == _SUCCESS:
        refused = False
    elif code == ResponseCode.STALE_BROKER_EPOCH:
        refused = True
    else:
        return None
    return {**v, "broker_id": broker_id, "stale_epoch": stale_epoch, "current_epoch": current_epoch,
            "refused": refused}


def leave_record(mine: Mapping[str, Any], before: Mapping[str, Any], after: Mapping[str, Any], *, exited: bool,
                 others: int) -> dict[str, Any]:
    """The value a ``leave`` adds (pure): ``mine`` is the leaving process's runtime info ({} if it did not answer),
    ``before``/``after`` the controller's GetReplicaInfo before the SIGTERM and after the exit.

    ``was_master`` needs an id on both sides: a process that reported no broker id (still registering, or not
    answering) was not the master, even when the set had no master either (None == None is no evidence).
    """
    broker_id = mine.get("broker_id")
    broker_id = broker_id if isinstance(broker_id, int) and not isinstance(broker_id, bool) else None
    master_before = before.get("master_id")
    return {"broker_id": broker_id, "master_before": master_before,
            "was_master": broker_id is not None and master_before == broker_id,
            "exited": exited, "others": others, "master_after": after.get("master_id"),
            "master_epoch_after": after.get("master_epoch")}


# ---------------------------------------------------------------------------------------------
# The next op


def alloc_op(rng: random.Random, virtual: Sequence[str], real: Sequence[str], seen: Mapping[str, int],
             claims: Sequence[tuple[str, int, str]], n: int, *, apply_fraction: float, read_fraction: float
             ) -> tuple[str, dict[str, Any]]:
    """The next allocator op ``(f, value)`` on the virtual broker sets ``virtual`` (``read-table`` of a ``real``
    set sometimes, if any).

    ``apply-id`` applies the next id seen (``seen``: per set the highest next id observed), an id above it (a
    gap), the id below it (stale) or, one time in ten, one of this client's own ``claims`` again; ``n`` makes
    each register code unique.  A correct allocator refuses the stale ids and any id but 1 of a new set, and
    moves its next id past a gap -- the cases the ``reuse-broker-id`` bug gets wrong."""
    r = rng.random()
    if r < read_fraction:
        if real and rng.random() < 0.5:
            return "read-table", {"broker_name": rng.choice(real)}
        return "read-ids", {"broker_set": rng.choice(virtual)}
    name = rng.choice(virtual)
    if r < read_fraction + apply_fraction:
        nxt = seen.get(name, 1)
        mine = [c for c in claims if c[0] == name]
        choice = rng.random()
        if mine and choice < 0.1:
            _, bid, code = rng.choice(mine)
        else:
            bid = max(1, nxt - 1) if choice < 0.25 else nxt + rng.choice((0, 0, 0, 1, 2))
            code = f"vid-{name}-{n}-{rng.getrandbits(24):06x}"
        return "apply-id", {"broker_set": name, "broker_id": bid, "register_code": code}
    return "next-id", {"broker_set": name}


def alloc_seen(seen: Mapping[str, int], claims: tuple[tuple[str, int, str], ...], f: Any, v: Mapping[str, Any]
               ) -> tuple[dict[str, int], tuple[tuple[str, int, str], ...]] | None:
    """What an ok allocator op taught the client: the new ``(seen, claims)``, or None if nothing (the last 32
    claims are kept)."""
    if f == "next-id" and isinstance(v.get("next_broker_id"), int):
        out = dict(seen)
        out[v["broker_set"]] = max(out.get(v["broker_set"], 1), v["next_broker_id"])
        return out, claims
    if f == "apply-id" and v.get("applied"):
        out = dict(seen)
        out[v["broker_set"]] = max(out.get(v["broker_set"], 1), int(v["broker_id"]) + 1)
        claim = (str(v["broker_set"]), int(v["broker_id"]), str(v["register_code"]))
        return out, claims if claim in claims else (*claims, claim)[-32:]
    return None


def lifecycle_op(rng: random.Random, slots: Sequence[str], stale_next: str | None, bounced: bool, *,
                 pause_write_fraction: float, bounce_fraction: float = 0.6) -> tuple[str, dict[str, Any]]:
    """The membership workload's next lifecycle op ``(f, value)``: after a ``bounce`` or ``leave`` of a slot
    (``stale_next``), a ``stale-heartbeat`` replaying that slot's previous broker epoch; a ``bounce`` first (so
    even a short run has one); then ``pause-write`` (``pause_write_fraction``), ``bounce`` or ``leave``."""
    slot = rng.choice(slots)
    if stale_next is not None:
        return "stale-heartbeat", {"slot": stale_next}
    if not bounced:
        return "bounce", {"slot": slot}
    if rng.random() < pause_write_fraction:
        return "pause-write", {}
    return ("bounce" if rng.random() < bounce_fraction else "leave"), {"slot": slot}
