"""The guided nemesis's policy (nemesis/guided.py): moments, stacking, undo, choice, and its recorded schedule."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nemesis.guided import Config, Decision, Move, State, decide, moves_from_ops, took_effect
from nemesis.schedule import UNDO, parse, partition_aims
from nemesis.targets import Topology
from systems.splitbrain.selectors import SELECTORS

NS = 1_000_000_000
AIMS = partition_aims(Topology(selectors=SELECTORS))  # our cluster's kinds aim as they did in generic code


def ours(moves: tuple[Move, ...], **kw: Any) -> Config:
    """A config over ``moves`` on our cluster (its partition kinds aim where its adapter says)."""
    return Config(moves, partition_aims=AIMS, **kw)


ISOLATE = Move("start-partition", {"kind": "isolate-master-from-slaves"})
KILL = Move("kill", "masters")
HALVES = Move("start-partition", {"kind": "random-halves"})
CFG = ours((ISOLATE, KILL, HALVES), settle_s=1.0, max_wait_s=4.0, holds_s=(3.0,), max_depth=2)
TOPO = Topology(("c1", "c2", "c3"), (("b1", "b2", "b3"),), selectors=SELECTORS)


def ev(t_s: float, kind: str, **fields: Any) -> dict[str, Any]:
    return {"time": int(t_s * NS), "kind": kind, "role": "broker", **fields}


def step(st_: State, events: list[dict[str, Any]], now_s: float, cfg: Config = CFG,
         seed: int = 0) -> tuple[Decision | None, float, State]:
    """One decision; a step it takes is done at once (the shell reports the nemesis's completion)."""
    d, wake, s = decide(st_, cfg, events, now_s=now_s, start_ns=0,
                        rng=random.Random(f"{seed}:{st_.k}:{len(st_.steps)}"))
    return d, wake, (took_effect(s, now_s) if d is not None else s)


def test_waits_to_settle_then_strikes_when_quiet() -> None:
    d, wake, s = step(State(), [], 0.5)
    assert d is None and wake == 1.0
    d, wake, s = step(s, [], 1.5)
    assert d is None and wake == 2.0  # no trigger: wait up to quiet_wait_s, not max_wait_s
    d, _, s = step(s, [], 2.0)
    assert d is not None and d.context == "none|quiet" and d.step.at_s == 2.0


def test_a_trigger_opens_the_moment() -> None:
    d, _, _s = step(State(), [ev(1.5, "become-master", master_epoch=2)], 1.6)
    assert d is not None and d.context == "none|become-master"


def test_undo_after_hold_and_quiet_again() -> None:
    d, _, s = step(State(), [], 5.0)
    assert d is not None and len(s.active) == 1
    d2, wake, s = step(s, [], 6.0)
    assert d2 is None and wake == 8.0
    d3, _, s = step(s, [], 8.0)
    assert d3 is not None and d3.step.f == UNDO[d.step.f] and not s.active and s.quiet_since_s == 8.0


def test_stacks_another_family_at_a_trigger() -> None:
    s = State()
    seen: set[tuple[str, ...]] = set()
    for seed in range(20):  # whatever is chosen first, a trigger while it is active may stack another family
        d, _, s1 = step(State(), [], 5.0, seed=seed)
        assert d is not None
        d2, _, s2 = step(s1, [ev(5.5, "sync-state-set", change="shrink", members=[1])], 5.6, seed=seed)
        families = [a.move.family for a in s2.active]
        assert len(families) == len(set(families)) <= CFG.max_depth
        if d2 is not None:
            assert d2.context is not None and d2.context.endswith("|sync-state-set:shrink:master-only")
            seen.add(tuple(a.move.key for a in s2.active))
    assert any(len(k) == 2 for k in seen)
    del s


def test_untried_moves_first_and_credit() -> None:
    s, t = State(), 0.0
    chosen: list[str] = []
    for _ in range(3):
        t = max(t + 0.1, s.quiet_since_s + CFG.settle_s + CFG.max_wait_s)
        d, _, s = step(s, [], t)
        assert d is not None
        assert d.move_key is not None
        chosen.append(d.move_key)
        while s.active:
            t = min(a.undo_at_s for a in s.active)
            d, _, s = step(s, [], t)
    assert sorted(chosen) == sorted(m.key for m in CFG.moves)  # each tried once in the quiet context


def test_moves_from_ops_dedupes() -> None:
    ops = [{"f": "kill", "value": "masters"}, {"f": "kill", "value": "masters"}, {"f": "kill", "value": "one"}]
    assert moves_from_ops(ops) == (Move("kill", "masters"), Move("kill", "one"))
    with pytest.raises(ValueError, match="no fault moves"):
        ours(())


# ---------------------------------------------------------------------------------------------
# A toy cluster, to test the loop: the policy must find "isolate the master from its slaves, wait for the
# SyncStateSet to shrink, then kill the master" -- the unclean-election loss of issue 20 -- by feedback.


def toy_run(seed: int, limit_s: float = 120.0) -> tuple[bool, State]:
    cfg = ours((ISOLATE, KILL, HALVES, Move("kill", "one"), Move("pause", "masters")), settle_s=0.5,
                 max_wait_s=2.0, holds_s=(1.0, 3.0), max_depth=2)
    s, t = State(), 0.0
    events: list[dict[str, Any]] = []
    isolated_at: float | None = None
    found = False
    while t < limit_s and not found:
        d, _wake, s = decide(s, cfg, events, now_s=t, start_ns=0, rng=random.Random(f"{seed}:{s.k}:{len(s.steps)}"))
        if d is not None:
            s = took_effect(s, t)
            f, v = d.step.f, d.step.value
            if f == "start-partition" and v == ISOLATE.value:
                isolated_at = t
            elif f == "stop-partition":
                isolated_at = None
            elif f == "kill":
                events.append(ev(t + 0.3, "become-master", master_epoch=len(events)))
                if v == "masters" and isolated_at is not None and t - isolated_at >= 0.8:
                    found = True
        if isolated_at is not None and t - isolated_at >= 0.8 and not any(
                e["kind"] == "sync-state-set" and e["time"] >= isolated_at * NS for e in events):
            events.append(ev(t, "sync-state-set", change="shrink", members=[1]))
        t = round(t + 0.1, 3) if d is None else t + 0.01
    return found, s


def test_toy_cluster_loss_is_found_by_feedback() -> None:
    found = [toy_run(seed)[0] for seed in range(20)]
    assert sum(found) >= 16


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.lists(st.tuples(st.floats(0, 60), st.sampled_from(
    ["become-master", "sync-state-set", "fenced", "raft-leader", "registered"])), max_size=30))
