"""Request decisions of the leader controller: ``decide`` before commit, ``complete`` after.

Theory of operation
-------------------
RIP-44's controller computes, for every request, a response plus a list of events against the
leader's *current* in-memory state; the events are replicated through Raft and the state changes
only when they are applied.  This module is that computation, with no I/O:

1. The server calls ``decide(code, header, body, ctx)``.  It pre-validates the request exactly as
   the reference does (section 1.3 of the reference notes; KIP-380 broker epochs; KIP-631
   registrations, fencing and controlled shutdown) and returns a :class:`Decision`:
   ``(code, header, body, events)``.  Reads and refusals carry no events and are the final reply.
   ``decide`` also records broker liveness in the heartbeat manager (soft state) -- the server
   calls it for heartbeats on followers too, only to keep their lease tables warm.
2. If ``events`` is non-empty the server proposes them as ONE Raft entry, waits until it is
   committed and applied, then calls ``complete(decision, results, state)`` with the
   ``ApplyResult`` of each event.  Replies of writes depend on those results (the broker epoch is
   the entry's index; a pipelined event may have been rejected at apply time).

Rules: no clock (``ctx.now_ms``), no randomness; ``decide`` never mutates ``ctx.state``; a bad
header value raises ``ValueError`` (the server answers CONTROLLER_INVALID_REQUEST).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from system_under_test.controller.decision import (
    DecideContext,
    Decision,
    Reply3,
    cluster_name_of,
    epoch_matches,
    header_int,
    header_str,
    refuse,
    stale_epoch,
    unknown_broker,
)
from system_under_test.controller.elect_policy import elect
from system_under_test.controller.events import (
    AlterSyncStateSet,
    ApplyBrokerId,
    CleanBrokerData,
    ElectMaster,
)
from system_under_test.controller.membership import (
    decide_controlled_shutdown,
    decide_heartbeat,
    decide_register,
    electable_fn,
    heartbeat_reply,
    register_reply,
)
from system_under_test.controller.queries import (
    broker_epochs_body,
    replica_info_reply,
    sync_state_data_body,
)
from system_under_test.controller.state_machine import ApplyResult, ControllerState
from system_under_test.protocol.codes import RequestCode, ResponseCode

__all__ = ["DecideContext", "Decision", "complete", "decide"]

# Members used on every request, as module globals: ``RequestCode.X`` goes through EnumType's
# ``__getattr__`` hook on Python 3.11 (about 0.2 us a lookup).
_ELECT_MASTER, _ALTER_SYNC_STATE_SET = RequestCode.CONTROLLER_ELECT_MASTER, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET
_REGISTER_BROKER, _APPLY_BROKER_ID = RequestCode.CONTROLLER_REGISTER_BROKER, RequestCode.CONTROLLER_APPLY_BROKER_ID
_LENIENT = frozenset({RequestCode.BROKER_HEARTBEAT, RequestCode.CONTROLLER_CONTROLLED_SHUTDOWN})
_READ_REQUESTS = frozenset({RequestCode.CONTROLLER_GET_REPLICA_INFO, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
                            RequestCode.CONTROLLER_GET_BROKER_EPOCHS})


# ---- ids ---------------------------------------------------------------------------------------
def _get_next_broker_id(h: Mapping[str, Any], ctx: DecideContext) -> Decision:
    name = header_str(h, "broker_name")
    return Decision(ResponseCode.SUCCESS, {"broker_name": name, "next_broker_id": ctx.state.next_broker_id(name)})


def _apply_broker_id(h: Mapping[str, Any], ctx: DecideContext) -> Decision:
    name, broker_id = header_str(h, "broker_name"), header_int(h, "broker_id", minimum=1)
    code, addr = header_str(h, "register_code"), str(h.get("broker_addr", ""))
    state = ctx.state
    bs = state.broker_set(name)
    next_id = state.next_broker_id(name)
    reuse = "reuse-broker-id" in state.bugs

    def invalid(why: str) -> Decision:
        return refuse(ResponseCode.CONTROLLER_BROKER_ID_INVALID, f"{name}/{broker_id}: {why}; next broker id is "
                      f"{next_id}: delete the temp meta file and start over", next_broker_id=next_id)

    held = bs.broker(broker_id) if bs is not None else None
    if held is not None:
        if held.register_code == code:
            return Decision(ResponseCode.SUCCESS, {"broker_id": broker_id, "next_broker_id": next_id,
                                                   "message": "already applied with this register code"})
        return invalid("id is held under another register code")
    if bs is None and broker_id != next_id and not reuse:
        return invalid("a new broker set only accepts its next broker id")
    if broker_id < next_id and not reuse:
        return invalid("id was assigned before and ids are never reused")
    event = ApplyBrokerId(cluster_name_of(h, ctx, bs), name, broker_id, addr, code)
    return Decision(ResponseCode.SUCCESS, {"broker_id": broker_id}, None, (event,))


# ---- elections and the SyncStateSet -------------------------------------------------------------
def _elect_master(h: Mapping[str, Any], ctx: DecideContext) -> Decision:
    name = header_str(h, "broker_name")
    broker_id = h.get("broker_id")
    if broker_id is not None and (type(broker_id) is not int or broker_id < 1):
        broker_id = None if broker_id == -1 else header_int(h, "broker_id", minimum=1)
    designate = bool(h.get("designate", False))
    state, hb = ctx.state, ctx.heartbeats
    bs = state.broker_set(name)
    if bs is None:
        return refuse(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, f"broker set {name} does not exist")
    if broker_id is not None and not designate:
        requester = bs.broker(broker_id)
        if requester is None:
            return unknown_broker(name, broker_id, state)
        reg = requester.registration
        if "broker_epoch" in h and h["broker_epoch"] is not None and not epoch_matches(state, reg, h["broker_epoch"]):
            return stale_epoch(name, broker_id, h["broker_epoch"], reg)

    def event(new: int | None) -> ElectMaster:
        return ElectMaster(bs.cluster_name, name, new is not None, new, bs.master_epoch, bs.sync_state_set_epoch)

    if bs.is_first_election():
        # RIP-44: the first broker to ask becomes master.  Unlike the reference, it must be registered
        # and hold a live lease (and not be shutting down).
        if broker_id is None:
            return refuse(ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE, f"{name} has never had a master")
        info = bs.broker(broker_id)
        reg = info.registration if info is not None else None
        if reg is None or reg.in_controlled_shutdown or not hb.is_alive((name, broker_id), ctx.now_ms):
            return refuse(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED,
                          f"first election of {name}: broker {broker_id} is not registered and alive")
        return Decision(ResponseCode.SUCCESS, {}, None, (event(broker_id),), RequestCode.CONTROLLER_ELECT_MASTER, h)
    prefer = broker_id if designate else None
    everyone = bs.broker_ids() if ctx.config.enable_elect_unclean_master else None
    new = elect(bs.sync_state_set, everyone, bs.master_id, prefer, electable_fn(bs, ctx),
                lambda i: hb.live_info((name, i)), ctx.now_ms)
    if new is not None and new == bs.master_id:
        _, header, body = replica_info_reply(state, name)
        return Decision(ResponseCode.CONTROLLER_MASTER_STILL_EXIST,
                        {**header, "message": f"master {new} of {name} is alive; no election needed"}, body)
    if new is not None:
        return Decision(ResponseCode.SUCCESS, {}, None, (event(new),), RequestCode.CONTROLLER_ELECT_MASTER, h)
    if broker_id is None:
        return Decision(ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE,
                        {"message": f"no electable broker in {name}; master cleared"}, None, (event(None),),
                        RequestCode.CONTROLLER_ELECT_MASTER, h)
    return refuse(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED,
                  f"no electable broker in {name}" + (f" (designated {broker_id} is not electable)" if designate
                                                      else ""))


def _elect_reply(decision: Decision, results: list[ApplyResult], state: ControllerState) -> Reply3:
    name = str(decision.request_header["broker_name"])
    failed = next((r for r in results if not r.ok), None)
    _, header, body = replica_info_reply(state, name)
    if failed is not None:
        return failed.code, {**header, "message": failed.message}, body
    if decision.code != ResponseCode.SUCCESS:
        return decision.code, {**header, **decision.header}, body
    return ResponseCode.SUCCESS, header, body


def _alter_sync_state_set(h: Mapping[str, Any], ctx: DecideContext) -> Decision:
    name = header_str(h, "broker_name")
    master_id, master_epoch = header_int(h, "master_id", minimum=1), header_int(h, "master_epoch")
    set_epoch = header_int(h, "sync_state_set_epoch")
    raw = h.get("sync_state_set")
    if not isinstance(raw, list) or not all(type(i) is int and i >= 1 for i in raw):
        raise ValueError(f"header field 'sync_state_set' must be a list of broker ids >= 1, got {raw!r}")
    new = tuple(sorted(set(raw)))
    state, fencing = ctx.state, ctx.state.epoch_fencing
    bs = state.broker_set(name)
    fail = ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
    if bs is None:
        return refuse(fail, f"broker set {name} does not exist")
    if new == bs.sync_state_set:
        return refuse(fail, f"{name}: SyncStateSet {list(new)} is unchanged")
    if bs.master_id != master_id:
        return refuse(ResponseCode.CONTROLLER_INVALID_MASTER,
                      f"{name}: only the master ({bs.master_id}) may alter the SyncStateSet, not {master_id}")
    if "broker_epoch" in h and h["broker_epoch"] is not None:
        reg = state.registration(name, master_id)
        if not epoch_matches(state, reg, h["broker_epoch"]):
            return stale_epoch(name, master_id, h["broker_epoch"], reg)
    if master_epoch != bs.master_epoch and fencing:
        return refuse(ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
                      f"{name}: master epoch {master_epoch} is not the current {bs.master_epoch}")
    if set_epoch != bs.sync_state_set_epoch and fencing:
        return refuse(ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                      f"{name}: set epoch {set_epoch} is not the current {bs.sync_state_set_epoch}; refresh")
    unknown = [i for i in new if bs.broker(i) is None]
    if unknown:
        return refuse(ResponseCode.CONTROLLER_INVALID_REPLICAS, f"{name}: ids {unknown} are not registered")
    dead = [i for i in new if not ctx.heartbeats.is_alive((name, i), ctx.now_ms)]
    if dead:
        return refuse(ResponseCode.CONTROLLER_BROKER_NOT_ALIVE, f"{name}: ids {dead} are not alive")
    if master_id not in new:
        return refuse(fail, f"{name}: the new SyncStateSet {list(new)} must contain the master {master_id}")
    event = AlterSyncStateSet(bs.cluster_name, name, master_id, master_epoch, new, bs.sync_state_set_epoch)
    return Decision(ResponseCode.SUCCESS, {}, None, (event,), RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, h)


def _alter_reply(decision: Decision, results: list[ApplyResult], state: ControllerState) -> Reply3:
    failed = next((r for r in results if not r.ok), None)
    if failed is not None:
        return failed.code, {"message": failed.message}, None
    ev = decision.events[0]
    assert isinstance(ev, AlterSyncStateSet)
    new_epoch = ev.expected_sync_state_set_epoch + 1
    body = {"sync_state_set": list(ev.sync_state_set), "sync_state_set_epoch": new_epoch}
    return ResponseCode.SUCCESS, {"new_sync_state_set_epoch": new_epoch}, body


def _clean_broker_data(h: Mapping[str, Any], ctx: DecideContext) -> Decision:
    name = header_str(h, "broker_name")
    raw = h.get("broker_ids") or []
    code = ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    if not isinstance(raw, list) or not all(type(i) is int and i >= 1 for i in raw):
        return refuse(code, f"broker_ids must be a list of ids >= 1, got {raw!r}")
    ids = tuple(sorted(set(raw)))
    force = bool(h.get("clean_living_broker", False))
    bs = ctx.state.broker_set(name)
    if bs is None:
        return refuse(code, f"broker set {name} does not exist")
    if not force:
        if not ids and bs.master_id is not None:
            return refuse(code, f"{name} still has master {bs.master_id}; name the ids or force")
        alive = [i for i in ids if ctx.heartbeats.is_alive((name, i), ctx.now_ms)]
        if alive:
            return refuse(code, f"{name}: brokers {alive} are still alive; stop them or force")
    event = CleanBrokerData(bs.cluster_name, name, ids)
    return Decision(ResponseCode.SUCCESS, {}, None, (event,), RequestCode.CLEAN_BROKER_DATA, h)


# ---- dispatch ----------------------------------------------------------------------------------
_DECIDERS: dict[RequestCode, Callable[[Mapping[str, Any], DecideContext], Decision]] = {
    RequestCode.CONTROLLER_GET_NEXT_BROKER_ID: _get_next_broker_id,
    RequestCode.CONTROLLER_APPLY_BROKER_ID: _apply_broker_id,
    RequestCode.CONTROLLER_REGISTER_BROKER: decide_register,
    RequestCode.BROKER_HEARTBEAT: decide_heartbeat,
    RequestCode.CONTROLLER_CONTROLLED_SHUTDOWN: decide_controlled_shutdown,
    RequestCode.CONTROLLER_ELECT_MASTER: _elect_master,
    RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: _alter_sync_state_set,
    RequestCode.CLEAN_BROKER_DATA: _clean_broker_data,
}


def _read(code: RequestCode, h: Mapping[str, Any], ctx: DecideContext) -> Decision | None:
    if code == RequestCode.CONTROLLER_GET_REPLICA_INFO:
        rc, header, body = replica_info_reply(ctx.state, header_str(h, "broker_name"))
        return Decision(rc, header, body)
    if code == RequestCode.CONTROLLER_GET_SYNC_STATE_DATA:
        names = h.get("broker_names") or []
        return Decision(ResponseCode.SUCCESS, {}, sync_state_data_body(ctx.state, ctx.heartbeats, names, ctx.now_ms))
    if code == RequestCode.CONTROLLER_GET_BROKER_EPOCHS:
        return Decision(ResponseCode.SUCCESS, {},
                        broker_epochs_body(ctx.state, ctx.heartbeats, h.get("broker_name"), ctx.now_ms))
    return None


def decide(code: RequestCode, header: Mapping[str, Any], body: Any, ctx: DecideContext) -> Decision:
    """Decide a controller request against the leader's current state.

    Args:
        code: the request code.
        header: the request header, already checked against ``protocol.schemas``.
        body: the request body (unused by current requests).
        ctx: state, heartbeats, config, time and node id.
    Returns:
        Decision: final reply if ``events`` is empty, else propose the events and call ``complete``.
    Raises:
        ValueError: a header value is out of range (reply CONTROLLER_INVALID_REQUEST).
    """
    if code in _READ_REQUESTS:
        read = _read(code, header, ctx)
        if read is not None:
            return read
    decider = _DECIDERS.get(code)
    if decider is None:
        return refuse(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"controller core does not handle {code.name}")
    d = decider(header, ctx)
    if d.events and d.request is None:
        d = Decision(d.code, d.header, d.body, d.events, code, header)
    return d


def complete(decision: Decision, results: list[ApplyResult], state: ControllerState) -> Reply3:
    """Build the final reply of a write after its events were committed and applied.

    Args:
        decision: what ``decide`` returned.
        results: the ``ApplyResult`` of each event of ``decision.events``, in order.
        state: the state after applying (possibly with later entries applied too).
    Returns:
        (code, header, body).  The first rejected event's code wins, except that rejected
        elections triggered by heartbeats/controlled shutdowns are ignored (the broker asks again).
    """
    if not decision.events:
        return decision.code, decision.header, decision.body
    if len(results) != len(decision.events):
        return ResponseCode.SYSTEM_ERROR, {
            "message": f"{len(decision.events)} events proposed but {len(results)} apply results returned"}, None
    req = decision.request
    if req == _ELECT_MASTER:
        return _elect_reply(decision, results, state)
    if req == _ALTER_SYNC_STATE_SET:
        return _alter_reply(decision, results, state)
    lenient = req in _LENIENT
    for ev, res in zip(decision.events, results):
        if not res.ok and not (lenient and isinstance(ev, ElectMaster)):
            header: dict[str, Any] = {"message": res.message}
            if isinstance(ev, ApplyBrokerId):
                header["next_broker_id"] = state.next_broker_id(ev.broker_name)
            return res.code, header, None
    if req == _REGISTER_BROKER:
        return register_reply(decision, results, state)
    if lenient:
        return heartbeat_reply(decision, results, state)
    if req == _APPLY_BROKER_ID:
        ev0 = decision.events[0]
        return ResponseCode.SUCCESS, {"broker_id": decision.header.get("broker_id"),
                                      "next_broker_id": state.next_broker_id(ev0.broker_name)}, None
    return ResponseCode.SUCCESS, dict(decision.header), decision.body
