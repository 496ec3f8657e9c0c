"""The one table of request codes and response/error codes.

Every RPC in splitbrain carries a *request code* (what is asked) and every reply a *response
code* (SUCCESS or an error).  Both live here and nowhere else: servers, clients, the admin CLI,
the workloads and `docs/protocol.md` all derive from these tables.

Codes mirror the seed documents where they define one (RocketMQ's 904 heartbeat and 1001-1013
controller requests, the CONTROLLER_* error codes 2000-2016) and use the seed's names for the
KIP-380/631 errors (STALE_BROKER_EPOCH, DUPLICATE_BROKER_REGISTRATION, INCONSISTENT_CLUSTER_ID).

Each error carries a ``definite`` flag.  ``definite=True`` means the server guarantees the
request had no effect, so a client may record the operation as ``fail``; ``definite=False``
means the outcome is unknown (``info``).  Clients decide fail-vs-info from this flag only.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

# The wire format's version, for what the tables here and in ``schemas.py`` do not describe: message bodies and
# the frame layout.  Bump it in the commit that changes either in a way a peer of the previous version could not
# parse (a reply body that was a list of records and becomes raw record frames, say); the harness refuses to run a
# cluster revision whose version differs from its own (harness/revisions.py, which also knows the versions of the
# commits made before this constant existed).
WIRE_VERSION = 1


@enum.unique
class RequestCode(enum.IntEnum):
    """What a request asks for.  Values below 900 are broker data-path requests."""

    # Data path (broker)
    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_BROKER_RUNTIME_INFO = 28
    HA_HANDSHAKE = 50
    HA_TRANSFER = 51
    HA_ACK = 52
    # Seed codes (RocketMQ controller mode)
    BROKER_HEARTBEAT = 904
    CONTROLLER_ALTER_SYNC_STATE_SET = 1001
    CONTROLLER_ELECT_MASTER = 1002
    CONTROLLER_REGISTER_BROKER = 1003
    CONTROLLER_GET_REPLICA_INFO = 1004
    CONTROLLER_GET_METADATA_INFO = 1005
    CONTROLLER_GET_SYNC_STATE_DATA = 1006
    GET_BROKER_EPOCH_CACHE = 1007
    NOTIFY_BROKER_ROLE_CHANGED = 1008
    UPDATE_CONTROLLER_CONFIG = 1009
    GET_CONTROLLER_CONFIG = 1010
    CLEAN_BROKER_DATA = 1011
    CONTROLLER_GET_NEXT_BROKER_ID = 1012
    CONTROLLER_APPLY_BROKER_ID = 1013
    # splitbrain additions
    CONTROLLER_CONTROLLED_SHUTDOWN = 1021
    CONTROLLER_GET_BROKER_EPOCHS = 1022
    RAFT_MESSAGE = 1100
    FORMATION_STATUS = 1101
    PING = 1102
    ADMIN_FAILPOINT_LIST = 1200
    ADMIN_FAILPOINT_ARM = 1201
    ADMIN_FAILPOINT_DISARM = 1202
    ADMIN_CLOCK_SET = 1203
    ADMIN_CLOCK_GET = 1204
    ADMIN_SHUTDOWN = 1205
    ADMIN_STATUS = 1206
    ADMIN_EVENTS = 1207


@enum.unique
class ResponseCode(enum.IntEnum):
    """Outcome of a request: SUCCESS or an error."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    MALFORMED_REQUEST = 4
    UNAUTHORIZED = 5
    FAILPOINT_ERROR = 6
    TIMEOUT = 7
    NOT_READY = 8
    # Broker data path
    NOT_MASTER = 100
    BROKER_FENCED = 101
    IN_SYNC_REPLICAS_NOT_ENOUGH = 102
    FLUSH_SLAVE_TIMEOUT = 103
    FLUSH_DISK_TIMEOUT = 104
    DISK_FULL = 105
    OFFSET_OUT_OF_RANGE = 106
    TOPIC_NOT_EXIST = 107
    SLAVE_NOT_AVAILABLE = 108
    STORE_ERROR = 109
    HA_NO_CONSISTENT_POINT = 110
    # Controller (reference section 1.5)
    CONTROLLER_FENCED_MASTER_EPOCH = 2000
    CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH = 2001
    CONTROLLER_INVALID_MASTER = 2002
    CONTROLLER_INVALID_REPLICAS = 2003
    CONTROLLER_MASTER_NOT_AVAILABLE = 2004
    CONTROLLER_INVALID_REQUEST = 2005
    CONTROLLER_BROKER_NOT_ALIVE = 2006
    CONTROLLER_NOT_LEADER = 2007
    CONTROLLER_BROKER_METADATA_NOT_EXIST = 2008
    CONTROLLER_INVALID_CLEAN_BROKER_METADATA = 2009
    CONTROLLER_BROKER_NEED_TO_BE_REGISTERED = 2010
    CONTROLLER_MASTER_STILL_EXIST = 2011
    CONTROLLER_ELECT_MASTER_FAILED = 2012
    CONTROLLER_ALTER_SYNC_STATE_SET_FAILED = 2013
    CONTROLLER_BROKER_ID_INVALID = 2014
    CONTROLLER_RAFT_INTERNAL_ERROR = 2015
    CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS = 2016
    # KIP-380 / KIP-631 / cluster formation
    STALE_BROKER_EPOCH = 2100
    DUPLICATE_BROKER_REGISTRATION = 2101
    INCONSISTENT_CLUSTER_ID = 2102
    INCONSISTENT_OPTIONS = 2103
    FORMATION_PENDING = 2104


