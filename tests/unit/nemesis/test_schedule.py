"""Fault schedules (pure): selectors, parsing and validation, planning, units, timing, replay, ddmin."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import generator as g
from harness.spec import SpecError, spec_from_dict
from nemesis import packages
from nemesis.replay import executed_steps, reproduces
from nemesis.schedule import FAULT_FS, UNDO, ScheduleError, Step, join_units, parse, timed, to_data, units
from nemesis.shrink import run_ddmin
from nemesis.targets import RoleUnavailable, SelectorError, Topology, resolve, roles_of
from systems.splitbrain.selectors import SELECTORS

TOPO = Topology(("c1", "c2", "c3"), (("b0-1", "b0-2", "b0-3"), ("b1-1", "b1-2", "b1-3")), selectors=SELECTORS)
PRIMARIES = ["c2", "b0-1", "b1-3"]  # leader c2, masters b0-1 and b1-3


# -- selectors ---------------------------------------------------------------------------------


@pytest.mark.parametrize("selector,expected", [
    ("slaves", ["b0-2", "b0-3", "b1-1", "b1-2"]),
    ("controller-followers", ["c1", "c3"]),
    ("masters+controller-leader", ["b0-1", "b1-3", "c2"]),
    ("controller-leader+masters", ["b0-1", "b1-3", "c2"]),
    ("primaries", ["b0-1", "b1-3", "c2"]),
    ("broker-set-1:all", ["b1-1", "b1-2", "b1-3"]),
    ("c1,b0-2+c1", ["b0-2", "c1"]),
], ids=lambda x: str(x))
def test_role_selectors_resolve_by_the_current_roles(selector: str, expected: list[str]) -> None:
    assert resolve(selector, TOPO, PRIMARIES, random.Random(0)) == expected


@pytest.mark.parametrize("selector,pool", [
    ("slaves:one", {"b0-2", "b0-3", "b1-1", "b1-2"}),
    ("controller-followers:one", {"c1", "c3"}),
    ("masters:one", {"b0-1", "b1-3"}),
])
def test_subset_of_a_role_is_one_node_of_that_role(selector: str, pool: set[str]) -> None:
    for seed in range(20):
        got = resolve(selector, TOPO, PRIMARIES, random.Random(seed))
        assert len(got) == 1 and got[0] in pool


def test_issue_example_master_plus_one_follower_controller() -> None:
    got = resolve("masters+controller-followers:one", TOPO, PRIMARIES, random.Random(3))
    assert {"b0-1", "b1-3"} <= set(got) and len(set(got) & {"c1", "c3"}) == 1 and "c2" not in got


def test_roles_missing_now_raise_role_unavailable_not_a_selector_error() -> None:
    with pytest.raises(RoleUnavailable):
        resolve("controller-followers", TOPO, ["b0-1"], random.Random(0))  # no leader known
    with pytest.raises(RoleUnavailable):
        resolve("slaves", TOPO, ["c1"], random.Random(0))  # no master known
    with pytest.raises(RoleUnavailable):
        resolve("primaries", TOPO, ["b0-1", "b1-3"], random.Random(0))  # masters but no leader: wait for both
    with pytest.raises(RoleUnavailable):
        resolve("primaries", TOPO, ["c2"], random.Random(0))
    with pytest.raises(SelectorError, match="only 2 broker sets"):
        resolve("broker-set-5:one", TOPO, PRIMARIES, random.Random(0))
    with pytest.raises(SelectorError, match="empty term"):
        resolve("masters+", TOPO, PRIMARIES, random.Random(0))
    with pytest.raises(SelectorError, match="unknown node"):
        resolve("masterz", TOPO, PRIMARIES, random.Random(0))


def test_roles_of_names_each_node_role() -> None:
    assert roles_of(["c1", "c2", "b0-1", "b0-2"], TOPO, PRIMARIES) == {
        "c1": "controller-follower", "c2": "controller-leader", "b0-1": "master", "b0-2": "slave"}
    assert roles_of(["c1", "b0-2"], TOPO, []) == {"c1": "controller", "b0-2": "broker"}


@given(st.lists(st.sampled_from(["one", "minority", "majority", "slaves:one", "masters", "controller-followers:one",
                                 "controller-leader", "brokers:minority", "broker-set-0:one"]), min_size=1, max_size=4),
       st.integers(0, 10**6))
@settings(deadline=None)
def test_unions_resolve_to_a_sorted_set_of_known_nodes(atoms: list[str], seed: int) -> None:
    got = resolve("+".join(atoms), TOPO, PRIMARIES, random.Random(seed))
    assert got == sorted(set(got)) and set(got) <= set(TOPO.all) and got
    assert got == resolve("+".join(atoms), TOPO, PRIMARIES, random.Random(seed))  # same rng, same nodes


# -- parsing and validation --------------------------------------------------------------------

ISSUE_EXAMPLE = [
    {"at_s": 5, "f": "start-partition", "value": {"kind": "isolate", "targets": "masters+controller-followers:one"}},
    {"at_s": 15, "f": "stop-partition"},
    {"at_s": 17, "f": "kill", "value": "masters"},
    {"at_s": 20, "f": "start"},
]


def test_the_issue_example_parses() -> None:
    steps = parse(ISSUE_EXAMPLE, TOPO)
    assert [s.f for s in steps] == ["start-partition", "stop-partition", "kill", "start"]
    assert steps[0].value == {"kind": "isolate", "targets": "masters+controller-followers:one"}


@pytest.mark.parametrize("raw,where,what", [
    ({"at_s": 1}, "schedule", "expected a list"),
    ([{"at_s": 1, "f": "explode"}], "schedule[0].f", "unknown nemesis op 'explode'"),
    ([{"at_s": -1, "f": "kill"}], "schedule[0].at_s", "expected a number"),
    ([{"at_s": "soon", "f": "kill"}], "schedule[0].at_s", "expected a number"),
    ([{"f": "kill"}], "schedule[0].at_s", "missing"),
    ([{"at_s": 1, "f": "kill", "value": "mastrs"}], "schedule[0].value", "unknown node"),
    ([{"at_s": 5, "f": "kill"}, {"at_s": 2, "f": "start"}], "schedule[1].at_s", "time order"),
    ([{"at_s": 1, "f": "start-partition", "value": {"kind": "halves"}}], "schedule[0].value.kind", "unknown partition"),
    ([{"at_s": 1, "f": "start-partition", "value": {"kind": "isolate", "targets": "x"}}],
     "schedule[0].value.targets", "unknown node"),
    ([{"at_s": 1, "f": "crash-at", "value": {"targets": "masters"}}], "schedule[0].value.name", "failpoint name"),
    ([{"at_s": 1, "f": "kill", "when": 3}], "schedule[0].when", "unknown key"),
    (["kill"], "schedule[0]", "expected a mapping"),
    ([{"at_s": 1, "f": "start-disk", "value": {"fault": "melt"}}], "schedule[0].value.fault", "unknown disk fault"),
    ([{"at_s": 1, "f": "start-packet", "value": {"behavior": {"teleport": {}}}}], "schedule[0].value.behavior",
     "behaviours"),
], ids=lambda x: str(x)[:40])
def test_bad_schedules_name_the_step_and_field(raw: Any, where: str, what: str) -> None:
    with pytest.raises(ScheduleError) as info:
        parse(raw, TOPO)
    assert str(info.value).startswith(where + ":") and what in str(info.value)


def _spec(schedule: Any) -> dict[str, Any]:
    return {"name": "s", "backend": "local", "nodes": {"controllers": 3, "broker_sets": {"count": 1, "replicas": 3}},
            "workloads": ["queue"], "nemesis": {"schedule": schedule}, "seed": 1}


def test_spec_errors_for_schedules_name_the_yaml_key() -> None:
    with pytest.raises(SpecError) as info:
        spec_from_dict(_spec([{"at_s": 1, "f": "kill"}, {"at_s": 0.5, "f": "start"}]), file="x.yaml")
    assert info.value.key == "nemesis.schedule[1].at_s" and "time order" in str(info.value)
    spec = spec_from_dict(_spec(ISSUE_EXAMPLE), file="x.yaml")
    assert spec.nemesis.schedule is not None and len(spec.nemesis.schedule) == 4


_values = st.one_of(
    st.builds(lambda s: Step(0, "kill", s), st.sampled_from(["one", "masters", "slaves:one", "c1,c2"])),
    st.builds(lambda k: Step(0, "start-partition", {"kind": k}),
              st.sampled_from(["random-halves", "isolate-master", "isolate-controller-leader"])),
    st.just(Step(0, "stop-partition")), st.just(Step(0, "start")),
    st.builds(lambda n: Step(0, "crash-at", {"name": n, "targets": "controller-leader"}),
              st.sampled_from(["controller.before_propose", "raft.before_apply"])),
)


@given(st.lists(st.tuples(st.floats(0, 600, allow_nan=False).map(lambda x: round(x, 3)), _values), max_size=12))
@settings(deadline=None)
def test_to_data_and_parse_round_trip(items: list[tuple[float, Step]]) -> None:
    steps = tuple(Step(t, s.f, s.value) for t, s in sorted(items, key=lambda x: x[0]))
    assert parse(to_data(steps), TOPO) == steps


# -- planning ----------------------------------------------------------------------------------


def _plan(names: list[str], seed: int, options: Any = None, limit: float = 100.0) -> tuple[Step, ...]:
    defs = packages.definitions(names, targets=["one", "primaries"], options=options, interval_s=5.0,
                                topo=TOPO)
    return packages.plan(defs, interval_s=5.0, time_limit_s=limit, seed=seed)


def test_plan_is_a_pure_function_of_packages_and_seed() -> None:
    a = _plan(["partition", "kill"], seed=7)
    assert a == _plan(["partition", "kill"], seed=7)
    assert a != _plan(["partition", "kill"], seed=8)
    assert all(s.at_s < 100 for s in a) and [s.at_s for s in a] == sorted(s.at_s for s in a)
    kill_only = _plan(["kill"], seed=7)  # one package's faults do not depend on the others present
    assert [s for s in a if s.f in ("kill", "start")] == list(kill_only)


def test_package_options_restrict_kinds_and_targets() -> None:
    opts = {"partition": {"kinds": ["isolate-master-from-slaves"]}, "kill": {"targets": ["slaves:one"]}}
    steps = _plan(["partition", "kill"], seed=3, options=opts)
    assert {s.value["kind"] for s in steps if s.f == "start-partition"} == {"isolate-master-from-slaves"}
    assert {s.value for s in steps if s.f == "kill"} == {"slaves:one"}
    with pytest.raises(ValueError, match=r"nemesis.options.partition.kinds\[0\]"):
        packages.validate(["partition"], ["one"], TOPO, options={"partition": {"kinds": ["halves"]}})
    with pytest.raises(ValueError, match=r"nemesis.options.kill.targets\[0\]"):
        packages.validate(["kill"], ["one"], TOPO, options={"kill": {"targets": ["nobody"]}})


def test_every_fault_is_followed_by_its_undo_when_it_has_one() -> None:
    steps = _plan(["partition", "kill", "pause", "clock", "packet"], seed=1, limit=60.0)
    for u in units(steps):
        if u[0].f in UNDO and u[0].at_s + 7.5 < 60.0:  # a later fault is undone by the heal phase
            assert len(u) == 2 and u[1].f == UNDO[u[0].f] and u[1].at_s > u[0].at_s


@given(st.integers(0, 1000))
@settings(max_examples=30, deadline=None)
def test_units_keep_every_fault_and_join_back_in_time_order(seed: int) -> None:
    steps = _plan(["partition", "kill", "protocol-crash"], seed=seed, limit=50.0)
    us = units(steps)
    assert sum(1 for s in steps if s.f in FAULT_FS) == len(us)
    joined = join_units(us)
    assert [s.at_s for s in joined] == sorted(s.at_s for s in joined)
    assert sorted(map(repr, joined)) == sorted(map(repr, steps))  # every step here has a partner


def test_timed_generator_runs_steps_at_their_offsets() -> None:
    steps = (Step(1.0, "kill", "one"), Step(2.5, "start"), Step(2.5, "pause", "c1"))
    hist = g.simulate(g.nemesis(timed(steps)), seed=1, client_threads=1, latency_ns=10_000_000)
    invokes = [op for op in hist if op["type"] == "invoke"]
    assert [(op["f"], op["time"]) for op in invokes] == [("kill", 1_000_000_000), ("start", 2_500_000_000),
                                                           ("pause", 2_510_000_000)]  # busy nemesis: runs late


# -- replay ------------------------------------------------------------------------------------


def _nem(t: int, typ: str, f: str, value: Any, **extra: Any) -> dict[str, Any]:
    return {"time": t, "type": typ, "process": "nemesis", "f": f, "value": value, **extra}


def test_executed_steps_read_back_offsets_and_pin_nodes_on_request() -> None:
    hist = [
        {"time": 100, "type": "invoke", "process": 0, "f": "send", "value": 1},
        _nem(3_000_000_100, "invoke", "start-partition", {"kind": "isolate-master"}),
        _nem(3_100_000_000, "info", "start-partition", {"kind": "isolate-master", "grudge": {"b0-1": ["c1"]}},
             targets=[{"selector": "masters", "nodes": ["b0-1"], "roles": {"b0-1": "master"}}]),
        _nem(6_000_000_100, "invoke", "kill", "masters"),
        _nem(6_200_000_000, "info", "kill", ["b0-1"], targets=[{"selector": "masters", "nodes": ["b0-1"]}]),
        _nem(61_000_000_000, "invoke", "start", None),  # heal phase: not part of the main schedule
        _nem(61_100_000_000, "info", "start", ["b0-1"]),
    ]
    by_role = executed_steps(hist, main_start_ns=100, time_limit_s=60)
    assert by_role == (Step(3.0, "start-partition", {"kind": "isolate-master"}), Step(6.0, "kill", "masters"))
    pinned = executed_steps(hist, main_start_ns=100, time_limit_s=60, same_nodes=True)
    assert pinned == (Step(3.0, "start-partition", {"kind": "grudge", "grudge": {"b0-1": ["c1"]}}),
                      Step(6.0, "kill", "b0-1"))


def test_executed_steps_end_where_the_main_phase_ended_when_that_is_recorded() -> None:
    """The heal phase may start a few ms before time_limit_s after main_start_ns (the phase's clock starts at
    its first op): with main_phase_end_ns recorded, its ops are never read as scheduled steps."""
    hist = [
        _nem(1_000_000_100, "invoke", "kill", "masters"),
        _nem(1_100_000_000, "info", "kill", ["b0-1"]),
        _nem(11_980_000_100, "invoke", "start", None),  # heal, 20 ms before the 12 s limit
        _nem(11_990_000_000, "info", "start", ["b0-1"]),
    ]
    assert len(executed_steps(hist, main_start_ns=100, time_limit_s=12)) == 2  # the old reading: heal included
    assert executed_steps(hist, main_start_ns=100, time_limit_s=12, main_end_ns=11_975_000_000) == (
        Step(1.0, "kill", "masters"),)


def test_reproduces_matches_anomaly_kinds() -> None:
    assert reproduces({"valid": False, "anomaly_counts": {"lost": 3}}, {"lost"})
    assert not reproduces({"valid": False, "anomaly_counts": {"duplicate": 1, "lost": 0}}, {"lost"})
    assert reproduces({"valid": False, "anomaly_counts": {}}, set())
    assert not reproduces({"valid": True}, set())


# -- ddmin -------------------------------------------------------------------------------------


def _superset_oracle(n: int, needed: frozenset[int]) -> dict[tuple[int, ...], bool]:
    return {c: needed <= set(c) for k in range(n + 1) for c in itertools.combinations(range(n), k)}


@given(st.integers(1, 10).flatmap(lambda n: st.tuples(st.just(n), st.frozensets(st.integers(0, n - 1), max_size=n))))
@settings(max_examples=60, deadline=None)
def test_ddmin_finds_exactly_the_needed_units(case: tuple[int, frozenset[int]]) -> None:
    n, needed = case
    result, asked = run_ddmin(n, _superset_oracle(n, needed))
    assert set(result) == set(needed)
    assert len(asked) == len(set(asked))  # never asks the same candidate twice


@given(st.integers(2, 9).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.frozensets(st.integers(0, n - 1), min_size=1, max_size=3), min_size=1, max_size=3))))
@settings(max_examples=60, deadline=None)
def test_ddmin_result_is_one_minimal(case: tuple[int, list[frozenset[int]]]) -> None:
    n, causes = case
    fails = {c: any(cause <= set(c) for cause in causes)
             for k in range(n + 1) for c in itertools.combinations(range(n), k)}
    result, _ = run_ddmin(n, fails)
    assert fails[result]
    for i in result:
        assert not fails[tuple(x for x in result if x != i)]


def test_ddmin_asks_the_empty_schedule_first() -> None:
    result, asked = run_ddmin(8, {(): True})
    assert result == () and asked == [()]
