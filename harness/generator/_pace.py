"""Per-worker pacing: every client thread runs its own seeded op stream at ``rate / threads`` ops/s.

Why this exists: :func:`~harness.generator.stagger` spaces ops over *all* threads and draws from the
context's shared RNG.  Under it, which worker runs an op depends on which happened to be free, and every
random choice depends on how often the interpreter asked (a promise about the future is re-asked, and
each ask drew again) -- so one timing difference shifted every later op of every worker, and the
nemesis, drawing from the same RNG, shifted with them.

:func:`pace` instead gives each thread a *lane*: its next due time and the number of ops it has
committed, ``k``.  The ``k``-th op of thread ``t`` is computed with ``random.Random`` seeded from
``(seed, t, k)`` only (a fresh one per op, never the context's), so:

* the random choices of each worker's ops are a pure function of ``(seed, worker)`` -- whatever the
  latencies, the other workers or the nemesis did;
* asking again for an op that is not yet due gives the same op (same ``k``, same RNG);
* the shared RNG of the context is never drawn from on the client path.

Pacing: the gap after op ``k`` is uniform in ``[0, 2 * mean)``, ``mean = threads / rate`` (drawn first
from op ``k``'s RNG, so the schedule does not depend on what the op was).  Each lane starts at a random
offset in ``[0, mean)`` so workers do not fire together.  When a worker is late (its previous op was
slow), its schedule keeps the missed time up to ``max_lag_s`` and then runs ops back to back until it
catches up: the configured rate is reached when the mean latency allows it, and a long stall (a fault
window) costs at most ``max_lag_s`` of catch-up burst instead of an unbounded one.

Rules of this file: no clock, no global RNG; the only ``random.Random`` objects are seeded here from
``(seed, thread, k)``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, NoReturn

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

_MASK64 = (1 << 64) - 1
_START = -1  # the k of a lane's start offset (ops count from 0)


def _mix64(x: int) -> int:
    """splitmix64's finaliser: spreads nearby inputs (seed, seed+1, ...) over the whole 64-bit range."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def _thread_key(thread: Thread) -> int:
    if isinstance(thread, int):
        return thread
    return sum((i + 1) * ord(c) for i, c in enumerate(thread)) + (1 << 40)  # stable, unlike hash(str)


def stream_seed(seed: int, thread: Thread, k: int) -> int:
    """The seed of op ``k`` of ``thread``'s stream (pure; ``k = -1`` seeds the lane's start offset)."""
    return _mix64(_mix64(_mix64(seed & _MASK64) ^ (_thread_key(thread) & _MASK64)) ^ (k & _MASK64))


class _NoRandom(random.Random):
    """Handed to ``update``: a client generator must draw its randomness in ``op`` (where the draw is
    part of the worker's stream), never while hearing an event (whose timing is not deterministic)."""

    def random(self) -> NoReturn:
        raise RuntimeError("pace: a client generator drew randomness in update(); draw it in op() instead")

    def getrandbits(self, k: int) -> NoReturn:
        raise RuntimeError("pace: a client generator drew randomness in update(); draw it in op() instead")


_NO_RANDOM = _NoRandom(0)


class LoadDial:
    """A client-rate multiplier someone else turns during the run (the guided nemesis raises it while faults are
    active: ``nemesis.guided_load_max``).  The one mutable input of :func:`pace`: it scales the gaps between a
    worker's ops (``gap / scale``) after they are drawn, so each worker's ops -- what they are, in what order --
    stay a function of (seed, worker); only when they start moves, as a latency moves it."""

    __slots__ = ("scale",)

    def __init__(self, scale: float = 1.0) -> None:
        self.scale = scale


