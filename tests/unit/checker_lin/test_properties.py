"""Property tests: sequential runs widened into concurrent histories are linearizable; an impossible read is
always caught; and the WGL search agrees with a brute-force permutation checker on small random histories."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from checker.history import Op
from checker.linearizable import Call, build_calls, check, partition_calls
from checker.linearizable.gen import kv_history
from checker.models import Inconsistent, Model, OpInput, make_model

MODELS = ["register", "cas-register", "kv", "mutex", "fifo-queue", "unordered-queue", "set"]


def _draw_op(data: st.DataObject, name: str, state: Any, n: int) -> tuple[str, Any, Any, bool]:
    """(f, input value, ok output, definitely-failed?) for one op run sequentially from ``state``."""
    draw = data.draw
    if name in ("register", "cas-register"):
        kinds = ["read", "write"] + (["cas"] if name == "cas-register" else [])
        f = draw(st.sampled_from(kinds))
        if f == "read":
            return f, None, state, False
        if f == "write":
            return f, n, n, False
        expected = draw(st.sampled_from([state, n + 100]))
        return f, [expected, n], [expected, n], expected != state
    if name == "kv":
        key = draw(st.sampled_from(["a", "b"]))
        cur = dict(state).get(key, "")
        f = draw(st.sampled_from(["get", "put", "append"]))
        if f == "get":
            return f, {"key": key, "value": None}, {"key": key, "value": cur}, False
        return f, {"key": key, "value": f"v{n};"}, {"key": key, "value": f"v{n};"}, False
    if name == "mutex":
        return ("release" if state else "acquire"), None, None, False
    if name == "set":
        if draw(st.booleans()):
            return "add", n, n, False
        return "read", None, sorted(state), False
    f = draw(st.sampled_from(["enqueue", "dequeue"]))
    if f == "enqueue":
        return f, n, n, False
    if not state:
        return f, None, None, False
    return f, None, (state[0] if name == "fifo-queue" else draw(st.sampled_from(list(state)))), False


def _sequential_history(data: st.DataObject, name: str) -> tuple[Model, list[Op]]:
    model = make_model(name)
    state = model.init()
    n_ops = data.draw(st.integers(1, 14))
    events: list[tuple[int, int, int, str, str, Any]] = []
    for n in range(n_ops):
        f, value, out, failed = _draw_op(data, name, state, n)
        if not failed:
            nxt = model.step(state, OpInput(f, value), out)
            assert not isinstance(nxt, Inconsistent), (state, f, value, out)
            state = nxt
        lp = 100 * n
        start = lp - data.draw(st.integers(0, 250))
        end = lp + data.draw(st.integers(0, 250))
        kind = "fail" if failed else data.draw(st.sampled_from(["ok", "ok", "ok", "info", "lost"]))
        events.append((start, 0, n, "invoke", f, value))
        if kind != "lost":
            events.append((end, 1, n, kind, f, out if kind == "ok" else value))
    events.sort()
    ops = [Op(i, t, typ, p, f, v) for i, (t, _, p, typ, f, v) in enumerate(events)]
    return model, ops


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), name=st.sampled_from(MODELS))
def test_widened_sequential_histories_are_linearizable(data: st.DataObject, name: str) -> None:
    model, ops = _sequential_history(data, name)
    result = check(ops, model)
    assert result.valid is True, (result.describe(), [o.describe() for o in ops])


@settings(max_examples=100, deadline=None)
@given(data=st.data(), name=st.sampled_from(["register", "cas-register"]))
def test_impossible_read_is_always_caught(data: st.DataObject, name: str) -> None:
    model, ops = _sequential_history(data, name)
    t = data.draw(st.integers(-300, 100 * len(ops)))
    n = 10_000
    extra = [Op(0, t, "invoke", n, "read", None), Op(0, t + data.draw(st.integers(0, 50)), "ok", n, "read", 424242)]
    merged = sorted([*ops, *extra], key=lambda o: (o.time, o.type != "invoke"))
    merged = [Op(i, o.time, o.type, o.process, o.f, o.value) for i, o in enumerate(merged)]
    result = check(merged, model)
    assert result.valid is False
    assert result.op is not None and result.op.process == n


def _brute_force(model: Model, calls: list[Call]) -> bool:
    """Naive: try every order of every subset of calls that keeps all determinate ones (no cache, no rules)."""

    def go(state: Any, left: list[Call]) -> bool:
        if all(not c.determinate for c in left):
            return True
        for c in left:
            if any(d.ret_time < c.call_time for d in left if d is not c):
                continue  # some remaining call must come before c
            nxt = model.step(state, c.input, c.output)
            if isinstance(nxt, Inconsistent):
                continue
            rest = [d for d in left if d is not c]
            for s in (nxt.states if hasattr(nxt, "states") else (nxt,)):
                if go(s, rest):
                    return True
        return False

    return go(model.init(), calls)


@st.composite
def _random_history(draw: st.DrawFn, name: str) -> list[Op]:
    n = draw(st.integers(1, 7))
    events: list[tuple[int, int, int, str, str, Any]] = []
    for p in range(n):
        start = draw(st.integers(0, 12))
        end = start + draw(st.integers(0, 8))
        kind = draw(st.sampled_from(["ok", "ok", "ok", "info", "fail", "lost"]))
        if name == "mutex":
            f, value, out = draw(st.sampled_from(["acquire", "release"])), None, None
        elif name == "kv":
            f = draw(st.sampled_from(["get", "get", "append", "put"]))
            arg = {"append": draw(st.sampled_from(["x", "y", "w"])), "put": "z", "get": None}[f]
            value = {"key": "k", "value": arg}
            out = value if f != "get" else {"key": "k", "value": draw(st.sampled_from(
                ["", "x", "y", "xy", "yx", "z", "zx", "zyx", "xw", "xyw"]))}
        elif name in ("fifo-queue", "unordered-queue"):
            f = draw(st.sampled_from(["enqueue", "dequeue"]))
            value = draw(st.integers(0, 2)) if f == "enqueue" else None
            out = value if f == "enqueue" else draw(st.sampled_from([None, 0, 1, 2]))
        else:
            f = draw(st.sampled_from(["read", "write", "cas"]))
            value = None if f == "read" else (draw(st.integers(0, 2)) if f == "write" else
                                              [draw(st.integers(0, 2)), draw(st.integers(0, 2))])
            out = draw(st.sampled_from([None, 0, 1, 2])) if f == "read" else value
        events.append((start, 0, p, "invoke", f, value))
        if kind != "lost":
            events.append((end, 1, p, kind, f, out))
    events.sort()
    return [Op(i, t, typ, p, f, v) for i, (t, _, p, typ, f, v) in enumerate(events)]


@settings(max_examples=300, deadline=None)
@given(data=st.data(), name=st.sampled_from(["cas-register", "mutex", "fifo-queue", "unordered-queue", "kv"]),
       policy=st.sampled_from(["drop", "definite"]))
def test_wgl_agrees_with_brute_force(data: st.DataObject, name: str, policy: str) -> None:
    ops = data.draw(_random_history(name))
    model = make_model(name, fail_policy=policy)
    calls = build_calls(ops, model)
    want = _brute_force(model, calls)
    got = check(ops, model)
    assert got.valid is want, ([o.describe() for o in ops], got.describe())


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_kv_stale_precheck_never_fires_on_linearizable_histories(data: st.DataObject) -> None:
    model, ops = _sequential_history(data, "kv")
    for _, group in partition_calls(build_calls(ops, model), model):
        assert model.impossible([(c.input, c.output, c.call_time, c.ret_time) for c in group]) is None


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_kv_stale_precheck_sound_on_generated_histories(seed: int) -> None:
    import random

    model = make_model("kv")
    ops = kv_history(random.Random(seed), clients=8, ops=120, keys=2)
    for _, group in partition_calls(build_calls(ops, model), model):
        assert model.impossible([(c.input, c.output, c.call_time, c.ret_time) for c in group]) is None


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), linearizable=st.booleans())
def test_partitioned_and_unpartitioned_kv_agree(seed: int, linearizable: bool) -> None:
    import random

    try:
        ops = kv_history(random.Random(seed), clients=6, ops=60, keys=2, linearizable=linearizable)
    except ValueError:  # no get could be made stale in so short a history
        assume(False)
    model = make_model("kv")
    whole = check(ops, model, partition=False)
    parts = check(ops, model)
    assert whole.valid is parts.valid is linearizable
