"""kv's look-ahead as groups of writers (``KV.reach_planner``) and the text cutting it and ``could_reach`` use.

A get of V can become legal only if the current value is a prefix of V (appends only grow it), or V is some
available put's value followed by available appends' values.  ``kv_reach_planner`` answers that question for
the search with bit operations: per get, the alternative groups of writers that could build V.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Container, Sequence
from typing import Any

from checker.models._base import FAILED, OpInput, freeze

_MAX_PLANS = 16
Parts = Callable[[OpInput], tuple[Any, Any]]  # an op's (key, value)
Plan = Callable[[int, int], list[tuple[tuple[int, ...], ...]] | None]


def kv_reach_planner(items: Sequence[tuple[OpInput, Any]], parts: Parts) -> Plan:
    """``KV.could_reach`` as groups of writers: a put whose value begins the get's value plus, for one way of
    cutting the rest into append values, an append of each value used; or any writer ``could_reach`` has no
    opinion on.  A group holds the writers that are interchangeable for the goal (every put of that base
    value, every append of that piece value), so repeated values cost nothing: one alternative per (base
    value, set of piece values).  At most ``_MAX_PLANS`` alternatives per get (else None: the checker asks
    ``could_reach``).  The index of the partition's writers by key and value is built on the first call."""
    # per key: puts by value, appends by value, other writers, distinct put lengths, distinct append lengths
    index: dict[Any, tuple[dict[str, list[int]], dict[str, list[int]], list[int], list[int], list[int]]] = {}

    def build() -> None:
        for i, (op, out) in enumerate(items):
            if op.f == "get" or out is FAILED:
                continue  # read-only: never a writer
            k, v = parts(op)
            puts, appends, other, _, _ = index.setdefault(freeze(k), ({}, {}, [], [], []))
            if not isinstance(v, str) or op.f not in ("append", "put"):
                other.append(i)
            elif op.f == "put":
                puts.setdefault(v, []).append(i)
            elif v:  # an empty append changes nothing, and _segments never uses it
                appends.setdefault(v, []).append(i)
        for puts, appends, _, put_lengths, lengths in index.values():
            put_lengths.extend(sorted({len(v) for v in puts}))
            lengths.extend(sorted({len(v) for v in appends}))

    # (key, value read) -> every alternative regardless of limit (gets that read the same value share it; a
    # limit keeps the members of each group below it, and the alternatives whose groups all keep one)
    full: dict[tuple[Any, str], list[tuple[list[int], ...]] | None] = {}

    def alternatives(fk: Any, want: str) -> list[tuple[list[int], ...]] | None:
        puts, appends, other, put_lengths, lengths = index.get(fk, ({}, {}, [], [], []))
        alts: list[tuple[list[int], ...]] = [(other,)] if other else []
        for ln in put_lengths:
            if ln > len(want):
                break
            bases = puts.get(want[:ln])
            if bases is None:
                continue
            cuts = _all_cuts(want, ln, appends, lengths, _MAX_PLANS)
            if cuts is None:
                return None
            for cut in cuts:
                alts.append((bases, *(appends[v] for v in sorted(cut))))
                if len(alts) > _MAX_PLANS:
                    return None
        return alts

    def plan(g: int, limit: int) -> list[tuple[tuple[int, ...], ...]] | None:
        if not index:
            build()
        op, out = items[g]
        want = out.get("value") if isinstance(out, dict) else out
        if not isinstance(want, str):
            return []  # could_reach says True in every state
        ck = (freeze(parts(op)[0]), want)
        if ck in full:
            alts = full[ck]
        else:
            alts = full[ck] = alternatives(*ck)
        if alts is None:
            return None
        kept = []
        for alt in alts:
            groups = tuple(tuple(grp[:bisect_left(grp, limit)]) for grp in alt)  # indices ascend
            if all(groups):
                kept.append(groups)
        return kept

    return plan


def _all_cuts(
    text: str, start: int, pieces: Container[str], lengths: list[int], cap: int,
) -> list[frozenset[str]] | None:
    """The distinct sets of values of ``pieces`` (distinct lengths ``lengths``, increasing) that ``text[start:]``
    can be cut into (repeats allowed); or None if there are more than ``cap`` ways to cut it."""
    n = len(text)
    out: set[frozenset[str]] = set()
    stack: list[tuple[int, frozenset[str]]] = [(start, frozenset())]
    seen: set[tuple[int, frozenset[str]]] = set()  # (position, values used so far): a tiny alphabet repeats them
    visits = 0
    while stack:
        i, used = stack.pop()
        if i == n:
            out.add(used)
            if len(out) > cap:
                return None
            continue
        visits += 1
        if visits > 64 * cap:
            return None
        for ln in lengths:
            j = i + ln
            if j > n:
                break
            v = text[i:j]
            if v in pieces:
                nxt = (j, used | {v})
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
    return list(out)


def segments(text: str, start: int, pieces: set[str]) -> bool:
    """Can ``text[start:]`` be cut into pieces from ``pieces`` (repeats allowed)?"""
    n = len(text)
    if start == n:
        return True
    lengths = sorted({len(p) for p in pieces if p})
    todo = [start]
    seen = {start}
    while todo:
        i = todo.pop()
        for ln in lengths:
            j = i + ln
            if j <= n and j not in seen and text[i:j] in pieces:
                if j == n:
                    return True
                seen.add(j)
                todo.append(j)
    return False
