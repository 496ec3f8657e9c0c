"""The ``kv`` model: a map of string keys to string values with get, put and append (partitioned per key).

Ops carry ``{"key": k, "value": v}`` (or ``[k, v]``); a get's output is the string read (or the same map).
The state is a sorted tuple of (key, value) pairs for keys whose value differs from the initial one.
Besides ``step``, kv implements the optional performance hooks of the model API: ``could_reach``
(look-ahead) and ``reach_planner`` (the same look-ahead as groups of writers, answered with bit operations),
``impossible`` (stale-get pre-check: which put can have been the last before a get) and ``canonical``
(unobserved values collapse to ``DEAD``); each is a necessary condition, an exact restatement or a
bisimulation, never a guess, and each lives in a module of its own (``_kv_reach``, ``_kv_stale``,
``_kv_canonical``, ``_kv_budget``).  A get that reads the wrong value is an ``Inconsistent`` whose sentence is
written only when read (the search steps hundreds of them per partition and reads none).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

from checker.models._base import FAILED, UNKNOWN, Inconsistent, Model, ModelError, OpInput, ReachBudget, freeze
from checker.models._kv_budget import kv_reach_budget, kv_state_canon
from checker.models._kv_canonical import kv_canonical
from checker.models._kv_reach import kv_reach_planner, segments
from checker.models._kv_stale import kv_impossible

DEAD = "\x00"  # stands for every value holding a chunk no get observes (see KV.canonical)


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
        return any(segments(want, len(b), appends) for b in bases)

    def reach_planner(
        self, items: Sequence[tuple[OpInput, Any]],
    ) -> Callable[[int, int], list[tuple[tuple[int, ...], ...]] | None] | None:
        """``could_reach`` as groups of writers (see ``_kv_reach``)."""
        return kv_reach_planner(items, _kv_parts)

    def state_canon(self, items: Sequence[tuple[OpInput, Any]]) -> Callable[[Hashable], Hashable] | None:
        """Values that begin no value a get of their key reads collapse to ``DEAD`` (see ``_kv_budget``)."""
        return kv_state_canon(items, DEAD, _kv_parts)

    def reach_budget(self, items: Sequence[tuple[OpInput, Any]]) -> ReachBudget | None:
        """Counts of characters the available appends must still supply (see ``_kv_budget``)."""
        return kv_reach_budget(items, self.initial, DEAD, _kv_parts)

    def read_only(self, op: OpInput, output: Any) -> bool:
        return op.f == "get" or output is FAILED

    def canonical(self, ops: Sequence[tuple[OpInput, Any]]) -> list[tuple[OpInput, Any]] | None:
        """Rewrite put/append values that no get of their key ever observes to ``DEAD`` (see ``_kv_canonical``).
        Not applied when a value already contains NUL."""
        return kv_canonical(ops, DEAD, _kv_parts)

    def impossible(self, ops: Sequence[tuple[OpInput, Any, float, float]]) -> int | None:
        """Stale gets of one key, found by asking which put can have been the last one before the get (see
        ``_kv_stale``): the impossible get that returns first, or None."""
        return kv_impossible(ops, self.initial, _kv_parts)

    def describe_state(self, state: Any) -> str:
        return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in state) + "}"
