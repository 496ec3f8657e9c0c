"""Broker ids and registrations: persistent-unique-broker-id.md (every fault-tolerance path),
KIP-380 broker epochs (stale epochs refused everywhere) and KIP-631 registration/fencing/controlled
shutdown, plus the Kafka ClusterControlManagerTest / BrokerHeartbeatManagerTest scenarios."""

from __future__ import annotations

from typing import Any

import pytest

from system_under_test.controller import (
    ApplyBrokerId,
    FenceBroker,
    RegisterBroker,
    UnfenceBroker,
    UpdateBrokerAddress,
    notifications,
)
from system_under_test.protocol.codes import RequestCode, ResponseCode

OK = ResponseCode.SUCCESS


def next_id(sim: Any, name: str = "bs") -> int:
    code, header, _ = sim.request(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, cluster_name="c1", broker_name=name)
    assert code == OK
    return int(header["next_broker_id"])


# ---- persistent-unique-broker-id.md: Online Process and Fault tolerance -------------------------
def test_online_process(sim: Any) -> None:
    assert next_id(sim) == 1  # 1 / 2: GetNextBrokerId
    code, header, _ = sim.apply_id("bs", 1, "rc-1", "10.0.0.1:1")  # 3 / 4: ApplyBrokerId
    assert code == OK and header["broker_id"] == 1 and header["next_broker_id"] == 2
    code, header, body = sim.register("bs", 1, "inc-a", "10.0.0.1:1")  # 5 / 6
    assert code == OK and header["broker_epoch"] == sim.index and header["fenced"] is True
    assert header["master_id"] is None and body["sync_state_set"] == []
    assert [type(e) for e in sim.log[-1]] == [RegisterBroker]  # same address: no UpdateBrokerAddress


def test_normal_restart_registers_directly(sim: Any) -> None:
    broker_id, epoch = sim.join("bs")
    code, header, _ = sim.register("bs", broker_id, "inc-restarted")
    # the old incarnation's lease is still alive: KIP-631 refuses until it expires
    assert code == ResponseCode.DUPLICATE_BROKER_REGISTRATION and header["retry_after_ms"] > 0
    sim.advance(header["retry_after_ms"] + 1)
    code, header, _ = sim.register("bs", broker_id, "inc-restarted")
    assert code == OK and header["broker_epoch"] > epoch and header["fenced"] is True


def test_create_temp_meta_file_failure_changes_nothing(sim: Any) -> None:
    sim.join("bs")
    before = sim.state.snapshot()
    assert next_id(sim) == 2  # the broker crashes before writing the temp file
    assert sim.state.snapshot() == before
    assert next_id(sim) == 2  # restart: same process from the beginning


def test_apply_broker_id_fail_returns_next_id(sim: Any) -> None:
    assert next_id(sim) == 1
    assert sim.apply_id("bs", 1, "rc-other")[0] == OK  # someone else got id 1 first
    code, header, _ = sim.apply_id("bs", 1, "rc-mine")
    assert code == ResponseCode.CONTROLLER_BROKER_ID_INVALID and header["next_broker_id"] == 2
    assert "temp meta" in header["message"]
    assert sim.apply_id("bs", 2, "rc-mine")[0] == OK  # back to step 2 with the new id


def test_apply_broker_id_success_create_meta_fail_retry_is_idempotent(sim: Any) -> None:
    assert sim.apply_id("bs", 1, "rc-1")[0] == OK
    index, before = sim.index, sim.state.snapshot()
    code, header, _ = sim.apply_id("bs", 1, "rc-1")  # restart with the temp file: same id + code
    assert code == OK and header["broker_id"] == 1
    assert sim.index == index and sim.state.snapshot() == before  # no new event


def test_register_updates_changed_address(sim: Any) -> None:
    """AutoSwitchRoleIntegrationTest.RestartWithChangedAddress: same id 1, address updated."""
    sim.join("bs", "10.0.0.1:1")
    sim.advance(2_500)
    code, header, _ = sim.register("bs", 1, "inc-2", "10.0.0.9:1")
    assert code == OK and header["broker_id"] == 1
    assert [type(e) for e in sim.log[-1]] == [UpdateBrokerAddress, RegisterBroker]
    assert sim.set_of().address(1) == "10.0.0.9:1"
    assert sim.set_of().broker(1).register_code == "code-bs-1"


