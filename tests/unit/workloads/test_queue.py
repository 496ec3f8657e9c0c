"""The queue workload's pure parts: options, generator (seeded, unique values, cursors), completion mapping,
final drain and checkers."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import generator as g
from harness.spec import SpecError, spec_from_dict
from system_under_test.client.consumer import NoRoute
from system_under_test.client.controller_client import NoControllerAvailable
from system_under_test.client.producer import SendError
from system_under_test.protocol import ConnectionLost, RequestTimeout, ResponseCode, RpcError
from systems.splitbrain.options import ClusterOptions
from workloads import registry
from workloads.common import StatsChecker, completion_for
from workloads.queue import (
    QueueChecker,
    QueueGen,
    QueueOptions,
    drain_generator,
    queue_names,
    settings_of,
)

SPEC = spec_from_dict({"name": "q", "nodes": {"controllers": 3, "broker_sets": {"count": 2, "replicas": 3}},
                       "seed": 1}, file="<test>")


def ctx(options: dict[str, Any], spec: Any = SPEC) -> registry.WorkloadContext:
    return registry.WorkloadContext(spec=spec, db=None, options=options, seed=1)


def test_builds_with_defaults() -> None:
    wl = registry.build("queue", ctx({}))
    assert wl.fs == {"send", "poll", "commit", "drain"}
    assert set(wl.checkers) == {"queue", "stats", "perf"}
    assert wl.extra["queues"][:2] == ("sb/broker-0/0", "sb/broker-0/1") and len(wl.extra["queues"]) == 8


@pytest.mark.parametrize(("options", "key"), [
    ({"queues_per_set": 0}, "queues_per_set"),
    ({"queues_per_set": "4"}, "queues_per_set"),
    ({"send_fraction": 1.5}, "send_fraction"),
    ({"max_poll_batch": 5000}, "max_poll_batch"),
    ({"slave_read_fraction": -0.1}, "slave_read_fraction"),
    ({"topic": "a/b"}, "topic"),
    ({"queue_per_set": 2}, "queue_per_set"),
], ids=["zero-queues", "string-int", "fraction-above-1", "batch-too-big", "negative-fraction", "slash-topic",
        "unknown-key"])
def test_bad_options_name_the_key(options: dict[str, Any], key: str) -> None:
    with pytest.raises(SpecError) as err:
        registry.build("queue", ctx(options))
    assert err.value.key == f"workloads[0].options.{key}"


def test_no_broker_sets_is_a_spec_error() -> None:
    spec = spec_from_dict({"name": "q", "nodes": {"controllers": 3, "broker_sets": []}, "seed": 1}, file="<t>")
    with pytest.raises(SpecError, match=r"nodes\.broker_sets"):
        registry.build("queue", ctx({}, spec))


def run(seed: int, n: int = 300) -> list[dict[str, Any]]:
    gen = QueueGen.start(queue_names("sb", 2, 2), QueueOptions())
    return g.simulate(g.clients(g.limit(n, gen)), seed=seed, client_threads=3, latency_ns=1000,
                      complete=lambda op: "info" if op["f"] == "send" and op["time"] % 7 == 0 else "ok")


def test_generator_is_deterministic_by_seed_and_values_are_unique() -> None:
    a, b, c = run(5), run(5), run(6)
    assert a == b and a != c
    sends = [op["value"]["value"] for op in a if op["type"] == "invoke" and op["f"] == "send"]
    assert len(sends) == len(set(sends)) > 50
    fs = {op["f"] for op in a}
    assert fs == {"send", "poll", "commit"}
    for op in a:
        if op["type"] == "invoke" and op["f"] == "send":
            assert op["value"]["value"].startswith(f"w{op['process'] % 3}-")  # keyed by worker thread


def test_poll_cursor_follows_ok_polls_per_thread_and_queue() -> None:
    gen = QueueGen.start(["sb/broker-0/0"], QueueOptions(send_fraction=0.0, commit_fraction=0.0,
                                                           slave_read_fraction=0.0))
    c = g.make_context(2, seed=1, nemesis=False)
    inv, gen = gen.op(c)
    assert inv["f"] == "poll" and inv["value"]["offset"] == 0 and inv["value"]["max"] == 32
    done = {**inv, "type": "ok", "value": {**inv["value"], "records": [[0, "p1-0"], [1, "p1-1"]]}}
    gen = gen.update(c, done)
    inv2, _ = gen.op(c)
    assert inv2["value"]["offset"] == 2
    other = gen.update(c, {**done, "process": 1, "value": {**inv["value"], "records": [[9, "x"]]}})
    assert other.cursors[(0, "sb/broker-0/0")] == 2 and other.cursors[(1, "sb/broker-0/0")] == 10
    assert gen.update(c, {**done, "type": "fail"}) is gen


def test_drain_retries_each_queue_until_ok() -> None:
    queues = ["sb/broker-0/0", "sb/broker-0/1"]
    tries = {"n": 0}

    def complete(op: dict[str, Any]) -> str:
        tries["n"] += 1
        return "fail" if tries["n"] <= 2 else "ok"

    hist = g.simulate(g.clients(drain_generator(queues, retry_interval_s=0.01)), seed=1, client_threads=1,
                      latency_ns=1000, complete=complete)
    done = [(op["value"]["queue"], op["type"]) for op in hist if op["type"] != "invoke"]
    assert done == [(queues[0], "fail"), (queues[0], "fail"), (queues[0], "ok"), (queues[1], "ok")]
    assert all(op["value"]["offset"] == 0 for op in hist)


OP = {"type": "invoke", "process": 3, "f": "send", "value": {"queue": "sb/broker-0/0", "value": "p3-0"}}


@pytest.mark.parametrize(("exc", "read_only", "kind"), [
    (RpcError(ResponseCode.NOT_MASTER, "x"), False, "fail"),
    (RpcError(ResponseCode.FLUSH_SLAVE_TIMEOUT, "x"), False, "info"),
    (RpcError(ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH, "x"), False, "fail"),
    (RpcError(ResponseCode.CONTROLLER_RAFT_INTERNAL_ERROR, "x"), False, "info"),
    (SendError("no master", code=None, definite=True), False, "fail"),
    (SendError("lost", code=None, definite=False), False, "info"),
    (RequestTimeout("slow"), False, "info"),
    (ConnectionLost("gone"), False, "info"),
    (NoControllerAvailable("none"), False, "fail"),
    (NoRoute("no master"), False, "fail"),
    (RuntimeError("boom"), False, "info"),
    (RequestTimeout("slow"), True, "fail"),
    (RpcError(ResponseCode.FLUSH_SLAVE_TIMEOUT, "x"), True, "fail"),
], ids=["definite-code", "flush-slave-timeout", "fenced", "raft-internal", "send-definite", "send-unknown",
        "timeout", "connection-lost", "no-controller", "no-route", "other", "read-timeout", "read-nondefinite"])
def test_completion_mapping(exc: BaseException, read_only: bool, kind: str) -> None:
    done = completion_for(OP, exc, read_only=read_only)
    assert done["type"] == kind
    assert done["process"] == 3 and done["f"] == "send" and done["value"] == OP["value"]
    assert type(exc).__name__ in done["error"]


def test_an_error_is_definite_by_its_flag_not_by_its_class_name() -> None:
    class NoRoute(Exception):  # same name as the client's, but it does not say it had no effect
        pass

    assert completion_for(OP, NoRoute("?"))["type"] == "info"


def hist(*ops: tuple[str, int, str, Any]) -> list[dict[str, Any]]:
    return [{"index": i, "time": i, "type": t, "process": p, "f": f, "value": v} for i, (t, p, f, v) in enumerate(ops)]


Q = "sb/broker-0/0"


def test_queue_checker_finds_a_lost_write_and_reports_settings() -> None:
    h = hist(("invoke", 0, "send", {"queue": Q, "value": "p0-0"}), ("ok", 0, "send", {"queue": Q, "value": "p0-0",
                                                                                      "offset": 0}),
             ("invoke", 0, "send", {"queue": Q, "value": "p0-1"}), ("ok", 0, "send", {"queue": Q, "value": "p0-1",
                                                                                      "offset": 1}),
             ("invoke", 1, "drain", {"queue": Q, "offset": 0}), ("ok", 1, "drain", {"queue": Q, "offset": 0,
                                                                                    "records": [[1, "p0-1"]]}))
    res = QueueChecker("unsafe").check({}, h, {})
    assert res.valid is False and "lost-write" in res.counts and res.stats["settings"] == "unsafe"
    ok = hist(*[op for op in [("invoke", 0, "send", {"queue": Q, "value": "p0-0"}),
                              ("ok", 0, "send", {"queue": Q, "value": "p0-0", "offset": 0}),
                              ("invoke", 1, "drain", {"queue": Q, "offset": 0}),
                              ("ok", 1, "drain", {"queue": Q, "offset": 0, "records": [[0, "p0-0"]]})]])
    assert QueueChecker().check({}, ok, {}).valid is True


def test_stats_checker_requires_an_ok_for_each_required_f() -> None:
    h = hist(("invoke", 0, "send", {}), ("ok", 0, "send", {}), ("invoke", 0, "poll", {}), ("fail", 0, "poll", {}))
    out = StatsChecker(("send", "poll"), frozenset({"send", "poll"})).check({}, h, {})
    assert out["valid"] is False and out["never_ok"] == ["poll"]
    assert out["by_f"]["send"] == {"ok": 1, "fail": 0, "info": 0}


@pytest.mark.parametrize(("options", "expected"), [
    (ClusterOptions(), "safe"),
    (ClusterOptions(all_ack_in_sync_state_set=False), "unsafe"),
    (ClusterOptions(enable_elect_unclean_master=True), "unsafe"),
    (ClusterOptions(bugs=("ack-before-replication",)), "unsafe"),
    (None, "safe"),
], ids=["default", "no-all-ack", "unclean", "bug", "no-db"])
def test_settings(options: Any, expected: str) -> None:
    assert settings_of(options) == expected


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 6), st.integers(1, 3))
def test_any_seed_gives_unique_values_and_cursors_that_only_move_forward(seed: int, threads: int, sets: int) -> None:
    gen: Any = QueueGen.start(queue_names("sb", sets, 2), QueueOptions(send_fraction=0.4))
    c = g.make_context(threads, seed=seed, nemesis=False)
    sent: list[str] = []
    last_offset: dict[tuple[Any, str], int] = {}
    for i in range(150):
        thread_ctx = c._replace(free=frozenset({i % threads}))  # each thread gets a turn
        inv, gen = gen.op(thread_ctx)
        assert inv["process"] == i % threads
        v = inv["value"]
        if inv["f"] == "send":
            sent.append(v["value"])
            continue
        key = (inv["process"], v["queue"])
        assert v["offset"] >= last_offset.get(key, 0)
        last_offset[key] = v["offset"]
        if inv["f"] == "poll":
            got = [[o, f"x{o}"] for o in range(v["offset"], v["offset"] + c.rng.randrange(3))]
            gen = gen.update(c, {**inv, "type": "ok", "value": {**v, "records": got}})
    assert len(sent) == len(set(sent))
    assert {x.split("-")[0] for x in sent} <= {f"w{t}" for t in range(threads)}
