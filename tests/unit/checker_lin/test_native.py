"""The compiled witness search (``native/lincheck``) against the Python search, and the fallback without it.

A native witness is taken as proof that a partition is linearizable, so every witness it gives must be a real
linearization (indeterminate calls included, placed anywhere after their invoke): the Python model accepts
it, step by step, and it respects real time.  On small histories it must find one whenever the Python search
says the history is linearizable.  Without the module, or with a witness the Python model refuses, the
checker decides in Python and says so in ``Result.engine``.
"""

from __future__ import annotations

import random
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checker.history import Op
from checker.linearizable import _check as check_module
from checker.linearizable import _native, build_calls, check, partition_calls
from checker.linearizable._search import RUNNING, PartitionSearch
from checker.linearizable.gen import kv_history, register_history, small_alphabet_history
from checker.models import Inconsistent, make_model

needs_native = pytest.mark.skipif(not _native.NATIVE_AVAILABLE,
                                  reason="lincheck_native is not built (scripts/build_native.sh)")


@st.composite
def _history(draw: st.DrawFn, kind: str) -> list[Op]:
    """2-4 clients, up to 14 ops on one key with tiny alphabets, some writes ending info (taking effect late
    or never, the client then going on as a new process), sometimes one read changed."""
    n_proc = draw(st.integers(2, 4))
    clock = [0] * n_proc
    procs = list(range(n_proc))
    rows: list[tuple[int, int, Any, str, Any, Any]] = []
    state: Any = "" if kind == "kv" else None
    sims = []
    for _ in range(draw(st.integers(1, 14))):
        w = draw(st.integers(0, n_proc - 1))
        call = clock[w] + draw(st.integers(0, 3))
        ret = call + draw(st.integers(0, 10))
        clock[w] = ret + 1
        if kind == "kv":
            f = draw(st.sampled_from(["get", "append", "append", "put"]))
            arg: Any = None if f == "get" else draw(st.sampled_from(["a", "b", "ab"]))
        else:
            f = draw(st.sampled_from(["read", "write", "cas"]))
            arg = None if f == "read" else (draw(st.integers(0, 2)) if f == "write" else
                                            [draw(st.integers(0, 2)), draw(st.integers(0, 2))])
        info = f not in ("get", "read") and draw(st.integers(0, 3)) == 0
        lin = draw(st.integers(call, ret + (20 if info else 0)))
        if info and draw(st.booleans()):
            lin = -1  # never took effect
        sims.append([procs[w], call, ret, lin, f, arg, info])
        if info:
            procs[w] = max(procs) + 1
    for p, call, ret, lin, f, arg, info in sorted(sims, key=lambda s: s[3]):
        typ, out = "ok", arg
        if lin < 0:
            pass
        elif f in ("get", "read"):
            out = state
        elif f == "append":
            state += arg
        elif f == "put" or f == "write":
            state = arg
        elif state == arg[0]:
            state = arg[1]
        else:
            typ = "fail"
        rows.append((call, 0, p, f, arg, None))
        rows.append((ret, 1, p, f, out, "info" if info else typ))
    if draw(st.booleans()):
        reads = [i for i, r in enumerate(rows) if r[1] == 1 and r[3] in ("get", "read")]
        if reads:
            i = draw(st.sampled_from(reads))
            pool = ["", "a", "b", "ab", "ba"] if kind == "kv" else [None, 0, 1, 2]
            rows[i] = (*rows[i][:4], draw(st.sampled_from(pool)), rows[i][5])
    ops = []
    for t, kind_, p, f, v, typ in sorted(rows, key=lambda r: (r[0], r[1], str(r[2]))):
        value = {"key": "k", "value": v} if kind == "kv" else v
        ops.append(Op(len(ops), t, "invoke" if kind_ == 0 else typ, p, f, value))
    return ops


def _python_verdict(model: Any, ops: list[Op]) -> bool:
    with patch.object(check_module, "NATIVE_AVAILABLE", False):
        res = check(ops, model)
    assert res.engine == _native.ENGINE_MISSING
    assert res.valid in (True, False)
    return res.valid is True


def _is_linearization(model: Any, order: list[Any]) -> bool:
    state = model.init()
    for k, c in enumerate(order):
        if any(later.ret_time < c.call_time for later in order[k + 1:]):
            return False  # a call placed after c returned before c was invoked
        state = model.step(state, c.input, c.output)
        if isinstance(state, Inconsistent):
            return False
    return True


@needs_native
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), kind=st.sampled_from(["kv", "register"]), fail=st.sampled_from(["drop", "definite"]))
def test_native_witnesses_are_real_and_found_whenever_python_finds_one(
    data: st.DataObject, kind: str, fail: str,
) -> None:
    ops = data.draw(_history(kind))
    model = make_model("kv" if kind == "kv" else "cas-register", fail_policy=fail)
    calls = build_calls(ops, model)
    found = _native.native_witness(model, calls, None)
    expected = _python_verdict(model, ops)
    if found is not None:
        assert _is_linearization(model, found._order), [o.describe() for o in ops]
        assert sorted(c.id for c in found._order) == [c.id for c in calls]
    assert (found is not None) == expected, ([o.describe() for o in ops], expected)
    res = check(ops, model)
    assert res.valid is expected
    assert res.engine == ("native" if expected else "python")


