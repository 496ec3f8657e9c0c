"""The broker-ids and membership workloads' requests and reply meanings (``client/workload_requests.py``): one core
that the real workload clients and the simulated ones both call."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from checker.history import Op
from checker.linearizable import check as check_linearizable
from system_under_test.client.workload_requests import (
    alloc_op,
    alloc_seen,
    apply_id_call,
    apply_id_value,
    lifecycle_op,
    read_value,
    stale_heartbeat_call,
    stale_heartbeat_value,
)
from system_under_test.protocol.codes import RequestCode, ResponseCode
from workloads.broker_ids import IdAllocator

CODES = st.sampled_from([int(c) for c in ResponseCode])
SUCCESS = int(ResponseCode.SUCCESS)


@given(code=CODES, message=st.text(max_size=300), bid=st.integers(1, 10_000))
def test_apply_id_is_applied_on_success_refused_on_id_invalid_and_an_error_otherwise(code: int, message: str,
                                                                                    bid: int) -> None:
    v = {"broker_set": "vids-0", "broker_id": bid, "register_code": "rc"}
    got = apply_id_value(v, code, message)
    if code == SUCCESS:
        assert got == {**v, "applied": True}
    elif code == ResponseCode.CONTROLLER_BROKER_ID_INVALID:
        assert got is not None and got["applied"] is False and len(got["reason"]) <= 200
    else:
        assert got is None
    assert v == {"broker_set": "vids-0", "broker_id": bid, "register_code": "rc"}  # the invoke's value is kept


@given(code=CODES, brokers=st.lists(st.tuples(st.integers(1, 99), st.text(max_size=8)), max_size=6),
       f=st.sampled_from(["read-ids", "read-table", "read-members"]))
def test_reads_parse_a_success_and_an_unknown_set_has_no_members(code: int, brokers: list[tuple[int, str]],
                                                                 f: str) -> None:
    header = {"master_id": 3, "master_addr": "b", "master_epoch": 4, "sync_state_set_epoch": 5}
    got = read_value(f, {"broker_set": "s"}, code, header, {"brokers": [list(b) for b in brokers]})
    if code == SUCCESS:
        assert got is not None
        if f == "read-ids":
            assert got["ids"] == sorted(i for i, _ in brokers)
        elif f == "read-table":
            assert got["brokers"] == [[i, a] for i, a in brokers] and got["master_epoch"] == 4
        else:
            assert {k: got[k] for k in header} == header
    elif code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST and f != "read-members":
        assert got is not None and got.get("ids", got.get("brokers")) == [] and got.get("master_id") is None
    else:
        assert got is None


@given(code=CODES, stale=st.integers(0, 50), extra=st.integers(1, 50))
def test_a_stale_heartbeat_carries_the_old_epoch_and_reads_accepted_or_refused(code: int, stale: int,
                                                                               extra: int) -> None:
    req, header = stale_heartbeat_call("c", "mem-0", 2, "m0", stale, 2000)
    assert req == RequestCode.BROKER_HEARTBEAT and header["broker_epoch"] == stale and header["broker_id"] == 2
    got = stale_heartbeat_value({"slot": "m0"}, 2, stale, stale + extra, code)
    if code == SUCCESS:
        assert got is not None and got["refused"] is False
    elif code == ResponseCode.STALE_BROKER_EPOCH:
        assert got is not None and got["refused"] is True
    else:
        assert got is None
    assert apply_id_call("c", "s", 7, "rc", "a")[1]["broker_id"] == 7


def _apply_correctly(state: tuple[int, dict[int, str]], value: dict[str, Any]) -> bool:
    nxt, held = state
    bid, code = value["broker_id"], value["register_code"]
    if bid in held:
        return held[bid] == code
    return bid == nxt if not held else bid >= nxt


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32), n_ops=st.integers(1, 80))
def test_the_generated_ops_against_a_correct_allocator_are_linearizable_and_seen_never_decreases(
        seed: int, n_ops: int) -> None:
    """Drive :func:`alloc_op` / :func:`alloc_seen` against a correct sequential allocator: the ok history is
    linearizable for ``IdAllocator``, the next id seen per set never goes back, at most 32 claims are kept."""
    rng = random.Random(seed)
    sets = ("vids-0", "vids-1")
    alloc: dict[str, tuple[int, dict[int, str]]] = {s: (1, {}) for s in sets}
    seen: dict[str, int] = {}
    claims: tuple[tuple[str, int, str], ...] = ()
    ops = []
    applied_n = 0
    for i in range(n_ops):
        f, value = alloc_op(rng, sets, (), seen, claims, applied_n, apply_fraction=0.45, read_fraction=0.15)
        assert f in ("next-id", "apply-id", "read-ids")
        name = value["broker_set"]
        nxt, held = alloc[name]
        if f == "apply-id":
            applied_n += 1
            ok = _apply_correctly(alloc[name], value)
            if ok and value["broker_id"] not in held:
                alloc[name] = (max(nxt, value["broker_id"] + 1), {**held, value["broker_id"]: value["register_code"]})
            out = apply_id_value(value, SUCCESS if ok else int(ResponseCode.CONTROLLER_BROKER_ID_INVALID), "no")
        elif f == "next-id":
            out = {**value, "next_broker_id": nxt}
        else:
            out = read_value(f, value, SUCCESS, {}, {"brokers": [[b, "a"] for b in held]})
        assert out is not None
        before = dict(seen)
        learnt = alloc_seen(seen, claims, f, out)
        if learnt is not None:
            seen, claims = learnt
        assert all(seen.get(k, 1) >= v for k, v in before.items()) and len(claims) <= 32
        ops += [Op.from_dict({"index": 2 * i, "time": 2 * i, "type": "invoke", "process": 0, "f": f, "value": value}),
                Op.from_dict({"index": 2 * i + 1, "time": 2 * i + 1, "type": "ok", "process": 0, "f": f,
                              "value": out})]
    res = check_linearizable(ops, IdAllocator())
    assert res.valid is True, res.describe()


@given(seed=st.integers(0, 2**32), stale=st.sampled_from([None, "m0", "m2"]), bounced=st.booleans())
def test_a_stale_heartbeat_follows_each_bounce_and_the_first_op_is_a_bounce(seed: int, stale: str | None,
                                                                            bounced: bool) -> None:
    slots = ("m0", "m1", "m2")
    f, value = lifecycle_op(random.Random(seed), slots, stale, bounced, pause_write_fraction=0.0, bounce_fraction=1.0)
    if stale is not None:
        assert (f, value) == ("stale-heartbeat", {"slot": stale})
    else:
        assert f == "bounce" and value["slot"] in slots
    # the same rng state draws the same op (the generators and the simulator replay by seed)
    assert lifecycle_op(random.Random(seed), slots, stale, bounced, pause_write_fraction=0.0,
                        bounce_fraction=1.0) == (f, value)
