"""Nemesis package schedules (pure, simulated in logical time): disk, disk-corrupt, protocol-crash."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import pytest

from harness import generator as g
from nemesis import packages
from nemesis.disk import CORRUPT_MODES, FAULTS, REPAIRABLE_MODES
from nemesis.registration import REGISTRATION_POINTS
from nemesis.targets import Topology
from system_under_test.broker.registration import FAILPOINTS
from systems.splitbrain.selectors import SELECTORS


def fake_db() -> Any:
    nodes = SimpleNamespace(controllers=("c1", "c2", "c3"), broker_sets=(("b1", "b2"),), selectors=SELECTORS)
    return SimpleNamespace(spec=SimpleNamespace(nodes=nodes))


def schedule(name: str, seed: int) -> list[dict[str, Any]]:
    composed = packages.build(fake_db(), [name], interval_s=0.5, targets=["one"], seed=seed, time_limit_s=200)
    history = g.simulate(g.time_limit(200, g.nemesis(composed.generator)), seed=seed, client_threads=1,
                         max_ops=400)
    return [op for op in history if op["type"] == "invoke"]


@pytest.mark.parametrize("name,modes", [("disk", REPAIRABLE_MODES), ("disk-corrupt", CORRUPT_MODES)])
def test_disk_schedules_alternate_faults_and_heals_on_brokers_only(name: str, modes: tuple[str, ...]) -> None:
    ops = schedule(name, seed=3)
    starts = [op for op in ops if op["f"] != "stop-disk"]
    assert len(starts) > 20
    assert sum(op["f"] == "stop-disk" for op in ops) >= sum(op["f"] == "start-disk" for op in starts) - 1
    assert {op["f"] for op in starts} == {"start-disk", "lose-unfsynced", "corrupt-file"}
    assert {op["value"]["fault"] for op in starts if op["f"] == "start-disk"} == set(FAULTS)
    assert {op["value"]["mode"] for op in starts if op["f"] == "corrupt-file"} <= set(modes)
    assert {op["value"]["targets"] for op in starts} <= {"brokers:one", "masters"}
    assert schedule(name, seed=3) == ops  # same seed, same schedule


def test_disk_is_part_of_all_and_heals_with_stop_disk() -> None:
    assert "disk" in packages.expand(["all"])
    composed = packages.build(fake_db(), ["disk", "kill"], interval_s=1, targets=["one"], seed=1, time_limit_s=10)
    assert {"f": "stop-disk"} in composed.heal and {"f": "start", "value": "dead"} in composed.heal
    packages.validate(["disk-corrupt"], ["brokers:one"], Topology(("c1",), (("b1",),), selectors=SELECTORS),
                      random.Random(0))


def _rotated(names: list[str], points: list[str]) -> int:
    """The offset at which ``names`` walks ``points`` in order (asserts that it does)."""
    start = points.index(names[0])
    assert names == [points[(start + i) % len(points)] for i in range(len(names))]
    return start


def test_protocol_crash_walks_every_point_in_order() -> None:
    ops = schedule("protocol-crash", seed=1)
    names = [op["value"]["name"] for op in ops if op["f"] == "crash-at"]
    points = [p for p, _ in packages.PROTOCOL_POINTS]
    assert len(names) >= 2 * len(points)
    _rotated(names, points)
    assert {op["value"]["targets"] for op in ops} == {t for _, t in packages.PROTOCOL_POINTS}


def test_the_registration_walk_is_our_brokers_own_table_of_failpoints() -> None:
    """The nemesis layer writes the walk out (it imports nothing of the system under test); it must stay the
    broker's table, in its order, or a planned point would be one the broker does not have."""
    assert REGISTRATION_POINTS == FAILPOINTS
    assert packages.KINDS["registration-crash"].all(Topology()) == FAILPOINTS


@pytest.mark.parametrize("name", ["protocol-crash", "registration-crash"])
def test_a_campaign_of_runs_starts_its_walks_all_over_the_walk(name: str) -> None:
    """Runs of different seeds start the walk at different points (a campaign of short runs reached only the
    first few registration failpoints when every run started at the first), and one seed always at the same."""
    points = [p for p, _ in packages.PROTOCOL_POINTS] if name == "protocol-crash" else list(FAILPOINTS)
    key = "name" if name == "protocol-crash" else "failpoint"
    f = "crash-at" if name == "protocol-crash" else "registration-crash"

    def walk(seed: int) -> list[str]:
        return [op["value"][key] for op in schedule(name, seed=seed) if op["f"] == f]

    starts = {_rotated(walk(seed), points) for seed in range(40)}
    assert starts == set(range(len(points)))
    assert walk(5) == walk(5)
