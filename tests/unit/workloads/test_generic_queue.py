"""The generic-queue workload: registration, options, the generator's op mix and the drain (pure parts)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from harness import generator as g
from harness.generator import simulate
from harness.protocols import CAPABILITIES, QueueClients
from harness.spec import SpecError, spec_from_dict
from workloads import registry
from workloads.generic_queue import GenericQueueGen, GenericQueueOptions, drain_all, promises_exactly_once


@dataclass
class _QueueDB:
    """Just enough of a DB for the builder: it makes a (never opened) client, as an adapter's DB does."""

    exactly_once: bool = False
    log: bool = False

    async def setup(self, test: dict[str, Any], node: str) -> None: ...
    async def teardown(self, test: dict[str, Any], node: str) -> None: ...

    def queue_client(self, *, timeout_s: float) -> Any:
        return ("client", timeout_s)


class _NoQueueDB:
    async def setup(self, test: dict[str, Any], node: str) -> None: ...
    async def teardown(self, test: dict[str, Any], node: str) -> None: ...


def _ctx(options: dict[str, Any], db: Any = None) -> registry.WorkloadContext:
    spec = spec_from_dict({"name": "e", "seed": 1, "workloads": ["queue"]}, file="e.yaml")
    return registry.WorkloadContext(spec, _QueueDB() if db is None else db, options, 1, 0)


def test_it_is_registered_and_needs_a_queue_client() -> None:
    assert "generic-queue" in registry.names()
    assert registry.needs("generic-queue") == ("queue-client",)
    assert CAPABILITIES["queue-client"].protocol is QueueClients


def test_it_builds_the_systems_client_and_the_total_queue_checker() -> None:
    wl = registry.build("generic-queue", _ctx({"queues": 3, "timeout_s": 1.5}))
    assert wl.client == ("client", 1.5)
    assert wl.fs == {"send", "poll", "drain"} and set(wl.checkers) == {"total-queue", "stats"}
    assert wl.extra == {"queues": ("q0", "q1", "q2"), "exactly_once": False, "log": False}
    assert all(t > 1.5 for t in wl.op_timeouts.values())


def test_a_db_that_promises_exactly_once_makes_duplicates_count() -> None:
    assert promises_exactly_once(_QueueDB(exactly_once=True)) and not promises_exactly_once(_QueueDB())
    assert not promises_exactly_once(_NoQueueDB())
    wl = registry.build("generic-queue", _ctx({}, _QueueDB(exactly_once=True)))
    assert wl.checkers["total-queue"].exactly_once is True


def test_a_db_whose_queues_are_logs_is_judged_as_a_log() -> None:
    assert registry.build("generic-queue", _ctx({}, _QueueDB(log=True))).checkers["total-queue"].log is True
    assert registry.build("generic-queue", _ctx({}, _QueueDB())).checkers["total-queue"].log is False


@pytest.mark.parametrize(("options", "key"), [
    ({"queues": 0}, "workloads[0].options.queues"),
    ({"send_fraction": 1.5}, "workloads[0].options.send_fraction"),
    ({"max_poll": "many"}, "workloads[0].options.max_poll"),
    ({"timeout_s": 0}, "workloads[0].options.timeout_s"),
    ({"colour": 1}, "workloads[0].options.colour"),
])
def test_bad_options_are_refused_by_key(options: dict[str, Any], key: str) -> None:
    with pytest.raises(SpecError) as info:
        registry.build("generic-queue", _ctx(options))
    assert info.value.key == key


def test_a_db_without_a_queue_client_is_refused_on_the_workload_name() -> None:
    with pytest.raises(SpecError) as info:
        registry.build("generic-queue", _ctx({}, _NoQueueDB()))
    assert info.value.key == "workloads[0].name"


def test_the_generator_sends_unique_values_and_polls_in_the_asked_share() -> None:
    o = GenericQueueOptions(queues=2, send_fraction=0.3, max_poll=5)
    ops = [op for op in simulate(g.clients(GenericQueueGen.start(("q0", "q1"), o)), seed=3, nemesis=False,
                                 max_ops=600) if op["type"] == "invoke"]
    sends = [op["value"] for op in ops if op["f"] == "send"]
    polls = [op["value"] for op in ops if op["f"] == "poll"]
    assert len({v["value"] for v in sends}) == len(sends) > 0
    assert 0.2 < len(sends) / len(ops) < 0.4
    assert {v["queue"] for v in sends + polls} == {"q0", "q1"}
    assert all(v == {"queue": v["queue"], "max": 5} for v in polls)


def test_the_drain_retries_each_queue_until_one_drain_is_ok() -> None:
    tries: dict[str, int] = {}

    def complete(op: dict[str, Any]) -> str:  # each queue's first two drains fail
        q = op["value"]["queue"]
        tries[q] = tries.get(q, 0) + 1
        return "fail" if tries[q] <= 2 else "ok"

    ops = simulate(g.clients(drain_all(("q0", "q1"), retry_interval_s=0.01)), seed=1, nemesis=False, max_ops=40,
                   complete=complete)
    drains = [op["value"]["queue"] for op in ops if op["type"] == "invoke"]
    assert drains == ["q0"] * 3 + ["q1"] * 3
    assert all(op["value"] == {"queue": op["value"]["queue"]} for op in ops if op["type"] == "invoke")
