"""Reference scenarios (reference-implementations.md section 2.5), one test per reference test name.

RocketMQ ReplicasInfoManagerTest / DLedgerControllerTest (logic parts) / ControllerManagerTest /
DefaultBrokerHeartbeatManagerTest, replayed against the pure core through the ``Sim`` harness.
"""

from __future__ import annotations

from typing import Any

import pytest

from system_under_test.controller import ControllerState
from system_under_test.protocol.codes import RequestCode, ResponseCode

OK = ResponseCode.SUCCESS


def three_brokers(sim: Any) -> None:
    for _ in range(3):
        sim.join("bs")


def test_register_broker_success(sim: Any) -> None:
    ids = [sim.join("bs")[0] for _ in range(3)]
    assert ids == [1, 2, 3]
    code, header, _ = sim.elect("bs", 1)
    assert code == OK and header["master_id"] == 1
    assert (header["master_epoch"], header["sync_state_set_epoch"]) == (1, 1)
    code, header, body = sim.alter("bs", 1, [1, 2, 3])
    assert code == OK and header["new_sync_state_set_epoch"] == 2
    assert body["sync_state_set"] == [1, 2, 3]
    assert sim.set_of().sync_state_set == (1, 2, 3)


def test_register_with_master_exist_resp(sim: Any) -> None:
    sim.join("bs")
    sim.join("bs")
    assert sim.elect("bs", 1)[0] == OK
    sim.apply_id("bs", 3, "code3")
    code, header, body = sim.register("bs", 3, "inc3")
    assert code == OK
    assert (header["master_id"], header["master_addr"], header["master_epoch"]) == (1, "bs-1:1", 1)
    assert body == {"sync_state_set": [1], "sync_state_set_epoch": 1}


def test_register_with_old_master_inactive(sim: Any) -> None:
    three_brokers(sim)
    sim.elect("bs", 1)
    sim.alter("bs", 1, [1, 2, 3])
    sim.advance(2_500)  # everyone's lease expired ...
    sim.heartbeat("bs", 3)  # ... but 3 is back
    code, header, _ = sim.elect("bs", 3)
    assert code == OK and header["master_id"] == 3
    bs = sim.set_of()
    assert (bs.master_id, bs.master_epoch, bs.sync_state_set, bs.sync_state_set_epoch) == (3, 2, (3,), 3)


def test_elect_master_old_master_still_alive(sim: Any) -> None:
    three_brokers(sim)
    sim.elect("bs", 1)
    code, header, _ = sim.elect("bs", None)  # controller-triggered
    assert code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST
    assert header["master_id"] == 1 and header["master_epoch"] == 1
    assert sim.set_of().master_epoch == 1


@pytest.mark.parametrize(
    ("name", "info2", "info3", "winner"),
    [
        ("prefer_higher_epoch", dict(master_epoch=1, max_offset=2), dict(master_epoch=0, max_offset=3), 2),
        ("prefer_higher_offset_when_epoch_equals", dict(master_epoch=1, max_offset=2),
         dict(master_epoch=1, max_offset=3), 3),
        ("prefer_higher_priority_when_epoch_and_offset_equals",
         dict(master_epoch=1, max_offset=3, election_priority=2),
         dict(master_epoch=1, max_offset=3, election_priority=1), 3),
        ("equal_candidates_lowest_id_wins", dict(master_epoch=1, max_offset=3), dict(master_epoch=1, max_offset=3), 2),
        ("offsets_differ_by_more_than_2_pow_31", dict(master_epoch=1, max_offset=2**33),
         dict(master_epoch=1, max_offset=1), 2),
    ],
)
def test_elect_policy_preferences(sim: Any, name: str, info2: dict[str, int], info3: dict[str, int],
                                  winner: int) -> None:
    three_brokers(sim)
    sim.elect("bs", 1)
    sim.alter("bs", 1, [1, 2, 3])
    sim.advance(2_500)  # master 1 dies
    sim.heartbeat("bs", 2, **info2)
    sim.heartbeat("bs", 3, **info3)
    code, header, _ = sim.elect("bs", None)
    assert code == OK and header["master_id"] == winner, name


def test_elect_master(sim: Any) -> None:
    three_brokers(sim)
    sim.elect("bs", 1)
    sim.alter("bs", 1, [1, 2, 3])
    sim.advance(2_500)
    sim.heartbeat("bs", 2, master_epoch=1, max_offset=5)
    sim.heartbeat("bs", 3, master_epoch=1, max_offset=4)
    code, header, _ = sim.elect("bs", 2)  # 1 dead -> new master
    assert code == OK and header["master_id"] == 2 and header["master_epoch"] == 2
    # admin designates dead 1 -> fails
    code, _, _ = sim.elect("bs", 1, designate=True)
    assert code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    # admin designates the current master -> still exists
    code, header, _ = sim.elect("bs", 2, designate=True)
    assert code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST and header["master_id"] == 2
    # 1 comes back (same incarnation re-registers) and rejoins the SyncStateSet, then is designated
    sim.register("bs", 1, "inc-bs-1")
    sim.heartbeat("bs", 1)
    assert sim.alter("bs", 2, [1, 2])[0] == OK
    code, header, _ = sim.elect("bs", 1, designate=True)
    assert code == OK and header["master_id"] == 1 and header["master_epoch"] == 3


def test_designate_outside_sync_state_set_needs_unclean(make_sim: Any) -> None:
    for unclean, expected in ((False, ResponseCode.CONTROLLER_ELECT_MASTER_FAILED), (True, OK)):
        sim = make_sim(unclean=unclean)
        three_brokers(sim)
        sim.elect("bs", 1)
        code, _, _ = sim.elect("bs", 3, designate=True)
        assert code == expected, unclean


