"""The ``kv`` model: a map of string keys to string values with get, put and append (partitioned per key).

Ops carry ``{"key": k, "value": v}`` (or ``[k, v]``); a get's output is the string read (or the same map).
The state is a sorted tuple of (key, value) pairs for keys whose value differs from the initial one.
Besides ``step``, kv implements the three optional performance hooks of the model API: ``could_reach``
(look-ahead), ``impossible`` (stale-get pre-check) and ``canonical`` (unobserved values collapse to
``DEAD``); each is a necessary condition or a bisimulation, never a guess.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Hashable, Sequence
from typing import Any

from checker.models._base import FAILED, UNKNOWN, Inconsistent, Model, ModelError, OpInput, freeze

INF = float("inf")
DEAD = "\x00"  # stands for every value holding a chunk no get observes (see KV.canonical)
_STALE_WINDOW = 8


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
        rest = [(k, v) for k, v in state if k != key]
        if value != self.initial:
            rest.append((key, value))
        if len(rest) > 1:
            rest.sort(key=repr)
        return tuple(rest)

    def step(self, state: Any, op: OpInput, output: Any) -> Any:
        key, value = _kv_parts(op)
        f = op.f
        if f == "get":
            if output is UNKNOWN or output is FAILED:
                return state
            cur = self._get(state, key)
            out = output.get("value") if isinstance(output, dict) else output
            if out == cur:
                return state
            return Inconsistent(f"get {key!r} returned {out!r}, but it holds {cur!r}")
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
        key, _ = _kv_parts(goal)
        want = goal_output.get("value") if isinstance(goal_output, dict) else goal_output
        cur = self._get(state, key)
        if not isinstance(want, str) or not isinstance(cur, str) or want.startswith(cur):
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

    def read_only(self, op: OpInput, output: Any) -> bool:
        return op.f == "get" or output is FAILED

    def canonical(self, ops: Sequence[tuple[OpInput, Any]]) -> list[tuple[OpInput, Any]] | None:
        """Rewrite put/append values that no get of their key ever observes to ``DEAD`` ("\\x00").

        A value holding an unobserved chunk cannot equal any get's value until a put replaces it, so all such
        values are equivalent; ``step`` collapses them to ``DEAD`` and the orderings of unobserved appends
        merge in the cache.  Not applied when a value already contains NUL.
        """
        seen: dict[Any, list[str]] = {}
        for op, out in ops:
            k, v = _kv_parts(op)
            if (isinstance(v, str) and DEAD in v) or op.f not in ("get", "put", "append"):
                return None
            if op.f == "get" and out is not UNKNOWN and out is not FAILED:
                want = out.get("value") if isinstance(out, dict) else out
                if not isinstance(want, str) or DEAD in want:
                    return None
                seen.setdefault(freeze(k), []).append(want)
        observed = {k: "\x01".join(v) for k, v in seen.items()}
        changed = False
        out_ops: list[tuple[OpInput, Any]] = []
        for op, out in ops:
            k, v = _kv_parts(op)
            fk = freeze(k)
            unobserved = isinstance(v, str) and (
                (op.f == "append" and v != "" and v not in observed.get(fk, ""))
                or (op.f == "put" and not any(w.startswith(v) for w in seen.get(fk, ()))))
            if unobserved:
                op, changed = OpInput(op.f, {"key": k, "value": DEAD}), True
            out_ops.append((op, out))
        return out_ops if changed else None

    def impossible(self, ops: Sequence[tuple[OpInput, Any, float, float]]) -> int | None:
        """Stale gets of one key: an append that returned before a get was invoked precedes it, so the
        get's value contains the append's value -- unless some put may fall between them (a put invoked
        before the get returns and returning after the append was invoked).  Checks the last
        ``_STALE_WINDOW`` such appends of each get; likewise a put that returned before the get was invoked
        must begin its value unless another put may follow it.  Only puts whose value begins the get's value
        count as possible resets (the last put before the get determines how its value begins).

        Returns the impossible get that returns first (the earliest in ``ops`` among equal returns).  Gets are
        visited in that order, so the scan stops at the first hit; per get the work is the puts invoked
        before it returns plus two windows, O(n * (puts + window)) for the partition.
        """
        appends: list[tuple[float, float, str]] = []  # (ret, call, value) of determinate appends
        puts: list[tuple[float, float, Any]] = []  # (call, ret, value), indeterminate ones included
        done: list[tuple[float, float, str]] = []  # (ret, call, value) of determinate string puts
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
                if out is not UNKNOWN:
                    appends.append((ret, call, v))
            elif f == "put":
                puts.append((call, ret, v))
                if out is not UNKNOWN and isinstance(v, str):
                    done.append((ret, call, v))
            else:
                return None
        appends.sort()
        puts.sort()
        done.sort(key=lambda x: x[0])
        append_rets = [a[0] for a in appends]
        done_rets = [d[0] for d in done]
        # Puts by value, so a get finds the puts whose value begins its own with one lookup per distinct put
        # length instead of a startswith per put (puts with a non-string value always count).
        by_value: dict[str, list[tuple[float, float]]] = {}
        any_value: list[tuple[float, float]] = []
        for c, r, v in puts:
            if isinstance(v, str):
                by_value.setdefault(v, []).append((c, r))
            else:
                any_value.append((c, r))
        lengths = sorted({len(v) for v in by_value})
        gets.sort(key=lambda g: (g[0], g[1]))
        for gret, i, gcall, want in gets:
            # A put can be the last one before the get only if it is invoked before the get returns and its
            # value begins the get's value; only such puts can "reset" the value between a write and the get.
            # top1: the reset returning last; top2: the one returning last among those unlike top1 (so "some
            # reset other than X returns at or after t" is one comparison).  The outcome does not depend on
            # the order the resets are visited in.
            top1: tuple[float, float] | None = None
            top2_ret = -INF
            resets = any_value
            for ln in lengths:
                if ln > len(want):
                    break
                hit = by_value.get(want[:ln])
                if hit is not None:
                    resets = resets + hit
            for c, r in resets:
                if c > gret:
                    continue
                if top1 is None:
                    top1 = (r, c)
                elif r > top1[0]:
                    if (r, c) != top1:
                        top2_ret = top1[0]
                    top1 = (r, c)
                elif (r, c) != top1 and r > top2_ret:
                    top2_ret = r
            reset_until = -INF if top1 is None else top1[0]
            j = bisect_left(append_rets, gcall)
            for _, acall, v in reversed(appends[max(0, j - _STALE_WINDOW):j]):
                if acall > reset_until and v not in want:
                    return i
            # a put that returned before the get was invoked begins its value unless another resetting put may
            # follow it
            j = bisect_left(done_rets, gcall)
            for pret, pcall, v in reversed(done[max(0, j - _STALE_WINDOW):j]):
                if want.startswith(v):
                    continue
                other = -INF if top1 is None else (top1[0] if top1 != (pret, pcall) else top2_ret)
                if not other >= pcall:
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
