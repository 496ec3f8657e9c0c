# ruff: noqa: E501  (the tables below read best one history per line)
"""Generator combinators: exact op sequences (table), determinism by seed, purity of the module."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import generator as g

N = "nemesis"


def fail_before(t: int) -> Any:
    return lambda op: "fail" if op["time"] < t else "ok"


def always(kind: str) -> Any:
    return lambda op: kind


# (id, generator factory, simulate kwargs, expected [(process, type, f, value, time)])
CASES: list[tuple[str, Any, dict[str, Any], list[tuple[Any, ...]]]] = [
    ("dict-is-one-op", lambda: g.clients({"f": "a"}), {}, [(0, "invoke", "a", None, 0), (0, "ok", "a", None, 10)]),
    ("list-runs-in-turn", lambda: g.clients([{"f": "a"}, {"f": "b"}, {"f": "c"}]), {}, [
        (0, "invoke", "a", None, 0), (1, "invoke", "b", None, 0), (0, "ok", "a", None, 10), (1, "ok", "b", None, 10),
        (0, "invoke", "c", None, 10), (0, "ok", "c", None, 20)]),
    ("limit-of-repeat", lambda: g.clients(g.limit(3, g.repeat({"f": "r"}))), {}, [
        (0, "invoke", "r", None, 0), (1, "invoke", "r", None, 0), (0, "ok", "r", None, 10), (1, "ok", "r", None, 10),
        (0, "invoke", "r", None, 10), (0, "ok", "r", None, 20)]),
    ("repeat-n", lambda: g.clients(g.repeat({"f": "r"}, 2)), {"client_threads": 1}, [
        (0, "invoke", "r", None, 0), (0, "ok", "r", None, 10), (0, "invoke", "r", None, 10), (0, "ok", "r", None, 20)]),
    ("cycle-twice", lambda: g.clients(g.cycle([{"f": "a"}, {"f": "b"}], 2)), {"client_threads": 1}, [
        (0, "invoke", "a", None, 0), (0, "ok", "a", None, 10), (0, "invoke", "b", None, 10), (0, "ok", "b", None, 20),
        (0, "invoke", "a", None, 20), (0, "ok", "a", None, 30), (0, "invoke", "b", None, 30), (0, "ok", "b", None, 40)]),
    ("once-of-list", lambda: g.clients(g.once([{"f": "a"}, {"f": "b"}])), {}, [
        (0, "invoke", "a", None, 0), (0, "ok", "a", None, 10)]),
    ("delay-spaces-ops", lambda: g.clients(g.delay(1e-6, g.limit(3, g.repeat({"f": "d"})))), {"client_threads": 1}, [
        (0, "invoke", "d", None, 0), (0, "ok", "d", None, 10), (0, "invoke", "d", None, 1000),
        (0, "ok", "d", None, 1010), (0, "invoke", "d", None, 2000), (0, "ok", "d", None, 2010)]),
    ("time-limit-cuts", lambda: g.clients(g.time_limit(3.5e-6, g.delay(1e-6, g.repeat({"f": "d"})))),
     {"client_threads": 1}, [
        (0, "invoke", "d", None, 0), (0, "ok", "d", None, 10), (0, "invoke", "d", None, 1000),
        (0, "ok", "d", None, 1010), (0, "invoke", "d", None, 2000), (0, "ok", "d", None, 2010),
        (0, "invoke", "d", None, 3000), (0, "ok", "d", None, 3010)]),
    ("phases-barrier", lambda: g.clients(g.phases(g.each_thread(g.once({"f": "a"})), {"f": "b"})), {}, [
        (0, "invoke", "a", None, 0), (1, "invoke", "a", None, 0), (0, "ok", "a", None, 10), (1, "ok", "a", None, 10),
        (0, "invoke", "b", None, 10), (0, "ok", "b", None, 20)]),
    ("then-is-phases", lambda: g.clients(g.then({"f": "a"}, {"f": "b"})), {"latency_ns": 5}, [
        (0, "invoke", "a", None, 0), (0, "ok", "a", None, 5), (0, "invoke", "b", None, 5), (0, "ok", "b", None, 10)]),
    ("synchronize-waits-for-all", lambda: g.clients([{"f": "a"}, g.synchronize({"f": "b"})]), {}, [
        (0, "invoke", "a", None, 0), (0, "ok", "a", None, 10), (0, "invoke", "b", None, 10), (0, "ok", "b", None, 20)]),
    ("flip-flop", lambda: g.clients(g.limit(4, g.flip_flop(g.repeat({"f": "x"}), g.repeat({"f": "y"})))),
     {"client_threads": 1}, [
        (0, "invoke", "x", None, 0), (0, "ok", "x", None, 10), (0, "invoke", "y", None, 10), (0, "ok", "y", None, 20),
        (0, "invoke", "x", None, 20), (0, "ok", "x", None, 30), (0, "invoke", "y", None, 30), (0, "ok", "y", None, 40)]),
    ("filter", lambda: g.clients(g.filter_ops(lambda o: o["value"] % 2 == 0, [{"f": "v", "value": i} for i in range(5)])),
     {"client_threads": 1}, [
        (0, "invoke", "v", 0, 0), (0, "ok", "v", 0, 10), (0, "invoke", "v", 2, 10), (0, "ok", "v", 2, 20),
        (0, "invoke", "v", 4, 20), (0, "ok", "v", 4, 30)]),
    ("map", lambda: g.clients(g.map_ops(lambda o: {**o, "f": "w"}, [{"f": "v"}])), {}, [
        (0, "invoke", "w", None, 0), (0, "ok", "w", None, 10)]),
    ("until-ok", lambda: g.clients(g.until_ok(g.repeat({"f": "try"}))), {"client_threads": 1,
                                                                             "complete": fail_before(25)}, [
        (0, "invoke", "try", None, 0), (0, "fail", "try", None, 10), (0, "invoke", "try", None, 10),
        (0, "fail", "try", None, 20), (0, "invoke", "try", None, 20), (0, "fail", "try", None, 30),
        (0, "invoke", "try", None, 30), (0, "ok", "try", None, 40)]),
    ("info-renumbers-process", lambda: g.clients(g.limit(3, g.repeat({"f": "w"}))), {"complete": always("info")}, [
        (0, "invoke", "w", None, 0), (1, "invoke", "w", None, 0), (0, "info", "w", None, 10),
        (1, "info", "w", None, 10), (2, "invoke", "w", None, 10), (2, "info", "w", None, 20)]),
    ("reserve-splits-threads", lambda: g.reserve(1, g.repeat({"f": "r"}, 2), 1, g.repeat({"f": "w"}, 2),
                                                 g.once({"f": "kill"})), {}, [
        (0, "invoke", "r", None, 0), (1, "invoke", "w", None, 0), (N, "invoke", "kill", None, 0),
        (0, "ok", "r", None, 10), (1, "ok", "w", None, 10), (N, "info", "kill", None, 10),
        (0, "invoke", "r", None, 10), (1, "invoke", "w", None, 10), (0, "ok", "r", None, 20), (1, "ok", "w", None, 20)]),
    ("each-process-fresh-after-info", lambda: g.clients(g.each_process(g.once({"f": "a"}))),
     {"client_threads": 1, "complete": always("info"), "max_ops": 6}, [
        (0, "invoke", "a", None, 0), (0, "info", "a", None, 10), (1, "invoke", "a", None, 10),
        (1, "info", "a", None, 20), (2, "invoke", "a", None, 20), (2, "info", "a", None, 30)]),
    ("each-thread-once", lambda: g.clients(g.each_thread(g.once({"f": "a"}))), {"client_threads": 3}, [
        (0, "invoke", "a", None, 0), (1, "invoke", "a", None, 0), (2, "invoke", "a", None, 0),
        (0, "ok", "a", None, 10), (1, "ok", "a", None, 10), (2, "ok", "a", None, 10)]),
    ("nemesis-sleep-after-completion", lambda: g.nemesis([{"f": "start"}, g.sleep(1e-6), {"f": "stop"}]), {}, [
        (N, "invoke", "start", None, 0), (N, "info", "start", None, 10), (N, "invoke", "stop", None, 1010),
        (N, "info", "stop", None, 1020)]),
    ("clients-and-nemesis", lambda: g.clients(g.limit(2, g.repeat({"f": "r"})), [{"f": "start"}]),
     {"client_threads": 1}, [
        (0, "invoke", "r", None, 0), (N, "invoke", "start", None, 0), (0, "ok", "r", None, 10),
        (N, "info", "start", None, 10), (0, "invoke", "r", None, 10), (0, "ok", "r", None, 20)]),
    ("any-of-soonest", lambda: g.clients(g.any_of(g.delay(5e-6, g.limit(1, g.repeat({"f": "slow"}))), {"f": "fast"})),
     {"client_threads": 1}, [
        (0, "invoke", "slow", None, 0), (0, "ok", "slow", None, 10), (0, "invoke", "fast", None, 10),
        (0, "ok", "fast", None, 20)]),
    # The time limit starts while its member is PENDING (thread busy with x), so it has expired by the
    # time the thread is free: any_of must keep a pending member's progress.
    ("any-of-keeps-pending-progress", lambda: g.clients([{"f": "x"}, g.any_of(g.time_limit(5e-9, g.repeat({"f": "a"})), g.once({"f": "b"}))]),
     {"client_threads": 1}, [
        (0, "invoke", "x", None, 0), (0, "ok", "x", None, 10), (0, "invoke", "b", None, 10), (0, "ok", "b", None, 20)]),
    ("fn-is-called-per-op", lambda: g.clients(g.limit(2, lambda ctx: {"f": "n", "value": ctx.time_ns})),
     {"client_threads": 1}, [
        (0, "invoke", "n", 0, 0), (0, "ok", "n", 0, 10), (0, "invoke", "n", 10, 10), (0, "ok", "n", 10, 20)]),
]


@pytest.mark.parametrize("make,kwargs,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_exact_sequences(make: Any, kwargs: dict[str, Any], expected: list[tuple[Any, ...]]) -> None:
    kwargs = {"latency_ns": 10, **kwargs}
    history = g.simulate(make(), seed=7, **kwargs)
    assert [(o["process"], o["type"], o["f"], o.get("value"), o["time"]) for o in history] == expected


def _workload() -> g.Gen:
    def add(ctx: g.Context) -> dict[str, Any]:
        return {"f": "add", "value": ctx.rng.randint(1, 100)}

    return g.time_limit(0.05, g.clients(
        g.stagger(0.001, g.mix([add, {"f": "read"}, g.repeat({"f": "cas"})])),
        g.cycle([g.sleep(0.005), {"f": "start"}, g.sleep(0.005), {"f": "stop"}]),
    ))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32), threads=st.integers(1, 6))
def test_same_seed_same_ops(seed: int, threads: int) -> None:
    a = g.simulate(_workload(), seed=seed, client_threads=threads, latency_ns=300_000)
    b = g.simulate(_workload(), seed=seed, client_threads=threads, latency_ns=300_000)
    assert a == b
    assert any(o["f"] == "start" for o in a) and any(o["f"] == "add" for o in a)


def test_different_seeds_differ() -> None:
    a = g.simulate(_workload(), seed=1, latency_ns=300_000)
    b = g.simulate(_workload(), seed=2, latency_ns=300_000)
    assert a != b


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32), threads=st.integers(1, 4), infos=st.sets(st.integers(0, 60), max_size=10))
def test_lifecycle_invariants(seed: int, threads: int, infos: set[int]) -> None:
    """Each process has at most one open op, completes what it invoked, and never invokes after info."""
    count = {"n": 0}

    def complete(op: dict[str, Any]) -> str:
        count["n"] += 1
        return "info" if count["n"] in infos else "ok"

    history = g.simulate(_workload(), seed=seed, client_threads=threads, latency_ns=300_000, complete=complete)
    open_: dict[Any, dict[str, Any]] = {}
    dead: set[Any] = set()
    for op in history:
        p = op["process"]
        if op["type"] == "invoke":
            assert p not in open_ and p not in dead
            open_[p] = op
        else:
            assert open_.pop(p)["f"] == op["f"]
            if op["type"] == "info" and p != N:
                dead.add(p)
    for p in {o["process"] for o in history if o["process"] != N}:
        assert p % threads in range(threads)


def test_stagger_mean_rate() -> None:
    history = g.simulate(g.clients(g.time_limit(1.0, g.stagger(0.01, g.repeat({"f": "x"})))), seed=3,
                         client_threads=4, latency_ns=1000, max_ops=100_000)
    invokes = [o for o in history if o["type"] == "invoke"]
    assert 80 <= len(invokes) <= 120  # ~100 ops in 1 s at a mean interval of 10 ms


def test_as_gen_rejects_garbage() -> None:
    with pytest.raises(TypeError, match="not a generator"):
        g.as_gen(42)
    with pytest.raises(ValueError, match="n must be >= 1"):
        g.cycle({"f": "a"}, 0)
    with pytest.raises(TypeError, match="count, gen"):
        g.reserve(1, {"f": "a"})


def test_next_process() -> None:
    assert g.next_process(3, 5) == 8
    assert g.next_process("nemesis", 5) == "nemesis"
