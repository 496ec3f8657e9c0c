"""The fast path of check (``_fast``) against the general path: the same Result, field for field.

The fast path spells kv pairs straight into the compiled search's op codes instead of building Calls; it must
give exactly what build_calls + partition_calls + the compiled search give (verdict, partitions, the partition
shown, its calls and linearization, steps and cache entries), and hand everything else to the general path.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checker.history import Op
from checker.linearizable import _check as check_module
from checker.linearizable import _native, check
from checker.linearizable.gen import kv_history, register_history, small_alphabet_history
from checker.models import make_model

needs_native = pytest.mark.skipif(not _native.NATIVE_AVAILABLE,
                                  reason="lincheck_native is not built (scripts/build_native.sh)")


def _no_fast(*_: Any) -> None:
    return None


def _both(ops: list[Op], model: Any) -> tuple[Any, Any]:
    fast = check(iter(ops), model)  # any iterable, as check's signature says
    with patch.object(check_module, "fast_witnesses", _no_fast):
        general = check(ops, model)
    return fast, general


def _same(fast: Any, general: Any) -> None:
    assert fast.valid == general.valid
    assert fast.describe() == general.describe()
    for field in ("partitions", "partition", "calls", "linearization", "steps", "cache_entries", "engine",
                  "cause", "op", "call"):
        assert getattr(fast, field) == getattr(general, field), field


@st.composite
def _kv_ops(draw: st.DrawFn) -> list[Op]:
    """Up to 30 kv ops over 1-3 keys with tiny values and a few nemesis ops, some completions fail or info, some
    never complete, some shapes the compiled search does not cover (an int value, an int key, an unknown f, no
    key, a NUL in a value)."""
    n_proc = draw(st.integers(1, 4))
    open_: dict[int, Op] = {}
    ops: list[Op] = []
    t = 0
    for _ in range(draw(st.integers(1, 30))):
        p = draw(st.integers(0, n_proc - 1))
        t += draw(st.integers(0, 2))
        if draw(st.integers(0, 15)) == 0:  # the checker skips nemesis ops
            ops.append(Op(len(ops), t, draw(st.sampled_from(["invoke", "info"])), "nemesis", "kill", None))
            continue
        if p in open_:
            inv = open_.pop(p)
            typ = draw(st.sampled_from(["ok", "ok", "ok", "fail", "info"]))
            value = inv.value
            if inv.f == "get" and typ == "ok":
                value = {"key": value.get("key"), "value": draw(st.sampled_from(["", "a", "b", "ab", "ba"]))}
            ops.append(Op(len(ops), t, typ, p, inv.f, value))
            continue
        f = draw(st.sampled_from(["get", "put", "append", "append"] * 8 + ["cas"]))
        key: Any = draw(st.sampled_from(["x", "y", "z"] * 10 + [1]))
        arg: Any = None if f == "get" else draw(st.sampled_from(["a", "b", "ab"] * 10 + [7, "\x00"]))
        value = {"key": key, "value": arg} if draw(st.integers(0, 30)) else {"value": arg}
        op = Op(len(ops), t, "invoke", p, f, value)
        open_[p] = op
        ops.append(op)
    return ops


@needs_native
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_kv_ops(), fail=st.sampled_from(["drop", "definite"]))
def test_the_fast_path_gives_what_the_general_path_gives(ops: list[Op], fail: str) -> None:
    fast, general = _both(ops, make_model("kv", fail_policy=fail))
    _same(fast, general)


@needs_native
@pytest.mark.parametrize("seed", range(6))
def test_the_fast_path_on_generated_histories(seed: int) -> None:
    rng = random.Random(seed)
    model = make_model("kv")
    for ops in (kv_history(rng, clients=5, ops=600, keys=4), kv_history(rng, clients=5, ops=600, keys=4,
                                                                        linearizable=False),
                small_alphabet_history(rng, model="kv", clients=3, ops=80)):
        _same(*_both(ops, model))


@needs_native
@pytest.mark.parametrize("times", ["int", "float", "past 2**53"])
def test_the_fast_path_reads_fresh_type_strings_and_any_time(times: str) -> None:
    """The compiled reader takes the interned type strings by identity and int times as ints; a copy of each
    type string (equal text, another object), float times and ints past 2**53 take its slower ways, with the
    same Result as the general path."""
    model = make_model("kv")
    for linearizable in (True, False):
        ops = kv_history(random.Random(7), clients=5, ops=300, keys=3, linearizable=linearizable)
        time: dict[str, Any] = {"int": lambda t: t, "float": lambda t: t + 0.5, "past 2**53": lambda t: 2**53 + 2 * t}
        ops = [Op(o.index, time[times](o.time), "".join(list(o.type)), o.process, o.f, o.value) for o in ops]
        fast, general = _both(ops, model)
        assert fast.valid is linearizable
        _same(fast, general)


class _Described:
    """What a Result reads of an op besides its fields."""

    __slots__ = ()
    index: int
    process: Any
    type: str
    f: str
    value: Any

    def describe(self) -> str:
        return f"#{self.index} p{self.process} {self.type} {self.f} {self.value!r}"


@dataclass(frozen=True, slots=True)
class _Reversed(_Described):
    """An op type whose slots sit in another order than Op's (so at other offsets)."""

    extra: Any
    error: Any
    node: Any
    value: Any
    f: str
    process: Any
    type: str
    time: Any
    index: int