def test_all_replicas_shutdown_and_restart(sim: Any) -> None:
    sim.join("bs")
    sim.join("bs")
    sim.elect("bs", 1)  # set {1}
    sim.advance(2_500)  # 1 and 2 dead
    code, _, _ = sim.elect("bs", None)  # controller-triggered: nobody electable
    assert code == ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE
    bs = sim.set_of()
    assert bs.master_id is None and bs.master_epoch == 2 and bs.sync_state_set == (1,)
    assert [type(e).__name__ for e in sim.log[-1]] == ["ElectMaster"]
    assert sim.log[-1][0].new_master_elected is False
    # DLedgerControllerTest ...UnClean=false: broker 2 cannot be elected, broker 1 can (epoch 3)
    sim.heartbeat("bs", 2)
    assert sim.elect("bs", 2)[0] == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    sim.heartbeat("bs", 1)
    code, header, _ = sim.elect("bs", 1)
    assert code == OK and header["master_id"] == 1 and header["master_epoch"] == 3


def test_enable_elect_unclean_master(make_sim: Any) -> None:
    sim = make_sim(unclean=True)
    sim.join("bs")
    sim.join("bs")
    sim.elect("bs", 1)
    sim.advance(2_500)
    sim.heartbeat("bs", 2)
    code, header, _ = sim.elect("bs", 2)
    assert code == OK and header["master_id"] == 2 and header["master_epoch"] == 2
    assert sim.set_of().sync_state_set == (2,)


@pytest.mark.parametrize(
    ("case", "header", "expected"),
    [
        ("alive_ids_refuse", dict(broker_ids=[2]), ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA),
        ("no_list_with_master_refuses", dict(), ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA),
        ("dead_ids_ok", dict(broker_ids=[3]), OK),
        ("unknown_set_refuses", dict(broker_name="nope"), ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA),
        ("force_ok", dict(broker_ids=[2], clean_living_broker=True), OK),
        ("force_whole_set_ok", dict(clean_living_broker=True), OK),
    ],
)
def test_clean_broker_data(sim: Any, case: str, header: dict[str, Any], expected: ResponseCode) -> None:
    three_brokers(sim)
    sim.elect("bs", 1)
    sim.advance(1_500)
    sim.heartbeat("bs", 1)
    sim.heartbeat("bs", 2)
    sim.advance(1_000)  # 3's lease is over
    code, _, _ = sim.request(RequestCode.CLEAN_BROKER_DATA, **{"broker_name": "bs", **header})
    assert code == expected, case
    if expected == OK:
        bs = sim.state.broker_set("bs")
        removed = header.get("broker_ids")
        if removed:
            assert all(bs.broker(i) is None for i in removed)
        else:
            assert bs is None
            assert sim.state.next_broker_id("bs") == 4  # ids are never reused


def test_serialize(sim: Any) -> None:
    three_brokers(sim)
    sim.elect("bs", 1)
    sim.alter("bs", 1, [1, 2])
    sim.join("other")
    copy = ControllerState()
    copy.restore(sim.state.snapshot())
    assert copy == sim.state and copy.snapshot() == sim.state.snapshot()
    assert copy.describe() == sim.state.describe()


def test_controller_manager_some_api(make_sim: Any) -> None:
    """ControllerManagerTest.testSomeApi: self-elects, then broker 1 stops heartbeating (3 s lease)."""
    sim = make_sim(lease_ms=3_000)
    sim.join("bs")
    sim.join("bs")
    assert sim.elect("bs", 1)[0] == OK
    assert sim.elect("bs", 2)[0] == ResponseCode.CONTROLLER_MASTER_STILL_EXIST
    sim.alter("bs", 1, [1, 2])
    deadline = sim.now_ms + 10_000
    while sim.now_ms < deadline and sim.set_of().master_id != 2:
        sim.advance(500)
        sim.heartbeat("bs", 2)
        sim.scan()
    assert sim.set_of().master_id == 2 and sim.now_ms <= deadline


def test_default_broker_heartbeat_manager_inactive(make_sim: Any) -> None:
    """DefaultBrokerHeartbeatManagerTest: a 3 s heartbeat with no renewal expires within 5 s."""
    sim = make_sim()
    sim.join("bs")
    sim.heartbeat("bs", 1, heartbeat_timeout_ms=3_000)
    key = ("bs", 1)
    sim.advance(2_999)
    assert sim.heartbeats.is_alive(key, sim.now_ms) and key not in sim.heartbeats.expired(sim.now_ms)
    sim.advance(2_000)
    assert not sim.heartbeats.is_alive(key, sim.now_ms) and key in sim.heartbeats.expired(sim.now_ms)


def test_broker_lifecycle_listener_scan_after_leader_change(sim: Any) -> None:
    """DLedgerControllerTest.BrokerLifecycleListener: a new leader (state rebuilt by log replay, empty
    heartbeat table) still has master 1 epoch 1 and its inactive-master scan elects away from it."""
    sim.join("bs")
    sim.join("bs")
    sim.elect("bs", 1)
    sim.alter("bs", 1, [1, 2])
    replica = ControllerState()
    for i, entry in enumerate(sim.log, start=1):
        for ev in entry:
            replica.apply(ev, i)
    assert replica == sim.state
    bs = replica.broker_set("bs")
    assert (bs.master_id, bs.master_epoch) == (1, 1)
    sim.advance(2_500)
    sim.heartbeat("bs", 2)
    results = sim.scan()
    assert all(r.ok for r in results)
    assert sim.set_of().master_id == 2 and sim.set_of().master_epoch == 2
