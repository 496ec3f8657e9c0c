"""The fast path of ``check``: a kv history the compiled search linearizes, without a Call object per operation.

On an easy long history the compiled witness search takes about 1 us per call, and everything the general
path does in Python before it (a Call per pair, a partition pass, the native spelling of each partition) took
several times that.  This pass reads each (invoke, completion) pair once and spells it straight into its
partition's op codes, exactly as ``build_calls``, ``partition_calls`` and ``_native.encode`` together would
(a differential test checks that the verdicts, partitions and witnesses agree).  When every partition has a
witness the history is linearizable, and Calls are built only for the partition a Result shows.  Anything
else -- a model or value the compiled search does not cover, a partition it misses -- returns ``None`` (and
the keys it missed), and ``check`` runs the general path, which never offers those keys to it again.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from checker.history import Op
from checker.linearizable._calls import calls_of_pairs
from checker.linearizable._native import APPEND, DEAD, NOP, READ, WRITE, Witnessed, witness_of
from checker.models import KV, Model

INF = float("inf")
_UNSET: Any = object()
# per partition: (code, first argument, second argument, call time, return time, call id) per call
Rows = list[tuple[int, str, str, float, float, int]]


def fast_witnesses(
    pairs: Sequence[tuple[Op, Op | None]], model: Model, policy: str,
) -> tuple[list[Witnessed] | None, set[Hashable]]:
    """One witness per partition (the largest partition's with its Calls, the others' without), or None and
    the keys of the partitions the compiled search missed (empty when the fast path does not apply)."""
    if type(model) is not KV:  # registers: the general path's share of their time is small (bench/checker.py)
        return None, set()
    kept: list[int] = []  # call id -> index of its pair
    init = model.initial
    parts = _kv_rows(pairs, policy, kept, init)
    if not parts:
        return None, set()
    found: list[tuple[Hashable, Rows, tuple[list[int], int, int]]] = []
    for key, rows in parts.items():
        codes, first, second, call_t, ret_t, _ = zip(*rows, strict=True)
        w = witness_of(init, codes, first, second, call_t, ret_t)
        if w is None:
            return None, {key}
        found.append((key, rows, w))
    # the largest partition (the first of equal size), as check shows it: with its Calls
    big = max(range(len(found)), key=lambda j: len(found[j][1]))
    out: list[Witnessed] = []
    for j, (key, rows, (order, steps, cache_entries)) in enumerate(found):
        calls = []
        if j == big:
            ids = [r[5] for r in rows]
            calls = [c._replace(id=i) for c, i in zip(calls_of_pairs([pairs[kept[i]] for i in ids], policy), ids,
                                                      strict=True)]
        out.append(Witnessed(model, calls, key, order, steps, cache_entries, size=len(rows)))
    return out, set()


def _kv_rows(pairs: Sequence[tuple[Op, Op | None]], policy: str, kept: list[int], init: Any) -> dict[Any, Rows] | None:
    """kv's partitions (by key, in order of first appearance), spelled as ``_native._encode_kv`` does."""
    if type(init) is not str or DEAD in init:
        return None
    parts: dict[Any, Rows] = {}
    drop = policy == "drop"
    for pi, (inv, comp) in enumerate(pairs):  # one pass per history: the steps of build_calls stay inline
        value = inv.value
        if comp is None or comp.type == "info":
            out: Any = _UNSET
            ret = INF
        elif comp.type == "fail":
            if drop:
                continue
            out, ret = None, float(comp.time)
        else:
            out, ret = comp.value, float(comp.time)
            if value is None:
                value = out
            if type(out) is dict:
                out = out.get("value")
        if type(value) is not dict:
            return None
        k = value.get("key", _UNSET)
        if type(k) is not str:
            return None  # partition_key freezes other keys; the general path handles them
        f = inv.f
        arg: Any
        if comp is not None and comp.type == "fail":
            code, arg = NOP, ""
        elif f == "get":
            code, arg = (NOP, "") if out is _UNSET else (READ, out)
        elif f == "append":
            code, arg = APPEND, value.get("value")
        elif f == "put":
            code, arg = WRITE, value.get("value")
        else:
            return None
        if type(arg) is not str or DEAD in arg:
            return None
        rows = parts.get(k)
        if rows is None:
            rows = parts[k] = []
        rows.append((code, arg, "", float(inv.time), ret, len(kept)))
        kept.append(pi)
    return parts