class _Plain(_Described):
    """An op type with a __dict__ and no slots."""

    def __init__(self, op: Op) -> None:
        self.index, self.time, self.type, self.process, self.f, self.value = (
            op.index, op.time, op.type, op.process, op.f, op.value)


class _Props(_Described):
    """An op type whose fields are properties over a hidden Op (getset-like descriptors, not slots)."""

    __slots__ = ("_op",)

    def __init__(self, op: Op) -> None:
        self._op = op

    process = property(lambda self: self._op.process)
    type = property(lambda self: self._op.type)
    time = property(lambda self: self._op.time)
    f = property(lambda self: self._op.f)
    value = property(lambda self: self._op.value)
    index = property(lambda self: self._op.index)


class _Remapped(Op):
    """A subclass of Op (the same slots: a Struct's subclass adds none) whose __getattribute__ answers another
    key: read through it."""

    def __getattribute__(self, name: str) -> Any:
        got = object.__getattribute__(self, name)
        if name == "value" and isinstance(got, dict) and "key" in got:
            return {**got, "key": f"{got['key']}'"}
        return got


def _as(kind: int, op: Op) -> Any:
    if kind == 1:
        return _Reversed({}, None, None, op.value, op.f, op.process, op.type, op.time, op.index)
    if kind == 2:
        return _Plain(op)
    if kind == 3:
        return _Props(op)
    if kind == 4:
        return _Remapped(op.index, op.time, op.type, op.process, op.f, op.value)
    return op


@needs_native
@pytest.mark.parametrize("seed", range(4))
def test_the_fast_path_reads_any_op_type_as_getattr_would(seed: int) -> None:
    """The compiled reader reads the fields of a slots type (Op) straight from its slots; ops of other types
    mixed in (slots in another order, a __dict__, properties, a subclass with its own __getattribute__) are
    read as getattr reads them, with the same Result as the general path."""
    rng = random.Random(seed)
    for model, ops in ((make_model("kv"), kv_history(rng, clients=5, ops=300, keys=3)),
                       (make_model("kv"), kv_history(rng, clients=5, ops=300, keys=3, linearizable=False)),
                       (make_model("cas-register"), register_history(rng, clients=3, ops=200))):
        for kinds in ([0, 1], [0, 2, 3], [0, 4], [1, 2, 3, 4]):
            mixed = [_as(rng.choice(kinds) if rng.random() < 0.5 else kinds[0], o) for o in ops]
            fast, general = _both(mixed, model)
            _same(fast, general)
        if model.name == "kv":  # the keys the remapped ops answer are the keys checked
            remapped = check([_as(4, o) for o in ops], model)
            assert str(remapped.partition).endswith("'"), remapped.partition


