"""Client load: per-worker pacing (``pace``), fair ``stagger``, and per-worker streams that do not shift with timing."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, NoReturn

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from harness import generator as g

MS = 1_000_000


def pick(ctx: g.Context) -> dict[str, Any]:
    """One random draw per op, from whatever RNG the context carries."""
    return {"f": "w", "value": ctx.rng.randrange(100)}


def workload() -> g.Gen:
    """Several ops drawing from the context's RNG (a mix picks a member, members draw their values).

    Every member repeats: a bare ``{"f": "read"}`` is one op in all, so whichever worker ran it first would
    change the mix for the others -- state shared by all streams, which ``pace`` does not (and cannot) make
    per-worker (hypothesis found that case: seed 20157, 2 threads, latencies 0 and 31 ms)."""
    def add(ctx: g.Context) -> dict[str, Any]:
        return {"f": "add", "value": ctx.rng.randint(1, 100)}

    return g.mix([add, g.repeat({"f": "read"}), pick])


def streams(history: list[dict[str, Any]], threads: int) -> dict[int, list[tuple[Any, Any]]]:
    """(f, value) of every client invocation, per worker thread (``process % threads``)."""
    out: dict[int, list[tuple[Any, Any]]] = {t: [] for t in range(threads)}
    for op in history:
        if op["type"] == "invoke" and op["process"] != "nemesis":
            out[op["process"] % threads].append((op["f"], op["value"]))
    return out


class Forbidden(random.Random):
    """An RNG that fails the test when anything draws from it."""

    def random(self) -> NoReturn:
        raise AssertionError("drew from the shared RNG")

    def getrandbits(self, k: int) -> NoReturn:
        raise AssertionError("drew from the shared RNG")


# ---------------------------------------------------------------------------------------------
# Exact sequences


def test_pace_exact_sequence() -> None:
    """2 workers at 1 op/s each (rate 2): each starts at its own offset in [0, 1 s) and then spaces its own
    ops by its own gaps; values come from each op's own stream.  Golden output of seed 5."""
    history = g.simulate(g.clients(g.limit(6, g.pace(2.0, pick, seed=5))), seed=1, client_threads=2,
                         latency_ns=10 * MS)
    assert [(o["process"], o["type"], o["value"], o["time"]) for o in history] == [
        (0, "invoke", 43, 580982155), (0, "ok", 43, 590982155),
        (1, "invoke", 97, 971652542), (1, "ok", 97, 981652542),
        (0, "invoke", 42, 2125385495), (0, "ok", 42, 2135385495),
        (1, "invoke", 53, 2807017311), (1, "ok", 53, 2817017311),
        (1, "invoke", 9, 2867342969), (1, "ok", 9, 2877342969),
        (1, "invoke", 93, 3175621445), (1, "ok", 93, 3185621445),
    ]


def test_pace_first_op_is_at_the_lane_offset_and_draws_from_op_zero() -> None:
    """The documented contract: lane start = ``Random(stream_seed(seed, t, -1)).randrange(mean)``; op k of
    thread t draws its gap and then its value from ``Random(stream_seed(seed, t, k))``."""
    seed, threads, rate = 9, 3, 30.0
    mean = int(threads * 1e9 / rate)
    history = g.simulate(g.clients(g.time_limit(1.0, g.pace(rate, pick, seed=seed))), seed=0, client_threads=threads,
                         latency_ns=MS)
    first: dict[Any, dict[str, Any]] = {}
    for o in history:
        if o["type"] == "invoke":
            first.setdefault(o["process"], o)
    for t in range(threads):
        offset = random.Random(g.stream_seed(seed, t, -1)).randrange(mean)
        assert first[t]["time"] == max(offset, MS)  # the simulator asks again 1 ms after the first PENDING
        rng = random.Random(g.stream_seed(seed, t, 0))
        rng.randrange(2 * mean)  # the gap comes first
        assert first[t]["value"] == rng.randrange(100)


