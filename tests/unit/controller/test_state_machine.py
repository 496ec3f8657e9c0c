"""ControllerState.apply: apply-time re-validation of pipelined events, tombstones, snapshots, bugs."""

from __future__ import annotations

from typing import Any

import pytest

from system_under_test.controller import (
    AlterSyncStateSet,
    ApplyBrokerId,
    CleanBrokerData,
    ControllerState,
    ElectMaster,
    InvariantViolation,
    RegisterBroker,
    describe_state,
)
from system_under_test.protocol.codes import RequestCode, ResponseCode

OK = ResponseCode.SUCCESS


def base(sim: Any) -> None:
    for _ in range(3):
        sim.join("bs")
    sim.elect("bs", 1)  # master 1, epochs 1/1


@pytest.mark.parametrize(
    ("case", "event", "code"),
    [
        ("alter_stale_master_epoch", AlterSyncStateSet("c1", "bs", 1, 0, (1, 2), 1),
         ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH),
        ("alter_stale_set_epoch", AlterSyncStateSet("c1", "bs", 1, 1, (1, 2), 0),
         ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH),
        ("alter_not_master", AlterSyncStateSet("c1", "bs", 2, 1, (1, 2), 1), ResponseCode.CONTROLLER_INVALID_MASTER),
        ("alter_unassigned_member", AlterSyncStateSet("c1", "bs", 1, 1, (1, 9), 1),
         ResponseCode.CONTROLLER_INVALID_REPLICAS),
        ("alter_drops_master", AlterSyncStateSet("c1", "bs", 1, 1, (2, 3), 1),
         ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
        ("alter_unknown_set", AlterSyncStateSet("c1", "zz", 1, 1, (1,), 1),
         ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
        ("elect_on_stale_master_epoch", ElectMaster("c1", "bs", True, 2, 0, 0),
         ResponseCode.CONTROLLER_MASTER_STILL_EXIST),
        ("elect_unassigned", ElectMaster("c1", "bs", True, 9, 1, 1), ResponseCode.CONTROLLER_ELECT_MASTER_FAILED),
        ("elect_unknown_set", ElectMaster("c1", "zz", True, 1, 0, 0),
         ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED),
        ("register_unassigned", RegisterBroker("c1", "bs", 9, "i", 0),
         ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED),
        ("register_other_incarnation_in_between", RegisterBroker("c1", "bs", 1, "new", 0),
         ResponseCode.DUPLICATE_BROKER_REGISTRATION),
        ("apply_id_held_by_other_code", ApplyBrokerId("c1", "bs", 2, "a", "other"),
         ResponseCode.CONTROLLER_BROKER_ID_INVALID),
        ("clean_unknown_set", CleanBrokerData("c1", "zz"), ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA),
    ],
)
def test_rejected_event_changes_nothing(sim: Any, case: str, event: Any, code: ResponseCode) -> None:
    base(sim)
    before = sim.state.to_dict()
    result = sim.state.apply(event, sim.index + 1)
    assert result.code == code, case
    assert result.message and not result.ok
    after = sim.state.to_dict()
    assert after.pop("last_index") == sim.index + 1
    before.pop("last_index")
    assert after == before


def test_pipelined_alters_second_is_fenced(sim: Any) -> None:
    base(sim)
    a = sim.decide_only(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, cluster_name="c1", broker_name="bs",
                        master_id=1, master_epoch=1, sync_state_set=[1, 2], sync_state_set_epoch=1)
    b = sim.decide_only(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, cluster_name="c1", broker_name="bs",
                        master_id=1, master_epoch=1, sync_state_set=[1, 3], sync_state_set_epoch=1)
    assert sim.finish(a)[0] == OK
    assert sim.finish(b)[0] == ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
    assert sim.set_of().sync_state_set == (1, 2) and sim.set_of().sync_state_set_epoch == 2


def test_pipelined_first_elections_one_master(sim: Any) -> None:
    sim.join("bs")
    sim.join("bs")
    a = sim.decide_only(RequestCode.CONTROLLER_ELECT_MASTER, cluster_name="c1", broker_name="bs", broker_id=1)
    b = sim.decide_only(RequestCode.CONTROLLER_ELECT_MASTER, cluster_name="c1", broker_name="bs", broker_id=2)
    assert sim.finish(a)[0] == OK
    code, header, _ = sim.finish(b)
    assert code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST and header["master_id"] == 1
    assert sim.set_of().master_epoch == 1


def test_alter_request_check_order(sim: Any) -> None:
    """Reference 1.3 order: exists, unchanged, master, master epoch, set epoch, registered, alive, has master."""
    base(sim)
    sim.advance(1_500)
    sim.heartbeat("bs", 1)
    sim.heartbeat("bs", 2)
    sim.advance(600)  # 3 is dead now
    cases = [
        (dict(broker_name="zz"), ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
        (dict(sync_state_set=[1]), ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
        (dict(master_id=2, master_epoch=0), ResponseCode.CONTROLLER_INVALID_MASTER),
        (dict(master_epoch=0, sync_state_set_epoch=0), ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH),
        (dict(sync_state_set_epoch=0, sync_state_set=[1, 9]), ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH),
        (dict(sync_state_set=[1, 9, 3]), ResponseCode.CONTROLLER_INVALID_REPLICAS),
        (dict(sync_state_set=[2, 3]), ResponseCode.CONTROLLER_BROKER_NOT_ALIVE),
        (dict(sync_state_set=[2]), ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
        (dict(sync_state_set=[1, 2]), OK),
    ]
    for override, expected in cases:
        header = dict(cluster_name="c1", broker_name="bs", master_id=1, master_epoch=1, sync_state_set=[1, 2],
                      sync_state_set_epoch=1)
        header.update(override)
        assert sim.request(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, **header)[0] == expected, override


def test_clean_master_clears_it_and_bumps_epochs(sim: Any) -> None:
    base(sim)
    sim.alter("bs", 1, [1, 2])
    result = sim.apply_entry([CleanBrokerData("c1", "bs", (1,))])[0]
    assert result.ok and result.notify_broker_set == "bs"
    bs = sim.set_of()
    assert (bs.master_id, bs.master_epoch, bs.sync_state_set, bs.sync_state_set_epoch) == (None, 2, (2,), 3)


def test_recreated_set_keeps_ids_and_epochs(sim: Any) -> None:
    base(sim)
    sim.apply_entry([CleanBrokerData("c1", "bs")])
    assert sim.state.broker_set("bs") is None
    assert sim.apply_id("bs", 4, "rc4")[0] == OK
    bs = sim.set_of()
    assert bs.next_broker_id == 5 and bs.master_epoch >= 1 and bs.sync_state_set_epoch >= 1
    assert bs.is_first_election()


def test_apply_index_must_not_go_backwards(sim: Any) -> None:
    base(sim)
    with pytest.raises(InvariantViolation, match="last applied index"):
        sim.state.apply(CleanBrokerData("c1", "bs", (3,)), sim.index - 1)
    # events of one entry share an index
    sim.state.apply(CleanBrokerData("c1", "bs", (3,)), sim.index)


def test_restore_corrupt_snapshot(sim: Any) -> None:
    with pytest.raises(InvariantViolation, match="cannot restore"):
        sim.state.restore(b"\x93garbage")


def test_describe_state(sim: Any) -> None:
    base(sim)
    text = describe_state(sim.state)
    assert "bs (cluster c1): master=1 master_epoch=1 set=[1] set_epoch=1 next_id=4" in text
    assert text.count("epoch=") >= 3


def test_bug_reuse_broker_id(make_sim: Any) -> None:
    sim = make_sim(bugs=frozenset({"reuse-broker-id"}))
    for _ in range(2):
        sim.join("bs")
    sim.advance(2_500)
    sim.request(RequestCode.CLEAN_BROKER_DATA, broker_name="bs", clean_living_broker=True)
    _, header, _ = sim.request(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, cluster_name="c1", broker_name="bs")
    assert header["next_broker_id"] == 1  # BUG: id 1 handed out again


def test_bug_no_epoch_fencing(make_sim: Any) -> None:
    sim = make_sim(bugs=frozenset({"no-epoch-fencing"}))
    base(sim)
    result = sim.state.apply(AlterSyncStateSet("c1", "bs", 1, 0, (1, 2), 0), sim.index + 1)
    assert result.ok  # BUG: a stale alter is accepted


def test_state_equality_and_hash() -> None:
    a, b = ControllerState(), ControllerState()
    assert a == b and a != object()
    with pytest.raises(TypeError):
        hash(a)
