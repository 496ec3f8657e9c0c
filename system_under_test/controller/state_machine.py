"""ControllerState: the replicated controller metadata and its deterministic apply function.

Theory of operation
-------------------
Every controller holds one ``ControllerState`` and applies the committed events of the Raft log,
in log order, with ``apply(event, index)``.  Because every replica applies the same events in the
same order and ``apply`` depends on nothing else (no clock, no heartbeats, no randomness), all
replicas hold identical states (``snapshot()`` bytes are equal).

Rules of this file:

1. ``apply`` is the ONLY way the state changes.  Readers get frozen values (``BrokerSet``,
   ``BrokerInfo``, ``Registration``).
2. An event that is invalid against the *current* state (computed by the leader on older state,
   because proposals are pipelined) is rejected: nothing changes and the ``ApplyResult`` carries the
   error ResponseCode and a message.  Rejection is deterministic, so all replicas agree on it.
3. Broker ids are never reused: a set's next broker id is ``max(assigned) + 1`` and survives
   CleanBrokerData (even of the whole set, via a tombstone that also keeps the epochs).
4. The broker epoch of a registration is the Raft index of the entry that carried its
   RegisterBroker; indices never go backwards (else :class:`InvariantViolation`).

Contents per broker set (RIP-44 BrokerReplicaInfo + SyncStateInfo, KIP-631 registrations): cluster
name, set name, next broker id, id -> (address, register code, registration), master id, master
epoch, SyncStateSet, set epoch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import msgpack

from system_under_test.controller.errors import InvariantViolation
from system_under_test.controller.events import (
    AlterSyncStateSet,
    ApplyBrokerId,
    CleanBrokerData,
    ControlledShutdown,
    ElectMaster,
    Event,
    FenceBroker,
    RegisterBroker,
    UnfenceBroker,
    UpdateBrokerAddress,
)
from system_under_test.controller.metadata import (
    FIRST_BROKER_ID,
    BrokerInfo,
    BrokerSet,
    Registration,
    Tombstone,
    describe_broker_set,
    set_from_wire,
    set_to_wire,
)
from system_under_test.protocol.codes import ResponseCode

__all__ = [
    "FIRST_BROKER_ID", "KNOWN_BUGS", "ApplyResult", "BrokerInfo", "BrokerSet", "ControllerState", "Registration",
    "Tombstone", "describe_broker_set", "describe_state",
]

SNAPSHOT_VERSION = 1
_SUCCESS = ResponseCode.SUCCESS  # a module global: ``ResponseCode.X`` costs ~0.2 us (EnumType.__getattr__ hook)


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """Outcome of applying one event.

    Attributes:
        code: SUCCESS, or the error that rejected the event (then nothing changed).
        message: human-readable reason (empty on success).
        index: the Raft index the event was applied at.
        notify_broker_set: the broker set whose members should get NOTIFY_BROKER_ROLE_CHANGED
            (its master changed), or None.
        broker_epoch: for RegisterBroker, the registration epoch now in force.
    """

    code: ResponseCode
    message: str = ""
    index: int = 0
    notify_broker_set: str | None = None
    broker_epoch: int | None = None

    @property
    def ok(self) -> bool:
        return self.code == _SUCCESS

    def describe(self) -> str:
        extra = f" notify={self.notify_broker_set}" if self.notify_broker_set else ""
        epoch = f" broker_epoch={self.broker_epoch}" if self.broker_epoch is not None else ""
        msg = f" ({self.message})" if self.message else ""
        return f"@{self.index} {self.code.name}{msg}{epoch}{extra}"


def _reject(code: ResponseCode, message: str, index: int) -> ApplyResult:
    return ApplyResult(code, message, index)


# Deliberate, named bugs the harness can switch on (every controller of a quorum must agree).
#   reuse-broker-id:  the reference quirk -- ApplyBrokerId accepts any id not currently held and bumps
#                     the next id by one; CleanBrokerData of a whole set forgets its next id.
#   no-epoch-fencing: stale master / set / broker epochs are not checked (decide time and apply time).
KNOWN_BUGS = frozenset({"reuse-broker-id", "no-epoch-fencing"})


class ControllerState:
    """The replicated metadata of the controller; see the module docstring.

    Args:
        bugs: names from :data:`KNOWN_BUGS` to enable (for testing the tester); others are ignored
            here (they belong to the server shell).
    """

    def __init__(self, *, bugs: frozenset[str] | set[str] = frozenset()) -> None:
        self._sets: dict[str, BrokerSet] = {}
        self._tombstones: dict[str, Tombstone] = {}
        self._last_index = 0
        self._ok = ApplyResult(ResponseCode.SUCCESS, "", 0)
        self.bugs: frozenset[str] = frozenset(bugs) & KNOWN_BUGS

    @property
    def epoch_fencing(self) -> bool:
        """False when the ``no-epoch-fencing`` bug is enabled."""
        return "no-epoch-fencing" not in self.bugs

    # ---- reads -------------------------------------------------------------------------------
    @property
    def last_index(self) -> int:
        """Raft index of the last applied event (0 = none)."""
        return self._last_index

    def broker_set(self, broker_name: str) -> BrokerSet | None:
        return self._sets.get(broker_name)

    def broker_sets(self) -> tuple[BrokerSet, ...]:
        return tuple(self._sets[name] for name in sorted(self._sets))

    def next_broker_id(self, broker_name: str) -> int:
        """The id GetNextBrokerId hands out: never one assigned before, even if since cleaned."""
        bs = self._sets.get(broker_name)
        if bs is not None:
            return bs.next_broker_id
        tomb = self._tombstones.get(broker_name)
        return tomb.next_broker_id if tomb is not None else FIRST_BROKER_ID

    def registration(self, broker_name: str, broker_id: int) -> Registration | None:
        bs = self._sets.get(broker_name)
        info = bs.broker(broker_id) if bs is not None else None
        return info.registration if info is not None else None

    def broker_epoch(self, broker_name: str, broker_id: int) -> int | None:
        """The current broker epoch of ``broker_name/broker_id`` (None if not registered)."""
        reg = self.registration(broker_name, broker_id)
        return reg.broker_epoch if reg is not None else None

    def replica_info(self, broker_name: str) -> dict[str, Any] | None:
        """Master and SyncStateSet of a set as a NOTIFY_BROKER_ROLE_CHANGED / GetReplicaInfo header."""
        bs = self._sets.get(broker_name)
        if bs is None:
            return None
        return {
            "broker_name": bs.broker_name,
            "master_id": bs.master_id,
            "master_addr": bs.master_addr(),
            "master_epoch": bs.master_epoch,
            "sync_state_set": list(bs.sync_state_set),
            "sync_state_set_epoch": bs.sync_state_set_epoch,
        }

    # ---- apply -------------------------------------------------------------------------------
    def apply(self, event: Event, index: int) -> ApplyResult:
        """Apply one committed event at Raft ``index`` (events of one entry share the index).

        Returns:
            ApplyResult: SUCCESS or the rejecting error code (the state is then unchanged).
        Raises:
            InvariantViolation: ``index`` is lower than the last applied index (log replayed out of
                order or applied twice from an older position -- a bug in the caller).
        """
        if type(index) is not int or index < self._last_index or index < 1:
            raise InvariantViolation(
                f"apply({event.describe()}) at index {index} but last applied index is {self._last_index}; "
                "committed entries must be applied once, in log order"
            )
        self._last_index = index
        handler = _HANDLERS.get(type(event))
        if handler is None:
            raise InvariantViolation(f"apply: no handler for event type {type(event).__name__}")
        result: ApplyResult = handler(self, event, index)
        return result

    def _apply_broker_id(self, ev: ApplyBrokerId, index: int) -> ApplyResult:
        bs = self._sets.get(ev.broker_name)
        if bs is None:
            tomb = self._tombstones.get(ev.broker_name)
            bs = BrokerSet(ev.cluster_name, ev.broker_name)
            if tomb is not None:
                bs = dataclasses.replace(
                    bs,
                    next_broker_id=tomb.next_broker_id,
                    master_epoch=tomb.master_epoch,
                    sync_state_set_epoch=tomb.sync_state_set_epoch,
                )
        held = bs.broker(ev.broker_id)
        if held is not None:
            if held.register_code == ev.register_code:
                return ApplyResult(ResponseCode.SUCCESS, "already applied (idempotent retry)", index)
            return _reject(
                ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                f"broker id {ev.broker_id} of {ev.broker_name} is held under another register code; "
                f"next broker id is {bs.next_broker_id}",
                index,
            )
        reuse = "reuse-broker-id" in self.bugs
        if ev.broker_id < bs.next_broker_id and not reuse:
            return _reject(
                ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                f"broker id {ev.broker_id} of {ev.broker_name} was assigned before (ids are never reused); "
                f"next broker id is {bs.next_broker_id}",
                index,
            )
        bs = bs.with_broker(BrokerInfo(ev.broker_id, ev.broker_addr, ev.register_code))
        next_id = bs.next_broker_id + 1 if reuse else max(bs.next_broker_id, ev.broker_id + 1)
        self._sets[ev.broker_name] = dataclasses.replace(bs, next_broker_id=next_id)
        self._tombstones.pop(ev.broker_name, None)
        return ApplyResult(ResponseCode.SUCCESS, "", index)

    def _existing(self, broker_name: str, broker_id: int, index: int) -> tuple[BrokerSet, BrokerInfo] | ApplyResult:
        bs = self._sets.get(broker_name)
        info = bs.broker(broker_id) if bs is not None else None
        if bs is None or info is None:
            return _reject(
                ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                f"broker {broker_name}/{broker_id} has no assigned id; apply for an id first",
                index,
            )
        return bs, info

    def _update_address(self, ev: UpdateBrokerAddress, index: int) -> ApplyResult:
        bs = self._sets.get(ev.broker_name)
        updated = bs.with_address(ev.broker_id, ev.broker_addr) if bs is not None else None
        if updated is None:
            found = self._existing(ev.broker_name, ev.broker_id, index)
            assert isinstance(found, ApplyResult)  # the id is not assigned: the rejection
            return found
        self._sets[ev.broker_name] = updated
        return self._success(index)

    def _success(self, index: int) -> ApplyResult:
        """The plain SUCCESS result at ``index``, one shared value per index (frozen, so sharing is
        safe): the events of one entry share its index, and building one per event showed."""
        ok = self._ok
        if ok.index != index:
            ok = self._ok = ApplyResult(_SUCCESS, "", index)
        return ok

    def _register(self, ev: RegisterBroker, index: int) -> ApplyResult:
        found = self._existing(ev.broker_name, ev.broker_id, index)
        if isinstance(found, ApplyResult):
            return found
        bs, info = found
        reg = info.registration
        if reg is not None and reg.incarnation_id == ev.incarnation_id:
            return ApplyResult(ResponseCode.SUCCESS, "same incarnation: registration kept", index,
                               broker_epoch=reg.broker_epoch)
        current = reg.broker_epoch if reg is not None else 0
        if current != ev.prev_broker_epoch:
            return ApplyResult(
                ResponseCode.DUPLICATE_BROKER_REGISTRATION,
                f"broker {ev.broker_name}/{ev.broker_id}: incarnation "
                f"{reg.incarnation_id if reg else '-'} registered at epoch {current} after this request was "
                f"decided (expected epoch {ev.prev_broker_epoch})",
                index,
            )
        new_reg = Registration(broker_epoch=index, incarnation_id=ev.incarnation_id)
        self._sets[ev.broker_name] = bs.with_broker(dataclasses.replace(info, registration=new_reg))
        return ApplyResult(ResponseCode.SUCCESS, "", index, broker_epoch=index)

    def _elect(self, ev: ElectMaster, index: int) -> ApplyResult:
        bs = self._sets.get(ev.broker_name)
        if bs is None:
            return _reject(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                           f"broker set {ev.broker_name} does not exist", index)
        expected = (ev.expected_master_epoch, ev.expected_sync_state_set_epoch)
        stale = (bs.master_epoch, bs.sync_state_set_epoch) != expected
        if stale and self.epoch_fencing:
            code = (ResponseCode.CONTROLLER_MASTER_STILL_EXIST if bs.master_id is not None
                    else ResponseCode.CONTROLLER_ELECT_MASTER_FAILED)
            return _reject(
                code,
                f"election for {ev.broker_name} computed on master_epoch={ev.expected_master_epoch} "
                f"set_epoch={ev.expected_sync_state_set_epoch} but state is now master={bs.master_id} "
                f"master_epoch={bs.master_epoch} set_epoch={bs.sync_state_set_epoch}",
                index,
            )
        if ev.new_master_elected:
            assert ev.broker_id is not None  # guaranteed by ElectMaster validation
            if bs.broker(ev.broker_id) is None:
                return _reject(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED,
                               f"elected broker {ev.broker_name}/{ev.broker_id} is no longer assigned", index)
            bs = dataclasses.replace(
                bs,
                master_id=ev.broker_id,
                master_epoch=bs.master_epoch + 1,
                sync_state_set=(ev.broker_id,),
                sync_state_set_epoch=bs.sync_state_set_epoch + 1,
            )
        else:
            bs = dataclasses.replace(bs, master_id=None, master_epoch=bs.master_epoch + 1)
        self._sets[ev.broker_name] = bs
        return ApplyResult(ResponseCode.SUCCESS, "", index, notify_broker_set=ev.broker_name)

    def _alter(self, ev: AlterSyncStateSet, index: int) -> ApplyResult:
        bs = self._sets.get(ev.broker_name)
        if bs is None:
            return _reject(ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                           f"broker set {ev.broker_name} does not exist", index)
        if bs.master_id != ev.master_id:
            return _reject(ResponseCode.CONTROLLER_INVALID_MASTER,
                           f"{ev.broker_name}: requester {ev.master_id} is not the master ({bs.master_id})", index)
        if bs.master_epoch != ev.master_epoch and self.epoch_fencing:
            return _reject(ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
                           f"{ev.broker_name}: master epoch {ev.master_epoch} != current {bs.master_epoch}", index)
        if bs.sync_state_set_epoch != ev.expected_sync_state_set_epoch and self.epoch_fencing:
            return _reject(
                ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                f"{ev.broker_name}: set epoch {ev.expected_sync_state_set_epoch} != current {bs.sync_state_set_epoch}",
                index,
            )
        unknown = [i for i in ev.sync_state_set if bs.broker(i) is None]
        if unknown:
            return _reject(ResponseCode.CONTROLLER_INVALID_REPLICAS,
                           f"{ev.broker_name}: SyncStateSet names unassigned ids {unknown}", index)
        if ev.master_id not in ev.sync_state_set:
            return _reject(ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                           f"{ev.broker_name}: new SyncStateSet {list(ev.sync_state_set)} drops master "
                           f"{ev.master_id}", index)
        self._sets[ev.broker_name] = dataclasses.replace(
            bs, sync_state_set=ev.sync_state_set, sync_state_set_epoch=bs.sync_state_set_epoch + 1
        )
        return ApplyResult(ResponseCode.SUCCESS, "", index)

    def _clean(self, ev: CleanBrokerData, index: int) -> ApplyResult:
        bs = self._sets.get(ev.broker_name)
        if bs is None:
            return _reject(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                           f"broker set {ev.broker_name} does not exist", index)
        removed = set(ev.broker_ids) if ev.broker_ids else set(bs.broker_ids())
        brokers = tuple(b for b in bs.brokers if b.broker_id not in removed)
        sss = tuple(i for i in bs.sync_state_set if i not in removed)
        notify: str | None = None
        master_id, master_epoch = bs.master_id, bs.master_epoch
        if master_id in removed:
            master_id, master_epoch, notify = None, master_epoch + 1, ev.broker_name
        set_epoch = bs.sync_state_set_epoch + (1 if sss != bs.sync_state_set else 0)
        if not brokers:
            del self._sets[ev.broker_name]
            if "reuse-broker-id" not in self.bugs:
                self._tombstones[ev.broker_name] = Tombstone(bs.next_broker_id, master_epoch, set_epoch)
            return ApplyResult(ResponseCode.SUCCESS, "", index)
        self._sets[ev.broker_name] = dataclasses.replace(
            bs, brokers=brokers, sync_state_set=sss, sync_state_set_epoch=set_epoch,
            master_id=master_id, master_epoch=master_epoch,
        )
        return ApplyResult(ResponseCode.SUCCESS, "", index, notify_broker_set=notify)

    def _registration_event(self, ev: FenceBroker | UnfenceBroker | ControlledShutdown,
                            index: int) -> ApplyResult:
        found = self._existing(ev.broker_name, ev.broker_id, index)
        if isinstance(found, ApplyResult):
            return found
        bs, info = found
        reg = info.registration
        if reg is None or (reg.broker_epoch != ev.broker_epoch and self.epoch_fencing):
            return _reject(
                ResponseCode.STALE_BROKER_EPOCH,
                f"{type(ev).__name__} for {ev.broker_name}/{ev.broker_id} epoch {ev.broker_epoch} but the "
                f"registration epoch is {reg.broker_epoch if reg else 'none'}",
                index,
            )
        if isinstance(ev, FenceBroker):
            new_reg = dataclasses.replace(reg, fenced=True)
        elif isinstance(ev, UnfenceBroker):
            new_reg = dataclasses.replace(reg, fenced=False)
        else:
            new_reg = dataclasses.replace(reg, in_controlled_shutdown=True)
        self._sets[ev.broker_name] = bs.with_broker(dataclasses.replace(info, registration=new_reg))
        return ApplyResult(ResponseCode.SUCCESS, "", index)

    # ---- snapshot ----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Canonical plain-data form (sorted, msgpack-able); the basis of snapshot() and equality."""
        return {
            "version": SNAPSHOT_VERSION,
            "last_index": self._last_index,
            "sets": [set_to_wire(self._sets[n]) for n in sorted(self._sets)],
            "tombstones": [
                [n, t.next_broker_id, t.master_epoch, t.sync_state_set_epoch]
                for n, t in sorted(self._tombstones.items())
            ],
        }

    def snapshot(self) -> bytes:
        """Deterministic bytes: equal states give equal snapshots."""
        return msgpack.packb(self.to_dict(), use_bin_type=True)

    def restore(self, data: bytes) -> None:
        """Replace this state with the one ``data`` (from :meth:`snapshot`) describes.

        Raises:
            InvariantViolation: the snapshot is corrupt or of an unknown version.
        """
        try:
            obj = msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True)
            if obj["version"] != SNAPSHOT_VERSION:
                raise ValueError(f"snapshot version {obj['version']} != {SNAPSHOT_VERSION}")
            sets = {s.broker_name: s for s in (set_from_wire(w) for w in obj["sets"])}
            tombs = {n: Tombstone(a, b, c) for n, a, b, c in obj["tombstones"]}
            last_index = int(obj["last_index"])
        except Exception as exc:  # any decoding problem means a corrupt snapshot
            raise InvariantViolation(f"cannot restore controller snapshot ({len(data)} bytes): {exc}") from exc
        self._sets, self._tombstones, self._last_index = sets, tombs, last_index

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ControllerState) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    def describe(self) -> str:
        return describe_state(self)


_HANDLERS: dict[type, Any] = {
    ApplyBrokerId: ControllerState._apply_broker_id,
    UpdateBrokerAddress: ControllerState._update_address,
    RegisterBroker: ControllerState._register,
    ElectMaster: ControllerState._elect,
    AlterSyncStateSet: ControllerState._alter,
    CleanBrokerData: ControllerState._clean,
    FenceBroker: ControllerState._registration_event,
    UnfenceBroker: ControllerState._registration_event,
    ControlledShutdown: ControllerState._registration_event,
}


def describe_state(state: ControllerState) -> str:
    parts = [f"controller state @{state.last_index}"]
    parts.extend(describe_broker_set(bs) for bs in state.broker_sets())
    return "\n".join(parts)