@dataclass(frozen=True, slots=True)
class _Pace:
    rate_hz: float
    seed: int
    max_lag_ns: int
    gen: Gen | None
    lanes: Mapping[Thread, tuple[int, int]] | None = None  # thread -> (next due time ns, ops committed)
    dial: LoadDial | None = None

    def _mean_ns(self, ctx: Context) -> int:
        return int(len(ctx.threads) * NS_PER_S / self.rate_hz)

    def op(self, ctx: Context) -> OpResult:
        if self.gen is None:
            return None
        mean = self._mean_ns(ctx)
        lanes = self.lanes
        if lanes is None:
            # Fix every lane's start now and return PENDING, which callers commit at once (an op
            # promised for later is not committed, and re-asked with a later clock it would move the
            # start along with it).  Not a sleep op: ``limit`` would count it as an op.
            start = {t: (ctx.time_ns + (random.Random(stream_seed(self.seed, t, _START)).randrange(mean)
                                        if mean > 0 else 0), 0) for t in ctx.threads}
            return (PENDING, replace(self, lanes=start))
        free = [t for t in ctx.threads if t in ctx.free]
        if not free:
            return (PENDING, self)
        pace: _Pace = self
        for t in sorted(free, key=lambda t: (lanes.get(t, (ctx.time_ns, 0))[0], str(t))):
            due, k = pace._lane(t, ctx)
            rng = random.Random(stream_seed(self.seed, t, k))
            gap = rng.randrange(2 * mean) if mean > 0 else 0
            if self.dial is not None and self.dial.scale > 0 and self.dial.scale != 1.0:
                gap = int(gap / self.dial.scale)
            assert pace.gen is not None
            res = pace.gen.op(ctx._replace(threads=(t,), rng=rng))
            if res is None:
                return None
            value, nxt = res
            if value is PENDING:
                pace = replace(pace, gen=nxt)  # keep the member's progress; try the next free worker
                if nxt is None:
                    return None
                continue
            if value["type"] == "sleep":  # type: ignore[index]
                return (value, replace(pace, gen=nxt))
            at = max(value["time"], due)  # type: ignore[index]
            nxt_due = max(due, at - self.max_lag_ns) + gap
            lanes2 = {**pace._lanes(), t: (nxt_due, k + 1)}
            return ({**value, "time": at}, replace(pace, gen=nxt, lanes=lanes2))  # type: ignore[dict-item]
        return (PENDING, pace)

    def _lanes(self) -> Mapping[Thread, tuple[int, int]]:
        return self.lanes or {}

    def _lane(self, t: Thread, ctx: Context) -> tuple[int, int]:
        return self._lanes().get(t, (ctx.time_ns, 0))  # a thread that joined later starts now

    def update(self, ctx: Context, event: OpDict) -> Gen | None:
        return replace(self, gen=_update(self.gen, ctx._replace(rng=_NO_RANDOM), event))


def pace(rate_hz: float, gen: Any, *, seed: int, max_lag_s: float = 1.0, dial: LoadDial | None = None) -> Gen:
    """Run ``gen`` on every thread of the context as one stream per thread, ``rate_hz`` ops/s in total.

    Args:
        rate_hz: total ops/s over all threads (each thread: ``rate_hz / threads``); must be > 0.
        gen: the generator every stream shares (its state is shared; its random draws are per stream).
        seed: the run's seed; op ``k`` of thread ``t`` draws from ``random.Random(stream_seed(seed, t, k))``.
        max_lag_s: how far behind schedule a slow worker may catch up (back-to-back ops) before its
            schedule drops the missed time.
        dial: a rate multiplier read at every op (:class:`LoadDial`); None = ``rate_hz`` throughout.

    Raises:
        ValueError: ``rate_hz`` not > 0 or ``max_lag_s`` < 0.
    """
    if not rate_hz > 0:
        raise ValueError(f"pace: rate_hz must be > 0 ops/s, got {rate_hz!r}")
    if not max_lag_s >= 0:
        raise ValueError(f"pace: max_lag_s must be >= 0 s, got {max_lag_s!r}")
    return _Pace(float(rate_hz), int(seed), int(max_lag_s * NS_PER_S), as_gen(gen), dial=dial)