def test_schedule_is_valid_and_bounded(seed: int, raw_events: list[tuple[float, str]]) -> None:
    """Whatever is observed: steps are in time order, parse as a schedule, never exceed the depth, never
    stack a family twice, and every fault with an undo is undone or still active at the end."""
    events = sorted((ev(t, k, change="shrink") for t, k in raw_events), key=lambda e: e["time"])
    s, t = State(), 0.0
    while t < 60:
        visible = [e for e in events if e["time"] <= t * NS]
        d, _wake, s = decide(s, CFG, visible, now_s=t, start_ns=0, rng=random.Random(f"{seed}:{s.k}:{len(s.steps)}"))
        families = [a.move.family for a in s.active]
        assert len(families) == len(set(families)) <= CFG.max_depth
        t = round(t + 0.25, 3) if d is None else t
    steps = s.steps
    assert [x.at_s for x in steps] == sorted(x.at_s for x in steps)
    parsed = parse([{"at_s": x.at_s, "f": x.f, **({"value": x.value} if x.value is not None else {})}
                    for x in steps], TOPO)
    assert len(parsed) == len(steps)
    opened = sum(1 for x in steps if x.f in UNDO)
    undone = sum(1 for x in steps if x.f in UNDO.values())
    assert opened - undone == len(s.active)
    # the same inputs give the same decisions
    again, t2 = State(), 0.0
    while t2 < 60:
        visible = [e for e in events if e["time"] <= t2 * NS]
        d, _, again = decide(again, CFG, visible, now_s=t2, start_ns=0,
                             rng=random.Random(f"{seed}:{again.k}:{len(again.steps)}"))
        t2 = round(t2 + 0.25, 3) if d is None else t2
    assert again.steps == steps


def test_a_trigger_during_a_fault_can_undo_it_early_but_not_before_the_shortest_hold() -> None:
    cfg = ours((ISOLATE, KILL, HALVES), settle_s=1.0, max_wait_s=4.0, holds_s=(1.0, 6.0), max_depth=2)
    undone = 0
    for seed in range(30):
        d, _, s1 = step(State(), [], 5.0, cfg=cfg, seed=seed)
        assert d is not None
        d1, _, _ = step(s1, [ev(5.5, "raft-leader")], 5.6, cfg=cfg, seed=seed)
        assert d1 is None or d1.step.f != UNDO[d.step.f]  # reacted, but in force for less than the shortest hold
        d2, _, s2 = step(s1, [ev(6.4, "raft-leader")], 6.5, cfg=cfg, seed=seed)
        if d2 is not None and d2.step.f == UNDO[d.step.f] and s1.active[0].undo_at_s > 6.5:
            undone += 1
            assert not s2.active and d2.move_key is not None and d2.move_key.startswith("undo:")
    assert undone >= 1


