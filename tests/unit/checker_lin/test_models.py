"""Table-driven tests of the built-in models' step functions (one row per (model, state, op, output))."""

from __future__ import annotations

from typing import Any

import pytest

from checker.models import FAILED, UNKNOWN, Branches, Inconsistent, ModelError, OpInput, make_model, model_names

BAD = Inconsistent  # marker: the step must be inconsistent

STEPS: list[tuple[str, str, Any, str, Any, Any, Any]] = [
    # id, model, state, f, value, output, expected next state (or BAD)
    ("read-match", "register", 3, "read", None, 3, 3),
    ("read-mismatch", "register", 3, "read", None, 4, BAD),
    ("read-unknown", "register", 3, "read", None, UNKNOWN, 3),
    ("write", "register", 3, "write", 5, "ok", 5),
    ("write-failed-definite", "register", 3, "write", 5, FAILED, 3),
    ("cas-ok", "cas-register", 1, "cas", [1, 2], [1, 2], 2),
    ("cas-ok-wrong-state", "cas-register", 0, "cas", [1, 2], [1, 2], BAD),
    ("cas-failed", "cas-register", 0, "cas", [1, 2], FAILED, 0),
    ("cas-failed-but-matched", "cas-register", 1, "cas", [1, 2], FAILED, BAD),
    ("cas-unknown-match", "cas-register", 1, "cas", [1, 2], UNKNOWN, 2),
    ("cas-unknown-nomatch", "cas-register", 0, "cas", [1, 2], UNKNOWN, 0),
    ("kv-get", "kv", (("a", "x"),), "get", {"key": "a", "value": None}, {"key": "a", "value": "x"},
     (("a", "x"),)),
    ("kv-get-initial", "kv", (), "get", {"key": "a", "value": None}, "", ()),
    ("kv-get-wrong", "kv", (), "get", {"key": "a", "value": None}, "y", BAD),
    ("kv-append", "kv", (("a", "x"),), "append", {"key": "a", "value": "y"}, "ok", (("a", "xy"),)),
    ("kv-put", "kv", (("a", "x"),), "put", {"key": "b", "value": "z"}, "ok", (("a", "x"), ("b", "z"))),
    ("mutex-acquire", "mutex", False, "acquire", None, None, True),
    ("mutex-acquire-held", "mutex", True, "acquire", None, None, BAD),
    ("mutex-release", "mutex", True, "release", None, None, False),
    ("mutex-release-free", "mutex", False, "release", None, UNKNOWN, BAD),
    ("set-add", "set", frozenset({1}), "add", 2, None, frozenset({1, 2})),
    ("set-read", "set", frozenset({1, 2}), "read", None, [2, 1], frozenset({1, 2})),
    ("set-read-missing", "set", frozenset({1, 2}), "read", None, [1], BAD),
    ("txn-read-write", "multi-register", (("x", 0), ("y", 0)), "txn", [["read", "x", None], ["write", "y", 2]],
     [["read", "x", 0], ["write", "y", 2]], (("x", 0), ("y", 2))),
    ("txn-bad-read", "multi-register", (("x", 0),), "txn", [["read", "x", None]], [["read", "x", 1]], BAD),
    ("fifo-enqueue", "fifo-queue", (1,), "enqueue", 2, None, (1, 2)),
    ("fifo-dequeue-head", "fifo-queue", (1, 2), "dequeue", None, 1, (2,)),
    ("fifo-dequeue-not-head", "fifo-queue", (1, 2), "dequeue", None, 2, BAD),
    ("fifo-dequeue-empty", "fifo-queue", (), "dequeue", None, None, ()),
    ("bag-dequeue-any", "unordered-queue", (1, 2), "dequeue", None, 2, (1,)),
    ("bag-dequeue-absent", "unordered-queue", (1, 2), "dequeue", None, 3, BAD),
]


@pytest.mark.parametrize(("name", "state", "f", "value", "output", "want"), [r[1:] for r in STEPS],
                         ids=[r[0] for r in STEPS])
def test_step(name: str, state: Any, f: str, value: Any, output: Any, want: Any) -> None:
    model = make_model(name)
    got = model.step(state, OpInput(f, value), output)
    if want is BAD:
        assert isinstance(got, Inconsistent) and got.reason
    else:
        assert got == want


