"""Read-side views of the controller state: replica info, sync-state data, broker epochs, electability.

Pure functions of ``(ControllerState, BrokerHeartbeatManager, now_ms)`` shared by request
decisions (:mod:`.requests`) and the leader scan (:mod:`.scan`).  Bodies are msgpack-able (string
map keys only: the framing decodes with ``strict_map_key``).
"""

from __future__ import annotations

from typing import Any

from system_under_test.controller.heartbeat import BrokerHeartbeatManager
from system_under_test.controller.state_machine import BrokerSet, ControllerState
from system_under_test.protocol.codes import ResponseCode


def electable(bs: BrokerSet, broker_id: int, heartbeats: BrokerHeartbeatManager, now_ms: int) -> bool:
    """May ``broker_id`` become master of ``bs`` now?

    It must be assigned, registered (KIP-631), unfenced, not in controlled shutdown, and hold a live
    lease on this controller.
    """
    info = bs.broker(broker_id)
    reg = info.registration if info is not None else None
    return (
        reg is not None
        and not reg.fenced
        and not reg.in_controlled_shutdown
        and heartbeats.is_alive((bs.broker_name, broker_id), now_ms)
    )


def replica_info_reply(state: ControllerState, broker_name: str) -> tuple[ResponseCode, dict[str, Any], Any]:
    """GetReplicaInfo: header = master id/addr/epoch + SyncStateSet and its epoch; body adds members."""
    bs = state.broker_set(broker_name)
    if bs is None:
        return ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST, {
            "message": f"broker set {broker_name} does not exist"}, None
    header = {
        "broker_name": bs.broker_name,
        "master_id": bs.master_id,
        "master_addr": bs.master_addr(),
        "master_epoch": bs.master_epoch,
        "sync_state_set": list(bs.sync_state_set),
        "sync_state_set_epoch": bs.sync_state_set_epoch,
    }
    body = {
        "sync_state_set": list(bs.sync_state_set),
        "sync_state_set_epoch": bs.sync_state_set_epoch,
        "brokers": [[b.broker_id, b.broker_addr] for b in bs.brokers],
    }
    return ResponseCode.SUCCESS, header, body


def sync_state_data_body(state: ControllerState, heartbeats: BrokerHeartbeatManager, broker_names: list[str],
                         now_ms: int) -> list[dict[str, Any]]:
    """GetSyncStateData: per set (all if ``broker_names`` is empty), in-sync and other members with liveness."""
    sets = state.broker_sets() if not broker_names else tuple(
        bs for bs in (state.broker_set(n) for n in broker_names) if bs is not None)
    out = []
    for bs in sets:
        members = [
            {
                "broker_id": b.broker_id,
                "broker_addr": b.broker_addr,
                "in_sync": b.broker_id in bs.sync_state_set,
                "alive": heartbeats.is_alive((bs.broker_name, b.broker_id), now_ms),
            }
            for b in bs.brokers
        ]
        out.append({
            "cluster_name": bs.cluster_name,
            "broker_name": bs.broker_name,
            "master_id": bs.master_id,
            "master_epoch": bs.master_epoch,
            "sync_state_set": list(bs.sync_state_set),
            "sync_state_set_epoch": bs.sync_state_set_epoch,
            "members": members,
        })
    return out


def broker_epochs_body(state: ControllerState, heartbeats: BrokerHeartbeatManager, broker_name: str | None,
                       now_ms: int) -> list[dict[str, Any]]:
    """GetBrokerEpochs: one row per assigned broker: registration (KIP-631) and lease."""
    rows = []
    for bs in state.broker_sets():
        if broker_name and bs.broker_name != broker_name:
            continue
        for b in bs.brokers:
            reg = b.registration
            live = heartbeats.live_info((bs.broker_name, b.broker_id))
            rows.append({
                "broker_name": bs.broker_name,
                "broker_id": b.broker_id,
                "broker_addr": b.broker_addr,
                "broker_epoch": reg.broker_epoch if reg else None,
                "incarnation_id": reg.incarnation_id if reg else None,
                "fenced": reg.fenced if reg else None,
                "in_controlled_shutdown": reg.in_controlled_shutdown if reg else None,
                "is_master": bs.master_id == b.broker_id,
                "alive": heartbeats.is_alive((bs.broker_name, b.broker_id), now_ms),
                "lease_remaining_ms": None if live is None else live.expires_at_ms() - now_ms,
            })
    return rows


def notifications(state: ControllerState, broker_name: str) -> list[tuple[int, str, dict[str, Any]]]:
    """NOTIFY_BROKER_ROLE_CHANGED headers for every member of a set: ``(broker_id, addr, header)``.

    Each header carries the destination's broker epoch (KIP-380) when it is registered.
    """
    info = state.replica_info(broker_name)
    bs = state.broker_set(broker_name)
    if info is None or bs is None:
        return []
    out = []
    for b in bs.brokers:
        header = dict(info)
        if b.registration is not None:
            header["broker_epoch"] = b.registration.broker_epoch
        out.append((b.broker_id, b.broker_addr, header))
    return out