def _times_after_stall(max_lag_s: float, stall_s: float, n: int) -> list[int]:
    """Drive pace on one worker whose ops complete at once, after the worker was stuck for ``stall_s``."""
    gen: Any = g.clients(g.pace(100.0, pick, seed=1, max_lag_s=max_lag_s))
    ctx = g.make_context(1, seed=0, nemesis=False)
    _, gen = gen.op(ctx)  # the sleep that fixes the lane's start
    ctx = ctx._replace(time_ns=int(stall_s * 1e9))
    times: list[int] = []
    while len(times) < n:
        value, nxt = gen.op(ctx)
        if value["time"] > ctx.time_ns:  # a promise: wait for it, then ask again
            ctx = ctx._replace(time_ns=value["time"])
            continue
        gen, times = nxt, [*times, ctx.time_ns]
    return times


@pytest.mark.parametrize("max_lag_s,burst", [(0.0, (1, 2)), (0.5, (40, 60)), (1.0, (85, 115))],
                         ids=["no-catch-up", "half-second", "one-second"])
def test_pace_catches_up_at_most_max_lag(max_lag_s: float, burst: tuple[int, int]) -> None:
    """100 ops/s on one worker stuck for 5 s: it runs back to back only until it has caught up
    ``max_lag_s`` of its schedule (about max_lag_s * 100 ops), then at its own pace again."""
    times = _times_after_stall(max_lag_s, 5.0, 300)
    at_once = times.count(5_000 * MS)
    assert burst[0] <= at_once <= burst[1]
    rest = times[at_once:]
    mean_gap_ms = (rest[-1] - rest[0]) / (len(rest) - 1) / MS
    assert 8.0 <= mean_gap_ms <= 12.0  # back at 10 ms per op


def test_stagger_rotates_over_free_workers() -> None:
    """The old stagger gave every op to the lowest free thread (worker 0 did ~all of them when ops were
    fast).  Now the least recently used free worker gets the next op."""
    history = g.simulate(g.clients(g.limit(8, g.stagger(0.001, g.repeat({"f": "x"})))), seed=3, client_threads=4,
                         latency_ns=1000)
    assert [o["process"] for o in history if o["type"] == "invoke"] == [0, 1, 2, 3, 0, 1, 2, 3]


def test_pace_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="rate_hz must be > 0"):
        g.pace(0, pick, seed=1)
    with pytest.raises(ValueError, match="max_lag_s must be >= 0"):
        g.pace(1.0, pick, seed=1, max_lag_s=-1)


# ---------------------------------------------------------------------------------------------
# RNG isolation


def test_pace_never_draws_from_the_shared_rng() -> None:
    """The context's RNG belongs to the nemesis: the client path under pace must not touch it."""
    gen: Any = g.clients(g.pace(50.0, workload(), seed=3))
    ctx = g.make_context(3, seed=0, nemesis=False)._replace(rng=Forbidden(0))
    for step in range(200):
        res = gen.op(ctx)
        assert res is not None
        value, gen = res
        if value is g.PENDING or value["type"] == "sleep":
            continue
        ctx = ctx._replace(time_ns=max(ctx.time_ns, value["time"]))
        gen = gen.update(ctx, value)
        gen = gen.update(ctx, {**value, "type": "ok", "time": ctx.time_ns + step})


def test_update_that_draws_randomness_is_an_error() -> None:
    class DrawsInUpdate:
        def op(self, ctx: g.Context) -> Any:
            return ({"type": "invoke", "process": ctx.workers[ctx.threads[0]], "time": ctx.time_ns, "f": "x",
                     "value": None}, self)

        def update(self, ctx: g.Context, event: dict[str, Any]) -> Any:
            ctx.rng.random()
            return self

    with pytest.raises(RuntimeError, match="drew randomness in update"):
        g.simulate(g.clients(g.limit(2, g.pace(10.0, DrawsInUpdate(), seed=1))), seed=0, client_threads=1)


