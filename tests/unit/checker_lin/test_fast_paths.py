"""Fast paths of the Python search's setup equal their general paths: the step-memo signature part
(``_sig_part``) has exactly repr's equalities, and kv's value collapse reads the common dict shape as the
general parser does."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from checker.linearizable._search import _sig_part
from checker.models import FAILED, UNKNOWN, OpInput
from checker.models._kv import DEAD, _kv_parts
from checker.models._kv_canonical import kv_canonical

_SCALARS = st.one_of(
    st.text(alphabet="ab1'\"", max_size=3), st.integers(-2, 2), st.booleans(), st.none(),
    st.sampled_from([0.0, 1.0, -0.0]), st.sampled_from([UNKNOWN, FAILED]),
)
_KEYS = st.one_of(st.sampled_from(["key", "value", "1", "a"]), st.integers(0, 1), st.booleans())
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(_KEYS, inner, max_size=3),
    ),
    max_leaves=6,
)


@settings(max_examples=500, deadline=None)
@given(a=_VALUES, b=_VALUES)
def test_sig_part_has_repr_equalities(a: Any, b: Any) -> None:
    assert (_sig_part(a) == _sig_part(b)) == (repr(a) == repr(b))
    assert _sig_part(a) == _sig_part(a)


@settings(max_examples=300, deadline=None)
@given(a=_VALUES)
def test_sig_part_of_a_value_equal_to_its_repr(a: Any) -> None:
    """A value's part never collides with the part of its own repr (a str), unless a is that str."""
    r = repr(a)
    assert (_sig_part(a) == _sig_part(r)) == (repr(r) == r)  # never: a str's repr is quoted


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["get", "put", "append"]), st.sampled_from(["x", "y", 1]),
        st.text(alphabet="ab", max_size=3), st.sampled_from(["ok", "unknown", "dict"]),
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(ops=_OPS)
def test_kv_canonical_dict_shape_equals_pair_shape(ops: list[tuple[str, Any, str, str]]) -> None:
    """Ops given as {"key", "value"} dicts (read inline) and as [k, v] pairs (read by the general parser)
    are rewritten at the same places to the same values."""
    as_dict, as_pair = [], []
    for f, k, v, kind in ops:
        out: Any = None
        if f == "get":
            out = UNKNOWN if kind == "unknown" else ({"value": v} if kind == "dict" else v)
        as_dict.append((OpInput(f, {"key": k, "value": v}), out))
        as_pair.append((OpInput(f, [k, v]), out))
    a = kv_canonical(as_dict, DEAD, _kv_parts)
    b = kv_canonical(as_pair, DEAD, _kv_parts)
    assert (a is None) == (b is None)
    if a is not None and b is not None:
        assert [(_kv_parts(op), out) for op, out in a] == [(_kv_parts(op), out) for op, out in b]
