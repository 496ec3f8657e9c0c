"""The ``kv`` model: a map of string keys to string values with get, put and append (partitioned per key).

Ops carry ``{"key": k, "value": v}`` (or ``[k, v]``); a get's output is the string read (or the same map).
The state is a sorted tuple of (key, value) pairs for keys whose value differs from the initial one.
Besides ``step``, kv implements the optional performance hooks of the model API: ``could_reach``
(look-ahead) and ``reach_planner`` (the same look-ahead as groups of writers, answered with bit operations),
``impossible`` (stale-get pre-check: which put can have been the last before a get) and ``canonical``
(unobserved values collapse to ``DEAD``); each is a necessary condition, an exact restatement or a
bisimulation, never a guess.  A get that reads the wrong value is an ``Inconsistent`` whose sentence is
written only when read (the search steps hundreds of them per partition and reads none).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Container, Hashable, Sequence
from typing import Any

from checker.models._base import FAILED, UNKNOWN, Inconsistent, Model, ModelError, OpInput, ReachBudget, freeze
from checker.models._kv_budget import kv_reach_budget, kv_state_canon

INF = float("inf")
DEAD = "\x00"  # stands for every value holding a chunk no get observes (see KV.canonical)
_STALE_WINDOW = 8
_MAX_PLANS = 16
_SCAN_INDEX_CHARS = 4096  # observed texts at least this long are indexed by windows (see KV.canonical)


def _kv_parts(op: OpInput) -> tuple[Any, Any]:
    v = op.value
    if type(v) is dict:
        try:
            return v["key"], v.get("value")
        except KeyError:
            pass
    elif isinstance(v, list | tuple) and len(v) == 2:
        return v[0], v[1]
    raise ModelError(f"kv: op {op.f!r} needs value {{'key': k, 'value': v}} or [k, v], got {v!r}")


class _Mismatch(Inconsistent):
    """A get that read another value than the one held.  The sentence is written only when someone reads it:
    the search steps hundreds of illegal gets per partition and never does (repr of long values costs more
    than the rest of ``step``)."""

    __slots__ = ("_cur", "_key", "_out")
    _cur: Any
    _key: Any
    _out: Any

    def __init__(self, key: Any, out: Any, cur: Any) -> None:
        object.__setattr__(self, "_key", key)
        object.__setattr__(self, "_out", out)
        object.__setattr__(self, "_cur", cur)

    @property
    def reason(self) -> str:
        held = "a value no get of it reads" if self._cur == DEAD else repr(self._cur)
        return f"get {self._key!r} returned {self._out!r}, but it holds {held}"


class KV(Model):
    """A map of string keys to string values with get, put and append."""

    name = "kv"

    def __init__(self, initial: Any = "", *, fail_policy: str = "drop") -> None:
        self.initial = "" if initial is None else initial
        self.fail_policy = fail_policy

    def init(self) -> Hashable:
        return ()

    def _get(self, state: tuple[tuple[Any, Any], ...], key: Any) -> Any:
        for k, v in state:
            if k == key:
                return v
        return self.initial

    def _set(self, state: tuple[tuple[Any, Any], ...], key: Any, value: Any) -> Hashable:
        if not state or (len(state) == 1 and state[0][0] == key):  # one key: a partitioned history's states
            return ((key, value),) if value != self.initial else ()
        rest = [(k, v) for k, v in state if k != key]
        if value != self.initial:
            rest.append((key, value))
        if len(rest) > 1:
            rest.sort(key=repr)
        return tuple(rest)

    def step(self, state: Any, op: OpInput, output: Any) -> Any:
        value = op.value
        if type(value) is dict and "key" in value:  # the common shape, without the general parser
            key, value = value["key"], value.get("value")
        else:
            key, value = _kv_parts(op)
        f = op.f
        if f == "get":
            if output is UNKNOWN or output is FAILED:
                return state
            cur = self._get(state, key)
            out = output.get("value") if isinstance(output, dict) else output
            if out == cur:
                return state
            return _Mismatch(key, out, cur)
        if output is FAILED:
            return state
        if f == "put":
            return self._set(state, key, value)
        if f == "append":
            cur = self._get(state, key)
            if cur == DEAD or value == DEAD:
                return self._set(state, key, DEAD)
            return self._set(state, key, cur + value)
        raise ModelError(f"kv: unknown op f={f!r} (expected get, put or append)")

    def partition_key(self, op: OpInput) -> Hashable | None:
        v = op.value
        if type(v) is dict and "key" in v:  # the common shape, without the general parser
            k = v["key"]
            return k if type(k) is str else freeze(k)
        return freeze(_kv_parts(op)[0])

    has_reach = True

    def could_reach(self, state: Any, goal: OpInput, goal_output: Any, writers: Sequence[tuple[OpInput, Any]]) -> bool:
        """A get of v can become legal only if the current value is a prefix of v (appends only grow it), or
        v = an available put's value followed by available appends' values (repeats allowed: a cheap
        necessary condition).  The writers are looked at only when the current value is not a prefix."""
        v = goal.value  # _kv_parts and _get inlined for the common shapes: the search asks this once per node
        key = v["key"] if type(v) is dict and "key" in v else _kv_parts(goal)[0]
        want = goal_output.get("value") if type(goal_output) is dict else goal_output
        if not state:
            cur = self.initial
        elif len(state) == 1:
            cur = state[0][1] if state[0][0] == key else self.initial
        else:
            cur = self._get(state, key)
        if type(want) is not str or type(cur) is not str or want.startswith(cur):
            return True
        appends: set[str] = set()
        bases: list[str] = []
        for op, out in writers:  # the search's hot loop: _kv_parts inlined for the common dict shape
            if out is FAILED:
                continue
            v = op.value
            if type(v) is dict and "key" in v:
                k, v = v["key"], v.get("value")
            else:
                k, v = _kv_parts(op)
            if k != key:
                continue
            f = op.f
            if not isinstance(v, str) or f not in ("append", "put"):
                return True  # an op this check does not understand: no opinion
            if f == "append":
                appends.add(v)
            elif want.startswith(v):
                bases.append(v)
        return any(_segments(want, len(b), appends) for b in bases)

    def reach_planner(
        self, items: Sequence[tuple[OpInput, Any]],
    ) -> Callable[[int, int], list[tuple[tuple[int, ...], ...]] | None] | None:
        """``could_reach`` as groups of writers: a put whose value begins the get's value plus, for one way of
        cutting the rest into append values, an append of each value used; or any writer ``could_reach`` has
        no opinion on.  A group holds the writers that are interchangeable for the goal (every put of that
        base value, every append of that piece value), so repeated values cost nothing: one alternative per
        (base value, set of piece values).  At most ``_MAX_PLANS`` alternatives per get (else None: the checker
        asks ``could_reach``).  The index of the partition's writers by key and value is built on the first
        call."""
        # per key: puts by value, appends by value, other writers, distinct put lengths, distinct append lengths
        index: dict[Any, tuple[dict[str, list[int]], dict[str, list[int]], list[int], list[int], list[int]]] = {}

        def build() -> None:
            for i, (op, out) in enumerate(items):
                if op.f == "get" or out is FAILED:
                    continue  # read-only: never a writer
                k, v = _kv_parts(op)
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
            ck = (freeze(_kv_parts(op)[0]), want)
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

    def state_canon(self, items: Sequence[tuple[OpInput, Any]]) -> Callable[[Hashable], Hashable] | None:
        """Values that begin no value a get of their key reads collapse to ``DEAD`` (see ``_kv_budget``)."""
        return kv_state_canon(items, DEAD, _kv_parts)

    def reach_budget(self, items: Sequence[tuple[OpInput, Any]]) -> ReachBudget | None:
        """Counts of characters the available appends must still supply (see ``_kv_budget``)."""
        return kv_reach_budget(items, self.initial, DEAD, _kv_parts)

    def read_only(self, op: OpInput, output: Any) -> bool:
        return op.f == "get" or output is FAILED

    def canonical(self, ops: Sequence[tuple[OpInput, Any]]) -> list[tuple[OpInput, Any]] | None:
        """Rewrite put/append values that no get of their key ever observes to ``DEAD`` ("\\x00").

        A value holding an unobserved chunk cannot equal any get's value until a put replaces it, so all such
        values are equivalent; ``step`` collapses them to ``DEAD`` and the orderings of unobserved appends
        merge in the cache.  Not applied when a value already contains NUL.
        """
        seen: dict[Any, set[str]] = {}
        parts: list[tuple[Any, Any, Any]] = []  # (key, frozen key, value) per op
        for op, out in ops:
            v = op.value
            if type(v) is dict and "key" in v:
                k, v = v["key"], v.get("value")
            else:
                k, v = _kv_parts(op)
            fk = k if type(k) is str else freeze(k)
            parts.append((k, fk, v))
            if (isinstance(v, str) and DEAD in v) or op.f not in ("get", "put", "append"):
                return None
            if op.f == "get" and out is not UNKNOWN and out is not FAILED:
                want = out.get("value") if isinstance(out, dict) else out
                if not isinstance(want, str) or DEAD in want:
                    return None
                got = seen.get(fk)
                if got is None:
                    seen[fk] = {want}
                else:
                    got.add(want)
        # Per key, the values read in order, and the longest ones (a value that begins another adds nothing to
        # "some get read a value containing x"): an append's value is looked for in those, a put's value by
        # bisection (the values a put's value begins follow it in sorted order).
        ordered = {k: sorted(v) for k, v in seen.items()}
        observed = {k: "\x01".join([w for w, nxt in zip(v, [*v[1:], ""], strict=True) if not nxt.startswith(w)])
                    for k, v in ordered.items()}
        # A long observed text is scanned once per distinct append length instead of once per append (10k-call
        # partitions spent 1.5 s in ``in`` before): the set of its windows of that length that begin with the
        # first character of some append value of that length.
        firsts: dict[tuple[Any, int], set[str]] = {}
        for (op, _), (_, fk, v) in zip(ops, parts, strict=True):
            if op.f == "append" and isinstance(v, str) and v:
                firsts.setdefault((fk, len(v)), set()).add(v[0])
        windows: dict[tuple[Any, int], set[str]] = {}

        def seen_in(fk: Any, v: str) -> bool:
            text = observed.get(fk, "")
            if len(text) < _SCAN_INDEX_CHARS:
                return v in text
            ln = len(v)
            win = windows.get((fk, ln))
            if win is None:
                win = windows[fk, ln] = set()
                last = len(text) - ln
                for ch in firsts[fk, ln]:
                    i = text.find(ch)
                    while 0 <= i <= last:
                        win.add(text[i:i + ln])
                        i = text.find(ch, i + 1)
            return v in win

        changed = False
        out_ops: list[tuple[OpInput, Any]] = []
        for (op, out), (k, fk, v) in zip(ops, parts, strict=True):
            if not isinstance(v, str):
                unobserved = False
            elif op.f == "append":
                unobserved = v != "" and not seen_in(fk, v)
            elif op.f == "put":
                values = ordered.get(fk, ())
                at = bisect_left(values, v)
                unobserved = at == len(values) or not values[at].startswith(v)
            else:
                unobserved = False
            if unobserved:
                op, changed = OpInput(op.f, {"key": k, "value": DEAD}), True
            out_ops.append((op, out))
        return out_ops if changed else None

    def impossible(self, ops: Sequence[tuple[OpInput, Any, float, float]]) -> int | None:
        """Stale gets of one key, found by asking which put can have been the last one before the get.

        Let Q be the last put linearized before a get G that read V (or the initial value, if no put comes
        before G).  Then V is Q's value followed by the values of the appends linearized between Q and G.
        G is impossible when neither a put nor the initial value can be that Q:

        * Q's value begins V, and Q is invoked no later than G returns.
        * Q is linearized after every op X known to precede G and to be followed by a put before G: an append
          that returned before G was invoked and whose value is not in V, and every put that returned before
          G was invoked other than Q itself.  So Q returns no earlier than each such X was invoked (the
          initial value qualifies only when there is no such X at all).
        * Unless V is Q's value, the last append before G left V ending with its value, and it falls between
          Q and G: some append whose value ends V (after Q's value) is invoked no later than G returns and
          returns no earlier than Q and every such X were invoked.

        Only the last ``_STALE_WINDOW`` appends and puts that returned before G was invoked are looked at as
        such X (fewer constraints, so still sound).  The appends-and-puts part is the classic stale read; the
        last-append part catches a get that returns the value from before a put, or from before an append,
        when the put that began that value is concurrent with the later write (it could have reset the
        value after it, but the append that ended it had returned before then).

        Returns the impossible get that returns first (the earliest in ``ops`` among equal returns).  Gets are
        visited in that order, so the scan stops at the first hit; per get the work is one window of appends,
        one lookup per distinct put length and, per put whose value begins V, one per distinct append length.
        """
        appends: list[tuple[float, float, str]] = []  # (ret, call, value) of determinate appends
        pieces: dict[str, list[tuple[float, float]]] = {}  # value -> (call, ret) of appends that may have happened
        by_value: dict[str, list[tuple[float, float, int]]] = {}  # put value -> (call, ret, index), indeterminate too
        any_value: list[tuple[float, float, int]] = []  # puts with a value this check does not understand
        done: list[tuple[float, float, int]] = []  # (ret, call, index) of determinate puts
        gets: list[tuple[float, int, float, str]] = []  # (ret, index, call, value read)
        key: Any = None
        for i, (op, out, call, ret) in enumerate(ops):
            if out is FAILED:
                continue
            v = op.value
            if type(v) is dict and "key" in v:
                k, v = v["key"], v.get("value")
            else:
                k, v = _kv_parts(op)
            if key is None:
                key = k
            elif k != key:
                return self._impossible_per_key(ops)
            f = op.f
            if f == "get":
                want = out.get("value") if isinstance(out, dict) else out
                if out is not UNKNOWN and isinstance(want, str):
                    gets.append((ret, i, call, want))
            elif f == "append" and isinstance(v, str):
                if v:
                    hit = pieces.get(v)
                    if hit is None:
                        pieces[v] = [(call, ret)]
                    else:
                        hit.append((call, ret))
                if out is not UNKNOWN:
                    appends.append((ret, call, v))
            elif f == "put":
                if isinstance(v, str):
                    by_value.setdefault(v, []).append((call, ret, i))
                else:
                    any_value.append((call, ret, i))
                if out is not UNKNOWN:
                    done.append((ret, call, i))
            else:
                return None
        if not gets:
            return None
        appends.sort()
        done.sort()
        gets.sort()  # by return, then index (indices are distinct, so values are never compared)
        append_rets = [a[0] for a in appends]
        done_rets = [d[0] for d in done]
        # tops[j]: (call, index) of the latest-invoked put among the last _STALE_WINDOW of done[:j], and the
        # call of the runner-up: "every put that returned before G, other than Q" is then one comparison.
        tops: list[tuple[float, int, float]] = [(-INF, -1, -INF)]
        for j in range(1, len(done) + 1):
            top_call, top_index, second_call = -INF, -1, -INF
            for _, pcall, pi in done[max(0, j - _STALE_WINDOW):j]:
                if pcall > top_call:
                    top_call, top_index, second_call = pcall, pi, top_call
                elif pcall > second_call:
                    second_call = pcall
            tops.append((top_call, top_index, second_call))
        put_lengths = sorted({len(v) for v in by_value})
        piece_lengths = sorted({len(v) for v in pieces})
        initial = self.initial
        for gret, i, gcall, want in gets:
            # lo: the latest invoke of an append after which some put must come before the get
            lo = -INF
            j = bisect_left(append_rets, gcall)
            for _, acall, v in appends[max(0, j - _STALE_WINDOW):j]:
                if acall > lo and v not in want:
                    lo = acall
            n_done = bisect_left(done_rets, gcall)
            top_call, top_index, second_call = tops[n_done]
            nw = len(want)
            if n_done == 0 and lo == -INF and (not isinstance(initial, str) or (
                    want.startswith(initial) and _last_piece(want, len(initial), -INF, gret, pieces, piece_lengths))):
                continue  # no put need come before the get: the initial value may begin it
            possible = False
            for ln in put_lengths:
                if ln > nw:
                    break
                same = by_value.get(want[:ln])
                if same is None:
                    continue
                for pcall, pret, pi in same:
                    if pcall > gret:
                        continue
                    bound = second_call if pi == top_index else top_call
                    if lo > bound:
                        bound = lo
                    if pcall > bound:
                        bound = pcall
                    if pret >= bound and _last_piece(want, ln, bound, gret, pieces, piece_lengths):
                        possible = True
                        break
                if possible:
                    break
            if possible:
                continue
            for pcall, pret, pi in any_value:  # no opinion on what such a put is followed by
                if pcall <= gret and pret >= max(lo, second_call if pi == top_index else top_call):
                    possible = True
                    break
            if not possible:
                return i
        return None

    def _impossible_per_key(self, ops: Sequence[tuple[OpInput, Any, float, float]]) -> int | None:
        """``impossible`` of an unpartitioned history: each key on its own, earliest-returning answer."""
        by_key: dict[Any, list[int]] = {}
        for i, (op, _, _, _) in enumerate(ops):
            by_key.setdefault(freeze(_kv_parts(op)[0]), []).append(i)
        best: int | None = None
        for idx in by_key.values():
            hit = self.impossible([ops[i] for i in idx])
            if hit is not None and (best is None or ops[idx[hit]][3] < ops[best][3]):
                best = idx[hit]
        return best

    def describe_state(self, state: Any) -> str:
        return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in state) + "}"


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


def _segments(text: str, start: int, pieces: set[str]) -> bool:
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
