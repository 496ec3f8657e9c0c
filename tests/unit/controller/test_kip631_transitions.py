"""KIP-631 broker state transitions driven by heartbeats (Kafka calculateNextBrokerState and
ClusterControlManagerTest replay/unregister lines), as one table."""

from __future__ import annotations

from typing import Any

import pytest

from system_under_test.controller import ControlledShutdown, FenceBroker, UnfenceBroker
from system_under_test.protocol.codes import RequestCode, ResponseCode

OK = ResponseCode.SUCCESS


def setup(sim: Any, start: str) -> None:
    """Broker 1 is master of {1, 2}; broker 2 is put in ``start`` state."""
    sim.join("bs")
    sim.join("bs")
    sim.elect("bs", 1)
    sim.alter("bs", 1, [1, 2])
    epoch = sim.state.broker_epoch("bs", 2)
    if start == "FENCED":
        sim.apply_entry([FenceBroker("c1", "bs", 2, epoch)])
    elif start == "CONTROLLED_SHUTDOWN":
        sim.apply_entry([ControlledShutdown("c1", "bs", 2, epoch)])


@pytest.mark.parametrize(
    ("start", "flags", "events", "fenced", "should_shutdown"),
    [
        ("FENCED", {}, [UnfenceBroker], False, False),
        ("FENCED", {"want_shutdown": True}, [ControlledShutdown], True, True),
        ("FENCED", {"want_fence": True}, [], True, False),
        ("UNFENCED", {}, [], False, False),
        ("UNFENCED", {"want_fence": True}, [FenceBroker], True, False),
        ("UNFENCED", {"want_shutdown": True}, [ControlledShutdown], False, True),
        ("CONTROLLED_SHUTDOWN", {}, [], False, True),
        ("CONTROLLED_SHUTDOWN", {"want_shutdown": True}, [], False, True),  # recorded only once
    ],
)
def test_calculate_next_broker_state(sim: Any, start: str, flags: dict[str, bool], events: list[type],
                                     fenced: bool, should_shutdown: bool) -> None:
    setup(sim, start)
    index = sim.index
    code, header, _ = sim.heartbeat("bs", 2, **flags)
    assert code == OK
    proposed = [type(e) for e in sim.log[-1]] if sim.index > index else []
    assert proposed == events
    assert (header["fenced"], header["should_shutdown"]) == (fenced, should_shutdown)


def test_master_in_controlled_shutdown_waits_for_leadership_to_move(sim: Any) -> None:
    setup(sim, "UNFENCED")
    sim.advance(2_500)  # 2's lease expired: nobody to move mastership to ...
    code, header, _ = sim.heartbeat("bs", 1, want_shutdown=True)
    # ... so the master is cleared rather than kept (KIP-631: NO_LEADER), and it may shut down
    assert code == OK and header["should_shutdown"] is True and header["master_id"] is None


def test_unregister_removes_registration(sim: Any) -> None:
    """ClusterControlManagerTest.Unregister: CleanBrokerData drops the id and its registration."""
    setup(sim, "UNFENCED")
    assert sim.request(RequestCode.CLEAN_BROKER_DATA, broker_name="bs", broker_ids=[2],
                       clean_living_broker=True)[0] == OK
    assert sim.state.registration("bs", 2) is None and sim.state.broker_epoch("bs", 2) is None
    assert sim.heartbeat("bs", 2, 5)[0] == ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    assert sim.set_of().sync_state_set == (1,)


def test_heartbeat_without_registration_is_stale(sim: Any) -> None:
    sim.apply_id("bs", 1, "rc")
    assert sim.heartbeat("bs", 1, 0)[0] == ResponseCode.STALE_BROKER_EPOCH
