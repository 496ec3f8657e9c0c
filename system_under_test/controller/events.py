"""Controller events: the records of the replicated controller log.

An *event* is the only thing that changes controller state (RIP-44 "Event": the state machine
applies the events of the Raft log to build consistent metadata).  The leader's request handling
(:mod:`.requests`) and periodic scan (:mod:`.scan`) produce events; the Raft shell encodes a batch
with :func:`encode_events`, replicates it as one log entry, and every controller applies the
decoded events with ``ControllerState.apply(event, index)`` where ``index`` is the entry's Raft
index.

Events carry the expectations they were computed from (``expected_*`` fields, ``prev_broker_epoch``)
because the server pipelines proposals: the state may move between deciding and applying, and the
state machine re-checks those expectations at apply time (a mismatch rejects the event and
changes nothing).

Words: *broker set* = the replicas sharing a broker name; *broker epoch* = Raft index of the entry
carrying the broker's current RegisterBroker (KIP-380/631); *master epoch* and *set epoch* as in
RIP-44's SyncStateInfo.

Wire form: ``msgpack([[type_id, {field: value}], ...])``; type ids live in one table,
:data:`EVENT_TYPES`, which fails to load on a duplicate id or name.
"""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass
from typing import Any

import msgpack

from system_under_test.controller.errors import EventError
from system_under_test.controller.records import slot_constructor


