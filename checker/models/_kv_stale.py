"""kv's stale-get pre-check (``KV.impossible``): which put can have been the last one before a get?

Let Q be the last put linearized before a get G that read V (or the initial value, if no put comes before G).
Then V is Q's value followed by the values of the appends linearized between Q and G.  G is impossible when
neither a put nor the initial value can be that Q:

* Q's value begins V, and Q is invoked no later than G returns.
* Q is linearized after every op X known to precede G and to be followed by a put before G: an append that
  returned before G was invoked and whose value is not in V, and every put that returned before G was invoked
  other than Q itself.  So Q returns no earlier than each such X was invoked (the initial value qualifies
  only when there is no such X at all).
* Unless V is Q's value, the last append before G left V ending with its value, and it falls between Q and
  G: some append whose value ends V (after Q's value) is invoked no later than G returns and returns no
  earlier than Q and every such X were invoked.

Only the last ``_STALE_WINDOW`` appends and puts that returned before G was invoked are looked at as such X
(fewer constraints, so still sound).  The appends-and-puts part is the classic stale read; the last-append
part catches a get that returns the value from before a put, or from before an append, when the put that
began that value is concurrent with the later write (it could have reset the value after it, but the append
that ended it had returned before then).  Each rule is a necessary condition, never a guess.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from checker.models._base import FAILED, UNKNOWN, OpInput, freeze

INF = float("inf")
_STALE_WINDOW = 8

Parts = Callable[[OpInput], tuple[Any, Any]]  # an op's (key, value)
Interval = tuple[float, float, int]  # (call, ret, index) or (ret, call, index), as each list says


class _Writes(NamedTuple):
    """One key's ops, indexed for the per-get questions."""

    appends: list[tuple[float, float, str]]  # (ret, call, value) of determinate appends, by return
    pieces: dict[str, list[tuple[float, float]]]  # value -> (call, ret) of appends that may have happened
    by_value: dict[str, list[Interval]]  # put value -> (call, ret, index), indeterminate puts too
    any_value: list[Interval]  # (call, ret, index) of puts with a value this check does not understand
    done: list[Interval]  # (ret, call, index) of determinate puts, by return
    gets: list[tuple[float, int, float, str]]  # (ret, index, call, value read), by return


_SEVERAL_KEYS: Any = object()


def kv_impossible(ops: Sequence[tuple[OpInput, Any, float, float]], initial: Any, parts: Parts) -> int | None:
    """The index in ``ops`` of the impossible get that returns first (the earliest among equal returns), or
    None.  Gets are visited in that order, so the scan stops at the first hit; per get the work is one window
    of appends, one lookup per distinct put length and, per put whose value begins V, one per distinct append
    length."""
    w = _collect(ops, parts)
    if w is _SEVERAL_KEYS:
        return _per_key(ops, initial, parts)
    if w is None or not w.gets:
        return None
    append_rets = [a[0] for a in w.appends]
    done_rets = [d[0] for d in w.done]
    tops = _put_tops(w.done)
    put_lengths = sorted({len(v) for v in w.by_value})
    piece_lengths = sorted({len(v) for v in w.pieces})
    for gret, i, gcall, want in w.gets:
        # lo: the latest invoke of an append after which some put must come before the get
        lo = -INF
        j = bisect_left(append_rets, gcall)
        for _, acall, v in w.appends[max(0, j - _STALE_WINDOW):j]:
            if acall > lo and v not in want:
                lo = acall
        n_done = bisect_left(done_rets, gcall)
        if n_done == 0 and lo == -INF and (not isinstance(initial, str) or (
                want.startswith(initial) and _last_piece(want, len(initial), -INF, gret, w.pieces, piece_lengths))):
            continue  # no put need come before the get: the initial value may begin it
        if not _some_put_begins(w, want, gret, lo, tops[n_done], put_lengths, piece_lengths):
            return i
    return None


