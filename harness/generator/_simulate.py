"""Run a generator against perfect workers in logical time (for tests)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.generator._core import (
    NEMESIS_THREAD,
    PENDING,
    OpDict,
    Thread,
    _update,
    as_gen,
    make_context,
    next_process,
)

# ---------------------------------------------------------------------------------------------
# Simulation


def simulate(
    gen: Any,
    *,
    seed: int,
    client_threads: int = 2,
    nemesis: bool = True,
    latency_ns: int = 0,
    complete: Callable[[OpDict], str] = lambda op: "ok",
    max_ops: int = 10_000,
) -> list[OpDict]:
    """Run ``gen`` against perfect workers in logical time; return invocations and completions.

    Each invocation completes after ``latency_ns`` with type ``complete(op)``; an ``info``
    completion moves the thread to a new process, as the runner does.  Same seed -> same list.
    """
    g = as_gen(gen)
    ctx = make_context(client_threads, seed=seed, nemesis=nemesis)
    history: list[OpDict] = []
    in_flight: list[tuple[int, Thread, OpDict]] = []  # (completion time, thread, invocation)
    workers = dict(ctx.workers)
    while g is not None and len(history) < max_ops:
        ctx = ctx._replace(free=frozenset(ctx.threads) - {t for _, t, _ in in_flight}, workers=dict(workers))
        res = g.op(ctx)
        soonest_done = min((c[0] for c in in_flight), default=None)
        if res is None and soonest_done is None:
            break
        value, nxt = res if res is not None else (PENDING, g)
        if value is not PENDING and (soonest_done is None or value["time"] < soonest_done):  # type: ignore[index]
            op = value
            if op["time"] > ctx.time_ns:  # type: ignore[index]
                # A promise about the future: jump there and ask again (commit only when due).
                ctx = ctx._replace(time_ns=op["time"])  # type: ignore[index]
                continue
            g = nxt
            if op["type"] == "sleep":  # type: ignore[index]
                continue
            thread = ctx.thread_of(op["process"])  # type: ignore[index]
            assert thread is not None
            op = {**op, "time": ctx.time_ns}  # type: ignore[dict-item]
            history.append(op)
            in_flight.append((ctx.time_ns + latency_ns, thread, op))
            ctx = ctx._replace(free=ctx.free - {thread})
            g = _update(g, ctx, op)
            continue
        if soonest_done is None:
            # Pending with nothing in flight: let logical time move on so timers can fire.
            ctx = ctx._replace(time_ns=ctx.time_ns + 1_000_000)
            g = nxt
            continue
        if value is PENDING:
            g = nxt
        in_flight.sort(key=lambda c: (c[0], str(c[1])))
        done_at, thread, inv = in_flight.pop(0)
        ctx = ctx._replace(time_ns=max(ctx.time_ns, done_at))
        kind = complete(inv) if inv["process"] != NEMESIS_THREAD else "info"
        done = {**inv, "type": kind, "time": ctx.time_ns}
        history.append(done)
        if kind == "info" and isinstance(thread, int):
            workers[thread] = next_process(workers[thread], client_threads)
        ctx = ctx._replace(free=ctx.free | {thread})
        g = _update(g, ctx, done)
    return history