@needs_native
@pytest.mark.parametrize(("kind", "seed"), [("kv", 0), ("kv", 1), ("register", 0), ("register", 1)])
def test_native_and_python_agree_on_generated_long_histories(kind: str, seed: int) -> None:
    if kind == "kv":
        ops, model = kv_history(random.Random(seed), clients=5, ops=2000, keys=3), make_model("kv")
    else:
        ops, model = register_history(random.Random(seed), clients=5, ops=2000), make_model("cas-register")
    res = check(ops, model)
    assert (res.valid, res.engine) == (True, "native")
    assert _python_verdict(model, ops) is True
    key, group = max(partition_calls(build_calls(ops, model), model), key=lambda kg: len(kg[1]))
    assert res.partition == key and len(res.linearization) == len(group)


def test_without_the_module_the_python_search_decides_and_says_so() -> None:
    ops = register_history(random.Random(3), clients=3, ops=200)
    with patch.object(check_module, "NATIVE_AVAILABLE", False):
        res = check(ops, make_model("cas-register"))
    assert res.valid is True
    assert res.engine == _native.ENGINE_MISSING and "scripts/build_native.sh" in res.engine


class _Backwards:
    """A broken compiled module: its witness is the calls in reverse invoke order."""

    @staticmethod
    def witness(init: str, codes: list[int], *rest: Any) -> tuple[list[int], int, int]:
        return list(reversed(range(len(codes)))), len(codes), len(codes)


def test_a_witness_the_python_model_refuses_is_searched_again_in_python() -> None:
    """The witness is stepped through the Python model when the Result's linearization is first read; one the
    model refuses is replaced by the Python search's."""
    ops = register_history(random.Random(4), clients=3, ops=120)
    model = make_model("cas-register")
    with patch.object(_native, "_impl", _Backwards), patch.object(check_module, "NATIVE_AVAILABLE", True):
        res = check(ops, model)
        assert res.valid is True and res.engine == "native"
        assert _is_linearization(model, [c for c, _ in res.linearization])
        assert len(res.linearization) == len(res.calls) == len(build_calls(ops, model))


def test_a_witness_of_a_partition_python_proves_invalid_raises_when_read() -> None:
    """A compiled core that linearizes what cannot be linearized is a bug: reading the witness says so."""
    ops = [Op(0, 0, "invoke", 0, "write", 1), Op(1, 1, "ok", 0, "write", 1),
           Op(2, 2, "invoke", 1, "read", None), Op(3, 3, "ok", 1, "read", 2)]
    with patch.object(_native, "_impl", _Backwards), patch.object(check_module, "NATIVE_AVAILABLE", True):
        res = check(ops, make_model("cas-register"))
        assert res.valid is True and res.engine == "native"  # the broken core's verdict
        with pytest.raises(RuntimeError, match="a bug in native/lincheck"):
            _ = res.linearization


@pytest.mark.parametrize(("model_name", "ops"), [
    ("kv", [Op(0, 0, "invoke", 0, "append", {"key": "k", "value": 1}),
            Op(1, 1, "ok", 0, "append", {"key": "k", "value": 1})]),  # not a string
    ("register", [Op(0, 0, "invoke", 0, "cas", [None, 1]), Op(1, 1, "ok", 0, "cas", [None, 1])]),  # no cas there
    ("set", [Op(0, 0, "invoke", 0, "add", 1), Op(1, 1, "ok", 0, "add", 1)]),
    ("cas-register", [Op(0, 0, "invoke", 0, "write", True), Op(1, 1, "ok", 0, "write", True)]),
], ids=["kv-int-value", "cas-on-plain-register", "other-model", "bool-value"])
def test_what_the_native_search_does_not_cover(model_name: str, ops: list[Op]) -> None:
    model = make_model(model_name)
    assert _native.encode(model, build_calls(ops, model)) is None


def test_the_python_lanes_and_the_native_witness_agree_on_the_family() -> None:
    """Family histories without info ops (info_rate 0): the native search and the Python lane agree."""
    for seed in range(20):
        rng = random.Random(seed)
        ops = small_alphabet_history(rng, model="kv", clients=rng.randint(2, 5), ops=rng.randint(60, 200),
                                     info_rate=0.0)
        model = make_model("kv")
        calls = build_calls(ops, model)
        lane = PartitionSearch(model, calls)
        while lane.run(10_000) == RUNNING:
            pass
        assert lane.status == "valid"
        if _native.NATIVE_AVAILABLE:  # given steps enough (the checker gives it about two per call)
            with patch.object(_native, "_BUDGET_BASE", 10**7):
                found = _native.native_witness(model, calls, None)
            assert found is not None and _is_linearization(model, found._order), seed
