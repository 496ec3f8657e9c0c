"""Header schemas for every request code: the one place message shapes are declared.

A schema is a mapping of field name -> :class:`FieldSpec`.  :func:`validate_header` checks a
received header against the schema of its request code and raises :class:`SchemaError` naming
the field, the expected type and the value received.  Unknown extra fields are rejected too, so
a typo in a client shows up as an error instead of a silently ignored option.

``docs/protocol.md`` is generated from this table (``python -m system_under_test.protocol.doc``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from system_under_test.protocol.codes import RequestCode

_TYPE_CHECKS: dict[str, Any] = {
    "int": lambda v: type(v) is int,
    "str": lambda v: isinstance(v, str),
    "bool": lambda v: isinstance(v, bool),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "bytes": lambda v: isinstance(v, (bytes, bytearray)),
    "list[int]": lambda v: isinstance(v, list) and all(type(x) is int for x in v),
    "list[str]": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
    "list": lambda v: isinstance(v, list),
    "map": lambda v: isinstance(v, dict),
    "any": lambda v: True,
}


class SchemaError(ValueError):
    """A header does not match its schema (the reply is MALFORMED_REQUEST)."""


@dataclass(frozen=True)
class FieldSpec:
    type: str
    required: bool = True
    nullable: bool = False
    doc: str = ""

    def __post_init__(self) -> None:
        if self.type not in _TYPE_CHECKS:
            raise ValueError(f"unknown schema type {self.type!r}; expected one of {sorted(_TYPE_CHECKS)}")


def F(type_: str, doc: str = "", *, required: bool = True, nullable: bool = False) -> FieldSpec:
    return FieldSpec(type_, required, nullable, doc)


# Fields shared by many requests.
_TOKEN = {"token": F("str", "cluster token (required on state-changing requests)", required=False)}
_SET = {
    "cluster_name": F("str", "cluster name from the broker's config"),
    "broker_name": F("str", "broker set name"),
}
_BROKER = {**_SET, "broker_id": F("int", "persistent broker id (>= 1)")}

_QUEUE = {
    "topic": F("str", "topic name"),
    "queue_id": F("int", "queue id within the topic on this broker set"),
}

SCHEMAS: dict[RequestCode, dict[str, FieldSpec]] = {
    # -- data path (brokers); bodies carry records, see docs/broker.md "Clients" ------------------
    RequestCode.SEND_MESSAGE: {
        **_QUEUE,
        "producer_id": F("str", "producer identity (for per-producer ordering checks)", required=False),
        "master_epoch": F("int", "the master epoch the producer routed by (informational)", required=False),
    },
    RequestCode.PULL_MESSAGE: {
        **_QUEUE,
        "queue_offset": F("int", "first logical offset to read"),
        "max_count": F("int", "at most this many records"),
    },
    RequestCode.QUERY_CONSUMER_OFFSET: {**_QUEUE, "group": F("str", "consumer group")},
    RequestCode.UPDATE_CONSUMER_OFFSET: {**_QUEUE, "group": F("str"), "offset": F("int", "next offset to consume")},
    RequestCode.GET_MAX_OFFSET: {**_QUEUE},
    RequestCode.GET_MIN_OFFSET: {**_QUEUE},
    RequestCode.GET_BROKER_RUNTIME_INFO: {},
    RequestCode.HA_HANDSHAKE: {
        **_TOKEN,
        "broker_id": F("int", "the slave's broker id"),
        "async_learner": F("bool", "replicate but never join the SyncStateSet"),
        "sync_from_last_file": F("bool", "an empty slave starts at the master's last segment"),
        "max_offset": F("int", "the slave's commit log max offset"),
        "master_epoch": F("int", "the master epoch the slave believes in"),
    },
    RequestCode.HA_TRANSFER: {
        "offset": F("int", "physical offset of the first byte of the body"),
        "epoch": F("int", "master epoch of every record in the body"),
        "epoch_start_offset": F("int", "start offset of that epoch"),
        "confirm_offset": F("int", "the master's confirmOffset"),
    },
    RequestCode.HA_ACK: {"max_offset": F("int", "the slave's max offset after appending"),
                         "broker_id": F("int", required=False)},
    RequestCode.CONTROLLER_GET_NEXT_BROKER_ID: {**_SET},
    RequestCode.CONTROLLER_APPLY_BROKER_ID: {
        **_SET,
        **_TOKEN,
        "broker_id": F("int", "the id the broker wants"),
        "register_code": F("str", "random code identifying this claim; retries reuse it"),
        "broker_addr": F("str", "host:port of the broker"),
    },
    RequestCode.CONTROLLER_REGISTER_BROKER: {
        **_BROKER,
        **_TOKEN,
        "broker_addr": F("str", "current host:port of the broker"),
        "incarnation_id": F("str", "random id chosen at process start (KIP-631)", required=False),
        "cluster_id": F("str", "cluster id recorded in the broker's store", nullable=True, required=False),
    },
    RequestCode.BROKER_HEARTBEAT: {
        **_BROKER,
        **_TOKEN,
        "broker_addr": F("str", "current host:port"),
        "broker_epoch": F("int", "broker epoch from the last registration"),
        "master_epoch": F("int", "last master epoch in the broker's epoch file"),
        "max_offset": F("int", "commit log max physical offset"),
        "confirm_offset": F("int", "confirmOffset"),
        "election_priority": F("int", "lower is preferred", required=False),
        "heartbeat_timeout_ms": F("int", "lease length the broker asks for", required=False),
        "want_shutdown": F("bool", "controlled shutdown requested", required=False),
        "want_fence": F("bool", "broker asks to be fenced", required=False),
        "lost_durable_offset": F("int", "the store lost durable records: it had made the log durable up to here",
                                 nullable=True, required=False),
        "lost_durable_epoch": F("int", "master epoch of the last durable record the store lost", nullable=True,
                                required=False),
    },
    RequestCode.CONTROLLER_CONTROLLED_SHUTDOWN: {**_BROKER, **_TOKEN, "broker_epoch": F("int")},
    RequestCode.CONTROLLER_GET_REPLICA_INFO: {"broker_name": F("str"), "cluster_name": F("str", required=False)},
    RequestCode.CONTROLLER_GET_METADATA_INFO: {},
    RequestCode.CONTROLLER_GET_SYNC_STATE_DATA: {"broker_names": F("list[str]", "empty = all")},
    RequestCode.CONTROLLER_GET_BROKER_EPOCHS: {"broker_name": F("str", nullable=True, required=False)},
    RequestCode.GET_BROKER_EPOCH_CACHE: {},
    RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: {
        **_SET,
        **_TOKEN,
        "master_id": F("int", "the requesting master's broker id"),
        "master_epoch": F("int", "the master epoch the requester holds"),
        "sync_state_set": F("list[int]", "the proposed SyncStateSet"),
        "sync_state_set_epoch": F("int", "the set epoch the proposal is based on"),
        "broker_epoch": F("int", "requester's broker epoch", required=False),
    },
    RequestCode.CONTROLLER_ELECT_MASTER: {
        "cluster_name": F("str", required=False),
        "broker_name": F("str"),
        **_TOKEN,
        "broker_id": F("int", "requesting/designated broker; nil = controller-triggered", nullable=True,
                       required=False),
        "designate": F("bool", "admin designates broker_id", required=False),
        "broker_epoch": F("int", required=False),
    },
    RequestCode.NOTIFY_BROKER_ROLE_CHANGED: {
        "broker_name": F("str"),
        "master_id": F("int", nullable=True),
        "master_addr": F("str", nullable=True),
        "master_epoch": F("int"),
        "sync_state_set": F("list[int]"),
        "sync_state_set_epoch": F("int"),
        "broker_epoch": F("int", "the destination broker's epoch (KIP-380)", required=False),
    },
    RequestCode.CLEAN_BROKER_DATA: {
        "cluster_name": F("str", required=False),
        "broker_name": F("str"),
        **_TOKEN,
        "broker_ids": F("list[int]", "empty = the whole broker set", required=False),
        "clean_living_broker": F("bool", required=False),
    },
    RequestCode.UPDATE_CONTROLLER_CONFIG: {**_TOKEN, "key": F("str"), "value": F("any")},
    RequestCode.GET_CONTROLLER_CONFIG: {},
    RequestCode.RAFT_MESSAGE: {"from_id": F("str"), "token": F("str", required=False)},
    RequestCode.PING: {},
    RequestCode.FORMATION_STATUS: {
        "node_id": F("str"),
        "cluster_id": F("str", nullable=True),
        "store_state": F("str", "empty | clean | dirty"),
        "shutdown_id": F("str", nullable=True),
        "options": F("map", "critical options"),
        "proposed_cluster_id": F("str", "cluster id this node proposes if every store is empty"),
        "active": F("bool", "this node already serves (a joiner adopts its cluster)", required=False),
        "last_index": F("int", "last applied Raft index", required=False),
        "token": F("str", required=False),
    },
    RequestCode.ADMIN_FAILPOINT_LIST: {},
    RequestCode.ADMIN_FAILPOINT_ARM: {**_TOKEN, "name": F("str"), "action": F("str", "e.g. crash, 1*error, delay(50)")},
    RequestCode.ADMIN_FAILPOINT_DISARM: {**_TOKEN, "name": F("str", "a name or '*' for all")},
    RequestCode.ADMIN_CLOCK_SET: {
        **_TOKEN,
        "offset_ms": F("float", "added to wall and monotonic time", required=False),
        "rate": F("float", "speed factor (1.0 = real time)", required=False),
    },
    RequestCode.ADMIN_CLOCK_GET: {},
    RequestCode.ADMIN_SHUTDOWN: {
        **_TOKEN,
        "shutdown_id": F("str", "shared id of an orderly whole-quorum shutdown (final signature)", required=False),
    },
    RequestCode.ADMIN_STATUS: {},
    RequestCode.ADMIN_EVENTS: {
        "since": F("int", "the last sequence number already read (0 = from the start)", required=False),
        "limit": F("int", "at most this many events (default 1000)", required=False),
    },
}


_Compiled = tuple[str, tuple[tuple[str, Any, bool, bool, str], ...], frozenset[str]]
_COMPILED: dict[int, _Compiled] = {
    int(code): (
        code.name,
        tuple((n, _TYPE_CHECKS[f.type], f.required, f.nullable, f.type) for n, f in schema.items()),
        frozenset(schema),
    )
    for code, schema in SCHEMAS.items()
}


#: Codes whose schema carries the cluster token: the state-changing requests every node refuses without it.
TOKEN_CODES = frozenset(int(code) for code, schema in SCHEMAS.items() if "token" in schema)


def validate_header(code: int, header: dict[str, Any]) -> None:
    """Check ``header`` against the schema of ``code`` (precompiled: this runs on every request).

    Codes without a schema accept any header.

    Raises:
        SchemaError: naming the field, the expected type and the received value.
    """
    compiled = _COMPILED.get(code)
    if compiled is None:
        return
    name, fields, allowed = compiled
    for field_name, check, required, nullable, type_name in fields:
        if field_name not in header:
            if required:
                raise SchemaError(f"{name}: missing required field {field_name!r} ({type_name}); see docs/protocol.md")
            continue
        value = header[field_name]
        if value is None:
            if nullable or not required:
                continue
            raise SchemaError(f"{name}: field {field_name!r} must be {type_name}, got nil; see docs/protocol.md")
        if not check(value):
            raise SchemaError(
                f"{name}: field {field_name!r} must be {type_name}, got {type(value).__name__} {value!r:.80}; "
                "see docs/protocol.md"
            )
    if len(header) > len(fields) or not allowed.issuperset(header):
        extra = sorted(set(header) - allowed)
        raise SchemaError(f"{name}: unknown field(s) {extra}; expected only {sorted(allowed)}; see docs/protocol.md")