@dataclass(frozen=True)
class CodeInfo:
    """Metadata for one response code.

    Attributes:
        definite: True if a reply with this code proves the request had no effect.
        doc: one line saying when the code is returned.
    """

    definite: bool
    doc: str


RESPONSE_INFO: dict[ResponseCode, CodeInfo] = {
    ResponseCode.SUCCESS: CodeInfo(True, "The request took effect (or the read was served)."),
    ResponseCode.SYSTEM_ERROR: CodeInfo(False, "Unexpected server error; the outcome is unknown."),
    ResponseCode.SYSTEM_BUSY: CodeInfo(True, "The server refused the request before doing anything (overload)."),
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: CodeInfo(True, "This server does not handle this request code."),
    ResponseCode.MALFORMED_REQUEST: CodeInfo(True, "The header or body does not match the request's schema."),
    ResponseCode.UNAUTHORIZED: CodeInfo(True, "A state-changing request without the right cluster token."),
    ResponseCode.FAILPOINT_ERROR: CodeInfo(False, "An armed failpoint injected an error at some step."),
    ResponseCode.TIMEOUT: CodeInfo(False, "The server gave up waiting (e.g. for a commit); outcome unknown."),
    ResponseCode.NOT_READY: CodeInfo(True, "The node is still starting (formation, recovery) and served nothing."),
    ResponseCode.NOT_MASTER: CodeInfo(True, "This broker is not the master of its broker set; refresh routing."),
    ResponseCode.BROKER_FENCED: CodeInfo(True, "This broker is fenced (no lease from the controller)."),
    ResponseCode.IN_SYNC_REPLICAS_NOT_ENOUGH: CodeInfo(True, "Fewer SyncStateSet members than minInSyncReplicas."),
    ResponseCode.FLUSH_SLAVE_TIMEOUT: CodeInfo(False, "Stored on the master but not acked by enough slaves in time."),
    ResponseCode.FLUSH_DISK_TIMEOUT: CodeInfo(False, "Written but the fsync did not finish in time."),
    ResponseCode.DISK_FULL: CodeInfo(True, "The store refused the write: no space left on device."),
    ResponseCode.OFFSET_OUT_OF_RANGE: CodeInfo(True, "The requested logical offset is outside the queue."),
    ResponseCode.TOPIC_NOT_EXIST: CodeInfo(True, "No such topic or queue id."),
    ResponseCode.SLAVE_NOT_AVAILABLE: CodeInfo(True, "The requested slave read cannot be served."),
    ResponseCode.STORE_ERROR: CodeInfo(False, "The store failed during the operation (I/O error)."),
    ResponseCode.HA_NO_CONSISTENT_POINT: CodeInfo(True, "Slave and master share no (epoch, startOffset)."),
    ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH: CodeInfo(True, "AlterSyncStateSet with a stale master epoch."),
    ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH: CodeInfo(True, "AlterSyncStateSet with a stale set epoch."),
    ResponseCode.CONTROLLER_INVALID_MASTER: CodeInfo(True, "The requester is not the current master."),
    ResponseCode.CONTROLLER_INVALID_REPLICAS: CodeInfo(True, "The new SyncStateSet names an unregistered broker."),
    ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE: CodeInfo(
        False, "Controller-triggered election found nobody; the master was cleared."
    ),
    ResponseCode.CONTROLLER_INVALID_REQUEST: CodeInfo(True, "Request missing a required identity (e.g. broker id)."),
    ResponseCode.CONTROLLER_BROKER_NOT_ALIVE: CodeInfo(True, "The new SyncStateSet names a broker that is not alive."),
    ResponseCode.CONTROLLER_NOT_LEADER: CodeInfo(True, "This controller is not the Raft leader; see leader hint."),
    ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST: CodeInfo(True, "No such broker set."),
    ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA: CodeInfo(True, "CleanBrokerData refused (alive/unknown)."),
    ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED: CodeInfo(True, "Broker id unknown: apply for an id first."),
    ResponseCode.CONTROLLER_MASTER_STILL_EXIST: CodeInfo(True, "Election not needed: the current master is alive."),
    ResponseCode.CONTROLLER_ELECT_MASTER_FAILED: CodeInfo(True, "No eligible broker could be elected."),
    ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED: CodeInfo(True, "AlterSyncStateSet refused (no-op/no master)."),
    ResponseCode.CONTROLLER_BROKER_ID_INVALID: CodeInfo(True, "ApplyBrokerId refused: id held by another code."),
    ResponseCode.CONTROLLER_RAFT_INTERNAL_ERROR: CodeInfo(False, "Raft failed to commit (leadership lost)."),
    ResponseCode.CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS: CodeInfo(True, "No heartbeat has been seen for this broker."),
    ResponseCode.STALE_BROKER_EPOCH: CodeInfo(True, "The broker epoch in the request is not the current one."),
    ResponseCode.DUPLICATE_BROKER_REGISTRATION: CodeInfo(True, "Another live incarnation holds this broker id."),
    ResponseCode.INCONSISTENT_CLUSTER_ID: CodeInfo(True, "The store or peer belongs to another cluster."),
    ResponseCode.INCONSISTENT_OPTIONS: CodeInfo(True, "A critical option differs between cluster members."),
    ResponseCode.FORMATION_PENDING: CodeInfo(True, "The quorum is still waiting for its initial members."),
}

