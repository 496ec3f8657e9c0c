"""The simulated nemesis's vocabulary (``system_under_test/sim/playback.py``): every fault it draws is playable and
means exactly what was drawn; everything else is refused naming the step and the field."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nemesis.schedule import parse
from nemesis.targets import Topology
from system_under_test.sim import FAULT_KINDS
from system_under_test.sim.faults import CORRELATED_SPREAD_MS, DRAW, UNDO_OF, Burst, _damage_keeps_a_leader
from system_under_test.sim.network import PacketFault
from system_under_test.sim.playback import FSYNC_FAULTS, PLAYABLE, PlayError, action_of, plan
from system_under_test.sim.swarm import Intensity, draw
from systems.splitbrain.selectors import SELECTORS

CONTROLLERS = ("c1", "c2", "c3")
BROKERS = ("b1-1", "b1-2", "b1-3")
NAMES = CONTROLLERS + BROKERS
TOPO = Topology(CONTROLLERS, (BROKERS,), selectors=SELECTORS)


@dataclass
class _Node:
    up: bool = True


@dataclass
class _View:
    """What a draw reads of the cluster: names, who is up, the master and the controller leader."""

    master: str | None
    leader: str | None
    down: frozenset[str] = frozenset()
    broker_names: tuple[str, ...] = BROKERS

    @property
    def brokers(self) -> dict[str, Any]:
        """Healthy brokers, every one in the master's SyncStateSet (what the ``disk`` draw reads)."""
        view = SimpleNamespace(members=frozenset(range(len(BROKERS))), proposed=None)
        return {n: SimpleNamespace(broker_id=i, up=n not in self.down, paused=False, fenced=False,
                                   store=SimpleNamespace(durable_loss=None), ha=SimpleNamespace(view=view))
                for i, n in enumerate(BROKERS)}

    def node_names(self) -> tuple[str, ...]:
        return NAMES

    def node(self, name: str) -> _Node:
        return _Node(up=name not in self.down)

    def master_node(self) -> str | None:
        return self.master

    def leader_node(self) -> str | None:
        return self.leader


def test_every_fault_kind_the_simulator_draws_is_in_the_playable_vocabulary() -> None:
    assert set(DRAW) == set(FAULT_KINDS)
    fs = {f for f in UNDO_OF} | {u for u in UNDO_OF.values() if u}
    assert fs <= set(PLAYABLE), sorted(fs - set(PLAYABLE))


views = st.builds(_View, master=st.sampled_from((None, *BROKERS)), leader=st.sampled_from((None, *CONTROLLERS)),
                  down=st.frozensets(st.sampled_from(NAMES), max_size=3))


knobs = st.one_of(st.just(Intensity()), st.integers(0, 10**6).map(
    lambda s: draw(s, FAULT_KINDS, ("queue",)).intensity))  # a run's fixed knobs, or a swarm seed's


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(FAULT_KINDS), seed=st.integers(0, 2**32), view=views, at_s=st.floats(0, 30),
       knob=knobs)
def test_a_drawn_step_is_a_valid_schedule_step_and_plays_what_was_drawn(kind: str, seed: int, view: _View,
                                                                          at_s: float, knob: Intensity) -> None:
    drawn = DRAW[kind](random.Random(seed), view, knob)  # type: ignore[arg-type]
    if drawn is None:  # only when the victim is already down, or (disk) the set could be left without a leader,
        assert kind in ("kill", "pause", "disk", "correlated-kill")  # or fewer than two brokers are up
        assert kind != "correlated-kill" or len(set(BROKERS) - view.down) < 2
        return
    if isinstance(drawn, Burst):
        _check_burst(drawn, view, at_s)
        return
    step: dict[str, Any] = {"at_s": round(at_s, 3), **drawn}
    parse([step], TOPO)  # the real nemesis's format accepts it as written
    action = action_of(0, step, NAMES)
    assert action.f == step["f"]
    v = step["value"]
    if action.f in ("kill", "pause"):
        assert action.nodes == (v,) and v not in view.down
    elif action.f == "start-partition":
        want = {tuple(sorted((a, b))) for a, drops in v["grudge"].items() for b in drops}
        assert set(action.cuts) == want and want
    elif action.f == "start-packet":
        b = v["behavior"]
        assert action.packet == PacketFault(
            drop_rate=b["loss"]["percent"] / 100, dup_rate=b.get("duplicate", {"percent": 0})["percent"] / 100,
            extra_delay_ms=sum(b.get("delay", {}).values()))
    elif action.f == "skew-clock":
        assert action.nodes == (v["targets"],) and action.rate == v["rate"]
    elif action.f == "corrupt-file":
        assert action.nodes == (v["targets"],) and v["targets"] in BROKERS and action.mode == v["mode"]
        assert v["mode"] in ("truncate-tail", "bitflip-tail")
    elif action.f == "start-disk":
        assert action.nodes == (v["targets"],) and v["targets"] in BROKERS
        assert (action.mode, action.delay_ms) == (v["fault"], v["delay_ms"]) and v["fault"] in FSYNC_FAULTS
    else:
        assert action.failpoint == v["failpoint"]


