"""kv's value collapse (``KV.canonical``): put and append values that no get of their key observes become ``DEAD``.

A value holding an unobserved chunk cannot equal any get's value until a put replaces it, so all such values
are equivalent; ``KV.step`` collapses them to ``DEAD`` and the orderings of unobserved appends merge in the
search's cache.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import Any

from checker.models._base import FAILED, UNKNOWN, OpInput, freeze

_SCAN_INDEX_CHARS = 4096  # observed texts at least this long are indexed by windows (see kv_canonical)
Parts = Callable[[OpInput], tuple[Any, Any]]  # an op's (key, value)


def kv_canonical(ops: Sequence[tuple[OpInput, Any]], dead: str, parts: Parts) -> list[tuple[OpInput, Any]] | None:
    """``ops`` with each put/append value that no get of its key observes rewritten to ``dead`` (``parts``:
    an op's key and value), or None when nothing changes or the rewrite does not apply (an op this model does
    not know, or a value that already holds ``dead``)."""
    seen: dict[Any, set[str]] = {}
    per_op: list[tuple[Any, Any, Any]] = []  # (key, frozen key, value) per op
    for op, out in ops:
        v = op.value
        if type(v) is dict and "key" in v:  # parts inlined for the common shape
            k, v = v["key"], v.get("value")
        else:
            k, v = parts(op)
        fk = k if type(k) is str else freeze(k)
        per_op.append((k, fk, v))
        f = op.f
        if isinstance(v, str) and dead in v:
            return None
        if f == "get":
            if out is UNKNOWN or out is FAILED:
                continue
            want = out.get("value") if isinstance(out, dict) else out
            if not isinstance(want, str) or dead in want:
                return None
            got = seen.get(fk)
            if got is None:
                seen[fk] = {want}
            else:
                got.add(want)
        elif f != "put" and f != "append":
            return None
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
    for (op, _), (_, fk, v) in zip(ops, per_op, strict=True):
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
    # one rewritten input per (f, str key): equal inputs, and one object to build instead of hundreds
    dead_inputs: dict[tuple[str, str], OpInput] = {}
    for (op, out), (k, fk, v) in zip(ops, per_op, strict=True):
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
            changed = True
            if type(k) is str:
                new = dead_inputs.get((op.f, k))
                if new is None:
                    new = dead_inputs[op.f, k] = OpInput(op.f, {"key": k, "value": dead})
                op = new
            else:
                op = OpInput(op.f, {"key": k, "value": dead})
        out_ops.append((op, out))
    return out_ops if changed else None
