"""The controller-register workload's pure core (``client/register_requests.py``): the next op, what an ok op
teaches, the alter a fresh or pinned op sends, and the requests and values both the real and the simulated client
use."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from system_under_test.client import register_requests as rr
from system_under_test.protocol.codes import RequestCode
from workloads.models import ModelError, meta_from_reply

SETS = rr.set_names(2)
CONTROLLERS = ("c1", "c2", "c3")

ids = st.integers(1, 5)
states = st.tuples(st.one_of(st.none(), ids), st.integers(0, 9), st.lists(ids, max_size=5, unique=True).map(
    lambda s: tuple(sorted(s))), st.integers(0, 9))
seens = st.dictionaries(st.sampled_from(SETS), st.lists(states, max_size=rr.KEEP_STATES).map(tuple), max_size=2)


def as_reply(state: rr.MetaState) -> dict[str, Any]:
    return dict(zip(rr.META_KEYS, (state[0], state[1], list(state[2]), state[3]), strict=True))


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32), seen=seens, replicas=st.integers(2, 5))
def test_register_op_draws_ops_in_range_and_pins_only_a_superseded_state_of_the_current_master(
        seed: int, seen: dict[str, tuple[rr.MetaState, ...]], replicas: int) -> None:
    f, value = rr.register_op(random.Random(seed), SETS, CONTROLLERS, seen, replicas=replicas)
    assert (f, value) == rr.register_op(random.Random(seed), SETS, CONTROLLERS, seen, replicas=replicas)
    assert f in rr.REGISTER_FS and value["broker_set"] in SETS
    states = seen.get(value["broker_set"], ())
    if f == "read":
        assert value["via"] in (None, *CONTROLLERS)
    elif f == "elect":
        in_set = states[-1][2] if states else ()
        assert 1 <= value["broker_id"] <= replicas or value["broker_id"] in in_set
    elif "master_epoch" in value:
        stale = rr.stale_state(states)
        assert stale is not None and stale != states[-1] and stale[0] == states[-1][0] is not None
        assert (value["master_id"], value["master_epoch"], value["sync_state_set_epoch"]) == (stale[0], stale[1],
                                                                                             stale[3])
        assert value["master_id"] in value["sync_state_set"]
    else:
        assert set(value["sync_state_set"]) <= set(range(1, replicas + 1))


def test_the_op_mix_follows_the_fractions() -> None:
    rng = random.Random(7)
    seen = {"vreg-0": ((1, 1, (1,), 1), (1, 1, (1, 2), 2)), "vreg-1": ((1, 1, (1,), 1), (1, 1, (1, 3), 2))}
    ops = [rr.register_op(rng, SETS, CONTROLLERS, seen) for _ in range(4000)]
    share = {f: sum(1 for g, _ in ops if g == f) / len(ops) for f in rr.REGISTER_FS}
    assert abs(share["read"] - rr.READ_FRACTION) < 0.03 and abs(share["elect"] - rr.ELECT_FRACTION) < 0.03
    reads = [v for f, v in ops if f == "read"]
    assert abs(sum(v["via"] is not None for v in reads) / len(reads) - rr.FOLLOWER_READ_FRACTION) < 0.04
    alters = [v for f, v in ops if f == "alter"]
    assert abs(sum("master_epoch" in v for v in alters) / len(alters) - rr.STALE_ALTER_FRACTION) < 0.04
    elects = [v["broker_id"] for f, v in ops if f == "elect"]
    assert elects.count(1) < len(elects) / 4  # mostly a non-master member of the last set seen


@settings(max_examples=200, deadline=None)
@given(state=states, extra=st.dictionaries(st.sampled_from(("broker_set", "via")), st.text(max_size=3)))
def test_observed_state_of_a_read_is_the_models_reading_of_it(state: rr.MetaState, extra: dict[str, Any]) -> None:
    value = {**extra, **as_reply(state)}
    assert rr.observed_state("read", value) == meta_from_reply(value) == state


@given(value=st.dictionaries(st.sampled_from(rr.META_KEYS), st.one_of(st.none(), st.integers(0, 3), st.text(
    max_size=2), st.lists(st.integers(0, 3), max_size=2))))
def test_observed_state_is_none_exactly_where_the_model_refuses_the_reply(value: dict[str, Any]) -> None:
    try:
        expected: rr.MetaState | None = meta_from_reply(value)
    except (ModelError, ValueError, TypeError):
        expected = None
    assert rr.observed_state("read", value) == expected


@given(seen=seens, state=states, f=st.sampled_from(("read", "elect", "alter")))
def test_register_seen_appends_each_new_observation_and_keeps_the_last_few(
        seen: dict[str, tuple[rr.MetaState, ...]], state: rr.MetaState, f: str) -> None:
    reply = as_reply(state)
    value = {"broker_set": "vreg-0", **({"via": None, **reply} if f == "read" else
                                        {"reply": reply} if f == "elect" else {"sent": reply})}
    observed = state if f != "alter" else (state[0], state[1], state[2], state[3] + 1)
    got = rr.register_seen(seen, f, value)
    before = seen.get("vreg-0", ())
    if before and before[-1] == observed:
        assert got is None
    else:
        assert got is not None and got["vreg-0"] == (*before, observed)[-rr.KEEP_STATES:]
        assert {k: v for k, v in got.items() if k != "vreg-0"} == {k: v for k, v in seen.items() if k != "vreg-0"}
    assert rr.register_seen(seen, "alter", {"broker_set": "vreg-0", "sync_state_set": [1]}) is None  # failed shape


def test_alter_sent_pinned_fresh_and_masterless() -> None:
    pinned = {"broker_set": "vreg-0", "sync_state_set": [3, 1], "master_id": 1, "master_epoch": 2,
              "sync_state_set_epoch": 4}
    assert rr.alter_sent(pinned, {"master_id": 9}) == {"master_id": 1, "master_epoch": 2, "sync_state_set": [1, 3],
                                                       "sync_state_set_epoch": 4}
    fresh = {"broker_set": "vreg-0", "sync_state_set": [3]}
    info = {"master_id": 2, "master_epoch": 5, "sync_state_set": [2], "sync_state_set_epoch": 7}
    assert rr.alter_sent(fresh, info) == {"master_id": 2, "master_epoch": 5, "sync_state_set": [2, 3],
                                          "sync_state_set_epoch": 7}
    assert rr.alter_sent(fresh, {**info, "master_id": None}) is None and rr.alter_sent(fresh, None) is None
    code, header = rr.alter_call("splitbrain", "vreg-0", rr.alter_sent(fresh, info) or {})
    assert code == RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET
    assert header == {"cluster_name": "splitbrain", "broker_name": "vreg-0", "master_id": 2, "master_epoch": 5,
                      "sync_state_set": [2, 3], "sync_state_set_epoch": 7}
    v = rr.alter_value(fresh, {"master_id": 2}, {"new_sync_state_set_epoch": 8, "other": 1})
    assert v == {**fresh, "sent": {"master_id": 2}, "new_sync_state_set_epoch": 8}


def test_requests_and_values() -> None:
    assert rr.elect_call("vreg-1", 2, designate=True, cluster_name="splitbrain") == (
        RequestCode.CONTROLLER_ELECT_MASTER,
        {"broker_name": "vreg-1", "broker_id": 2, "designate": True, "cluster_name": "splitbrain"})
    assert "cluster_name" not in rr.elect_call("vreg-1", None, designate=False, cluster_name=None)[1]
    code, header = rr.register_broker_call("splitbrain", "vreg-0", 1, rr.virtual_addr(0, 0), "ab", None)
    assert code == RequestCode.CONTROLLER_REGISTER_BROKER and header["broker_addr"] == "10.254.0.1:10911"
    reply = {"master_id": 1, "master_epoch": 1, "sync_state_set": [1], "sync_state_set_epoch": 1, "x": 0}
    v = {"broker_set": "vreg-0", "via": "c2"}
    assert rr.meta_read_value(v, reply) == {**v, **{k: reply[k] for k in rr.META_KEYS}}
    assert rr.elect_value({"broker_set": "vreg-0", "broker_id": 1}, reply)["reply"] == rr.meta_fields(reply)
    assert rr.observed_state("read", rr.meta_read_value(v, reply)) == rr.INITIAL_STATE
    assert rr.set_names(3) == ("vreg-0", "vreg-1", "vreg-2")
