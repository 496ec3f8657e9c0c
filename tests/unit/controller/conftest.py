"""Test machinery for the controller core: a single-leader simulation with a virtual clock.

``Sim`` plays the server's role without I/O: ``request`` runs ``decide``, applies the events at the
next Raft index (one entry per request, as the server proposes them) and returns ``complete``'s
reply.  ``decide_only``/``apply_entry`` let tests pipeline proposals and reorder applies.
"""

from __future__ import annotations

from typing import Any

import pytest

from system_under_test.controller import (
    BrokerHeartbeatManager,
    ControllerConfig,
    ControllerState,
    DecideContext,
    Decision,
    Event,
    complete,
    decide,
    scan,
)
from system_under_test.protocol.codes import RequestCode, ResponseCode
from system_under_test.protocol.schemas import validate_header

Reply3 = tuple[ResponseCode, dict[str, Any], Any]


class Sim:
    def __init__(self, *, unclean: bool = False, lease_ms: int = 2000, bugs: frozenset[str] = frozenset(),
                 cluster_id: str | None = None) -> None:
        self.state = ControllerState(bugs=bugs)
        self.heartbeats = BrokerHeartbeatManager()
        self.config = ControllerConfig(cluster_name="c1", enable_elect_unclean_master=unclean,
                                       lease_timeout_ms=lease_ms, scan_interval_ms=min(500, lease_ms - 1))
        self.now_ms = 1_000
        self.index = 0
        self.cluster_id = cluster_id
        self.log: list[list[Event]] = []

    # -- plumbing ------------------------------------------------------------------------------
    def ctx(self) -> DecideContext:
        return DecideContext(self.state, self.heartbeats, self.config, self.now_ms, "n0", self.cluster_id)

    def decide_only(self, code: RequestCode, **header: Any) -> Decision:
        validate_header(code, header)
        return decide(code, header, None, self.ctx())

    def apply_entry(self, events: list[Event] | tuple[Event, ...]) -> list[Any]:
        self.index += 1
        self.log.append(list(events))
        return [self.state.apply(e, self.index) for e in events]

    def finish(self, decision: Decision) -> Reply3:
        if not decision.events:
            return decision.code, decision.header, decision.body
        results = self.apply_entry(decision.events)
        return complete(decision, results, self.state)

    def request(self, code: RequestCode, **header: Any) -> Reply3:
        return self.finish(self.decide_only(code, **header))

    def advance(self, ms: int) -> None:
        self.now_ms += ms

    def scan(self) -> list[Any]:
        events = scan(self.state, self.heartbeats, self.config, self.now_ms)
        return self.apply_entry(events) if events else []

    # -- broker flows --------------------------------------------------------------------------
    def apply_id(self, name: str, broker_id: int, code: str, addr: str = "") -> Reply3:
        return self.request(RequestCode.CONTROLLER_APPLY_BROKER_ID, cluster_name="c1", broker_name=name,
                            broker_id=broker_id, register_code=code, broker_addr=addr or f"{name}-{broker_id}:1")

    def register(self, name: str, broker_id: int, incarnation: str, addr: str = "", **extra: Any) -> Reply3:
        return self.request(RequestCode.CONTROLLER_REGISTER_BROKER, cluster_name="c1", broker_name=name,
                            broker_id=broker_id, broker_addr=addr or f"{name}-{broker_id}:1",
                            incarnation_id=incarnation, **extra)

    def join(self, name: str = "bs", addr: str = "") -> tuple[int, int]:
        """GetNextBrokerId -> ApplyBrokerId -> RegisterBroker -> first heartbeat (unfences)."""
        code, header, _ = self.request(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, cluster_name="c1",
                                       broker_name=name)
        assert code == ResponseCode.SUCCESS
        broker_id = header["next_broker_id"]
        code, header, _ = self.apply_id(name, broker_id, f"code-{name}-{broker_id}", addr)
        assert code == ResponseCode.SUCCESS, header
        code, header, _ = self.register(name, broker_id, f"inc-{name}-{broker_id}", addr)
        assert code == ResponseCode.SUCCESS, header
        epoch = header["broker_epoch"]
        code, header, _ = self.heartbeat(name, broker_id, epoch)
        assert code == ResponseCode.SUCCESS and header["fenced"] is False, header
        return broker_id, epoch

    def heartbeat(self, name: str, broker_id: int, epoch: int | None = None, *, master_epoch: int = 0,
                  max_offset: int = 0, confirm_offset: int = 0, **extra: Any) -> Reply3:
        if epoch is None:
            epoch = self.state.broker_epoch(name, broker_id) or 0
        return self.request(RequestCode.BROKER_HEARTBEAT, cluster_name="c1", broker_name=name, broker_id=broker_id,
                            broker_addr=f"{name}-{broker_id}:1", broker_epoch=epoch, master_epoch=master_epoch,
                            max_offset=max_offset, confirm_offset=confirm_offset, **extra)

    def elect(self, name: str = "bs", broker_id: int | None = None, **extra: Any) -> Reply3:
        header: dict[str, Any] = {"cluster_name": "c1", "broker_name": name, **extra}
        if broker_id is not None:
            header["broker_id"] = broker_id
        return self.request(RequestCode.CONTROLLER_ELECT_MASTER, **header)

    def alter(self, name: str, master_id: int, new_set: list[int], *, master_epoch: int | None = None,
              set_epoch: int | None = None) -> Reply3:
        bs = self.state.broker_set(name)
        assert bs is not None
        return self.request(
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, cluster_name="c1", broker_name=name, master_id=master_id,
            master_epoch=bs.master_epoch if master_epoch is None else master_epoch, sync_state_set=new_set,
            sync_state_set_epoch=bs.sync_state_set_epoch if set_epoch is None else set_epoch)

    def set_of(self, name: str = "bs") -> Any:
        bs = self.state.broker_set(name)
        assert bs is not None
        return bs


@pytest.fixture
def sim() -> Sim:
    return Sim()


@pytest.fixture
def make_sim() -> Any:
    return Sim
