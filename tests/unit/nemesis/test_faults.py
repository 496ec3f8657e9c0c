"""The one fault table (nemesis/faults.py): every f any nemesis can emit has a row, the rows agree with the
nemesis classes and packages they name, and an f with no row is an error where it used to be skipped.

The emitters are found from code, not listed by hand: every class in the ``nemesis`` package that declares an
``FS`` (what :func:`harness.protocols.compose_nemeses` routes to it), every op every package can plan (each kind
it may draw, its undo steps, its heal ops), and every step the simulator's nemesis plays."""

from __future__ import annotations

import importlib
import pkgutil
import random
from typing import Any

import pytest

import nemesis
from nemesis import schedule
from nemesis.accounting import RULES, account, judge, summarize
from nemesis.faults import EVIDENCE, FAULTS, NEMESES, ROWS, VALUE_SHAPES, UnknownFault, row
from nemesis.packages import KINDS, NEMESIS_OF, _heal_for, definitions, plan
from nemesis.replay import executed_steps
from nemesis.targets import Topology
from nemesis.words import WORDS
from systems.splitbrain.selectors import SELECTORS

OURS = Topology(("c1", "c2", "c3"), (("b1", "b2", "b3"),), selectors=SELECTORS)


def _nemesis_classes() -> set[type]:
    """Every class defined in a ``nemesis`` module that declares the fs it performs."""
    found: set[type] = set()
    for info in pkgutil.walk_packages(nemesis.__path__, "nemesis."):
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if isinstance(obj, type) and obj.__module__ == module.__name__ and getattr(obj, "FS", None):
                found.add(obj)
    return found


def _package_ops(name: str) -> set[str]:
    """Every f package ``name`` can put in a schedule: its faults over every kind it may draw (many draws),
    their undo steps, and its heal ops."""
    kind = KINDS[name]
    options = {name: {"kinds": list(kind.all(OURS))}}
    (d,) = definitions([name], targets=["one"], options=options, interval_s=1.0, topo=OURS)
    rng = random.Random(0)
    fs = {d.start(rng, k)["f"] for k in range(300)}
    fs |= {schedule.UNDO[f] for f in fs if d.alternate and f in schedule.UNDO}
    fs |= {s.f for s in plan([d], interval_s=1.0, time_limit_s=200.0, seed=7)}
    return fs | {op["f"] for op in d.heal}


# -- every emitter's fs have rows -------------------------------------------------------------------


def test_every_f_a_nemesis_class_performs_has_a_row() -> None:
    classes = _nemesis_classes()
    assert classes == set(NEMESIS_OF.values()), "a nemesis class without its family in packages.NEMESIS_OF"
    for cls in classes:
        fs: frozenset[str] = cls.FS  # type: ignore[attr-defined]
        assert not fs - set(FAULTS), f"{cls.__name__} performs {sorted(fs - set(FAULTS))} with no row"


def test_each_family_is_exactly_its_class() -> None:
    assert tuple(NEMESIS_OF) == NEMESES  # the order classes are built in (they draw from the run's RNG)
    for family, cls in NEMESIS_OF.items():
        assert {r.f for r in ROWS if r.nemesis == family} == cls.FS, family  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_f_a_package_plans_has_a_row(name: str) -> None:
    fs = _package_ops(name)
    assert not fs - set(FAULTS), f"package {name} plans {sorted(fs - set(FAULTS))} with no row"
    faults = {f for f in fs if FAULTS[f].fault}
    assert faults == {r.f for r in ROWS if name in r.packages}, "the rows' packages disagree with what it plans"
    assert all(NEMESIS_OF[FAULTS[f].nemesis] is KINDS[name].nemesis for f in faults)


def test_every_heal_op_has_a_row() -> None:
    for r in ROWS:
        assert all(op["f"] in FAULTS for op in r.heal), r.f
        assert _heal_for(r.f) == tuple(dict(op) for op in r.heal)


def test_every_step_the_simulator_plays_has_a_row() -> None:
    from system_under_test.sim.faults import UNDO_OF
    from system_under_test.sim.playback import PLAYABLE

    assert not set(PLAYABLE) - set(FAULTS), sorted(set(PLAYABLE) - set(FAULTS))
    for f, undo in UNDO_OF.items():
        assert FAULTS[f].fault and FAULTS[f].undo == undo, f  # the simulator undoes a fault as the table says