def _check_burst(burst: Burst, view: _View, at_s: float) -> None:
    """A correlated failure: kills of two or three distinct brokers that are up, each at most
    ``CORRELATED_SPREAD_MS`` after the one before, every step (and its undo) a playable schedule step."""
    assert burst.steps[0][0] == 0
    victims = [step["value"] for _, step, _ in burst.steps]
    assert all(step["f"] == "kill" for _, step, _ in burst.steps)
    assert len(set(victims)) == len(victims) and 2 <= len(victims) <= 3
    assert set(victims) <= set(BROKERS) - view.down
    offsets = [o for o, _, _ in burst.steps]
    assert all(0 <= b - a <= CORRELATED_SPREAD_MS for a, b in itertools.pairwise(offsets))
    assert all(hold >= 200 for _, _, hold in burst.steps)
    steps: list[dict[str, Any]] = []
    for offset, step, hold in burst.steps:
        steps.append({"at_s": round(at_s + offset / 1000, 3), **step})
        steps.append({"at_s": round(at_s + (offset + hold) / 1000, 3), "f": UNDO_OF[step["f"]], "value": step["value"]})
    steps.sort(key=lambda s: s["at_s"])
    parse(steps, TOPO)
    for i, step in enumerate(steps):
        action = action_of(i, step, NAMES)
        assert action.f == step["f"] and action.nodes == (step["value"],)


def test_a_burst_is_refused_unless_its_offsets_start_at_zero_and_ascend() -> None:
    kill: dict[str, Any] = {"f": "kill", "value": "b1-1"}
    Burst(((0, kill, 1000), (0, kill, 1000), (500, kill, 1)))
    for bad in (((10, kill, 1000),), ((0, kill, 1000), (-1, kill, 1000)), ((0, kill, 0),), ()):
        with pytest.raises(ValueError, match="Burst"):
            Burst(bad)


def _fake(durable_loss: object = None, *, members: frozenset[int] = frozenset({0, 1, 2}),
          proposed: frozenset[int] | None = None, down: frozenset[str] = frozenset(), fenced: frozenset[str] =
          frozenset()) -> _View:
    view = _View(master="b1-1", leader="c1", down=down)
    hav = SimpleNamespace(members=members, proposed=proposed)
    brokers = {n: SimpleNamespace(broker_id=i, up=n not in down, paused=False, fenced=n in fenced,
                                  store=SimpleNamespace(durable_loss=durable_loss if n == "b1-3" else None),
                                  ha=SimpleNamespace(view=hav)) for i, n in enumerate(BROKERS)}
    return SimpleNamespace(broker_names=BROKERS, brokers=brokers, master_node=view.master_node)  # type: ignore[return-value]


def test_the_disk_draw_never_leaves_the_set_without_an_electable_member() -> None:
    assert _damage_keeps_a_leader(_fake(), "b1-1")  # type: ignore[arg-type]
    assert not _damage_keeps_a_leader(_fake(durable_loss=object()), "b1-1"), "one damaged disk at a time"  # type: ignore[arg-type]
    only_master = _fake(members=frozenset({0}))
    assert not _damage_keeps_a_leader(only_master, "b1-1"), "the set's only member"  # type: ignore[arg-type]
    assert _damage_keeps_a_leader(only_master, "b1-2"), "a slave outside the set: harmless"  # type: ignore[arg-type]
    shrinking = _fake(members=frozenset({0, 1}), proposed=frozenset({0}))
    assert not _damage_keeps_a_leader(shrinking, "b1-1"), "b1-2 may be out already"  # type: ignore[arg-type]
    assert not _damage_keeps_a_leader(_fake(members=frozenset({0, 1}), down=frozenset({"b1-2"})), "b1-1")  # type: ignore[arg-type]
    assert not _damage_keeps_a_leader(_fake(members=frozenset({0, 1}), fenced=frozenset({"b1-2"})), "b1-1")  # type: ignore[arg-type]


