"""Combinators over logical time: stagger, delay, sleep, time_limit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.generator._core import (
    NS_PER_S,
    PENDING,
    Context,
    Gen,
    OpDict,
    OpResult,
    Thread,
    _update,
    as_gen,
)

# ---------------------------------------------------------------------------------------------
# Time


@dataclass(frozen=True, slots=True)
class _Stagger:
    mean_ns: int
    next_ns: int | None
    gen: Gen | None
    order: tuple[Thread, ...] = ()  # threads that ran an op, least recently first

    def _fair(self, ctx: Context) -> Context:
        """``ctx`` with its threads least recently used first, so ``free_thread()`` rotates over the free
        workers instead of always handing the op to the lowest-numbered one."""
        if not self.order:
            return ctx
        used = [t for t in self.order if t in ctx.threads]
        fresh = [t for t in ctx.threads if t not in self.order]
        return ctx._replace(threads=(*fresh, *used))

    def op(self, ctx: Context) -> OpResult:
        if self.gen is None:
            return None
        res = self.gen.op(self._fair(ctx))
        if res is None:
            return None
        value, nxt = res
        if value is PENDING:
            return (PENDING, _Stagger(self.mean_ns, self.next_ns, nxt, self.order))
        at = max(value["time"], self.next_ns if self.next_ns is not None else ctx.time_ns)  # type: ignore[index]
        gap = ctx.rng.randrange(2 * self.mean_ns) if self.mean_ns > 0 else 0
        order = self.order
        if value["type"] != "sleep":  # type: ignore[index]
            thread = ctx.thread_of(value["process"])  # type: ignore[index]
            if thread is not None:
                order = (*(t for t in order if t != thread), thread)
        return ({**value, "time": at}, _Stagger(self.mean_ns, at + gap, nxt, order))  # type: ignore[dict-item]

    def update(self, ctx: Context, event: OpDict) -> Gen | None:
        return _Stagger(self.mean_ns, self.next_ns, _update(self.gen, ctx, event), self.order)


def stagger(mean_interval_s: float, gen: Any) -> Gen:
    """Space ops by uniformly random gaps in [0, 2*mean) -- a total rate of ~1/mean ops/s -- handing each
    op to the least recently used free thread (round robin when all keep up).

    One stream for all threads, drawn from the context's shared RNG: for client load prefer
    :func:`~harness.generator.pace`, whose per-worker streams do not shift with timing."""
    return _Stagger(int(mean_interval_s * NS_PER_S), None, as_gen(gen))


@dataclass(frozen=True, slots=True)
class _Delay:
    interval_ns: int
    next_ns: int | None
    gen: Gen | None

    def op(self, ctx: Context) -> OpResult:
        if self.gen is None:
            return None
        res = self.gen.op(ctx)
        if res is None:
            return None
        value, nxt = res
        if value is PENDING:
            return (PENDING, _Delay(self.interval_ns, self.next_ns, nxt))
        at = max(value["time"], self.next_ns if self.next_ns is not None else ctx.time_ns)  # type: ignore[index]
        return ({**value, "time": at}, _Delay(self.interval_ns, at + self.interval_ns, nxt))  # type: ignore[dict-item]

    def update(self, ctx: Context, event: OpDict) -> Gen | None:
        return _Delay(self.interval_ns, self.next_ns, _update(self.gen, ctx, event))


def delay(interval_s: float, gen: Any) -> Gen:
    """Ops at least ``interval_s`` apart (exactly, when the workers keep up)."""
    return _Delay(int(interval_s * NS_PER_S), None, as_gen(gen))


@dataclass(frozen=True, slots=True)
class _Until:
    deadline_ns: int

    def op(self, ctx: Context) -> OpResult:
        if ctx.time_ns >= self.deadline_ns:
            return None
        return ({"type": "sleep", "time": self.deadline_ns}, None)

    def update(self, ctx: Context, event: OpDict) -> Gen | None:
        return self


@dataclass(frozen=True, slots=True)
class _Sleep:
    duration_ns: int

    def op(self, ctx: Context) -> OpResult:
        if ctx.free_thread() is None:  # start counting once a thread is idle (after a completion)
            return (PENDING, self)
        return ({"type": "sleep", "time": ctx.time_ns}, _Until(ctx.time_ns + self.duration_ns))

    def update(self, ctx: Context, event: OpDict) -> Gen | None:
        return self


def sleep(duration_s: float) -> Gen:
    """Emit nothing for ``duration_s``, counted from when one of the context's threads is free, then end."""
    return _Sleep(int(duration_s * NS_PER_S))


@dataclass(frozen=True, slots=True)
class _TimeLimit:
    duration_ns: int
    deadline_ns: int | None
    gen: Gen | None

    def op(self, ctx: Context) -> OpResult:
        if self.gen is None:
            return None
        deadline = self.deadline_ns if self.deadline_ns is not None else ctx.time_ns + self.duration_ns
        if ctx.time_ns >= deadline:
            return None
        res = self.gen.op(ctx)
        if res is None:
            return None
        value, nxt = res
        if value is not PENDING and value["time"] >= deadline:  # type: ignore[index]
            return None
        return (value, _TimeLimit(self.duration_ns, deadline, nxt))

    def update(self, ctx: Context, event: OpDict) -> Gen | None:
        return _TimeLimit(self.duration_ns, self.deadline_ns, _update(self.gen, ctx, event))


def time_limit(duration_s: float, gen: Any) -> Gen:
    """Ops from ``gen`` until ``duration_s`` after this generator's first op (or pending)."""
    return _TimeLimit(int(duration_s * NS_PER_S), None, as_gen(gen))