def test_client_streams_do_not_depend_on_the_nemesis() -> None:
    """With or without a nemesis drawing from the context RNG, every worker sends the same ops."""
    def run(with_nemesis: bool) -> dict[int, list[tuple[Any, Any]]]:
        nem = g.cycle([g.sleep(0.01), lambda ctx: {"f": "kill", "value": ctx.rng.random()}]) if with_nemesis else None
        gen = g.time_limit(2.0, g.clients(g.pace(200.0, workload(), seed=4), nem))
        return streams(g.simulate(gen, seed=1, client_threads=3, latency_ns=3 * MS, max_ops=100_000), 3)

    assert run(True) == run(False)


# ---------------------------------------------------------------------------------------------
# Properties


def _counts(history: list[dict[str, Any]], threads: int) -> Counter[int]:
    return Counter(o["process"] % threads for o in history if o["type"] == "invoke" and o["process"] != "nemesis")


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32), threads=st.integers(1, 4), latency_frac=st.floats(0.0, 0.5))
def test_pace_is_fair_and_reaches_the_rate(seed: int, threads: int, latency_frac: float) -> None:
    """Over 400 mean intervals per worker with latency below half the interval: no worker does more than
    1.5x its fair share and the total rate is within 10% of the configured one."""
    rate, intervals = 20.0 * threads, 400
    mean_ns = int(threads * 1e9 / rate)
    duration_s = intervals * mean_ns / 1e9
    history = g.simulate(g.clients(g.time_limit(duration_s, g.pace(rate, pick, seed=seed))), seed=seed,
                         client_threads=threads, latency_ns=int(latency_frac * mean_ns), max_ops=1_000_000)
    counts = _counts(history, threads)
    total = sum(counts.values())
    assert len(counts) == threads
    assert max(counts.values()) <= 1.5 * total / threads
    assert abs(total / duration_s - rate) <= 0.1 * rate


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32), threads=st.integers(1, 4), lat_a=st.integers(0, 40), lat_b=st.integers(0, 40),
       infos=st.sets(st.integers(0, 200), max_size=20))
@example(seed=20157, threads=2, lat_a=0, lat_b=31, infos=set())
def test_each_workers_stream_is_a_function_of_seed_and_worker(
    seed: int, threads: int, lat_a: int, lat_b: int, infos: set[int],
) -> None:
    """Different latencies and different ``info`` completions (so different process ids) leave every
    worker's sequence of ops the same: one run's stream is a prefix of the other's."""
    def run(latency_ms: int, info_at: set[int]) -> dict[int, list[tuple[Any, Any]]]:
        n = {"i": 0}

        def complete(op: dict[str, Any]) -> str:
            n["i"] += 1
            return "info" if n["i"] in info_at else "ok"

        gen = g.clients(g.time_limit(3.0, g.pace(30.0, workload(), seed=seed)))
        return streams(g.simulate(gen, seed=seed, client_threads=threads, latency_ns=latency_ms * MS,
                                  complete=complete, max_ops=100_000), threads)

    a, b = run(lat_a, set()), run(lat_b, infos)
    for t in range(threads):
        k = min(len(a[t]), len(b[t]))
        assert k > 0 and a[t][:k] == b[t][:k]


def test_a_load_dial_scales_the_gaps_not_the_ops() -> None:
    """Turning the dial to 2 halves every worker's gaps: twice the ops in the same time, and each worker's
    ops are the same sequence (the draws are made before the gap is scaled)."""
    def run(scale: float) -> list[dict[str, Any]]:
        dial = g.LoadDial(scale)
        gen = g.time_limit(10, g.pace(20, workload(), seed=7, dial=dial))
        return g.simulate(g.clients(gen), seed=7, client_threads=2, max_ops=5000)

    one, two = run(1.0), run(2.0)
    n1 = sum(1 for op in one if op["type"] == "invoke")
    n2 = sum(1 for op in two if op["type"] == "invoke")
    assert 1.7 * n1 <= n2 <= 2.3 * n1
    s1, s2 = streams(one, 2), streams(two, 2)
    for t in range(2):
        assert s2[t][:len(s1[t])] == s1[t]