def test_unordered_dequeue_unknown_branches() -> None:
    got = make_model("unordered-queue").step((1, 2), OpInput("dequeue", None), UNKNOWN)
    assert isinstance(got, Branches) and set(got.states) == {(1,), (2,)}


def test_nil_read_any_is_knossos_semantics() -> None:
    strict = make_model("cas-register", initial=0)
    loose = make_model("cas-register", initial=0, nil_read_any=True)
    assert isinstance(strict.step(0, OpInput("read", None), None), Inconsistent)
    assert loose.step(0, OpInput("read", None), None) == 0


@pytest.mark.parametrize(("name", "f"), [("register", "cas"), ("kv", "delete"), ("mutex", "read"), ("set", "pop")])
def test_unknown_op_names_model_and_op(name: str, f: str) -> None:
    with pytest.raises(ModelError, match=f"{f!r}"):
        make_model(name).step(make_model(name).init(), OpInput(f, {"key": "a", "value": 1}), None)


def test_make_model_rejects_unknown_names() -> None:
    with pytest.raises(ModelError, match="expected one of"):
        make_model("nope")
    with pytest.raises(ModelError, match="fail policy"):
        make_model("register", fail_policy="maybe")
    assert model_names()[:2] == ["register", "cas-register"]


def test_read_only_flags_are_sound() -> None:
    # read_only ops must leave every legal state unchanged.
    reg = make_model("cas-register")
    for state in (None, 0, 1, 2):
        for op, out in [(OpInput("read", None), state), (OpInput("cas", [1, 2]), FAILED)]:
            assert reg.read_only(op, out)
            nxt = reg.step(state, op, out)
            assert isinstance(nxt, Inconsistent) or nxt == state
    assert not reg.read_only(OpInput("cas", [1, 2]), UNKNOWN)


def test_kv_could_reach() -> None:
    kv = make_model("kv")
    get = OpInput("get", {"key": "a", "value": None})
    app = [(OpInput("append", {"key": "a", "value": "c"}), "ok")]
    assert kv.could_reach((("a", "ab"),), get, "abc", app)
    assert not kv.could_reach((("a", "ac"),), get, "abc", app)
    assert kv.could_reach((("a", "ac"),), get, "abc", [(OpInput("put", {"key": "a", "value": "ab"}), "ok"), *app])


READ_ONLY = [
    ("register", "read", None, 1, True), ("register", "write", 1, "ok", False),
    ("cas-register", "cas", [1, 2], FAILED, True), ("cas-register", "cas", [1, 2], "ok", False),
    ("kv", "get", {"key": "a", "value": None}, "x", True), ("kv", "append", {"key": "a", "value": "y"}, "ok", False),
    ("set", "read", None, [1], True), ("set", "add", 1, None, False),
    ("multi-register", "txn", [["read", "x", None]], [["read", "x", 1]], True),
    ("multi-register", "txn", [["write", "x", 1]], [["write", "x", 1]], False),
    ("mutex", "acquire", None, None, False), ("fifo-queue", "dequeue", None, 1, False),
]


@pytest.mark.parametrize(("name", "f", "value", "output", "want"), READ_ONLY,
                         ids=[f"{r[0]}-{r[1]}-{r[4]}" for r in READ_ONLY])
def test_read_only_table(name: str, f: str, value: Any, output: Any, want: bool) -> None:
    assert make_model(name).read_only(OpInput(f, value), output) is want


def _kv(f: str, value: Any, out: Any, call: float, ret: float) -> tuple[OpInput, Any, float, float]:
    return OpInput(f, {"key": "k", "value": value}), out, call, ret


