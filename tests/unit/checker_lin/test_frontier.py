"""An invalid result names the states the model could be in when the failing op had to take effect: the
states of the explored nodes that got furthest, the state after the longest linearizable prefix among them."""

from __future__ import annotations

import random

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from checker.history import Op
from checker.linearizable import check, failure_window
from checker.linearizable.gen import kv_history, register_history
from checker.models import make_model


def _check_frontier(history: list[Op], model_name: str) -> None:
    res = check(history, make_model(model_name))
    if res.valid is not False:
        assert res.frontier_states == ()
        return
    assert 1 <= len(res.frontier_states) <= 8
    assert len(set(res.frontier_states)) == len(res.frontier_states)
    after_prefix = res.linearization[-1][1] if res.linearization else make_model(model_name).init()
    assert after_prefix in res.frontier_states
    window = failure_window(res)
    assert window is not None and len(window["states"]) == len(res.frontier_states)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 100_000))
def test_kv_frontier(seed: int) -> None:
    try:
        history = kv_history(random.Random(seed), clients=5, ops=80, keys=1, linearizable=False)
    except ValueError:  # the generator found no get to make stale in so few ops
        assume(False)
    _check_frontier(history, "kv")


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 100_000))
def test_register_frontier(seed: int) -> None:
    history = register_history(random.Random(seed), clients=4, ops=60, values=3)
    _check_frontier(history, "cas-register")


def test_two_concurrent_writes_leave_two_possible_states() -> None:
    """w1, then w2 and w3 overlap, then a read sees 1: either of w2 and w3 may have been last, so the register
    could hold 2 or 3 when the read had to take effect, and the read fits neither."""
    spec = [("invoke", 0, "write", 1), ("ok", 0, "write", 1), ("invoke", 1, "write", 2), ("invoke", 2, "write", 3),
            ("ok", 1, "write", 2), ("ok", 2, "write", 3), ("invoke", 3, "read", None), ("ok", 3, "read", 1)]
    h = [Op(i, i, t, p, f, v) for i, (t, p, f, v) in enumerate(spec)]
    res = check(h, make_model("register"))
    assert res.valid is False and res.op is not None and res.op.index == 7
    assert set(res.frontier_states) == {2, 3}
