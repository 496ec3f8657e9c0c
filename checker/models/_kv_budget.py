"""kv's counting look-ahead (``KV.reach_budget``) and state collapse (``KV.state_canon``).

The budget: how many characters must appends still supply to a get?  A get of V from a state holding C can
become legal only through a sequence of still-available writers whose last put (if any) has a value P
beginning V, or, with no put, C beginning V; the appends after it then spell the rest of V.  So, per
character, the appends still available must hold at least as many of it as the rest of V after C (when C
begins V) or after the value of some put of the key (when it begins V) does -- the minimum over those
choices, per character, which is sound whichever choice the real sequence makes.  A character no append
holds, or no choice at all, makes the need unmeetable.

Plans (``KV.reach_planner``) ignore counts: with a tiny value alphabet (``a``, ``b``, ``ab``) and an
indeterminate put pending, a state such as ``babab`` passes them against a 52-character get, since the put
could reset the value and appends of ``a`` and ``b`` could rebuild it -- given about 25 more of each, far
more than are left.  On issue 19's hard family such states were 90% of the nodes.  The budget is offered
only for a partition of one key whose appends use at most ``_MAX_GROUPS`` distinct values made of at most
``_MAX_CHARS`` distinct characters (the search counts each group's available members with one popcount).

The collapse (``kv_state_canon``) maps every value that begins no value read to ``DEAD``: see its docstring.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from checker.models._base import FAILED, UNKNOWN, OpInput, ReachBudget

_MAX_GROUPS = 8
_MAX_CHARS = 8


def kv_reach_budget(
    items: Sequence[tuple[OpInput, Any]], initial: Any, dead: str, parts: Callable[[OpInput], tuple[Any, Any]],
) -> ReachBudget | None:
    """The budget of one kv partition, or None when it does not apply (see the module docstring).

    Args:
        items: the partition's (input, output) pairs.
        initial: the model's initial value; dead: the value standing for every unobserved value.
        parts: (key, value) of an op.
    """
    key: Any = None
    appends: dict[str, list[int]] = {}
    puts: set[str] = set()
    for i, (op, out) in enumerate(items):
        if out is FAILED:
            continue
        k, v = parts(op)
        if key is None:
            key = k
        elif k != key:
            return None
        if op.f == "get":
            continue
        if op.f not in ("put", "append") or not isinstance(v, str):
            return None
        if op.f == "put":
            if dead not in v:
                puts.add(v)
        elif v and dead not in v:
            hit = appends.get(v)
            if hit is not None:
                hit.append(i)
            elif len(appends) == _MAX_GROUPS:
                return None
            else:
                appends[v] = [i]
    chars = sorted({ch for v in appends for ch in v})
    if len(chars) > _MAX_CHARS:
        return None
    where = {ch: r for r, ch in enumerate(chars)}
    # the last resource counts characters no append holds: its weight is 0 in every group
    groups = [(tuple(idx), (*(v.count(ch) for ch in chars), 0)) for v, idx in appends.items()]
    impossible = (*(0 for _ in chars), 1)
    bases = sorted(puts)

    def counts(text: str) -> tuple[int, ...]:
        out = [0] * (len(chars) + 1)
        for ch in text:
            out[where.get(ch, len(chars))] += 1
        return tuple(out)

    def need(state: Hashable, g: int) -> tuple[int, ...] | None:
        out = items[g][1]
        want = out.get("value") if isinstance(out, dict) else out
        if out is UNKNOWN or not isinstance(want, str):
            return None
        cur: Any = initial
        for k, v in state:  # type: ignore[attr-defined]
            if k == key:
                cur = v
        best: list[int] | None = None
        starts = [b for b in bases if want.startswith(b)]
        if isinstance(cur, str) and cur != dead and want.startswith(cur):
            starts.append(cur)
        for b in starts:
            c = counts(want[len(b):])
            best = list(c) if best is None else [min(x, y) for x, y in zip(best, c, strict=True)]
        return impossible if best is None else tuple(best)

    return ReachBudget(groups, need)


def kv_state_canon(
    items: Sequence[tuple[OpInput, Any]], dead: str, parts: Callable[[OpInput], tuple[Any, Any]],
) -> Callable[[Hashable], Hashable] | None:
    """Map a state's values that begin no value a get of their key reads to ``dead``; None if nothing to do.

    A bisimulation: such a value C never again begins a read value whatever is appended (if C + x began W, so
    would C), so every get fails on it as on ``dead``, appends keep it so (``step`` keeps ``dead``), and a put
    replaces either with the same value.  Gets with an unknown output, and keys or values that are not
    strings, keep the map off for their key (None when no key qualifies).
    """
    reads: dict[Any, set[str]] = {}
    off: set[Any] = set()
    for op, out in items:
        k, v = parts(op)
        if not isinstance(k, str):
            return None
        if op.f == "get":
            if out is FAILED:
                continue
            want = out.get("value") if isinstance(out, dict) else out
            if out is UNKNOWN or not isinstance(want, str):
                off.add(k)
                continue
            if dead in want:
                return None
            reads.setdefault(k, set()).add(want)
        elif not isinstance(v, str):
            off.add(k)
    # per key, the values read in sorted order: v begins one of them iff it begins the first one >= v
    keys = {k: sorted(w) for k, w in reads.items() if k not in off}
    if not keys:
        return None

    def canon(state: Hashable) -> Hashable:
        changed = False
        out = []
        for k, v in state:  # type: ignore[attr-defined]
            values = keys.get(k)
            if values is not None and v != dead and isinstance(v, str):
                at = bisect_left(values, v)
                if at == len(values) or not values[at].startswith(v):
                    v, changed = dead, True
            out.append((k, v))
        if not changed:
            return state
        if len(out) > 1:
            out.sort(key=repr)  # the order ``KV._set`` keeps
        return tuple(out)

    return canon