STALE = [
    ("append-missing", [_kv("append", "a", "a", 0, 1), _kv("get", None, "", 2, 3)], 1),
    ("append-present", [_kv("append", "a", "a", 0, 1), _kv("get", None, "a", 2, 3)], None),
    ("append-concurrent", [_kv("append", "a", "a", 0, 5), _kv("get", None, "", 2, 3)], None),
    ("put-may-reset", [_kv("append", "a", "a", 0, 1), _kv("put", "b", "b", 1, 9), _kv("get", None, "b", 2, 3)],
     None),
    ("info-put-may-reset", [_kv("append", "a", "a", 0, 1), _kv("put", "b", UNKNOWN, 1, float("inf")),
                            _kv("get", None, "b", 2, 3)], None),
    # a concurrent put whose value does not begin the get's value cannot be the reset
    ("unrelated-put-is-no-reset", [_kv("append", "a", "a", 0, 1), _kv("put", "b", UNKNOWN, 1, float("inf")),
                                   _kv("get", None, "", 2, 3)], 2),
    ("put-overwritten-value", [_kv("put", "p", "p", 0, 1), _kv("get", None, "q", 2, 3)], 1),
    ("put-then-append", [_kv("put", "p", "p", 0, 1), _kv("append", "a", "a", 1, 2), _kv("get", None, "pa", 3, 4)],
     None),
    # resets are looked up by value (one lookup per distinct put length): every kind of reset must still count
    ("empty-put-may-reset", [_kv("append", "a", "a", 0, 1), _kv("put", "", "", 1, 9), _kv("get", None, "", 2, 3)],
     None),
    ("non-string-put-may-reset", [_kv("append", "a", "a", 0, 1), _kv("put", 7, UNKNOWN, 1, float("inf")),
                                  _kv("get", None, "", 2, 3)], None),
    ("longer-put-is-no-reset", [_kv("append", "a", "a", 0, 1), _kv("put", "bb", "bb", 1, 9),
                                _kv("get", None, "b", 2, 3)], 2),
    ("put-invoked-after-get-returns", [_kv("append", "a", "a", 0, 1), _kv("put", "b", "b", 4, 9),
                                       _kv("get", None, "b", 2, 3)], 2),
    # two done puts tied on return: either may be followed by the other, so neither is stale
    ("tied-puts", [_kv("put", "p", "p", 0, 2), _kv("put", "q", "q", 1, 2), _kv("get", None, "q", 3, 4)], None),
    ("tied-puts-other-value", [_kv("put", "p", "p", 0, 2), _kv("put", "q", "q", 1, 2), _kv("get", None, "p", 3, 4)],
     None),
    # the put that begins the value must follow the append "b" the value lacks, so the append that ends the value
    # must follow it too, but "a" returned before "b" was invoked
    ("concurrent-put-then-early-append", [_kv("put", "p", "p", 0, 10), _kv("append", "a", "a", 1, 2),
                                          _kv("append", "b", "b", 3, 4), _kv("get", None, "pa", 5, 6)], 3),
    ("concurrent-put-then-concurrent-append", [_kv("put", "p", "p", 0, 10), _kv("append", "a", "a", 1, 7),
                                               _kv("append", "b", "b", 3, 4), _kv("get", None, "pa", 5, 6)], None),
    # the same with a put that returned before the get: the other put must follow it, and so must "a"
    ("put-overwritten-then-early-append", [_kv("put", "p", "p", 0, 10), _kv("append", "a", "a", 1, 2),
                                           _kv("put", "q", "q", 3, 4), _kv("get", None, "pa", 5, 6)], 3),
    ("append-invoked-after-get-returns", [_kv("put", "p", "p", 0, 1), _kv("append", "a", "a", 7, 8),
                                          _kv("get", None, "pa", 5, 6)], 2),
]


@pytest.mark.parametrize(("ops", "want"), [s[1:] for s in STALE], ids=[s[0] for s in STALE])
def test_kv_stale_precheck(ops: list[tuple[OpInput, Any, float, float]], want: Any) -> None:
    assert make_model("kv").impossible(ops) == want


def test_kv_canonical_collapses_unobserved_values() -> None:
    kv = make_model("kv")
    ops = [(OpInput("append", {"key": "k", "value": "a"}), "ok"), (OpInput("append", {"key": "k", "value": "b"}), "ok"),
           (OpInput("put", {"key": "k", "value": "p"}), "ok"), (OpInput("get", {"key": "k", "value": None}), "a")]
    out = kv.canonical(ops)
    assert out is not None
    assert [o.value["value"] for o, _ in out[:3]] == ["a", "\x00", "\x00"]
    dead = kv.step((("k", "a"),), out[1][0], "ok")
    assert dead == (("k", "\x00"),) and kv.step(dead, out[0][0], "ok") == dead
    assert kv.canonical(ops[:1] + ops[3:]) is None  # everything observed: nothing to rewrite
