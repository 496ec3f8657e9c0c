"""Decision vocabulary shared by the request modules: the context a decision reads and its result.

``DecideContext`` is everything a decision may look at; ``Decision`` is the reply so far plus the
events to replicate.  The helpers parse header fields (raising ``ValueError`` that names the field)
and build the common refusals (unknown broker, stale broker epoch).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from system_under_test.controller.config import ControllerConfig
from system_under_test.controller.events import Event
from system_under_test.controller.heartbeat import BrokerHeartbeatManager
from system_under_test.controller.state_machine import BrokerSet, ControllerState, Registration
from system_under_test.protocol.codes import RequestCode, ResponseCode

Reply3 = tuple[ResponseCode, dict[str, Any], Any]


@dataclass(frozen=True)
class DecideContext:
    """Everything a decision may look at.

    Attributes:
        state: the leader's applied controller state (read only here).
        heartbeats: this node's lease table (``decide`` records heartbeats/registrations in it).
        config: controller options.
        now_ms: the node's monotonic time in ms.
        node_id: this controller's id (for messages).
        cluster_id: the quorum's cluster id, if formed; RegisterBroker with another one is refused.
    """

    state: ControllerState
    heartbeats: BrokerHeartbeatManager
    config: ControllerConfig
    now_ms: int
    node_id: str
    cluster_id: str | None = None


@dataclass(slots=True)  # treat as immutable; not frozen: built for every request (see protocol.Frame)
class Decision:
    """A decided request: the reply so far and the events to replicate (empty = final reply).

    ``request`` and ``request_header`` are kept so ``complete`` can build the final reply.
    """

    code: ResponseCode
    header: dict[str, Any]
    body: Any = None
    events: tuple[Event, ...] = ()
    request: RequestCode | None = None
    request_header: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        req = self.request.name if self.request is not None else "-"
        evs = "; ".join(e.describe() for e in self.events) or "no events"
        msg = self.header.get("message")
        return f"{req} -> {self.code.name}{f' ({msg})' if msg else ''}: {evs}"


def refuse(code: ResponseCode, message: str, **header: Any) -> Decision:
    return Decision(code, {"message": message, **header})


def header_int(header: Mapping[str, Any], name: str, *, minimum: int = 0) -> int:
    value = header.get(name)
    if type(value) is not int or value < minimum:
        raise ValueError(f"header field {name!r} must be an int >= {minimum}, got {value!r}")
    return value


def header_str(header: Mapping[str, Any], name: str) -> str:
    value = header.get(name)
    if not isinstance(value, str) or not value:
        raise ValueError(f"header field {name!r} must be a non-empty str, got {value!r}")
    return value


def cluster_name_of(header: Mapping[str, Any], ctx: DecideContext, bs: BrokerSet | None = None) -> str:
    name = header.get("cluster_name")
    if isinstance(name, str) and name:
        return name
    return bs.cluster_name if bs is not None else ctx.config.cluster_name


def unknown_broker(broker_name: str, broker_id: int, state: ControllerState) -> Decision:
    return refuse(
        ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
        f"broker {broker_name}/{broker_id} has no assigned id; apply for one (GetNextBrokerId, ApplyBrokerId)",
        next_broker_id=state.next_broker_id(broker_name),
    )


def stale_epoch(broker_name: str, broker_id: int, given: int, reg: Registration | None) -> Decision:
    return refuse(
        ResponseCode.STALE_BROKER_EPOCH,
        f"broker {broker_name}/{broker_id} sent broker epoch {given} but the registered epoch is "
        f"{reg.broker_epoch if reg else 'none'}; register again",
    )


def epoch_matches(state: ControllerState, reg: Registration | None, given: int) -> bool:
    return reg is not None and (reg.broker_epoch == given or not state.epoch_fencing)
