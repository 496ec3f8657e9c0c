"""Guided mode wiring: ``nemesis.mode`` in a spec, ``--nemesis-mode`` on the CLI, and packages.build."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from harness import generator as g
from harness.spec import SpecError, apply_overrides, spec_from_dict
from nemesis import packages
from nemesis.guided_run import GuidedGen, GuidedNemesis, load_scale, moves
from nemesis.schedule import UNDO
from nemesis.targets import Topology
from systems.splitbrain.selectors import SELECTORS


def raw(**nemesis: Any) -> dict[str, Any]:
    return {"name": "s", "backend": "local", "nodes": {"controllers": 3, "broker_sets": {"count": 1, "replicas": 3}},
            "workloads": ["queue"], "nemesis": nemesis, "seed": 1}


def test_mode_defaults_to_random_and_round_trips() -> None:
    assert spec_from_dict(raw(packages=["kill"]), file="x.yaml").nemesis.mode == "random"
    spec = spec_from_dict(raw(packages=["kill"], mode="guided"), file="x.yaml")
    assert spec.nemesis.mode == "guided"
    from harness.spec import resolved_yaml
    assert yaml.safe_load(resolved_yaml(spec))["nemesis"]["mode"] == "guided"


@pytest.mark.parametrize(("nemesis", "fragment"), [
    ({"packages": ["kill"], "mode": "smart"}, "nemesis.mode: got 'smart'; expected one of random, guided"),
    ({"mode": "guided"}, "nemesis.mode: got 'guided'; expected random, or nemesis.packages"),
], ids=["unknown-mode", "guided-without-packages"])
def test_bad_modes_name_the_key(nemesis: dict[str, Any], fragment: str) -> None:
    with pytest.raises(SpecError) as info:
        spec_from_dict(raw(**nemesis), file="x.yaml")
    assert fragment in str(info.value) and str(info.value).startswith("x.yaml: ")


def test_override() -> None:
    out = apply_overrides(raw(packages=["kill"]), {"nemesis_mode": "guided"})
    assert spec_from_dict(out, file="x.yaml").nemesis.mode == "guided"


def fake_db(mode: str) -> Any:
    nodes = SimpleNamespace(controllers=("c1", "c2", "c3"), broker_sets=(("b1", "b2", "b3"),), selectors=SELECTORS)
    return SimpleNamespace(spec=SimpleNamespace(nodes=nodes, nemesis=SimpleNamespace(mode=mode, role_wait_s=10.0)))


def test_build_guided_uses_the_packages_vocabulary_and_records_nothing_up_front() -> None:
    composed = packages.build(fake_db("guided"), ["partition", "kill"], interval_s=4, targets=["masters", "one"],
                              seed=3, time_limit_s=60)
    assert isinstance(composed.generator, GuidedGen) and isinstance(composed.nemesis, GuidedNemesis)
    assert composed.schedule == ()
    assert {"f": "stop-partition"} in composed.heal and {"f": "start", "value": "dead"} in composed.heal
    defs = packages.definitions(["partition", "kill"], targets=["masters", "one"], options=None, interval_s=4,
                                topo=Topology(("c1", "c2", "c3"), (("b1", "b2", "b3"),), selectors=SELECTORS))
    fs = {m.f for m in moves(defs, seed=3)}
    assert fs == {"start-partition", "kill"}
    # with no observer the policy still runs (quiet moments): faults and their undo steps, in order
    history = g.simulate(g.time_limit(40, g.nemesis(composed.generator)), seed=3, client_threads=1, max_ops=200)
    invokes = [op for op in history if op["type"] == "invoke"]
    assert invokes and invokes[0]["f"] in fs
    open_faults = 0
    for op in invokes:
        open_faults += 1 if op["f"] in UNDO else -1 if op["f"] in UNDO.values() else 0
        assert 0 <= open_faults <= 2


def test_a_schedule_overrides_guided_mode() -> None:
    from nemesis.schedule import Step

    composed = packages.build(fake_db("guided"), ["kill"], interval_s=4, targets=["one"], seed=3, time_limit_s=60,
                              schedule=[Step(1.0, "kill", "one"), Step(2.0, "start")])
    assert not isinstance(composed.generator, GuidedGen) and len(composed.schedule) == 2


def test_cli_rejects_a_bad_mode_with_exit_2(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(raw(packages=["kill"])))
    out = subprocess.run([sys.executable, "-m", "harness.cli", "test", str(spec), "--nemesis-mode", "smart"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--nemesis-mode: invalid choice: 'smart'" in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "results").exists()


def test_memory_round_trip_and_bad_file(tmp_path: Path) -> None:
    from nemesis.guided import State, memory_of, state_from_memory
    from nemesis.guided_run import load_memory, save_memory

    state = State(stats={("none|quiet", "kill@masters"): (2, 1.5)})
    path = tmp_path / "memory.json"
    save_memory(str(path), state)
    loaded = load_memory(str(path))
    assert loaded.stats == state.stats and memory_of(loaded) == memory_of(state)
    assert load_memory(str(tmp_path / "missing.json")) == State()
    assert state_from_memory({"reached": [["kill", "broker", ["become-master"]]]}).coverage.count == 1
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not a guided memory file"):
        load_memory(str(path))
    db = fake_db("guided")
    db.spec.nemesis.guided_memory = str(path)
    db.spec.source = "x.yaml"
    with pytest.raises(SpecError) as info:
        packages.build(db, ["kill"], interval_s=4, targets=["one"], seed=1, time_limit_s=10)
    assert info.value.key == "nemesis.guided_memory"


def test_guided_load_max_defaults_to_1_round_trips_and_is_bounded() -> None:
    from harness.spec import resolved_yaml

    assert spec_from_dict(raw(packages=["kill"]), file="x.yaml").nemesis.guided_load_max == 1.0
    spec = spec_from_dict(raw(packages=["kill"], mode="guided", guided_load_max=3), file="x.yaml")
    assert yaml.safe_load(resolved_yaml(spec))["nemesis"]["guided_load_max"] == 3.0
    with pytest.raises(SpecError) as info:
        spec_from_dict(raw(packages=["kill"], guided_load_max=0.5), file="x.yaml")
    assert "nemesis.guided_load_max" in str(info.value)


@given(active=st.integers(-2, 10), depth=st.integers(1, 5), load_max=st.floats(0.5, 10))
def test_load_scale_rises_with_the_faults_between_1_and_the_max(active: int, depth: int, load_max: float) -> None:
    s = load_scale(active, depth, load_max)
    assert 1.0 <= s <= max(1.0, load_max) + 1e-9
    assert load_scale(0, depth, load_max) == 1.0
    assert load_scale(active + 1, depth, load_max) >= s
    if load_max > 1:
        assert load_scale(depth, depth, load_max) == pytest.approx(load_max)


def test_guided_decisions_turn_the_client_dial() -> None:
    """With the feed's dial bound, each decision sets the dial from the faults then in force (the fake db has no
    observer: the policy acts on quiet moments): up while faults are active, never past the max, back to 1."""

    class Recording(g.LoadDial):
        def __init__(self) -> None:
            self.values: list[float] = []
            super().__init__()

        @property  # type: ignore[override]
        def scale(self) -> float:
            return self.values[-1]

        @scale.setter
        def scale(self, value: float) -> None:
            self.values.append(value)

    composed = packages.build(fake_db("guided"), ["partition", "kill"], interval_s=4, targets=["masters", "one"],
                              seed=3, time_limit_s=60)
    dial = Recording()
    composed.nemesis.feed.load = dial
    composed.nemesis.feed.load_max = 3.0
    history = g.simulate(g.time_limit(40, g.nemesis(composed.generator)), seed=3, client_threads=1, max_ops=200)
    assert any(op["type"] == "invoke" for op in history)
    assert all(1.0 <= v <= 3.0 for v in dial.values)
    assert max(dial.values) > 1.0 and 1.0 in dial.values[1:]
