"""Counting, repetition, choice, barriers and op transforms."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from harness.generator._core import (
    PENDING,
    Context,
    Gen,
    OpDict,
    OpResult,
    Process,
    _advance,
    _Pending,
    _Seq,
    _soonest,
    _update,
    as_gen,
)

# ---------------------------------------------------------------------------------------------
# Counting and repetition


@dataclass(frozen=True, slots=True)
class _Limit:
    remaining: int
    gen: Gen | None

    def op(self, ctx: Context) -> OpResult:
        if self.remaining <= 0 or self.gen is None:
            return None
        res = self.gen.op(ctx)
        if res is None:
            return None
        value, nxt = res
        if value is PENDING:
            return (PENDING, _Limit(self.remaining, nxt))
        return (value, _Limit(self.remaining - 1, nxt))

    def update(self, ctx: Context, event: OpDict) -> Gen | None:
        return _Limit(self.remaining, _update(self.gen, ctx, event))


def limit(n: int, gen: Any) -> Gen:
    """At most ``n`` ops from ``gen``."""
    return _Limit(n, as_gen(gen))


def once(gen: Any) -> Gen:
    """Exactly the first op of ``gen``."""
    return _Limit(1, as_gen(gen))


@dataclass(frozen=True, slots=True)
class _Repeat:
    remaining: int | None
    gen: Gen

    def op(self, ctx: Context) -> OpResult:
        if self.remaining is not None and self.remaining <= 0:
            return None
        res = self.gen.op(ctx)
        if res is None:
            return None
        value, _ = res
        if value is PENDING:
            return (PENDING, self)
        return (value, _Repeat(None if self.remaining is None else self.remaining - 1, self.gen))

    def update(self, ctx: Context, event: OpDict) -> Gen | None:
        return self


def repeat(gen: Any, n: int | None = None) -> Gen:
    """The first op of ``gen`` over and over (``n`` times, or forever)."""
    g = as_gen(gen)
    if g is None:
        raise TypeError("repeat: generator must not be None")
    return _Repeat(n, g)


@dataclass(frozen=True, slots=True)
class _Cycle:
    remaining: int | None
    original: Gen
    current: Gen | None

    def op(self, ctx: Context) -> OpResult:
        current, remaining = self.current, self.remaining  # remaining = restarts still allowed
        for _ in range(2):
            if current is not None:
                res = current.op(ctx)
                if res is not None:
                    return (res[0], _Cycle(remaining, self.original, res[1]))
            if remaining is not None and remaining <= 0:
                return None
            current = self.original
            remaining = None if remaining is None else remaining - 1
        return None

    def update(self, ctx: Context, event: OpDict) -> Gen | None:
        return _Cycle(self.remaining, self.original, _update(self.current, ctx, event))


def cycle(gen: Any, n: int | None = None) -> Gen:
    """Run ``gen`` to exhaustion, then start it again from the beginning (``n`` times, or forever)."""
    g = as_gen(gen)
    if g is None:
        raise TypeError("cycle: generator must not be None")
    if n is not None and n < 1:
        raise ValueError(f"cycle: n must be >= 1 or None, got {n}")
    return _Cycle(None if n is None else n - 1, g, g)


# ---------------------------------------------------------------------------------------------
# Choice


@dataclass(frozen=True, slots=True)
class _Mix:
    gens: tuple[Gen, ...]

    def op(self, ctx: Context) -> OpResult:
        gens = self.gens
        while gens:
            i = ctx.rng.randrange(len(gens))
            res = gens[i].op(ctx)
            if res is None:
                gens = gens[:i] + gens[i + 1 :]
                continue
            value, nxt = res
            new = gens[:i] + ((nxt,) if nxt is not None else ()) + gens[i + 1 :]
            return (value, _Mix(new))
        return None

    def update(self, ctx: Context, event: OpDict) -> Gen | None:
        return _Mix(tuple(g for g in (x.update(ctx, event) for x in self.gens) if g is not None))


def mix(gens: Sequence[Any]) -> Gen:
    """Each op comes from a uniformly random (seeded) member; exhausted members drop out."""
    return _Mix(tuple(g for g in map(as_gen, gens) if g is not None))



@dataclass(frozen=True, slots=True)
class _Any:
    gens: tuple[Gen | None, ...]

    def op(self, ctx: Context) -> OpResult:
        cands = []
        for i, g in enumerate(self.gens):
            if g is None:
                continue
            res = g.op(ctx)
            if res is not None:
                cands.append((i, res[0], res[1]))
        if not cands:
            return None
        best = _soonest(cands)
        gens = _advance(self.gens, cands, best)
        return (PENDING if best is None else cands[best][1], _Any(gens))

    def update(self, ctx: Context, event: OpDict) -> Gen | None:
        return _Any(tuple(_update(g, ctx, event) for g in self.gens))


def any_of(*gens: Any) -> Gen:
    """Whichever member offers the soonest op."""
    return _Any(tuple(as_gen(g) for g in gens))


@dataclass(frozen=True, slots=True)
class _FlipFlop:
    gens: tuple[Gen, Gen]
    turn: int

    def op(self, ctx: Context) -> OpResult:
        res = self.gens[self.turn].op(ctx)
        if res is None:
            return None
        value, nxt = res
        if nxt is None:
            return (value, None) if value is not PENDING else None
        gens = (nxt, self.gens[1]) if self.turn == 0 else (self.gens[0], nxt)
        return (value, _FlipFlop(gens, self.turn if value is PENDING else 1 - self.turn))

    def update(self, ctx: Context, event: OpDict) -> Gen | None:
        a, b = self.gens[0].update(ctx, event), self.gens[1].update(ctx, event)
        return None if a is None or b is None else _FlipFlop((a, b), self.turn)


def flip_flop(a: Any, b: Any) -> Gen:
    """Alternate ops from ``a`` and ``b``; ends when the one whose turn it is runs out."""
    ga, gb = as_gen(a), as_gen(b)
    if ga is None or gb is None:
        raise TypeError("flip_flop: generators must not be None")
    return _FlipFlop((ga, gb), 0)


# ---------------------------------------------------------------------------------------------
# Sequencing and barriers


@dataclass(frozen=True, slots=True)
class _Synchronize:
    gen: Gen | None

    def op(self, ctx: Context) -> OpResult:
        if self.gen is None:
            return None
        if not ctx.all_free():
            return (PENDING, self)
        return self.gen.op(ctx)

    def update(self, ctx: Context, event: OpDict) -> Gen | None:
        return _Synchronize(_update(self.gen, ctx, event))


def synchronize(gen: Any) -> Gen:
    """Wait until every thread of the context is free, then behave as ``gen``."""
    return _Synchronize(as_gen(gen))


def phases(*gens: Any) -> Gen:
    """Each generator runs to completion and all threads go idle before the next one starts."""
    return _Seq(tuple(_Synchronize(as_gen(g)) for g in gens))


def then(a: Any, b: Any) -> Gen:
    """``a`` to completion, a barrier, then ``b``."""
    return phases(a, b)


# ---------------------------------------------------------------------------------------------
# Reacting to results; transforming ops


@dataclass(frozen=True, slots=True)
class _UntilOk:
    gen: Gen | None
    mine: frozenset[Process]
    done: bool

    def op(self, ctx: Context) -> OpResult:
        if self.done or self.gen is None:
            return None
        res = self.gen.op(ctx)
        if res is None:
            return None
        value, nxt = res
        mine = self.mine if value is PENDING else self.mine | {value["process"]}  # type: ignore[index]
        return (value, _UntilOk(nxt, mine, False))

    def update(self, ctx: Context, event: OpDict) -> Gen | None:
        if event.get("process") in self.mine and event.get("type") != "invoke":
            if event.get("type") == "ok":
                return _UntilOk(self.gen, frozenset(), True)
            return _UntilOk(_update(self.gen, ctx, event), self.mine - {event["process"]}, False)
        return _UntilOk(_update(self.gen, ctx, event), self.mine, self.done)


def until_ok(gen: Any) -> Gen:
    """Ops from ``gen`` until one of them completes ``ok``."""
    return _UntilOk(as_gen(gen), frozenset(), False)


_FILTER_MAX_SKIPS = 100_000


@dataclass(frozen=True, slots=True)
class _Filter:
    pred: Callable[[OpDict], bool]
    gen: Gen | None

    def op(self, ctx: Context) -> OpResult:
        gen = self.gen
        for _ in range(_FILTER_MAX_SKIPS):
            if gen is None:
                return None
            res = gen.op(ctx)
            if res is None:
                return None
            value, nxt = res
            if isinstance(value, _Pending) or value["type"] == "sleep" or self.pred(value):
                return (value, _Filter(self.pred, nxt))
            gen = nxt
        raise RuntimeError(f"filter_ops: {_FILTER_MAX_SKIPS} ops in a row rejected by {self.pred!r}")

    def update(self, ctx: Context, event: OpDict) -> Gen | None:
        return _Filter(self.pred, _update(self.gen, ctx, event))


def filter_ops(pred: Callable[[OpDict], bool], gen: Any) -> Gen:
    """Only the ops of ``gen`` for which ``pred(op)`` is true."""
    return _Filter(pred, as_gen(gen))


@dataclass(frozen=True, slots=True)
class _Map:
    fn: Callable[[OpDict], OpDict]
    gen: Gen | None

    def op(self, ctx: Context) -> OpResult:
        if self.gen is None:
            return None
        res = self.gen.op(ctx)
        if res is None:
            return None
        value, nxt = res
        if value is PENDING or value["type"] == "sleep":  # type: ignore[index]
            return (value, _Map(self.fn, nxt))
        return (self.fn(value), _Map(self.fn, nxt))  # type: ignore[arg-type]

    def update(self, ctx: Context, event: OpDict) -> Gen | None:
        return _Map(self.fn, _update(self.gen, ctx, event))


def map_ops(fn: Callable[[OpDict], OpDict], gen: Any) -> Gen:
    """``fn(op)`` for every op of ``gen``."""
    return _Map(fn, as_gen(gen))