# -- the table is consistent, and what derives from it covers it ------------------------------------


def test_rows_are_consistent() -> None:
    assert len(FAULTS) == len(ROWS)
    for r in ROWS:
        assert r.nemesis in NEMESES and (r.value is None or r.value in VALUE_SHAPES), r.f
        assert set(r.packages) <= set(KINDS), r.f
        if r.undo is not None:
            assert r.fault and not FAULTS[r.undo].fault and FAULTS[r.undo].nemesis == r.nemesis, r.f
        if r.fault:  # without evidence a fault would count as effective whatever happened
            assert r.evidence in EVIDENCE, f"fault {r.f} needs evidence from {EVIDENCE}"
        else:
            assert r.undo is None and not r.packages and r.evidence is None, r.f


def test_what_derives_from_the_table_covers_it() -> None:
    assert set(schedule._CHECK_OF_SHAPE) == set(VALUE_SHAPES)
    assert set(RULES) == set(EVIDENCE)
    assert set(schedule._VALUE_CHECKS) == schedule.KNOWN_FS == set(FAULTS) == set(WORDS)
    assert schedule.FAULT_FS | schedule.UNDO_FS == schedule.KNOWN_FS
    assert not schedule.FAULT_FS & schedule.UNDO_FS
    assert schedule.FAULT_FS - set(schedule.UNDO) == schedule.SELF_HEALING_FS


# -- an f with no row is an error, never skipped ------------------------------------------------------


def _op(index: int, type_: str, f: Any) -> dict[str, Any]:
    return {"index": index, "time": index, "type": type_, "process": "nemesis", "f": f, "value": None}


HISTORY = [_op(0, "invoke", "kill"), _op(1, "info", "kill"), _op(2, "invoke", "bitflip"), _op(3, "info", "bitflip")]


def test_row_names_an_unknown_f() -> None:
    assert row("kill").undo == "start"
    with pytest.raises(UnknownFault, match=r"here: nemesis op f 'bitflip' has no row"):
        row("bitflip", "here")
    with pytest.raises(UnknownFault, match="None"):
        row(None)


def test_replay_refuses_an_unknown_f() -> None:
    with pytest.raises(UnknownFault, match=r"history op 2: nemesis op f 'bitflip'"):
        executed_steps(HISTORY, main_start_ns=0, time_limit_s=60.0)
    assert [s.f for s in executed_steps(HISTORY[:2], main_start_ns=0, time_limit_s=60.0)] == ["kill"]


def test_accounting_refuses_an_unknown_f() -> None:
    with pytest.raises(UnknownFault, match=r"history op 2: nemesis op f 'bitflip'"):
        summarize(HISTORY)
    assert set(summarize(HISTORY[:2])) == {"kill"}
    assert summarize([_op(0, "invoke", "start"), _op(1, "info", "start")]) == {}  # undo steps: known, not counted


def test_a_runs_accounting_names_an_unknown_f_instead_of_leaving_it_out() -> None:
    faults, warnings = account(HISTORY)  # the runner drives foreign nemeses too: a warning, never a lost verdict
    assert faults == {} and len(warnings) == 1 and "'bitflip' has no row" in warnings[0]
    assert account(HISTORY[:2])[0].keys() == {"kill"}


def test_a_fault_that_touched_nothing_is_never_judged_effective() -> None:
    for r in ROWS:  # an empty completion value is no evidence for any fault; undo steps and reads always pass
        effective, why = judge({"f": r.f, "value": {}})
        assert (effective, why is None) == (not r.fault, not r.fault), r.f


# -- the checkers' per-f tables (below the nemesis layer, so they cannot read the table) agree with it -----


def test_the_availability_checkers_effects_agree_with_the_table() -> None:
    from checker.availability._faults import NEMESIS_EFFECTS, Effect

    assert set(NEMESIS_EFFECTS) == set(FAULTS), sorted(set(NEMESIS_EFFECTS) ^ set(FAULTS))
    closing = {Effect.DOWN: Effect.UP, Effect.CUT: Effect.UNCUT, Effect.START: Effect.STOP}
    for r in ROWS:
        effect, kind = NEMESIS_EFFECTS[r.f]
        if r.self_healing:
            assert effect is Effect.INSTANT, r.f
        elif r.undo is not None:
            assert effect in closing and NEMESIS_EFFECTS[r.undo] == (closing[effect], kind), r.f
        else:
            assert effect in (*closing.values(), Effect.NONE), r.f