REQUEST_DOCS: dict[RequestCode, str] = {
    RequestCode.SEND_MESSAGE: "Append one or more records to a queue on the master.",
    RequestCode.PULL_MESSAGE: (
        "Read records from a queue by logical offset (never beyond confirmOffset). Reply: body = the records' "
        "commit-log frames back to back (bytes), header `spans` = [[phys_offset, size], ...] runs of adjacent "
        "frames, `next_offset`, `min_offset`, `max_offset`; the consumer verifies each frame's CRC."
    ),
    RequestCode.QUERY_CONSUMER_OFFSET: "Read a consumer group's committed offset for a queue.",
    RequestCode.UPDATE_CONSUMER_OFFSET: "Commit a consumer group's offset for a queue.",
    RequestCode.GET_MAX_OFFSET: "Max logical offset of a queue.",
    RequestCode.GET_MIN_OFFSET: "Min logical offset of a queue.",
    RequestCode.GET_BROKER_RUNTIME_INFO: "Broker role, epochs, offsets, SyncStateSet (for admin and harness).",
    RequestCode.HA_HANDSHAKE: "Slave -> master replication handshake; reply carries epoch entries.",
    RequestCode.HA_TRANSFER: "Master -> slave batch of log bytes within one epoch.",
    RequestCode.HA_ACK: "Slave -> master ack of its max offset.",
    RequestCode.BROKER_HEARTBEAT: "Broker lease renewal with epochs and offsets.",
    RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: "Master reports a shrunk or expanded SyncStateSet.",
    RequestCode.CONTROLLER_ELECT_MASTER: "Elect a master for a broker set (broker- or admin-triggered).",
    RequestCode.CONTROLLER_REGISTER_BROKER: "RegisterBrokerToController: new broker epoch, address, master info.",
    RequestCode.CONTROLLER_GET_REPLICA_INFO: "Master, master epoch and SyncStateSet of a broker set.",
    RequestCode.CONTROLLER_GET_METADATA_INFO: "Which controller leads; served by every controller.",
    RequestCode.CONTROLLER_GET_SYNC_STATE_DATA: "SyncStateSet and liveness of broker sets (admin).",
    RequestCode.GET_BROKER_EPOCH_CACHE: "Epoch entries of a broker (admin).",
    RequestCode.NOTIFY_BROKER_ROLE_CHANGED: "Controller -> broker push after an election (one-way).",
    RequestCode.UPDATE_CONTROLLER_CONFIG: "Change a non-critical controller option at run time.",
    RequestCode.GET_CONTROLLER_CONFIG: "Read the controller's options.",
    RequestCode.CLEAN_BROKER_DATA: "Remove broker ids (or a whole broker set) from controller metadata.",
    RequestCode.CONTROLLER_GET_NEXT_BROKER_ID: "The next broker id this broker set would assign.",
    RequestCode.CONTROLLER_APPLY_BROKER_ID: "Claim a broker id with a register code (CAS, idempotent per code).",
    RequestCode.CONTROLLER_CONTROLLED_SHUTDOWN: "Ask to shut down once mastership has moved away.",
    RequestCode.CONTROLLER_GET_BROKER_EPOCHS: "Broker epochs, fenced flags and leases (admin).",
    RequestCode.RAFT_MESSAGE: "Controller <-> controller Raft message (one-way).",
    RequestCode.PING: "Link liveness probe, answered SUCCESS by the protocol layer itself (docs/operations.md).",
    RequestCode.FORMATION_STATUS: "Controller <-> controller cluster-formation status exchange.",
    RequestCode.ADMIN_FAILPOINT_LIST: "List failpoints with their armed actions and hit counts.",
    RequestCode.ADMIN_FAILPOINT_ARM: "Arm a failpoint with an action.",
    RequestCode.ADMIN_FAILPOINT_DISARM: "Disarm a failpoint (or all).",
    RequestCode.ADMIN_CLOCK_SET: "Set the process clock's offset and rate (clock nemesis).",
    RequestCode.ADMIN_CLOCK_GET: "Read the process clock (wall and monotonic, with offset and rate).",
    RequestCode.ADMIN_SHUTDOWN: "Orderly shutdown of this node.",
    RequestCode.ADMIN_STATUS: "Node status: role, term, leader, applied index.",
    RequestCode.ADMIN_EVENTS: "The node's event log after a sequence number (roles, epochs, SyncStateSet, fencing...).",
}


def _validate_tables() -> None:
    missing_r = [c.name for c in ResponseCode if c not in RESPONSE_INFO]
    missing_q = [c.name for c in RequestCode if c not in REQUEST_DOCS]
    if missing_r or missing_q:
        raise RuntimeError(f"protocol/codes.py: codes without docs: {missing_r + missing_q}")
    overlap = {c.value for c in RequestCode} & {c.value for c in ResponseCode}
    # Request and response codes live in separate spaces; overlap is allowed but names must differ.
    names = [c.name for c in RequestCode] + [c.name for c in ResponseCode]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise RuntimeError(f"protocol/codes.py: names used twice: {sorted(dupes)}")
    del overlap


_validate_tables()


def is_definite(code: ResponseCode | int) -> bool:
    """True if a reply with ``code`` proves the request had no effect (record it as ``fail``)."""
    try:
        return RESPONSE_INFO[ResponseCode(code)].definite
    except ValueError:
        return False