@given(f=st.sampled_from(sorted({u for u in UNDO_OF.values() if u})))
def test_undo_steps_without_a_value_heal_everything_of_their_kind(f: str) -> None:
    action = action_of(0, {"at_s": 1, "f": f}, NAMES)
    assert action.f == f and action.nodes == ()


@pytest.mark.parametrize(("step", "field"), [
    ({"at_s": 1, "f": "kill", "value": "masters"}, "schedule[0].value"),
    ({"at_s": 1, "f": "crash-at", "value": {"name": "controller.before_propose"}}, "schedule[0].f"),
    ({"at_s": 1, "f": "start-packet", "value": {"behavior": {"reorder": {"percent": 5}}}},
     "schedule[0].value.behavior.reorder"),
    ({"at_s": 1, "f": "start-packet", "value": {"targets": "b1-1", "behavior": {"loss": {"percent": 5}}}},
     "schedule[0].value.targets"),
    ({"at_s": 1, "f": "start-packet", "value": {"behavior": {"loss": {}}}}, "schedule[0].value.behavior.loss.percent"),
    ({"at_s": 1, "f": "start-partition", "value": {"kind": "isolate-master"}}, "schedule[0].value.kind"),
    ({"at_s": 1, "f": "start-partition", "value": {"kind": "grudge", "grudge": {"c1": ["x9"]}}},
     "schedule[0].value.grudge"),
    ({"at_s": 1, "f": "skew-clock", "value": {"targets": "c1", "delta_ms": 5}}, "schedule[0].value.delta_ms"),
    ({"at_s": 1, "f": "registration-crash", "value": {"failpoint": "broker.nope"}}, "schedule[0].value.failpoint"),
    ({"at_s": 1, "f": "stop-partition", "value": {"kind": "grudge"}}, "schedule[0].value"),
    ({"at_s": 1, "f": "corrupt-file", "value": {"targets": "b1-1", "mode": "bitflip"}}, "schedule[0].value.mode"),
    ({"at_s": 1, "f": "corrupt-file", "value": {"targets": "b1-1"}}, "schedule[0].value.mode"),
    ({"at_s": 1, "f": "corrupt-file", "value": {"targets": "masters", "mode": "truncate-tail"}},
     "schedule[0].value.targets"),
    ({"at_s": 1, "f": "lose-unfsynced", "value": {"targets": "b1-1"}}, "schedule[0].f"),
    ({"at_s": 1, "f": "start-disk", "value": {"fault": "eio-fsync"}}, "schedule[0].value.targets"),
    ({"at_s": 1, "f": "start-disk", "value": {"targets": "b1-1", "fault": "enospc"}}, "schedule[0].value.fault"),
    ({"at_s": 1, "f": "start-disk", "value": {"targets": "b1-1", "delay_ms": -5}}, "schedule[0].value.delay_ms"),
    ({"at_s": 1, "f": "stop-disk", "value": {"targets": "b1-1"}}, "schedule[0].value"),
    ({"at_s": 31, "f": "kill", "value": "c1"}, "schedule[0].at_s"),
    ({"at_s": 1, "f": "kill", "value": "c1", "why": "x"}, "schedule[0].why"),
])
def test_what_the_simulator_cannot_play_is_refused_naming_the_step_and_field(step: dict[str, Any],
                                                                            field: str) -> None:
    with pytest.raises(PlayError) as err:
        plan([step], NAMES, 30.0)
    assert str(err.value).startswith(field + ":"), str(err.value)


def test_plan_keeps_time_order_and_milliseconds() -> None:
    steps = [{"at_s": 1.5, "f": "kill", "value": "b1-1,c2"}, {"at_s": 1.5, "f": "start"},
             {"at_s": 30, "f": "pause", "value": "c1"}]
    timed = plan(steps, NAMES, 30.0)
    assert [t.at_ms for t in timed] == [1500, 1500, 30000]
    assert timed[0].action.nodes == ("b1-1", "c2")
    with pytest.raises(PlayError, match=r"schedule\[1\]\.at_s"):
        plan([steps[2], steps[0]], NAMES, 30.0)
