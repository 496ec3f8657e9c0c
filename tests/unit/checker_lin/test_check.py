"""check(): semantics of intervals and indeterminate ops, budgets, partition scheduling, result and HTML."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from checker.history import Op
from checker.linearizable import check, merge_valid, render_html
from checker.linearizable.gen import kv_history
from checker.models import UNKNOWN, Inconsistent, Model, ModelError, OpInput, make_model


def H(*rows: tuple[int, str, int, str, Any]) -> list[Op]:
    """Rows of (time, type, process, f, value) -> ops in time order (invokes first on ties)."""
    ordered = sorted(rows, key=lambda r: (r[0], r[1] != "invoke"))
    return [Op(i, t, typ, p, f, v) for i, (t, typ, p, f, v) in enumerate(ordered)]


CASES = [
    ("sequential-ok", H((0, "invoke", 0, "write", 1), (1, "ok", 0, "write", 1),
                        (2, "invoke", 1, "read", None), (3, "ok", 1, "read", 1)), True),
    ("stale-read", H((0, "invoke", 0, "write", 1), (1, "ok", 0, "write", 1), (2, "invoke", 0, "write", 2),
                     (3, "ok", 0, "write", 2), (4, "invoke", 1, "read", None), (5, "ok", 1, "read", 1)), False),
    # closed intervals: the read invoked at the very time the write returned may precede it
    ("touching-is-concurrent", H((0, "invoke", 0, "write", 1), (5, "ok", 0, "write", 1),
                                 (5, "invoke", 1, "read", None), (6, "ok", 1, "read", None)), True),
    ("strictly-after", H((0, "invoke", 0, "write", 1), (5, "ok", 0, "write", 1),
                         (6, "invoke", 1, "read", None), (7, "ok", 1, "read", None)), False),
    # an info write may take effect late...
    ("info-late", H((0, "invoke", 0, "write", 1), (1, "info", 0, "write", 1),
                    (5, "invoke", 1, "read", None), (6, "ok", 1, "read", None),
                    (7, "invoke", 1, "read", None), (8, "ok", 1, "read", 1)), True),
    # ...or never
    ("info-never", H((0, "invoke", 0, "write", 1), (9, "invoke", 1, "read", None), (10, "ok", 1, "read", None)),
     True),
    # but not before its invoke
    ("info-not-before-invoke", H((0, "invoke", 1, "read", None), (1, "ok", 1, "read", 1),
                                 (2, "invoke", 0, "write", 1), (3, "info", 0, "write", 1)), False),
    # a failed write is dropped
    ("fail-dropped", H((0, "invoke", 0, "write", 1), (1, "fail", 0, "write", 1),
                       (2, "invoke", 1, "read", None), (3, "ok", 1, "read", 1)), False),
]


@pytest.mark.parametrize(("ops", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_semantics(ops: list[Op], want: bool) -> None:
    assert check(ops, make_model("register")).valid is want


def test_definite_failed_cas_must_linearize() -> None:
    ops = H((0, "invoke", 0, "cas", [None, 1]), (1, "fail", 0, "cas", [None, 1]))
    assert check(ops, make_model("cas-register", fail_policy="drop")).valid is True
    res = check(ops, make_model("cas-register", fail_policy="definite"))
    assert res.valid is False and "failed" in (res.reason or "")


def test_time_limit_needs_a_clock() -> None:
    with pytest.raises(ValueError, match="clock"):
        check([], make_model("register"), time_limit_s=1)


class Tagged(Model):
    """A model whose state remembers the order of ops (no states merge): expensive to search."""

    name = "tagged"

    def init(self) -> tuple[Any, ...]:
        return ()

    def step(self, state: Any, op: OpInput, output: Any) -> Any:
        _key, v = op.value
        if op.f == "add":
            return (*state, v)
        want = tuple(output[1]) if isinstance(output, list | tuple) else output
        return state if want == state else Inconsistent(f"read {want}, state {state}")

    def partition_key(self, op: OpInput) -> Any:
        return op.value[0]

    def read_only(self, op: OpInput, output: Any) -> bool:
        return op.f == "read"


def _hard_and_cheap_bad() -> list[Op]:
    rows: list[tuple[int, str, int, str, Any]] = []
    for p in range(11):  # 11 concurrent adds, then a read expecting an order the search finds last
        rows += [(0, "invoke", p, "add", ["hard", p]), (10, "ok", p, "add", ["hard", p])]
    rows += [(11, "invoke", 99, "read", ["hard", None]), (12, "ok", 99, "read", ["hard", list(range(10, -1, -1))])]
    rows += [(13, "invoke", 99, "read", ["hard", None]), (14, "ok", 99, "read", ["hard", [0]])]  # invalid, late
    for k in range(40):  # a long cheap sequential partition with a stale read at its end
        rows += [(100 + 2 * k, "invoke", 50, "add", ["cheap", k]), (101 + 2 * k, "ok", 50, "add", ["cheap", k])]
    rows += [(300, "invoke", 51, "read", ["cheap", None]), (301, "ok", 51, "read", ["cheap", [0]])]
    return H(*rows)


def _ticks() -> Callable[[], float]:
    """An injected clock: one second per read, so a limit is a count of the checker's clock reads."""
    reads = iter(range(10**9))
    return lambda: float(next(reads))