@needs_native
def test_the_fast_path_raises_as_getattr_on_an_unset_slot() -> None:
    """An Op whose slots are unset (emptied through their member descriptors): the reader raises AttributeError
    like getattr, and check gives unknown with that error on both paths."""
    ops = kv_history(random.Random(3), clients=3, ops=40, keys=2)
    unset = Op(0, 0, "invoke", 0, "get")
    for name in ("index", "time", "type", "process", "f", "value"):
        Op.__dict__[name].__delete__(unset)
    ops[5] = unset
    fast, general = _both(ops, make_model("kv"))
    assert fast.valid == general.valid == "unknown"
    assert "AttributeError" in (fast.cause or "") and "AttributeError" in (general.cause or "")


@st.composite
def _register_ops(draw: st.DrawFn) -> list[Op]:
    """Up to 30 register ops (read / write / cas of 0..2 and None) with a few nemesis ops, some completions fail
    or info, some never complete, an invoke value sometimes None (the completion's is used), and some shapes
    the compiled reader does not take (a bool or str value, a cas argument that is not a pair, a tuple pair,
    an unknown f, a huge int)."""
    n_proc = draw(st.integers(1, 4))
    open_: dict[int, Op] = {}
    ops: list[Op] = []
    t = 0
    value = st.sampled_from([0, 1, 2, None] * 8 + [True, "1", 2**70])
    for _ in range(draw(st.integers(1, 30))):
        p = draw(st.integers(0, n_proc - 1))
        t += draw(st.integers(0, 2))
        if draw(st.integers(0, 15)) == 0:
            ops.append(Op(len(ops), t, draw(st.sampled_from(["invoke", "info"])), "nemesis", "kill", None))
            continue
        if p in open_:
            inv = open_.pop(p)
            typ = draw(st.sampled_from(["ok", "ok", "ok", "fail", "info"]))
            out = draw(value) if inv.f == "read" and typ == "ok" else inv.value
            if inv.value is None and inv.f == "write" and typ == "ok":
                out = draw(value)
            ops.append(Op(len(ops), t, typ, p, inv.f, out))
            continue
        f = draw(st.sampled_from(["read", "write", "cas"] * 10 + ["add"]))
        arg: Any = None
        if f == "write":
            arg = draw(value)
        elif f == "cas":
            arg = draw(st.sampled_from([[draw(value), draw(value)]] * 8 + [(draw(value), draw(value)), [1], 3]))
        op = Op(len(ops), t, "invoke", p, f, arg)
        open_[p] = op
        ops.append(op)
    return ops


@needs_native
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_register_ops(), name=st.sampled_from(["cas-register", "register"]),
       fail=st.sampled_from(["drop", "definite"]), nil_any=st.booleans())
def test_the_register_fast_path_gives_what_the_general_path_gives(
    ops: list[Op], name: str, fail: str, nil_any: bool,
) -> None:
    kwargs: dict[str, Any] = {"fail_policy": fail}
    if nil_any:
        kwargs["nil_read_any"] = True
    fast, general = _both(ops, make_model(name, **kwargs))
    _same(fast, general)


@needs_native
@pytest.mark.parametrize("fail", ["drop", "definite"])
@pytest.mark.parametrize("seed", range(4))
def test_the_register_fast_path_on_generated_histories(seed: int, fail: str) -> None:
    """Valid histories (the drawn ones above are mostly invalid), with their failed cas kept or dropped."""
    rng = random.Random(seed)
    model = make_model("cas-register", fail_policy=fail)
    for ops in (register_history(rng, clients=5, ops=600),
                small_alphabet_history(rng, model="register", clients=3, ops=80),
                small_alphabet_history(rng, model="register", clients=3, ops=80, corrupt=True)):
        fast, general = _both(ops, model)
        _same(fast, general)