def test_client_outcomes_open_moments_only_when_no_fault_is_active() -> None:
    client = {"time": int(1.5 * NS), "kind": "client-outcome", "role": "client", "f": "send", "outcome": "info"}
    d, _, _s = step(State(), [client], 1.6)
    assert d is not None and d.context == "none|client-outcome:send:info"
    d, _, s = step(State(), [], 5.0)
    assert d is not None and s.active
    late = {**client, "time": int(5.5 * NS)}
    d2, wake, s2 = step(s, [late], 5.6)
    assert d2 is None and wake == s.active[0].undo_at_s and s2.trigger is None


def test_a_shrink_aims_at_the_master() -> None:
    """Right after the SyncStateSet shrinks (under a partition), killing the master is the favoured stack."""
    picks = []
    for seed in range(40):
        s = State()
        d, _, s = step(s, [], 5.0, cfg=ours((ISOLATE, KILL, Move("kill", "one")), holds_s=(6.0,)), seed=seed)
        if d is None or d.step.f != "start-partition":
            continue
        d2, _, _s = step(s, [ev(6.0, "sync-state-set", change="shrink", members=[1])], 6.1,
                         cfg=ours((ISOLATE, KILL, Move("kill", "one")), holds_s=(6.0,)), seed=seed)
        picks.append(None if d2 is None else d2.move_key)
    assert picks and all(p == "kill@masters" for p in picks)


def test_a_narrowing_not_yet_complete_is_held_and_never_undone() -> None:
    """The slaves' leases expire (fenced) before the master drops them: wait for the shrink, do not heal."""
    cfg = ours((ISOLATE, KILL, Move("kill", "one")), holds_s=(6.0,))
    for seed in range(20):
        d, _, s = step(State(), [], 5.0, cfg=cfg, seed=seed)
        assert d is not None
        for trigger in (ev(6.0, "fenced"), ev(6.0, "sync-state-set", change="shrink", members=[1, 2])):
            d2, _, s2 = step(s, [trigger], 6.1, cfg=cfg, seed=seed)
            assert d2 is None and [a.move for a in s2.active] == [a.move for a in s.active]  # held: no undo or stack


def test_undo_waits_for_a_reaction_and_the_stack_unwinds_from_the_bottom() -> None:
    cfg = ours((ISOLATE, KILL), settle_s=1.0, holds_s=(3.0, 9.0), max_depth=2)
    stacked = 0
    for seed in range(10):
        d, _, s = step(State(), [], 5.0, cfg=cfg, seed=seed)
        assert d is not None
        (first,) = s.active
        # no reaction yet: held past its hold, up to the longest
        d2, _, _ = step(s, [], first.undo_at_s + 0.1, cfg=cfg, seed=seed)
        assert (d2 is None) == (first.undo_at_s + 0.1 < first.at_s + 9.0)
        d2, _, _ = step(s, [], first.at_s + 9.0, cfg=cfg, seed=seed)
        assert d2 is not None and d2.step.f == UNDO[first.move.f]
        # a reaction that leaves the master alone: a stacked fault outlasts the one below, which goes first
        shrink = ev(5.5, "sync-state-set", change="shrink", members=[1])
        d3, _, s3 = step(s, [shrink], 5.6, cfg=cfg, seed=seed)
        if d3 is not None and len(s3.active) == 2:
            stacked += 1
            below, top = s3.active
            assert below.reacted and top.undo_at_s >= below.undo_at_s + cfg.settle_s
            d4, _, s4 = step(s3, [shrink], below.undo_at_s, cfg=cfg, seed=seed)
            assert d4 is not None and d4.step.f == UNDO[below.move.f] and [a.move for a in s4.active] == [top.move]
    assert stacked


def test_a_new_fault_waits_for_the_cluster_to_settle_after_the_last_one() -> None:
    """Restarts and elections right after an undo are the last fault's aftermath: not a moment, and they push the
    next fault back (at most ``max_wait_s``)."""
    d, _, s = step(State(), [], 5.0)
    assert d is not None
    d, _, s = step(s, [], s.active[0].undo_at_s)  # held for its time (no reaction: the longest hold)
    assert d is not None and not s.active
    undone = s.quiet_since_s
    aftermath = [ev(undone + 0.5, "node-restart"), ev(undone + 0.8, "become-master")]
    d, _, s = step(s, aftermath, undone + 0.9)
    assert d is None and s.trigger is None and s.cluster_at_s == pytest.approx(undone + 0.8)
    d, _, _ = step(s, aftermath, undone + 0.8 + CFG.settle_s - 0.05)
    assert d is None  # settle_s after the last cluster trigger, not after the undo
    late = [*aftermath, ev(undone + 3.0, "raft-leader")]
    d, _, _ = step(s, late, undone + 3.05)
    assert d is not None and d.context == "none|raft-leader"
    flapping = [ev(undone + 0.1 * i, "become-master") for i in range(1, 80)]
    t, s3 = undone, s
    while t < undone + CFG.settle_s + CFG.max_wait_s + 2:
        t = round(t + 0.1, 3)
        d, _, s3 = step(s3, [e for e in flapping if e["time"] <= t * NS], t)
        if d is not None:
            break
    assert d is not None and t <= undone + CFG.settle_s + CFG.max_wait_s + CFG.max_wait_s + 0.1


