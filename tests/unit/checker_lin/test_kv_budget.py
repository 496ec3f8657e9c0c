"""kv's counting look-ahead and state collapse (``KV.reach_budget``, ``KV.state_canon``) against brute force.

Both are only sound if they never cut a state the search needs: the budget's need must never exceed what
some sequence of the writers that makes a get legal supplies, and two states the collapse maps together
must answer every later sequence of ops alike.
"""

from __future__ import annotations

from itertools import permutations
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checker.models import FAILED, UNKNOWN, Inconsistent, OpInput, _kv_canonical, make_model
from checker.models._kv import DEAD

KV = make_model("kv")
PIECES = ("a", "b", "ab")
_text = st.text(alphabet="ab", max_size=6)


def _op(f: str, value: Any = None) -> OpInput:
    return OpInput(f, {"key": "k", "value": value})


def _state(value: str) -> Any:
    return KV.step(KV.init(), _op("put", value), value)


@st.composite
def _writers(draw: st.DrawFn) -> list[tuple[OpInput, Any]]:
    out = []
    for _ in range(draw(st.integers(0, 5))):
        f = draw(st.sampled_from(["append", "append", "put"]))
        v = draw(st.sampled_from(PIECES))
        out.append((_op(f, v), draw(st.sampled_from([v, UNKNOWN]))))
    return out


@settings(max_examples=400, deadline=None)
@given(writers=_writers(), want=_text, cur=_text)
def test_budget_need_never_exceeds_what_a_working_sequence_supplies(
    writers: list[tuple[OpInput, Any]], want: str, cur: str,
) -> None:
    items = [*writers, (_op("get"), want)]
    budget = KV.reach_budget(items)
    assert budget is not None
    g = len(items) - 1
    state = _state(cur)
    need = budget.need(state, g)
    assert need is not None
    weight = {i: w for idx, w in budget.groups for i in idx}
    for r in range(len(writers) + 1):
        for seq in permutations(range(len(writers)), r):
            s = state
            for i in seq:
                s = KV.step(s, *writers[i])
            if isinstance(KV.step(s, *items[g]), Inconsistent):
                continue
            supplied = [sum(weight.get(i, (0,) * len(need))[j] for i in seq) for j in range(len(need))]
            assert all(x >= y for x, y in zip(supplied, need, strict=True)), (seq, supplied, need)


@pytest.mark.parametrize(("cur", "want", "blocked"), [
    ("ab", "abab", False),      # one append of ab, or of a then b, is enough
    ("b", "abababab", True),    # a put of a or ab, then at least three b's: two appends hold a b
    ("", "", False),
], ids=["prefix", "garbage-needs-many-appends", "empty"])
def test_budget_blocks_a_state_only_many_appends_could_repair(cur: str, want: str, blocked: bool) -> None:
    items = [(_op("append", "a"), UNKNOWN), (_op("append", "a"), "a"), (_op("append", "b"), "b"),
             (_op("append", "ab"), "ab"), (_op("put", "a"), UNKNOWN), (_op("put", "ab"), UNKNOWN),
             (_op("get"), want)]
    budget = KV.reach_budget(items)
    assert budget is not None
    need = budget.need(_state(cur), len(items) - 1)
    assert need is not None
    have = [sum(len(idx) * w[j] for idx, w in budget.groups) for j in range(len(need))]
    assert (not all(h >= n for h, n in zip(have, need, strict=True))) is blocked


def test_budget_is_off_for_many_distinct_values_and_for_several_keys() -> None:
    many = [(_op("append", f"v{i}"), f"v{i}") for i in range(20)] + [(_op("get"), "v1")]
    assert KV.reach_budget(many) is None
    two_keys = [(_op("append", "a"), "a"), (OpInput("get", {"key": "j", "value": None}), "")]
    assert KV.reach_budget(two_keys) is None


@settings(max_examples=400, deadline=None)
@given(reads=st.lists(_text, min_size=1, max_size=3), a=_text, b=_text,
       ops=st.lists(st.tuples(st.sampled_from(["append", "put", "get"]), st.sampled_from(["", *PIECES])),
                    max_size=6))
def test_state_canon_only_merges_states_no_later_op_tells_apart(
    reads: list[str], a: str, b: str, ops: list[tuple[str, str]],
) -> None:
    items = [(_op("get"), r) for r in reads] + [(_op("append", p), p) for p in PIECES] + [(_op("put", "a"), "a")]
    canon = KV.state_canon(items)
    assert canon is not None
    sa, sb = _state(a), _state(b)
    if canon(sa) != canon(sb):
        return
    for f, v in ops:
        if f == "get":
            for want in reads:  # every get of the partition answers alike from both
                ra, rb = (KV.step(s, _op("get"), want) for s in (sa, sb))
                assert isinstance(ra, Inconsistent) == isinstance(rb, Inconsistent), (a, b, want)
            continue
        sa, sb = canon(KV.step(sa, _op(f, v), v)), canon(KV.step(sb, _op(f, v), v))
        assert sa == sb


def test_state_canon_collapses_values_that_begin_no_read_value() -> None:
    items = [(_op("get"), "abab"), (_op("append", "a"), "a"), (_op("get"), FAILED)]
    canon = KV.state_canon(items)
    assert canon is not None
    assert canon(_state("ab")) == _state("ab")
    assert canon(_state("ba")) == canon(_state("bbb")) == (("k", DEAD),)
    assert KV.state_canon([(_op("get"), UNKNOWN), (_op("append", "a"), "a")]) is None


@settings(max_examples=200, deadline=None)
@given(reads=st.lists(st.text(alphabet="abx ", max_size=12), min_size=1, max_size=6),
       appends=st.lists(st.text(alphabet="abx ", min_size=1, max_size=4), max_size=8),
       puts=st.lists(st.text(alphabet="abx ", max_size=4), max_size=3))
def test_canonical_finds_the_same_unobserved_values_with_and_without_its_window_index(
    reads: list[str], appends: list[str], puts: list[str],
) -> None:
    items = ([(_op("get"), r) for r in reads] + [(_op("append", v), v) for v in appends]
             + [(_op("put", v), v) for v in puts])
    with patch.object(_kv_canonical, "_SCAN_INDEX_CHARS", 10**9):  # plain substring search
        plain = KV.canonical(items)
    with patch.object(_kv_canonical, "_SCAN_INDEX_CHARS", 0):  # every observed text indexed by windows
        indexed = KV.canonical(items)
    assert plain == indexed