@pytest.mark.parametrize(
    ("case", "code", "header"),
    [
        ("register_unknown_set", RequestCode.CONTROLLER_REGISTER_BROKER,
         dict(broker_name="zz", broker_id=1, broker_addr="a:1", cluster_name="c1")),
        ("register_unknown_id", RequestCode.CONTROLLER_REGISTER_BROKER,
         dict(broker_name="bs", broker_id=7, broker_addr="a:1", cluster_name="c1")),
        ("heartbeat_unknown_id", RequestCode.BROKER_HEARTBEAT,
         dict(broker_name="bs", broker_id=7, broker_addr="a:1", cluster_name="c1", broker_epoch=1, master_epoch=0,
              max_offset=0, confirm_offset=0)),
        ("elect_unknown_set", RequestCode.CONTROLLER_ELECT_MASTER, dict(broker_name="zz", broker_id=1)),
    ],
)
def test_unknown_broker_needs_to_be_registered(sim: Any, case: str, code: RequestCode,
                                               header: dict[str, Any]) -> None:
    sim.join("bs")
    rc, _, _ = sim.request(code, **header)
    assert rc == ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, case


def test_new_set_accepts_only_its_next_id(sim: Any) -> None:
    code, header, _ = sim.apply_id("new", 3, "rc")
    assert code == ResponseCode.CONTROLLER_BROKER_ID_INVALID and header["next_broker_id"] == 1


def test_ids_never_reused_after_clean(sim: Any) -> None:
    for _ in range(3):
        sim.join("bs")
    sim.advance(2_500)
    assert sim.request(RequestCode.CLEAN_BROKER_DATA, broker_name="bs", broker_ids=[2, 3])[0] == OK
    assert next_id(sim) == 4
    assert sim.apply_id("bs", 2, "rc-new")[0] == ResponseCode.CONTROLLER_BROKER_ID_INVALID
    assert sim.request(RequestCode.CLEAN_BROKER_DATA, broker_name="bs", clean_living_broker=True)[0] == OK
    assert sim.state.broker_set("bs") is None and next_id(sim) == 4
    assert sim.apply_id("bs", 1, "rc-new")[0] == ResponseCode.CONTROLLER_BROKER_ID_INVALID
    assert sim.apply_id("bs", 4, "rc-new")[0] == OK


def test_pipelined_apply_broker_id_same_id_two_codes(sim: Any) -> None:
    a = sim.decide_only(RequestCode.CONTROLLER_APPLY_BROKER_ID, cluster_name="c1", broker_name="bs", broker_id=1,
                        register_code="A", broker_addr="a:1")
    b = sim.decide_only(RequestCode.CONTROLLER_APPLY_BROKER_ID, cluster_name="c1", broker_name="bs", broker_id=1,
                        register_code="B", broker_addr="b:1")
    assert a.events and b.events  # both pass the leader's pre-check
    assert sim.finish(a)[0] == OK
    code, header, _ = sim.finish(b)
    assert code == ResponseCode.CONTROLLER_BROKER_ID_INVALID and header["next_broker_id"] == 2
    assert sim.set_of().broker(1).register_code == "A"


def test_out_of_order_apply_never_hands_out_assigned_id(sim: Any) -> None:
    """Reference quirk 1.6: a larger id applied first must move next id past it."""
    sim.apply_id("bs", 1, "rc1")
    sim.state.apply(ApplyBrokerId("c1", "bs", 5, "x:1", "rc5"), sim.index + 1)
    sim.index += 1
    assert next_id(sim) == 6
    assert sim.apply_id("bs", 3, "rc3")[0] == ResponseCode.CONTROLLER_BROKER_ID_INVALID


# ---- KIP-380: stale broker epochs ---------------------------------------------------------------
def test_stale_epoch_heartbeat_refused_and_not_recorded(sim: Any) -> None:
    broker_id, epoch = sim.join("bs")
    sim.advance(2_500)
    code, header, _ = sim.heartbeat("bs", broker_id, epoch - 1)
    assert code == ResponseCode.STALE_BROKER_EPOCH and "register again" in header["message"]
    assert not sim.heartbeats.is_alive(("bs", broker_id), sim.now_ms)


def test_stale_epoch_everywhere(sim: Any) -> None:
    sim.join("bs")
    sim.join("bs")
    sim.elect("bs", 1)
    epoch1 = sim.state.broker_epoch("bs", 1)
    stale = epoch1 - 1
    code, _, _ = sim.request(RequestCode.CONTROLLER_CONTROLLED_SHUTDOWN, cluster_name="c1", broker_name="bs",
                             broker_id=1, broker_epoch=stale)
    assert code == ResponseCode.STALE_BROKER_EPOCH
    code, _, _ = sim.request(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, cluster_name="c1", broker_name="bs",
                             master_id=1, master_epoch=1, sync_state_set=[1, 2], sync_state_set_epoch=1,
                             broker_epoch=stale)
    assert code == ResponseCode.STALE_BROKER_EPOCH
    code, _, _ = sim.elect("bs", 2, broker_epoch=0)
    assert code == ResponseCode.STALE_BROKER_EPOCH
    res = sim.apply_entry([FenceBroker("c1", "bs", 1, stale), UnfenceBroker("c1", "bs", 2, 0)])
    assert [r.code for r in res] == [ResponseCode.STALE_BROKER_EPOCH] * 2
    assert sim.state.registration("bs", 1).fenced is False