def _check_name(event: str, field: str, value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise EventError(f"{event}.{field} must be a non-empty str, got {value!r}")


def _check_str(event: str, field: str, value: Any) -> None:
    if not isinstance(value, str):
        raise EventError(f"{event}.{field} must be a str, got {value!r}")


def _check_id(event: str, field: str, value: Any) -> None:
    if type(value) is not int or value < 1:
        raise EventError(f"{event}.{field} must be a broker id (int >= 1), got {value!r}")


def _check_nonneg(event: str, field: str, value: Any) -> None:
    if type(value) is not int or value < 0:
        raise EventError(f"{event}.{field} must be an int >= 0, got {value!r}")


def _check_ids(event: str, field: str, value: Any) -> None:
    if not isinstance(value, tuple):
        raise EventError(f"{event}.{field} must be a tuple of broker ids, got {type(value).__name__} {value!r}")
    for v in value:
        _check_id(event, field, v)
    if list(value) != sorted(set(value)):
        raise EventError(f"{event}.{field} must be sorted and free of duplicates, got {value!r}")


@dataclass(frozen=True, slots=True)
class ApplyBrokerId:
    """Claim ``broker_id`` in ``broker_name`` for the holder of ``register_code`` (CAS at apply time).

    Creates the broker set if it does not exist.  Rejected (CONTROLLER_BROKER_ID_INVALID) if the id is
    held under another register code, or is below the set's next broker id (ids are never reused).
    """

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    register_code: str

    def __post_init__(self) -> None:
        _check_name("ApplyBrokerId", "cluster_name", self.cluster_name)
        _check_name("ApplyBrokerId", "broker_name", self.broker_name)
        _check_id("ApplyBrokerId", "broker_id", self.broker_id)
        _check_str("ApplyBrokerId", "broker_addr", self.broker_addr)
        _check_name("ApplyBrokerId", "register_code", self.register_code)

    def describe(self) -> str:
        return f"ApplyBrokerId {self.broker_name}/{self.broker_id} addr={self.broker_addr} code={self.register_code}"


@dataclass(frozen=True, slots=True)
class UpdateBrokerAddress:
    """Replace the recorded address of an assigned broker id (register code kept)."""

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str

    def __post_init__(self) -> None:
        _check_name("UpdateBrokerAddress", "cluster_name", self.cluster_name)
        _check_name("UpdateBrokerAddress", "broker_name", self.broker_name)
        _check_id("UpdateBrokerAddress", "broker_id", self.broker_id)
        _check_str("UpdateBrokerAddress", "broker_addr", self.broker_addr)

    def describe(self) -> str:
        return f"UpdateBrokerAddress {self.broker_name}/{self.broker_id} addr={self.broker_addr}"


@dataclass(frozen=True, slots=True)
class RegisterBroker:
    """KIP-631 registration record: a (new) incarnation of an assigned broker id.

    The new broker epoch is the Raft index of the entry carrying this event.  ``prev_broker_epoch``
    is the registration epoch the leader saw when deciding (0 = none).  At apply time: same
    incarnation as the current registration -> no change (amend); current epoch equals
    ``prev_broker_epoch`` -> new registration, fenced, not in controlled shutdown; otherwise another
    incarnation registered in between -> rejected with DUPLICATE_BROKER_REGISTRATION.
    """

    cluster_name: str
    broker_name: str
    broker_id: int
    incarnation_id: str
    prev_broker_epoch: int = 0

    def __post_init__(self) -> None:
        _check_name("RegisterBroker", "cluster_name", self.cluster_name)
        _check_name("RegisterBroker", "broker_name", self.broker_name)
        _check_id("RegisterBroker", "broker_id", self.broker_id)
        _check_str("RegisterBroker", "incarnation_id", self.incarnation_id)
        _check_nonneg("RegisterBroker", "prev_broker_epoch", self.prev_broker_epoch)

    def describe(self) -> str:
        return (
            f"RegisterBroker {self.broker_name}/{self.broker_id} incarnation={self.incarnation_id} "
            f"prev_epoch={self.prev_broker_epoch}"
        )


@dataclass(frozen=True, slots=True)
class ElectMaster:
    """Set (``new_master_elected=True``) or clear (False) the master of a broker set.

    Applying bumps the master epoch; electing also resets the SyncStateSet to ``{broker_id}`` and
    bumps the set epoch.  Rejected if the set's master epoch / set epoch differ from the
    ``expected_*`` values (computed on stale state) or the new master is no longer assigned.
    """

    cluster_name: str
    broker_name: str
    new_master_elected: bool
    broker_id: int | None
    expected_master_epoch: int
    expected_sync_state_set_epoch: int

    def __post_init__(self) -> None:
        _check_name("ElectMaster", "cluster_name", self.cluster_name)
        _check_name("ElectMaster", "broker_name", self.broker_name)
        if not isinstance(self.new_master_elected, bool):
            raise EventError(f"ElectMaster.new_master_elected must be a bool, got {self.new_master_elected!r}")
        if self.new_master_elected:
            _check_id("ElectMaster", "broker_id", self.broker_id)
        elif self.broker_id is not None:
            raise EventError(f"ElectMaster.broker_id must be None when new_master_elected=False, got {self.broker_id}")
        _check_nonneg("ElectMaster", "expected_master_epoch", self.expected_master_epoch)
        _check_nonneg("ElectMaster", "expected_sync_state_set_epoch", self.expected_sync_state_set_epoch)

    def describe(self) -> str:
        who = f"master={self.broker_id}" if self.new_master_elected else "no master"
        return (
            f"ElectMaster {self.broker_name} {who} expect master_epoch={self.expected_master_epoch} "
            f"set_epoch={self.expected_sync_state_set_epoch}"
        )


@dataclass(frozen=True, slots=True)
class AlterSyncStateSet:
    """Replace the SyncStateSet (master-initiated shrink/expand); bumps the set epoch.

    Rejected at apply time unless ``master_id``/``master_epoch``/``expected_sync_state_set_epoch``
    still match, every member is assigned and the master is a member.
    """

    cluster_name: str
    broker_name: str
    master_id: int
    master_epoch: int
    sync_state_set: tuple[int, ...]
    expected_sync_state_set_epoch: int

    def __post_init__(self) -> None:
        _check_name("AlterSyncStateSet", "cluster_name", self.cluster_name)
        _check_name("AlterSyncStateSet", "broker_name", self.broker_name)
        _check_id("AlterSyncStateSet", "master_id", self.master_id)
        _check_nonneg("AlterSyncStateSet", "master_epoch", self.master_epoch)
        _check_ids("AlterSyncStateSet", "sync_state_set", self.sync_state_set)
        _check_nonneg("AlterSyncStateSet", "expected_sync_state_set_epoch", self.expected_sync_state_set_epoch)

    def describe(self) -> str:
        return (
            f"AlterSyncStateSet {self.broker_name} master={self.master_id}@{self.master_epoch} "
            f"set={list(self.sync_state_set)} expect set_epoch={self.expected_sync_state_set_epoch}"
        )


@dataclass(frozen=True, slots=True)
class CleanBrokerData:
    """Remove broker ids (empty tuple = the whole broker set) from the metadata.

    The set's next broker id and epochs survive (a tombstone), so removed ids are never reused and
    epochs never go backwards if the set is re-created.
    """

    cluster_name: str
    broker_name: str
    broker_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        _check_name("CleanBrokerData", "cluster_name", self.cluster_name)
        _check_name("CleanBrokerData", "broker_name", self.broker_name)
        _check_ids("CleanBrokerData", "broker_ids", self.broker_ids)

    def describe(self) -> str:
        return f"CleanBrokerData {self.broker_name} ids={list(self.broker_ids) or 'ALL'}"


@dataclass(frozen=True, slots=True)
class _BrokerEpochEvent:
    cluster_name: str
    broker_name: str
    broker_id: int
    broker_epoch: int

    def __post_init__(self) -> None:
        kind = type(self).__name__
        _check_name(kind, "cluster_name", self.cluster_name)
        _check_name(kind, "broker_name", self.broker_name)
        _check_id(kind, "broker_id", self.broker_id)
        _check_nonneg(kind, "broker_epoch", self.broker_epoch)

    def describe(self) -> str:
        return f"{type(self).__name__} {self.broker_name}/{self.broker_id} epoch={self.broker_epoch}"


@dataclass(frozen=True, slots=True)
class FenceBroker(_BrokerEpochEvent):
    """KIP-631 fence record: the registration ``broker_epoch`` lost its lease (stale epoch -> rejected)."""


@dataclass(frozen=True, slots=True)
class UnfenceBroker(_BrokerEpochEvent):
    """KIP-631 unfence record: the registration ``broker_epoch`` heartbeat and may serve (stale -> rejected)."""


@dataclass(frozen=True, slots=True)
class ControlledShutdown(_BrokerEpochEvent):
    """The registration ``broker_epoch`` entered controlled shutdown: never elected master again."""


Event = (
    ApplyBrokerId
    | UpdateBrokerAddress
    | RegisterBroker
    | ElectMaster
    | AlterSyncStateSet
    | CleanBrokerData
    | FenceBroker
    | UnfenceBroker
    | ControlledShutdown
)

# The one table of event type ids.  Ids are part of the log format: never renumber, only append.
EVENT_TYPES: tuple[tuple[int, type], ...] = (
    (1, AlterSyncStateSet),
    (2, ApplyBrokerId),
    (3, ElectMaster),
    (5, CleanBrokerData),
    (6, UpdateBrokerAddress),
    (7, RegisterBroker),
    (8, FenceBroker),
    (9, UnfenceBroker),
    (10, ControlledShutdown),
)


def _build_tables(table: tuple[tuple[int, type], ...]) -> tuple[dict[int, type], dict[type, int]]:
    by_id: dict[int, type] = {}
    by_type: dict[type, int] = {}
    names: set[str] = set()
    for type_id, cls in table:
        if type_id in by_id:
            raise EventError(f"events.EVENT_TYPES: type id {type_id} used by {by_id[type_id].__name__} and "
                             f"{cls.__name__}")
        if cls.__name__ in names:
            raise EventError(f"events.EVENT_TYPES: event name {cls.__name__} listed twice")
        by_id[type_id] = cls
        by_type[cls] = type_id
        names.add(cls.__name__)
    return by_id, by_type


_BY_ID, _BY_TYPE = _build_tables(EVENT_TYPES)
# Per event type, computed once (this runs for every event on the leader's encode and every node's
# apply): field names, one getter for all of them, and whether a field is a tuple (the wire form
# has lists there; types without one skip the per-value conversion both ways).
_FIELDS: dict[type, tuple[str, ...]] = {cls: tuple(f.name for f in dataclasses.fields(cls)) for _, cls in EVENT_TYPES}
_FIELD_SETS: dict[type, frozenset[str]] = {cls: frozenset(names) for cls, names in _FIELDS.items()}
_GETTERS: dict[type, operator.attrgetter[Any]] = {cls: operator.attrgetter(*names) for cls, names in _FIELDS.items()}
_WITH_TUPLES: frozenset[type] = frozenset(
    cls for _, cls in EVENT_TYPES if any(str(f.type).startswith("tuple") for f in dataclasses.fields(cls))
)
_VALUES: dict[type, operator.itemgetter[Any]] = {cls: operator.itemgetter(*names) for cls, names in _FIELDS.items()}
_MAKERS: dict[type, Any] = {cls: slot_constructor(cls) for _, cls in EVENT_TYPES}


def event_to_wire(event: Event) -> list[Any]:
    """``[type_id, {field: value}]`` with tuples turned into lists (msgpack-friendly)."""
    cls = type(event)
    type_id = _BY_TYPE.get(cls)
    if type_id is None:
        raise EventError(f"cannot encode {event!r}: not an event type listed in EVENT_TYPES")
    values = _GETTERS[cls](event)  # every event type has several fields: a tuple
    if cls in _WITH_TUPLES:
        values = [list(v) if isinstance(v, tuple) else v for v in values]
    return [type_id, dict(zip(_FIELDS[cls], values))]


def event_from_wire(obj: Any) -> Event:
    """Inverse of :func:`event_to_wire`; validates with the event's own ``__post_init__``, as its
    constructor would (built through :func:`slot_constructor`: this runs for every event on every
    node)."""
    if not isinstance(obj, (list, tuple)) or len(obj) != 2 or not isinstance(obj[1], dict):
        raise EventError(f"encoded event must be [type_id, {{fields}}], got {obj!r:.200}")
    type_id, fields = obj
    cls = _BY_ID.get(type_id)
    if cls is None:
        raise EventError(f"unknown event type id {type_id!r}; known: {sorted(_BY_ID)}")
    names = _FIELD_SETS[cls]
    if fields.keys() != names:
        raise EventError(f"{cls.__name__}: encoded fields {sorted(fields)} != expected {sorted(names)}")
    values = _VALUES[cls](fields)
    if cls in _WITH_TUPLES:
        values = [tuple(v) if isinstance(v, list) else v for v in values]
    event: Event = _MAKERS[cls](*values)
    event.__post_init__()
    return event


def encode_events(events: list[Event] | tuple[Event, ...]) -> bytes:
    """Encode a batch of events as one msgpack blob (the data of one Raft entry)."""
    return msgpack.packb([event_to_wire(e) for e in events], use_bin_type=True)


def decode_events(data: bytes) -> list[Event]:
    """Decode a blob made by :func:`encode_events`.

    Raises:
        EventError: the blob is not valid msgpack or names an unknown event / bad field.
    """
    try:
        obj = msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True)
    except Exception as exc:  # msgpack raises several unrelated exception types on garbage
        raise EventError(f"event batch is not valid msgpack ({len(data)} bytes): {exc}") from exc
    if not isinstance(obj, list):
        raise EventError(f"event batch must be a list, got {type(obj).__name__}")
    return [event_from_wire(item) for item in obj]


def describe_event(event: Event) -> str:
    """One-line canonical text form of an event."""
    return event.describe()
