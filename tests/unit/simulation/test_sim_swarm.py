"""Swarm seeds: the draw is a pure function of the seed and the pools, a swarm seed replays byte for byte, the
drawn subset is what the run played and what it records, and a run without swarm draws as before."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest

from checker.compose import compose
from harness import cli
from system_under_test.sim import FAULT_KINDS, SIM_WORKLOADS, SimConfig, run
from system_under_test.sim.faults import DRAW
from system_under_test.sim.swarm import PARTITION_SHAPES, SWARM_SHAPES, Intensity, draw
from systems.splitbrain.sim.check import check_run, replay_command


def test_the_draw_is_a_function_of_the_seed_and_the_pools() -> None:
    assert draw(7, FAULT_KINDS, SIM_WORKLOADS) == draw(7, FAULT_KINDS, SIM_WORKLOADS)
    draws = [draw(s, FAULT_KINDS, SIM_WORKLOADS) for s in range(200)]
    assert len({d.faults for d in draws}) > 30, "the subsets must vary across seeds"
    for d in draws:
        assert d.faults and set(d.faults) <= set(FAULT_KINDS)
        assert list(d.faults) == [k for k in FAULT_KINDS if k in d.faults], "pool order kept"
        assert d.workloads[0] == "queue" and set(d.workloads) <= set(SIM_WORKLOADS)
        shapes = d.intensity.partition_shapes
        assert shapes and set(shapes) <= set(SWARM_SHAPES)
    seen = Counter(k for d in draws for k in d.faults)
    assert set(seen) == set(FAULT_KINDS) and all(60 <= n <= 140 for n in seen.values()), seen


def test_a_pool_of_one_kind_is_always_kept() -> None:
    assert {draw(s, ("kill",), ("queue",)).faults for s in range(20)} == {("kill",)}
    assert {draw(s, (), ("queue",)).faults for s in range(5)} == {()}


def test_intensity_refuses_empty_choices_and_unknown_shapes() -> None:
    with pytest.raises(ValueError, match="packet_delay"):
        Intensity(packet_delay=())
    with pytest.raises(ValueError, match="partition_shapes"):
        Intensity(partition_shapes=("everyone",))
    with pytest.raises(ValueError, match="overlap"):
        Intensity(overlap=1.5)


class _FakeCluster:
    """Just what the partition draw reads (a unit test of a pure draw)."""

    broker_names = ("b1-1", "b1-2", "b1-3")

    def node_names(self) -> tuple[str, ...]:
        return ("c1", "c2", "c3", *self.broker_names)

    def master_node(self) -> str | None:
        return "b1-2"

    def leader_node(self) -> str | None:
        return "c3"


@pytest.mark.parametrize(("shape", "grudge"), [
    ("master-controllers", {"b1-2": ["c1", "c2", "c3"]}),
    ("leader-controllers", {"c3": ["c1", "c2"]}),
    ("master-slaves", {"b1-2": ["b1-1", "b1-3"]}),
])
def test_a_swarm_partition_shape_cuts_what_it_names(shape: str, grudge: dict[str, list[str]]) -> None:
    drawn = DRAW["partition"](random.Random(1), _FakeCluster(), Intensity(partition_shapes=(shape,)))  # type: ignore[arg-type]
    assert drawn is not None and drawn["value"] == {"kind": "grudge", "grudge": grudge}


def test_default_knobs_keep_the_weighted_shapes() -> None:
    assert Intensity().partition_shapes is None and set(PARTITION_SHAPES) < set(SWARM_SHAPES)


def test_a_swarm_seed_replays_and_plays_its_draw() -> None:
    cfg = SimConfig(seed=11, seconds=15, faults=FAULT_KINDS, swarm=True)
    a, b = run(cfg), run(cfg)
    key = [a.history, a.node_events, a.schedule]
    assert json.dumps(key) == json.dumps([b.history, b.node_events, b.schedule])
    d = draw(11, FAULT_KINDS, SIM_WORKLOADS)
    assert a.swarm == d and a.config.faults == d.faults and a.config.workloads == d.workloads
    assert set(a.stats["faults"]) <= set(d.faults)
    assert set(check_run(a)) >= {f"{w}/stats" for w in d.workloads if w != "queue"}
    assert compose(check_run(a)).valid is True
    cmd = replay_command(a)
    assert "--swarm" in cmd and f"--faults {','.join(FAULT_KINDS)}" in cmd


def test_the_sweep_line_names_the_draw(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["sim", "--seed", "3", "--seeds", "2", "--seconds", "5", "--swarm", "--json",
                     "--out", str(tmp_path)])
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert code == 0 and len(lines) == 2
    for line in lines:
        assert line["swarm"]["faults"] == list(draw(line["seed"], FAULT_KINDS, SIM_WORKLOADS).faults)
        assert "--swarm" in line["replay"]
