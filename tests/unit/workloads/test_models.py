"""The controller-metadata model: table tests of each step, and property tests against the checker.

The property tests run a small reference controller (written here, independently of the model) on random
op sequences, record the sequential history it produces, and assert the linearizability checker accepts it
with the model -- and rejects it once one read reports a state the controller never had.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checker.history import Op
from checker.linearizable import check
from checker.models import UNKNOWN, Inconsistent, ModelError, OpInput
from workloads.models import INITIAL_STATE, ControllerMetadata, describe_meta, meta_from_reply

S = INITIAL_STATE  # (1, 1, (1,), 1)
M = ControllerMetadata(replicas=3)


def read_out(state: Any) -> dict[str, Any]:
    master, epoch, sss, set_epoch = state
    return {"broker_set": "b", "master_id": master, "master_epoch": epoch, "sync_state_set": list(sss),
            "sync_state_set_epoch": set_epoch}


def alter_in(sss: list[int], pinned: tuple[int, int, int] | None = None) -> dict[str, Any]:
    v: dict[str, Any] = {"broker_set": "b", "sync_state_set": sss}
    if pinned is not None:
        v.update(master_id=pinned[0], master_epoch=pinned[1], sync_state_set_epoch=pinned[2])
    return v


def sent(master: int, epoch: int, sss: list[int], set_epoch: int) -> dict[str, Any]:
    return {"sent": {"master_id": master, "master_epoch": epoch, "sync_state_set": sss,
                     "sync_state_set_epoch": set_epoch}, "new_sync_state_set_epoch": set_epoch + 1}


TWO = (1, 1, (1, 2), 2)  # after a successful alter to [1, 2]

LEGAL = [
    pytest.param(S, "read", {"broker_set": "b"}, read_out(S), S, id="read-current"),
    pytest.param(S, "read", {"broker_set": "b"}, UNKNOWN, S, id="read-unknown"),
    pytest.param(TWO, "elect", {"broker_set": "b", "broker_id": 2}, {}, (2, 2, (2,), 3), id="elect-in-set"),
    pytest.param(S, "alter", alter_in([2]), sent(1, 1, [1, 2], 1), TWO, id="alter-fresh-ok"),
    pytest.param(S, "alter", alter_in([2]), UNKNOWN, TWO, id="alter-fresh-unknown-adds-master"),
    pytest.param(S, "alter", alter_in([1, 3], (1, 1, 1)), {}, (1, 1, (1, 3), 2), id="alter-pinned-current"),
    pytest.param(TWO, "alter", alter_in([1], (1, 1, 2)), UNKNOWN, (1, 1, (1,), 3), id="alter-pinned-unknown-shrink"),
]


@pytest.mark.parametrize(("state", "f", "value", "output", "after"), LEGAL)
def test_legal_steps(state: Any, f: str, value: Any, output: Any, after: Any) -> None:
    assert M.step(state, OpInput(f, value), output) == after


ILLEGAL = [
    pytest.param(S, "read", {"broker_set": "b"}, read_out((1, 1, (1,), 0)), "set_epoch=0", id="read-stale"),
    pytest.param(S, "elect", {"broker_set": "b", "broker_id": 1}, {}, "already master", id="elect-master"),
    pytest.param(S, "elect", {"broker_set": "b", "broker_id": 3}, {}, "not in the sync-state set",
                 id="elect-out-of-set"),
    pytest.param(TWO, "alter", alter_in([1, 3], (1, 1, 1)), {}, "stale sync-state set", id="alter-stale-set-epoch"),
    pytest.param(TWO, "alter", alter_in([1, 3], (1, 0, 2)), {}, "stale master", id="alter-stale-master-epoch"),
    pytest.param(TWO, "alter", alter_in([2, 3], (2, 1, 2)), {}, "master is 1", id="alter-not-master"),
    pytest.param(TWO, "alter", alter_in([1, 2], (1, 1, 2)), {}, "unchanged", id="alter-unchanged"),
    pytest.param(S, "alter", alter_in([2]), sent(1, 1, [2], 1), "without the master", id="alter-drops-master"),
    pytest.param(S, "alter", alter_in([2]), {**sent(1, 1, [1, 2], 1), "new_sync_state_set_epoch": 5},
                 "new set epoch 5", id="alter-wrong-new-epoch"),
]


@pytest.mark.parametrize(("state", "f", "value", "output", "reason"), ILLEGAL)
def test_illegal_steps_say_what_could_not_happen(state: Any, f: str, value: Any, output: Any, reason: str) -> None:
    res = M.step(state, OpInput(f, value), output)
    assert isinstance(res, Inconsistent), res
    assert reason in res.reason


def test_unclean_election_allows_any_replica() -> None:
    unclean = ControllerMetadata(replicas=3, unclean=True)
    assert unclean.step(S, OpInput("elect", {"broker_set": "b", "broker_id": 3}), {}) == (3, 2, (3,), 2)
    assert isinstance(unclean.step(S, OpInput("elect", {"broker_set": "b", "broker_id": 4}), {}), Inconsistent)


@pytest.mark.parametrize(("f", "value"), [("write", {"broker_set": "b"}), ("read", 3),
                                          ("elect", {"broker_set": "b", "broker_id": "x"}),
                                          ("alter", {"broker_set": "b", "sync_state_set": "1,2"})],
                         ids=["unknown-f", "not-a-mapping", "bad-broker-id", "bad-set"])
def test_malformed_ops_raise_model_error(f: str, value: Any) -> None:
    with pytest.raises(ModelError):
        M.step(S, OpInput(f, value), {})


def test_partitions_by_broker_set_and_reads_are_read_only() -> None:
    assert M.partition_key(OpInput("read", {"broker_set": "vreg-1"})) == "vreg-1"
    assert M.read_only(OpInput("read", {}), None) and not M.read_only(OpInput("alter", {}), None)
    assert meta_from_reply(read_out(TWO)) == TWO
    assert describe_meta(TWO) == "master=1 master_epoch=1 sync_state_set=[1, 2] set_epoch=2"
    with pytest.raises(ModelError, match="lacks"):
        meta_from_reply({"master_id": 1})


# ---------------------------------------------------------------------------------------------
# Reference controller and property tests


def reference(state: Any, op: tuple[Any, ...]) -> tuple[Any, Any]:
    """(completion type, output/new state) of one op on an independent, minimal controller."""
    master, epoch, sss, set_epoch = state
    kind = op[0]
    if kind == "read":
        return "ok", state
    if kind == "elect":
        target = op[1]
        if target == master or target not in sss:
            return "fail", state
        return "ok", (target, epoch + 1, (target,), set_epoch + 1)
    members, pinned = op[1], op[2]
    m, e, se = pinned if pinned is not None else (master, epoch, set_epoch)
    new = tuple(sorted(set(members) | ({m} if pinned is None else set())))
    if (m, e, se) != (master, epoch, set_epoch) or master not in new or new == sss:
        return "fail", state
    return "ok", (master, epoch, new, set_epoch + 1)


OPS = st.one_of(
    st.just(("read",)),
    st.tuples(st.just("elect"), st.integers(1, 3)),
    st.tuples(st.just("alter"), st.lists(st.integers(1, 3), max_size=3),
              st.none() | st.tuples(st.integers(1, 3), st.integers(0, 4), st.integers(0, 6))),
)


def sequential_history(ops: list[tuple[Any, ...]], sets: tuple[str, ...] = ("a", "b")) -> list[Op]:
    states = dict.fromkeys(sets, INITIAL_STATE)
    out: list[Op] = []
    for i, op in enumerate(ops):
        name = sets[i % len(sets)]
        state = states[name]
        kind, result = reference(state, op)
        if op[0] == "read":
            value: dict[str, Any] = {"broker_set": name, "via": None}
            done = {**value, **read_out(state), "broker_set": name}
        elif op[0] == "elect":
            value = {"broker_set": name, "broker_id": op[1]}
            done = dict(value)
        else:
            value = {"broker_set": name, "sync_state_set": list(op[1])}
            if op[2] is not None:
                value.update(master_id=op[2][0], master_epoch=op[2][1], sync_state_set_epoch=op[2][2])
                done = dict(value)
            else:
                m, e, _, se = state
                assert m is not None  # the reference never clears the master
                done = {**value, **sent(m, e, sorted(set(op[1]) | {m}), se)}
        states[name] = result if op[0] != "read" else state
        t = 10 * i
        out.append(Op(len(out), t, "invoke", i % 3, op[0], value))
        out.append(Op(len(out), t + 5, kind, i % 3, op[0], done if kind == "ok" else value))
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(OPS, max_size=30))
def test_sequential_histories_of_the_reference_controller_are_linearizable(ops: list[tuple[Any, ...]]) -> None:
    res = check(sequential_history(ops), ControllerMetadata(replicas=3))
    assert res.valid is True, res.describe()


@settings(max_examples=40, deadline=None)
@given(st.lists(OPS, max_size=20), st.integers(5, 50))
def test_a_read_of_a_state_never_reached_is_rejected(ops: list[tuple[Any, ...]], bogus_epoch: int) -> None:
    history = sequential_history([*ops, ("read",)], sets=("a",))
    last = history[-1]
    bad = {**last.value, "master_epoch": 100 + bogus_epoch}  # epochs only grow by one per op
    history[-1] = Op(last.index, last.time, "ok", last.process, "read", bad)
    res = check(history, ControllerMetadata(replicas=3))
    assert res.valid is False
    assert res.op is not None and res.op.index == last.index