def test_notifications_carry_destination_broker_epoch(sim: Any) -> None:
    sim.join("bs")
    sim.join("bs")
    sim.elect("bs", 1)
    notes = notifications(sim.state, "bs")
    assert [(i, h["broker_epoch"]) for i, _, h in notes] == [
        (1, sim.state.broker_epoch("bs", 1)), (2, sim.state.broker_epoch("bs", 2))]
    assert all(h["master_id"] == 1 and h["master_epoch"] == 1 for _, _, h in notes)
    assert notifications(sim.state, "none") == []


# ---- KIP-631 ------------------------------------------------------------------------------------
def test_new_registration_starts_fenced_and_heartbeat_unfences(sim: Any) -> None:
    sim.apply_id("bs", 1, "rc")
    code, header, _ = sim.register("bs", 1, "inc")
    epoch = header["broker_epoch"]
    assert header["fenced"] is True
    code, header, _ = sim.heartbeat("bs", 1, epoch)
    assert code == OK and header["fenced"] is False and header["broker_epoch"] == epoch
    assert [type(e) for e in sim.log[-1]] == [UnfenceBroker]
    index = sim.index
    assert sim.heartbeat("bs", 1, epoch)[1]["fenced"] is False
    assert sim.index == index  # an unfenced broker's heartbeat proposes nothing


def test_re_registration_and_broker_epoch(sim: Any) -> None:
    """ClusterControlManagerTest.ReRegistrationAndBrokerEpoch."""
    broker_id, epoch = sim.join("bs")
    code, header, _ = sim.register("bs", broker_id, f"inc-bs-{broker_id}")  # same incarnation: amend
    assert code == OK and header["broker_epoch"] == epoch and header["fenced"] is False
    sim.advance(2_500)
    code, header, _ = sim.register("bs", broker_id, "other")
    assert code == OK and header["broker_epoch"] > epoch and header["fenced"] is True


def test_duplicate_registration_then_takeover_then_old_incarnation_stale(sim: Any) -> None:
    broker_id, epoch = sim.join("bs")
    sim.advance(1_000)
    assert sim.register("bs", broker_id, "zombie")[0] == ResponseCode.DUPLICATE_BROKER_REGISTRATION
    sim.advance(1_500)  # old lease expired
    code, header, _ = sim.register("bs", broker_id, "zombie")
    assert code == OK and header["broker_epoch"] > epoch
    assert sim.heartbeat("bs", broker_id, epoch)[0] == ResponseCode.STALE_BROKER_EPOCH
    assert sim.register("bs", broker_id, f"inc-bs-{broker_id}")[0] == ResponseCode.DUPLICATE_BROKER_REGISTRATION


def test_pipelined_registrations_of_two_incarnations(sim: Any) -> None:
    sim.apply_id("bs", 1, "rc")
    a = sim.decide_only(RequestCode.CONTROLLER_REGISTER_BROKER, cluster_name="c1", broker_name="bs", broker_id=1,
                        broker_addr="bs-1:1", incarnation_id="A")
    b = sim.decide_only(RequestCode.CONTROLLER_REGISTER_BROKER, cluster_name="c1", broker_name="bs", broker_id=1,
                        broker_addr="bs-1:1", incarnation_id="B")
    a2 = sim.decide_only(RequestCode.CONTROLLER_REGISTER_BROKER, cluster_name="c1", broker_name="bs", broker_id=1,
                         broker_addr="bs-1:1", incarnation_id="A")
    ca, ha, _ = sim.finish(a)
    cb, _, _ = sim.finish(b)
    ca2, ha2, _ = sim.finish(a2)
    assert (ca, cb, ca2) == (OK, ResponseCode.DUPLICATE_BROKER_REGISTRATION, OK)
    assert ha2["broker_epoch"] == ha["broker_epoch"]  # same incarnation retry: no new epoch


def test_registration_with_incorrect_cluster_id(make_sim: Any) -> None:
    sim = make_sim(cluster_id="cid-1")
    sim.apply_id("bs", 1, "rc")
    code, header, _ = sim.register("bs", 1, "inc", cluster_id="cid-2")
    assert code == ResponseCode.INCONSISTENT_CLUSTER_ID and "cid-2" in header["message"]
    assert sim.register("bs", 1, "inc", cluster_id="cid-1")[0] == OK


