"""Broker membership requests (KIP-631): RegisterBroker, BROKER_HEARTBEAT, controlled shutdown.

* RegisterBroker: a new incarnation gets a RegisterBroker record (broker epoch = its Raft index,
  starts fenced); the same incarnation keeps its epoch; another incarnation holding a live lease
  is refused with DUPLICATE_BROKER_REGISTRATION (an expired lease, or a finished controlled
  shutdown, lets the new incarnation take over).  An address change adds UpdateBrokerAddress.
* Heartbeat: refused with STALE_BROKER_EPOCH unless it carries the current broker epoch
  (KIP-380); records the lease (and a durable-loss claim: ``lost_durable_offset`` / ``lost_durable_epoch``);
  unfences a fenced broker; ``want_fence`` fences it.
* Controlled shutdown (``want_shutdown`` or CONTROLLER_CONTROLLED_SHUTDOWN): records
  ControlledShutdown and, if the broker is master, an ElectMaster that moves mastership to the
  best electable SyncStateSet member (or clears it); ``should_shutdown`` is true once it is not
  master.
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
    ControlledShutdown,
    ElectMaster,
    Event,
    FenceBroker,
    RegisterBroker,
    UnfenceBroker,
    UpdateBrokerAddress,
)
from system_under_test.controller.heartbeat import DEFAULT_ELECTION_PRIORITY, HeartbeatInfo
from system_under_test.controller.queries import electable
from system_under_test.controller.state_machine import ApplyResult, BrokerSet, ControllerState, Registration
from system_under_test.protocol.codes import RequestCode, ResponseCode

# Used on every registration, as module globals (``ResponseCode.X`` costs ~0.2 us: EnumType's hook).
_SUCCESS, _REGISTER_BROKER = ResponseCode.SUCCESS, RequestCode.CONTROLLER_REGISTER_BROKER


def decide_register(h: Mapping[str, Any], ctx: DecideContext) -> Decision:
    name, broker_id = header_str(h, "broker_name"), header_int(h, "broker_id", minimum=1)
    addr = str(h.get("broker_addr", ""))
    incarnation = h.get("incarnation_id") or ""
    state, hb = ctx.state, ctx.heartbeats
    bs = state.broker_set(name)
    info = bs.broker(broker_id) if bs is not None else None
    if bs is None or info is None:
        return unknown_broker(name, broker_id, state)
    cluster_id = h.get("cluster_id")
    if cluster_id and ctx.cluster_id and cluster_id != ctx.cluster_id:
        return refuse(ResponseCode.INCONSISTENT_CLUSTER_ID,
                      f"broker {name}/{broker_id} store belongs to cluster {cluster_id}, this controller quorum "
                      f"({ctx.node_id}) to {ctx.cluster_id}; point the broker at its own cluster or wipe its store")
    key = (name, broker_id)
    reg = info.registration
    new_incarnation = reg is None or reg.incarnation_id != incarnation
    if reg is not None and new_incarnation and hb.is_alive(key, ctx.now_ms):
        shut_down = reg.in_controlled_shutdown and bs.master_id != broker_id
        if not shut_down:
            live = hb.live_info(key)
            retry = max(0, live.expires_at_ms() - ctx.now_ms) if live else 0
            return refuse(
                ResponseCode.DUPLICATE_BROKER_REGISTRATION,
                f"broker {name}/{broker_id}: incarnation {reg.incarnation_id} (epoch {reg.broker_epoch}) still "
                f"holds a live lease; retry after it expires or stop the other process",
                retry_after_ms=retry,
            )
    events: list[Event] = []
    cluster = cluster_name_of(h, ctx, bs)
    if addr and addr != info.broker_addr:
        events.append(UpdateBrokerAddress(cluster, name, broker_id, addr))
    lease = ctx.config.lease_timeout_ms
    if new_incarnation:
        events.append(RegisterBroker(cluster, name, broker_id, incarnation, reg.broker_epoch if reg else 0))
        hb.remove(key)  # the new incarnation's progress is unknown until it heartbeats
    hb.touch(key, lease, ctx.now_ms, broker_addr=addr)  # registering is contact: it starts/renews the lease
    decision = Decision(_SUCCESS, {"lease_timeout_ms": lease}, None, tuple(events), _REGISTER_BROKER, h)
    if events:
        return decision
    code, header, body = register_reply(decision, [], state)
    return Decision(code, header, body, (), decision.request, h)


def register_reply(decision: Decision, results: list[ApplyResult], state: ControllerState) -> Reply3:
    h = decision.request_header
    name, broker_id = str(h["broker_name"]), int(h["broker_id"])
    bs = state.broker_set(name)  # one lookup of the set and the broker: this runs for every write
    info = bs.broker(broker_id) if bs is not None else None
    reg = info.registration if info is not None else None
    if reg is None or bs is None:
        return ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, {
            "message": f"broker {name}/{broker_id} was removed while registering"}, None
    # The RegisterBroker result names this request's epoch exactly, even if later entries re-registered.
    epoch = reg.broker_epoch
    for r in results:
        if r.broker_epoch is not None:
            epoch = r.broker_epoch
            break
    sss_epoch = bs.sync_state_set_epoch
    header = {
        "broker_id": broker_id,
        "broker_epoch": epoch,
        "fenced": reg.fenced or epoch != reg.broker_epoch,
        "master_id": bs.master_id,
        "master_addr": None if bs.master_id is None else bs.master_addr(),
        "master_epoch": bs.master_epoch,
        "sync_state_set": list(bs.sync_state_set),
        "sync_state_set_epoch": sss_epoch,
        "lease_timeout_ms": decision.header.get("lease_timeout_ms"),
    }
    body = {"sync_state_set": list(bs.sync_state_set), "sync_state_set_epoch": sss_epoch}
    return _SUCCESS, header, body


# ---- heartbeat and controlled shutdown ---------------------------------------------------------
def electable_fn(bs: BrokerSet, ctx: DecideContext) -> Callable[[int], bool]:
    return lambda i: electable(bs, i, ctx.heartbeats, ctx.now_ms)


def _shutdown_events(bs: BrokerSet, broker_id: int, reg: Registration, ctx: DecideContext) -> list[Event]:
    """KIP-631 controlled shutdown: mark the registration, and move mastership away if it is master."""
    events: list[Event] = []
    if not reg.in_controlled_shutdown:
        events.append(ControlledShutdown(bs.cluster_name, bs.broker_name, broker_id, reg.broker_epoch))
    if bs.master_id == broker_id:
        alive = electable_fn(bs, ctx)
        others = [i for i in bs.sync_state_set if i != broker_id]
        everyone = [i for i in bs.broker_ids() if i != broker_id] if ctx.config.enable_elect_unclean_master else None
        new = elect(others, everyone, None, None, alive, lambda i: ctx.heartbeats.live_info((bs.broker_name, i)),
                    ctx.now_ms)
        events.append(ElectMaster(bs.cluster_name, bs.broker_name, new is not None, new, bs.master_epoch,
                                  bs.sync_state_set_epoch))
    return events


def _claim(h: Mapping[str, Any], key: str) -> int | None:
    """An optional non-negative int of a heartbeat (a durable-loss claim); anything else is no claim."""
    v = h.get(key)
    return v if type(v) is int and v >= 0 else None


def decide_heartbeat(h: Mapping[str, Any], ctx: DecideContext) -> Decision:
    name, broker_id = header_str(h, "broker_name"), header_int(h, "broker_id", minimum=1)
    given = header_int(h, "broker_epoch")
    state = ctx.state
    bs = state.broker_set(name)
    info = bs.broker(broker_id) if bs is not None else None
    if bs is None or info is None:
        return unknown_broker(name, broker_id, state)
    reg = info.registration
    if not epoch_matches(state, reg, given) or reg is None:
        return stale_epoch(name, broker_id, given, reg)
    lease = h.get("heartbeat_timeout_ms")
    lease = lease if type(lease) is int and lease > 0 else ctx.config.lease_timeout_ms
    priority = h.get("election_priority")
    ctx.heartbeats.on_heartbeat((name, broker_id), HeartbeatInfo(
        broker_addr=str(h.get("broker_addr", "")),
        broker_epoch=reg.broker_epoch,
        master_epoch=header_int(h, "master_epoch"),
        max_offset=header_int(h, "max_offset"),
        confirm_offset=header_int(h, "confirm_offset"),
        election_priority=priority if type(priority) is int else DEFAULT_ELECTION_PRIORITY,
        lease_timeout_ms=lease,
        lost_durable_offset=_claim(h, "lost_durable_offset"),
        lost_durable_epoch=_claim(h, "lost_durable_epoch"),
    ), ctx.now_ms)
    events: list[Event] = []
    if h.get("want_shutdown"):
        events = _shutdown_events(bs, broker_id, reg, ctx)
    elif h.get("want_fence"):
        if not reg.fenced:
            events.append(FenceBroker(bs.cluster_name, name, broker_id, reg.broker_epoch))
    elif reg.fenced and not reg.in_controlled_shutdown:
        events.append(UnfenceBroker(bs.cluster_name, name, broker_id, reg.broker_epoch))
    decision = Decision(ResponseCode.SUCCESS, {"lease_timeout_ms": lease}, None, tuple(events),
                        RequestCode.BROKER_HEARTBEAT, h)
    if events:
        return decision
    return Decision(*heartbeat_reply(decision, [], state), (), decision.request, h)


def decide_controlled_shutdown(h: Mapping[str, Any], ctx: DecideContext) -> Decision:
    name, broker_id = header_str(h, "broker_name"), header_int(h, "broker_id", minimum=1)
    given = header_int(h, "broker_epoch")
    state = ctx.state
    bs = state.broker_set(name)
    info = bs.broker(broker_id) if bs is not None else None
    if bs is None or info is None:
        return unknown_broker(name, broker_id, state)
    reg = info.registration
    if not epoch_matches(state, reg, given) or reg is None:
        return stale_epoch(name, broker_id, given, reg)
    events = _shutdown_events(bs, broker_id, reg, ctx)
    decision = Decision(ResponseCode.SUCCESS, {"lease_timeout_ms": ctx.config.lease_timeout_ms}, None,
                        tuple(events), RequestCode.CONTROLLER_CONTROLLED_SHUTDOWN, h)
    if events:
        return decision
    code, header, body = heartbeat_reply(decision, [], state)
    return Decision(code, header, body, (), decision.request, h)


def heartbeat_reply(decision: Decision, results: list[ApplyResult], state: ControllerState) -> Reply3:
    h = decision.request_header
    name, broker_id = str(h["broker_name"]), int(h["broker_id"])
    bs = state.broker_set(name)
    reg = state.registration(name, broker_id)
    if bs is None or reg is None:
        return ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, {
            "message": f"broker {name}/{broker_id} was removed"}, None
    header = {
        "broker_id": broker_id,
        "broker_epoch": reg.broker_epoch,
        "fenced": reg.fenced,
        "in_controlled_shutdown": reg.in_controlled_shutdown,
        "should_shutdown": reg.in_controlled_shutdown and bs.master_id != broker_id,
        "master_id": bs.master_id,
        "master_addr": bs.master_addr(),
        "master_epoch": bs.master_epoch,
        "sync_state_set_epoch": bs.sync_state_set_epoch,
        "lease_timeout_ms": decision.header.get("lease_timeout_ms"),
    }
    return ResponseCode.SUCCESS, header, None
