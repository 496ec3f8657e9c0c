"""Routing ops to threads and processes: clients/nemesis, reserve, each_thread/each_process."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.generator._combinators import _Any
from harness.generator._core import (
    NEMESIS_THREAD,
    PENDING,
    Context,
    Gen,
    OpDict,
    OpResult,
    Thread,
    _advance,
    _soonest,
    _update,
    as_gen,
)

# ---------------------------------------------------------------------------------------------
# Threads and processes


@functools.lru_cache(maxsize=256)
def _kept(keep: Callable[[Thread], bool], threads: tuple[Thread, ...]) -> tuple[Thread, ...]:
    return tuple(t for t in threads if keep(t))


@dataclass(frozen=True, slots=True)
class _OnThreads:
    keep: Callable[[Thread], bool]
    gen: Gen | None

    def op(self, ctx: Context) -> OpResult:
        if self.gen is None:
            return None
        sub = Context(ctx.time_ns, _kept(self.keep, ctx.threads), ctx.free, ctx.workers, ctx.rng, ctx.client_threads)
        res = self.gen.op(sub)
        if res is None:
            return None
        return (res[0], _OnThreads(self.keep, res[1]))

    def update(self, ctx: Context, event: OpDict) -> Gen | None:
        threads = _kept(self.keep, ctx.threads)
        process = event["process"]
        thread = (process % ctx.client_threads if ctx.client_threads else None) if isinstance(process, int) else process
        if thread not in threads or ctx.workers.get(thread) != process:
            return self
        sub = Context(ctx.time_ns, threads, ctx.free, ctx.workers, ctx.rng, ctx.client_threads)
        return _OnThreads(self.keep, _update(self.gen, sub, event))


def _is_client(t: Thread) -> bool:
    return t != NEMESIS_THREAD


def _is_nemesis(t: Thread) -> bool:
    return t == NEMESIS_THREAD


def clients(client_gen: Any, nemesis_gen: Any = None) -> Gen:
    """Route ``client_gen`` to client threads (and ``nemesis_gen``, if given, to the nemesis)."""
    c = _OnThreads(_is_client, as_gen(client_gen))
    return c if nemesis_gen is None else _Any((c, _OnThreads(_is_nemesis, as_gen(nemesis_gen))))


def nemesis(nemesis_gen: Any, client_gen: Any = None) -> Gen:
    """Route ``nemesis_gen`` to the nemesis thread (and ``client_gen``, if given, to clients)."""
    n = _OnThreads(_is_nemesis, as_gen(nemesis_gen))
    return n if client_gen is None else _Any((n, _OnThreads(_is_client, as_gen(client_gen))))


@dataclass(frozen=True, slots=True)
class _Reserve:
    ranges: tuple[tuple[int, int], ...]  # [lo, hi) of client threads per member; last member = rest
    gens: tuple[Gen | None, ...]

    def _keep(self, i: int) -> Callable[[Thread], bool]:
        if i < len(self.ranges):
            lo, hi = self.ranges[i]
            return lambda t: isinstance(t, int) and lo <= t < hi
        top = self.ranges[-1][1] if self.ranges else 0
        return lambda t: not isinstance(t, int) or t >= top

    def op(self, ctx: Context) -> OpResult:
        cands = []
        for i, g in enumerate(self.gens):
            if g is None:
                continue
            res = g.op(ctx.restrict(self._keep(i)))
            if res is not None:
                cands.append((i, res[0], res[1]))
        if not cands:
            return None
        best = _soonest(cands)
        gens = _advance(self.gens, cands, best)
        return (PENDING if best is None else cands[best][1], _Reserve(self.ranges, gens))

    def update(self, ctx: Context, event: OpDict) -> Gen | None:
        thread = ctx.thread_of(event.get("process"))  # type: ignore[arg-type]
        gens = list(self.gens)
        for i, g in enumerate(gens):
            keep = self._keep(i)
            if thread is not None and keep(thread):
                gens[i] = _update(g, ctx.restrict(keep), event)
        return _Reserve(self.ranges, tuple(gens))


def reserve(*args: Any) -> Gen:
    """``reserve(n1, g1, n2, g2, ..., default)``: the first n1 client threads run g1, the next n2 g2,
    and every other thread (including the nemesis) runs ``default``."""
    if len(args) % 2 != 1:
        raise TypeError("reserve: expected (count, gen) pairs followed by a default generator")
    ranges, gens, lo = [], [], 0
    for n, g in zip(args[0:-1:2], args[1:-1:2]):
        if not isinstance(n, int) or n < 0:
            raise TypeError(f"reserve: thread counts must be ints >= 0, got {n!r}")
        ranges.append((lo, lo + n))
        gens.append(as_gen(g))
        lo += n
    gens.append(as_gen(args[-1]))
    return _Reserve(tuple(ranges), tuple(gens))


@dataclass(frozen=True, slots=True)
class _Each:
    by_process: bool
    original: Gen | None
    copies: tuple[tuple[Any, Gen | None], ...]  # (thread or process, generator); absent = fresh copy

    def _key(self, ctx: Context, t: Thread) -> Any:
        return ctx.workers[t] if self.by_process else t

    def _gen_for(self, key: Any) -> Gen | None:
        for k, g in self.copies:
            if k == key:
                return g
        return self.original

    def _with(self, key: Any, gen: Gen | None) -> _Each:
        copies = (*((k, g) for k, g in self.copies if k != key), (key, gen))
        return _Each(self.by_process, self.original, copies)

    def op(self, ctx: Context) -> OpResult:
        cands, live = [], False
        for t in ctx.threads:
            key = self._key(ctx, t)
            g = self._gen_for(key)
            if g is None:
                continue
            live = True
            if t not in ctx.free:
                continue
            res = g.op(ctx._replace(threads=(t,)))
            if res is not None:
                cands.append((key, res[0], res[1]))
        if not cands:
            return (PENDING, self) if live and any(t not in ctx.free for t in ctx.threads) else None
        best = _soonest(cands)
        state = self
        for j, (key, value, nxt) in enumerate(cands):
            if j == best or value is PENDING:  # pending members keep their progress (e.g. a started deadline)
                state = state._with(key, nxt)
        return (PENDING if best is None else cands[best][1], state)

    def update(self, ctx: Context, event: OpDict) -> Gen | None:
        thread = ctx.thread_of(event.get("process"))  # type: ignore[arg-type]
        if thread is None:
            return self
        key = self._key(ctx, thread)
        g = self._gen_for(key)
        return self if g is None else self._with(key, g.update(ctx._replace(threads=(thread,)), event))


def each_thread(gen: Any) -> Gen:
    """Every thread runs its own copy of ``gen``."""
    return _Each(False, as_gen(gen), ())


def each_process(gen: Any) -> Gen:
    """Every process runs its own copy of ``gen`` (a renumbered process starts a fresh copy)."""
    return _Each(True, as_gen(gen), ())


