"""decide/complete edges: bad header values, unsupported codes, result-count mismatch, read replies."""

from __future__ import annotations

from typing import Any

import pytest

from system_under_test.controller import complete, decide
from system_under_test.protocol.codes import RequestCode, ResponseCode

OK = ResponseCode.SUCCESS


@pytest.mark.parametrize(
    ("code", "header", "match"),
    [
        (RequestCode.CONTROLLER_APPLY_BROKER_ID, dict(broker_name="bs", broker_id=0, register_code="x"), "broker_id"),
        (RequestCode.CONTROLLER_APPLY_BROKER_ID, dict(broker_name="bs", broker_id=1, register_code=""),
         "register_code"),
        (RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, dict(broker_name=""), "broker_name"),
        (RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, dict(broker_name="bs", master_id=1, master_epoch=1,
                                                           sync_state_set=[0], sync_state_set_epoch=1),
         "sync_state_set"),
        (RequestCode.CONTROLLER_ELECT_MASTER, dict(broker_name="bs", broker_id=0), "broker_id"),
        (RequestCode.BROKER_HEARTBEAT, dict(broker_name="bs", broker_id=1, broker_epoch=-1), "broker_epoch"),
    ],
)
def test_bad_header_values_raise_value_error(sim: Any, code: RequestCode, header: dict[str, Any],
                                              match: str) -> None:
    sim.join("bs")
    with pytest.raises(ValueError, match=match):
        decide(code, header, None, sim.ctx())


def test_unsupported_code(sim: Any) -> None:
    d = decide(RequestCode.SEND_MESSAGE, {}, None, sim.ctx())
    assert d.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and not d.events
    assert "SEND_MESSAGE" in d.describe()


def test_complete_with_wrong_result_count(sim: Any) -> None:
    d = sim.decide_only(RequestCode.CONTROLLER_APPLY_BROKER_ID, cluster_name="c1", broker_name="bs", broker_id=1,
                        register_code="rc", broker_addr="a:1")
    code, header, _ = complete(d, [], sim.state)
    assert code == ResponseCode.SYSTEM_ERROR and "1 events proposed but 0" in header["message"]
    assert "ApplyBrokerId" in d.describe()


def test_elect_minus_one_is_controller_triggered(sim: Any) -> None:
    sim.join("bs")
    sim.elect("bs", 1)
    code, _, _ = sim.request(RequestCode.CONTROLLER_ELECT_MASTER, broker_name="bs", broker_id=-1)
    assert code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST


def test_first_election_requires_registered_live_requester(sim: Any) -> None:
    sim.apply_id("bs", 1, "rc")  # id assigned, never registered
    assert sim.elect("bs", 1)[0] == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    assert sim.elect("bs", None)[0] == ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE
    sim.register("bs", 1, "inc")
    sim.advance(2_500)  # registered, but its lease ran out
    assert sim.elect("bs", 1)[0] == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    sim.heartbeat("bs", 1)
    assert sim.elect("bs", 1)[0] == OK


def test_reads(sim: Any) -> None:
    sim.join("bs")
    sim.join("bs")
    sim.elect("bs", 1)
    code, header, body = sim.request(RequestCode.CONTROLLER_GET_REPLICA_INFO, broker_name="bs")
    assert code == OK and header["master_id"] == 1 and body["brokers"] == [[1, "bs-1:1"], [2, "bs-2:1"]]
    assert sim.request(RequestCode.CONTROLLER_GET_REPLICA_INFO, broker_name="zz")[0] == \
        ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST
    sim.advance(2_100)
    sim.heartbeat("bs", 2)
    code, _, body = sim.request(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, broker_names=[])
    assert code == OK and [m["alive"] for m in body[0]["members"]] == [False, True]
    assert [m["in_sync"] for m in body[0]["members"]] == [True, False]
    assert sim.request(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, broker_names=["zz"])[2] == []
    code, _, rows = sim.request(RequestCode.CONTROLLER_GET_BROKER_EPOCHS, broker_name="bs")
    assert code == OK and [(r["broker_id"], r["is_master"], r["alive"]) for r in rows] == [(1, True, False),
                                                                                          (2, False, True)]
    assert rows[1]["lease_remaining_ms"] == 2_000
    index = sim.index
    sim.request(RequestCode.CONTROLLER_GET_BROKER_EPOCHS)
    assert sim.index == index  # reads produce no events