PERF_UNPAIRED: frozenset[str] = frozenset()
"""Faults whose windows checker/perf does not draw (its NEMESIS_PAIRS lacks them and they are not ``start-X``).
``terminate`` and ``skew-clock`` were here until 2026-11-28: runs with them had no fault band in their plots and no
per-kind recovery figures for the release gate.  Kept (empty) so that no new fault joins it unseen."""


def test_the_perf_windows_pair_each_fault_with_its_undo() -> None:
    from checker.perf import healing_f

    unpaired = {r.f for r in ROWS if healing_f(r.f) != r.undo}
    assert unpaired == PERF_UNPAIRED, sorted(unpaired ^ PERF_UNPAIRED)
    assert all(healing_f(r.f) is None for r in ROWS if r.f in PERF_UNPAIRED)


# -- guided mode reads the same table: every move it can make has a row and an aim it can read ---------------------


def _guided_moves(has_sets: bool = True, has_controllers: bool = True) -> tuple[Any, ...]:
    """Every move guided mode can draw from every package, over every kind and a spread of selectors."""
    from nemesis.guided_run import moves

    targets = ["one", "masters", "slaves:one", "primaries", "controller-leader", "brokers:one"] if has_sets else \
        ["one", "members:one", "primaries"]
    topo = OURS if has_sets else Topology(members=("m1", "m2", "m3"))
    options = {n: {"kinds": list(KINDS[n].all(topo))} for n in KINDS}
    defs = definitions(list(KINDS), targets=targets, options=options, interval_s=5.0,
                       topo=Topology(OURS.controllers if has_controllers else (), topo.broker_sets, topo.members,
                                     selectors=SELECTORS if has_sets or has_controllers else topo.selectors))
    return moves(defs, seed=1)


def test_every_move_guided_mode_can_make_has_a_row_and_an_aim() -> None:
    from nemesis.guided import aims_of

    POOLS = tuple(OURS.table)

    for move in _guided_moves():
        r = row(move.f, "guided move")  # no row: UnknownFault
        assert r.fault, move.key  # guided mode draws faults; their undos come from the rows
        assert aims_of(move) <= set(POOLS), move.key
        if r.value is not None and r.value != "partition" and VALUE_SHAPES[r.value]:  # random partitions aim at none
            assert schedule.selectors_of(move.f, move.value), f"{move.key}: its row names where it aims; found none"


def test_every_value_shape_says_where_its_targets_are() -> None:
    assert set(VALUE_SHAPES) == set(schedule._CHECK_OF_SHAPE)
    for shape, keys in VALUE_SHAPES.items():
        assert all(isinstance(k, str) for k in keys), shape
        assert ("" in keys) == (shape == "process") and (keys == ("",) or "" not in keys), shape
    for r in ROWS:
        assert r.target_keys == (VALUE_SHAPES[r.value] if r.value else ()), r.f


def test_guided_modes_aims_are_pools_that_some_move_hits() -> None:
    """The trigger table's aims and the quiet aim name pools of the pool table, and each is hit by some move the
    packages make on our cluster (or, for ``primaries`` after a member gained leadership, on a system of members):
    an aim no move can hit would be dead, as a misspelt one was possible when aims were substrings of move keys."""
    from nemesis.guided import AIM, NARROWING, QUIET_AIM, TRIGGER_TABLE, TRIGGERS, aims_of

    POOL_OF = OURS.table
    hit = {p for m in _guided_moves() for p in aims_of(m)}
    hit_members = {p for m in _guided_moves(False, False) for p in aims_of(m)}
    assert len({t.prefix for t in TRIGGER_TABLE}) == len(TRIGGER_TABLE)
    assert tuple(t.prefix for t in TRIGGER_TABLE) == TRIGGERS
    assert set(NARROWING) <= set(TRIGGERS) and {p for p, _ in AIM} <= set(TRIGGERS)
    for prefix, pools in (*AIM, ("quiet", QUIET_AIM)):
        assert pools and set(pools) <= set(POOL_OF), prefix
        assert set(pools) & (hit | hit_members), f"trigger {prefix}: no move hits {pools}"
    for i, t in enumerate(TRIGGER_TABLE):  # a general prefix never hides a specific one listed after it
        assert not any(t.prefix.startswith(u.prefix) for u in TRIGGER_TABLE[:i]), t.prefix