def test_what_the_cluster_raised_before_a_fault_took_effect_is_not_its_reaction() -> None:
    d, _, s = decide(State(), CFG, [], now_s=5.0, start_ns=0, rng=random.Random(0))
    assert d is not None and s.active[0].effect_s is None
    early = [ev(5.05, "sync-state-set", change="expand")]  # the last fault's aftermath, before this one is in
    _, _, s = decide(s, CFG, early, now_s=5.1, start_ns=0, rng=random.Random(0))
    s = took_effect(s, 5.2)
    assert not s.active[0].reacted and s.active[0].effect_s == 5.2
    _, _, s = decide(s, CFG, [*early, ev(5.6, "raft-leader")], now_s=5.7, start_ns=0, rng=random.Random(0))
    assert s.active[0].reacted or not s.active


def test_with_the_master_alone_in_the_set_only_moves_aimed_at_it_are_candidates() -> None:
    """Even when killing the master earned little before and another move was never tried (optimism)."""
    from nemesis.guided import Active

    cfg = ours((ISOLATE, KILL, Move("kill", "one")), holds_s=(6.0,))
    learned = {("none|quiet", KILL.key): (6, 0.0), ("none|quiet", ISOLATE.key): (1, 4.0)}
    for seed in range(20):
        s = State(active=(Active(ISOLATE, 5.0, 11.0, effect_s=5.0),), stats=learned)
        d, _, _ = step(s, [ev(6.0, "sync-state-set", change="shrink", members=[1])], 6.1, cfg=cfg, seed=seed)
        assert d is not None and d.move_key == KILL.key


def test_a_hold_that_ends_as_the_narrowing_arrives_gives_way_to_the_trigger() -> None:
    """The cut that left the master alone is not healed because its hold ran out in the same instant: the master
    is struck; a partial narrowing at the hold's end is held on for where it leads."""
    from nemesis.guided import Active

    cfg = ours((ISOLATE, KILL, Move("kill", "one")), settle_s=1.0, max_wait_s=2.0, holds_s=(2.0,))
    for seed in range(20):
        s = State(active=(Active(ISOLATE, 5.0, 7.0, effect_s=5.0),))
        d, _, s2 = step(s, [ev(6.95, "sync-state-set", change="shrink", members=[1])], 7.0, cfg=cfg, seed=seed)
        assert d is not None and d.move_key == KILL.key and [a.move for a in s2.active] == [ISOLATE, KILL]
        d, wake, s3 = step(s, [ev(6.95, "sync-state-set", change="shrink", members=[1, 2])], 7.0, cfg=cfg, seed=seed)
        assert d is None and [a.move for a in s3.active] == [ISOLATE] and wake == pytest.approx(9.0)
        d, _, _ = step(s3, [ev(6.95, "sync-state-set", change="shrink", members=[1, 2])], 9.0, cfg=cfg, seed=seed)
        assert d is not None and d.step.f == UNDO[ISOLATE.f]  # nothing more came: healed after the extension


def test_on_the_quiet_moves_at_nodes_holding_authority_are_tried_first() -> None:
    """With nothing to aim at, the untried moves naming a master or the controller leader come before the rest."""
    aimed = (Move("kill", "masters"), Move("start-partition", {"kind": "isolate", "targets": "controller-leader"}))
    cfg = ours((Move("kill", "slaves"), *aimed, Move("kill", "one"), HALVES), settle_s=1.0, holds_s=(3.0,))
    for seed in range(20):
        s, t, chosen = State(), 0.0, []
        for _ in range(2):
            t = max(t + 0.1, s.quiet_since_s + cfg.settle_s + cfg.quiet_wait_s)
            d, _, s = step(s, [], t, cfg=cfg, seed=seed)
            assert d is not None and d.context == "none|quiet"
            chosen.append(d.move_key)
            while s.active:
                t = min(a.undo_at_s for a in s.active)
                _, _, s = step(s, [], t, cfg=cfg, seed=seed)
        assert sorted(chosen) == sorted(m.key for m in aimed)
