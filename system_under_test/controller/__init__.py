"""Controller: replicated state machine, request handling, heartbeats/leases, election policy, server.

The pure core (no asyncio/socket/os/time/random) is re-exported here:

* :mod:`.events` -- the log records (ApplyBrokerId, RegisterBroker, ElectMaster, ...) and their codec.
* :mod:`.state_machine` -- ``ControllerState.apply(event, index)``, the only way state changes.
* :mod:`.requests` -- ``decide`` (pre-commit validation -> reply + events) and ``complete`` (reply
  after commit from the apply results).
* :mod:`.heartbeat` -- per-controller broker leases (soft state).
* :mod:`.elect_policy` -- which broker becomes master.
* :mod:`.scan` -- the leader's periodic fencing and re-election.
* :mod:`.config` -- ``ControllerConfig``.

The shells (``server.py``, ``main.py``, ``formation.py``) import from the modules directly.
"""

from system_under_test.controller.config import ControllerConfig
from system_under_test.controller.elect_policy import candidate_rank, elect, elect_complete_replica, holds_claim
from system_under_test.controller.errors import ConfigError, ControllerError, EventError, InvariantViolation
from system_under_test.controller.events import (
    EVENT_TYPES,
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
    decode_events,
    describe_event,
    encode_events,
)
from system_under_test.controller.heartbeat import BrokerHeartbeatManager, BrokerKey, HeartbeatInfo, LiveInfo
from system_under_test.controller.queries import electable, notifications
from system_under_test.controller.requests import DecideContext, Decision, complete, decide
from system_under_test.controller.scan import describe_scan, scan
from system_under_test.controller.state_machine import (
    KNOWN_BUGS,
    ApplyResult,
    BrokerInfo,
    BrokerSet,
    ControllerState,
    Registration,
    describe_broker_set,
    describe_state,
)

__all__ = [
    "EVENT_TYPES",
    "KNOWN_BUGS",
    "AlterSyncStateSet",
    "ApplyBrokerId",
    "ApplyResult",
    "BrokerHeartbeatManager",
    "BrokerInfo",
    "BrokerKey",
    "BrokerSet",
    "CleanBrokerData",
    "ConfigError",
    "ControlledShutdown",
    "ControllerConfig",
    "ControllerError",
    "ControllerState",
    "DecideContext",
    "Decision",
    "ElectMaster",
    "Event",
    "EventError",
    "FenceBroker",
    "HeartbeatInfo",
    "InvariantViolation",
    "LiveInfo",
    "RegisterBroker",
    "Registration",
    "UnfenceBroker",
    "UpdateBrokerAddress",
    "candidate_rank",
    "complete",
    "decide",
    "decode_events",
    "describe_broker_set",
    "describe_event",
    "describe_scan",
    "describe_state",
    "elect",
    "elect_complete_replica",
    "electable",
    "encode_events",
    "holds_claim",
    "notifications",
    "scan",
]