def test_fence_multiple_brokers(sim: Any) -> None:
    """QuorumControllerTest.FenceMultipleBrokers: silent brokers are fenced by the scan."""
    for _ in range(4):
        sim.join("bs")
    sim.elect("bs", 1)
    sim.alter("bs", 1, [1, 2, 3, 4])
    for _ in range(6):
        sim.advance(500)
        sim.heartbeat("bs", 1)
        sim.scan()
    fenced = {b.broker_id: b.registration.fenced for b in sim.set_of().brokers}
    assert fenced == {1: False, 2: True, 3: True, 4: True}
    assert sim.set_of().master_id == 1
    # a fenced broker that heartbeats with its current epoch is unfenced again
    code, header, _ = sim.heartbeat("bs", 3)
    assert code == OK and header["fenced"] is False


def test_want_fence(sim: Any) -> None:
    sim.join("bs")
    code, header, _ = sim.heartbeat("bs", 1, want_fence=True)
    assert code == OK and header["fenced"] is True


def test_controlled_shutdown_of_slave(sim: Any) -> None:
    sim.join("bs")
    sim.join("bs")
    sim.elect("bs", 1)
    code, header, _ = sim.heartbeat("bs", 2, want_shutdown=True)
    assert code == OK and header["in_controlled_shutdown"] is True and header["should_shutdown"] is True
    assert sim.set_of().master_id == 1


def test_controlled_shutdown_of_master_moves_mastership(sim: Any) -> None:
    """ReplicationControlManagerTest.ProcessBrokerHeartbeatInControlledShutdown (adapted)."""
    for _ in range(3):
        sim.join("bs")
    sim.elect("bs", 1)
    sim.alter("bs", 1, [1, 2, 3])
    sim.heartbeat("bs", 3, master_epoch=1, max_offset=10)
    code, header, _ = sim.heartbeat("bs", 1, want_shutdown=True)
    assert code == OK and header["should_shutdown"] is True
    bs = sim.set_of()
    assert bs.master_id == 3 and bs.master_epoch == 2 and bs.sync_state_set == (3,)
    # a broker in controlled shutdown is never elected, and its heartbeats do not unfence it
    assert sim.elect("bs", 1, designate=True)[0] == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED


def test_controlled_shutdown_of_lone_master_clears_master(sim: Any) -> None:
    sim.join("bs")
    sim.elect("bs", 1)
    code, header, _ = sim.request(RequestCode.CONTROLLER_CONTROLLED_SHUTDOWN, cluster_name="c1", broker_name="bs",
                                  broker_id=1, broker_epoch=sim.state.broker_epoch("bs", 1))
    assert code == OK and header["should_shutdown"] is True and header["master_id"] is None
    assert sim.set_of().master_epoch == 2 and sim.set_of().sync_state_set == (1,)


def test_pipelined_controlled_shutdown_heartbeats(sim: Any) -> None:
    sim.join("bs")
    sim.join("bs")
    sim.elect("bs", 1)
    sim.alter("bs", 1, [1, 2])
    d1 = sim.decide_only(RequestCode.BROKER_HEARTBEAT, cluster_name="c1", broker_name="bs", broker_id=1,
                         broker_addr="x", broker_epoch=sim.state.broker_epoch("bs", 1), master_epoch=1, max_offset=0,
                         confirm_offset=0, want_shutdown=True)
    d2 = sim.decide_only(RequestCode.BROKER_HEARTBEAT, cluster_name="c1", broker_name="bs", broker_id=1,
                         broker_addr="x", broker_epoch=sim.state.broker_epoch("bs", 1), master_epoch=1, max_offset=0,
                         confirm_offset=0, want_shutdown=True)
    r1 = sim.finish(d1)
    r2 = sim.finish(d2)  # its ElectMaster is stale and rejected at apply; the reply is still fine
    assert r1[0] == OK and r2[0] == OK and r2[1]["should_shutdown"] is True
    assert sim.set_of().master_id == 2 and sim.set_of().master_epoch == 2


def test_restart_after_controlled_shutdown_is_not_a_duplicate(sim: Any) -> None:
    sim.join("bs")
    sim.join("bs")
    sim.elect("bs", 1)
    sim.heartbeat("bs", 2, want_shutdown=True)
    code, header, _ = sim.register("bs", 2, "inc-new")  # lease still alive, but it shut down cleanly
    assert code == OK and header["fenced"] is True
    code, header, _ = sim.heartbeat("bs", 2)
    assert header["fenced"] is False and header["in_controlled_shutdown"] is False