def test_cheap_invalid_partition_found_before_expensive_one_finishes() -> None:
    # Alone, the hard partition runs out of a 50-read budget; with the cheap invalid partition beside it the
    # same budget ends in False: the search interleaves partitions instead of finishing the hard one first.
    hard_only = [op for op in _hard_and_cheap_bad() if op.value[0] == "hard"]
    alone = check(hard_only, Tagged(), time_limit_s=50, clock=_ticks())
    assert (alone.valid, alone.cause) == ("unknown", "timeout")
    res = check(_hard_and_cheap_bad(), Tagged(), time_limit_s=50, clock=_ticks())
    assert res.valid is False and res.partition == "cheap"


def test_memory_budget_gives_unknown() -> None:
    res = check(_hard_and_cheap_bad()[:48], Tagged(), max_cache_entries=50)
    assert (res.valid, res.cause) == ("unknown", "memory")


def test_timeout_gives_unknown() -> None:
    ticks = iter(range(10**9))
    res = check(_hard_and_cheap_bad()[:48], Tagged(), time_limit_s=5, clock=lambda: float(next(ticks)))
    assert (res.valid, res.cause) == ("unknown", "timeout")


def test_bad_model_input_is_unknown_with_error() -> None:
    ops = H((0, "invoke", 0, "frobnicate", 1), (1, "ok", 0, "frobnicate", 1))
    res = check(ops, make_model("register"))
    assert res.valid == "unknown" and res.cause is not None and "frobnicate" in res.cause


def test_merge_valid() -> None:
    assert merge_valid([True, "unknown", False]) is False
    assert merge_valid([True, "unknown"]) == "unknown"
    assert merge_valid([True, True]) is True


@pytest.mark.parametrize("seed", [1, 2])
def test_generated_kv_histories_have_known_verdicts(seed: int) -> None:
    ok = kv_history(random.Random(seed), clients=10, ops=300, keys=3)
    bad = kv_history(random.Random(seed), clients=10, ops=300, keys=3, linearizable=False)
    assert check(ok, make_model("kv")).valid is True
    res = check(bad, make_model("kv"))
    assert res.valid is False and res.first_failure() is not None


def test_render_html_shows_lanes_and_failure(tmp_path: Path) -> None:
    res = check(CASES[1][1], make_model("register"))
    out = render_html(res, tmp_path / "t.html")
    text = out.read_text()
    assert text.startswith("<!doctype html>") and "NOT linearizable" in text
    assert text.count('class="lane"') == 2 and 'class="op bad' in text and "<script" not in text
    ok = render_html(check(CASES[0][1], make_model("register")), tmp_path / "ok.html").read_text()
    assert "linearizable" in ok and "#1" in ok


class Counter(Model):
    """The example model of docs/linearizability.md ("Adding a model")."""

    name = "counter"
    fail_policy = "drop"

    def init(self) -> int:
        return 0

    def step(self, state: Any, op: OpInput, output: Any) -> Any:
        if op.f == "add":
            return state + op.value
        if op.f == "read":
            return state if output in (state, UNKNOWN) else Inconsistent(f"read {output}, counter is {state}")
        raise ModelError(f"counter: unknown op {op.f!r}")

    def read_only(self, op: OpInput, output: Any) -> bool:
        return op.f == "read"


def test_documented_custom_model() -> None:
    ok = H((0, "invoke", 0, "add", 2), (3, "ok", 0, "add", 2), (1, "invoke", 1, "read", None), (2, "ok", 1, "read", 2))
    bad = H((0, "invoke", 0, "add", 2), (1, "ok", 0, "add", 2), (2, "invoke", 1, "read", None), (3, "ok", 1, "read", 0))
    assert check(ok, Counter()).valid is True
    res = check(bad, Counter())
    assert res.valid is False and res.reason == "read 0, counter is 2"


@pytest.mark.parametrize("seed", [3, 4])
def test_search_resumed_in_small_slices_gives_the_same_answer(seed: int) -> None:
    from checker.linearizable._calls import build_calls, partition_calls
    from checker.linearizable._search import RUNNING, PartitionSearch

    model = make_model("kv")
    ops = kv_history(random.Random(seed), clients=8, ops=200, keys=1, linearizable=False)
    (key, group), = partition_calls(build_calls(ops, model), model)
    whole = PartitionSearch(model, group, key)
    sliced = PartitionSearch(model, group, key)
    assert whole.run(10**6) == "invalid"
    while (status := sliced.run(3)) == RUNNING:
        pass
    assert status == "invalid" and sliced.steps == whole.steps
    assert sliced.failing_call() == whole.failing_call()
    assert [c.id for c, _ in sliced.linearization()] == [c.id for c, _ in whole.linearization()]


def test_crashing_model_gives_unknown_not_an_exception() -> None:
    class Broken(Model):
        name = "broken"

        def init(self) -> int:
            return 0

        def step(self, state: Any, op: OpInput, output: Any) -> Any:
            raise ZeroDivisionError("boom")

    res = check(CASES[0][1], Broken())
    assert res.valid == "unknown" and res.cause == "error: ZeroDivisionError: boom"