def _collect(ops: Sequence[tuple[OpInput, Any, float, float]], parts: Parts) -> Any:
    """The ops as ``_Writes`` (lists sorted), ``_SEVERAL_KEYS``, or None for an op this check does not know."""
    w = _Writes([], {}, {}, [], [], [])
    key = parts(ops[0][0])[0] if ops else None  # the first op's, failed or not (_per_key splits the rest)
    for i, (op, out, call, ret) in enumerate(ops):
        if out is FAILED:
            continue
        k, v = parts(op)
        if k != key:
            return _SEVERAL_KEYS
        f = op.f
        if f == "get":
            want = out.get("value") if isinstance(out, dict) else out
            if out is not UNKNOWN and isinstance(want, str):
                w.gets.append((ret, i, call, want))
        elif f == "append" and isinstance(v, str):
            if v:
                w.pieces.setdefault(v, []).append((call, ret))
            if out is not UNKNOWN:
                w.appends.append((ret, call, v))
        elif f == "put":
            if isinstance(v, str):
                w.by_value.setdefault(v, []).append((call, ret, i))
            else:
                w.any_value.append((call, ret, i))
            if out is not UNKNOWN:
                w.done.append((ret, call, i))
        else:
            return None
    w.appends.sort()
    w.done.sort()
    w.gets.sort()  # by return, then index (indices are distinct, so values are never compared)
    return w


def _put_tops(done: list[Interval]) -> list[tuple[float, int, float]]:
    """tops[j]: (call, index) of the latest-invoked put among the last ``_STALE_WINDOW`` of ``done[:j]``, and
    the call of the runner-up: "every put that returned before G, other than Q" is then one comparison."""
    tops: list[tuple[float, int, float]] = [(-INF, -1, -INF)]
    for j in range(1, len(done) + 1):
        top_call, top_index, second_call = -INF, -1, -INF
        for _, pcall, pi in done[max(0, j - _STALE_WINDOW):j]:
            if pcall > top_call:
                top_call, top_index, second_call = pcall, pi, top_call
            elif pcall > second_call:
                second_call = pcall
        tops.append((top_call, top_index, second_call))
    return tops


def _some_put_begins(
    w: _Writes, want: str, gret: float, lo: float, top: tuple[float, int, float], put_lengths: list[int],
    piece_lengths: list[int],
) -> bool:
    """Can some put be the last one before a get that returned at ``gret`` having read ``want``?"""
    top_call, top_index, second_call = top
    nw = len(want)
    for ln in put_lengths:
        if ln > nw:
            break
        for pcall, pret, pi in w.by_value.get(want[:ln], ()):
            if pcall > gret:
                continue
            bound = max(second_call if pi == top_index else top_call, lo, pcall)
            if pret >= bound and _last_piece(want, ln, bound, gret, w.pieces, piece_lengths):
                return True
    # no opinion on what a put of another kind of value is followed by
    return any(pcall <= gret and pret >= max(lo, second_call if pi == top_index else top_call)
               for pcall, pret, pi in w.any_value)


def _per_key(ops: Sequence[tuple[OpInput, Any, float, float]], initial: Any, parts: Parts) -> int | None:
    """``kv_impossible`` of an unpartitioned history: each key on its own, earliest-returning answer."""
    by_key: dict[Any, list[int]] = {}
    for i, (op, _, _, _) in enumerate(ops):
        by_key.setdefault(freeze(parts(op)[0]), []).append(i)
    best: int | None = None
    for idx in by_key.values():
        hit = kv_impossible([ops[i] for i in idx], initial, parts)
        if hit is not None and (best is None or ops[idx[hit]][3] < ops[best][3]):
            best = idx[hit]
    return best


def _last_piece(
    text: str, start: int, lo: float, hi: float, pieces: dict[str, list[tuple[float, float]]], lengths: list[int],
) -> bool:
    """Is ``text[start:]`` empty or does it end with the value of an append invoked no later than ``hi`` and
    returning no earlier than ``lo``?  (``pieces`` maps a value to the (call, ret) of its appends, ``lengths``
    are their distinct lengths in increasing order.)"""
    n = len(text)
    room = n - start
    if room == 0:
        return True
    for ln in lengths:
        if ln > room:
            break
        hit = pieces.get(text[n - ln:])
        if hit is not None:
            for c, r in hit:
                if c <= hi and r >= lo:
                    return True
    return False
