"""BrokerHeartbeatManager (refresh rule, leases), the elect policy (pure table) and the leader scan."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from system_under_test.controller import (
    BrokerHeartbeatManager,
    ElectMaster,
    FenceBroker,
    HeartbeatInfo,
    LiveInfo,
    candidate_rank,
    describe_scan,
    elect,
    scan,
)
from system_under_test.protocol.codes import ResponseCode

K = ("bs", 1)


@pytest.mark.parametrize(
    ("case", "first", "second", "expected"),
    [
        ("higher_epoch_replaces", (1, 100, 90), (2, 5, 5), (2, 5, 5)),
        ("same_epoch_higher_offset_replaces", (1, 100, 90), (1, 120, 95), (1, 120, 95)),
        ("same_epoch_lower_offset_kept", (1, 100, 90), (1, 50, 50), (1, 100, 90)),
        ("same_epoch_same_offset_kept", (1, 100, 90), (1, 100, 99), (1, 100, 90)),
        ("lower_epoch_kept", (2, 10, 10), (1, 500, 500), (2, 10, 10)),
    ],
)
def test_refresh_rule(case: str, first: tuple[int, int, int], second: tuple[int, int, int],
                      expected: tuple[int, int, int]) -> None:
    hb = BrokerHeartbeatManager()
    hb.on_heartbeat(K, HeartbeatInfo("a:1", 7, *first, election_priority=5, lease_timeout_ms=1000), 0)
    rec = hb.on_heartbeat(K, HeartbeatInfo("a:1", 7, *second, election_priority=3, lease_timeout_ms=2000), 10)
    assert (rec.master_epoch, rec.max_offset, rec.confirm_offset) == expected, case
    assert (rec.election_priority, rec.lease_timeout_ms, rec.last_update_ms) == (3, 2000, 10)  # always refreshed


def test_new_broker_epoch_replaces_progress() -> None:
    hb = BrokerHeartbeatManager()
    hb.on_heartbeat(K, HeartbeatInfo("a", 7, 3, 1000, 1000), 0)
    rec = hb.on_heartbeat(K, HeartbeatInfo("a", 9, 1, 10, 10), 5)
    assert (rec.broker_epoch, rec.master_epoch, rec.max_offset) == (9, 1, 10)


def test_has_valid_session_expiry_per_broker_and_remove() -> None:
    """Kafka BrokerHeartbeatManagerTest.HasValidSession (10 ms sessions)."""
    hb = BrokerHeartbeatManager()
    for i, t in ((1, 0), (2, 5), (3, 8)):
        hb.on_heartbeat(("bs", i), HeartbeatInfo(lease_timeout_ms=10), t)
    assert [hb.is_alive(("bs", i), 10) for i in (1, 2, 3)] == [True, True, True]
    assert [hb.is_alive(("bs", i), 11) for i in (1, 2, 3)] == [False, True, True]
    assert hb.expired(16) == [("bs", 1), ("bs", 2)]
    assert hb.next_expiry_ms(16) == 18 and hb.next_expiry_ms(100) is None
    hb.remove(("bs", 3))
    assert not hb.is_alive(("bs", 3), 9) and hb.live_info(("bs", 3)) is None
    assert not hb.is_alive(("bs", 99), 0)


def test_a_clock_that_goes_backwards_rebases_leases_instead_of_extending_them_by_the_jump() -> None:
    """The leader's clock ran fast, then was reset 10 s back: the entries it stamped must not stay 10 s in the
    future (every lease would last 10 s longer; a simulated failover took 8.2 s instead of 3)."""
    hb = BrokerHeartbeatManager()
    hb.on_heartbeat(K, HeartbeatInfo(lease_timeout_ms=2_000), 20_000)  # stamped by the fast clock
    hb.on_heartbeat(("bs", 2), HeartbeatInfo(lease_timeout_ms=2_000), 20_000)
    assert hb.is_alive(K, 10_000)  # the reset: re-based to 10,000, alive until 12,000
    hb.on_heartbeat(("bs", 2), HeartbeatInfo(lease_timeout_ms=2_000), 11_000)
    assert not hb.is_alive(K, 12_001) and hb.is_alive(("bs", 2), 12_001)
    assert hb.expired(12_001) == [K]


@given(st.lists(st.tuples(st.sampled_from(["hb", "touch", "alive", "expired"]), st.integers(1, 3),
                          st.integers(0, 10_000)), max_size=40))
def test_no_entry_is_ever_later_than_the_latest_clock_reading(ops: list[tuple[str, int, int]]) -> None:
    hb = BrokerHeartbeatManager()
    for op, broker, now in ops:
        if op == "hb":
            hb.on_heartbeat(("bs", broker), HeartbeatInfo(lease_timeout_ms=100), now)
        elif op == "touch":
            hb.touch(("bs", broker), 100, now)
        elif op == "alive":
            hb.is_alive(("bs", broker), now)
        else:
            hb.expired(now)
        known = hb.keys()
        assert all(hb.live_info(k).last_update_ms <= now for k in known)  # type: ignore[union-attr]
        if op in ("hb", "touch"):
            assert hb.live_info(("bs", broker)).last_update_ms == now  # type: ignore[union-attr]


def test_touch_and_reset_sessions() -> None:
    hb = BrokerHeartbeatManager()
    hb.on_heartbeat(K, HeartbeatInfo("a", 7, 2, 100, 90, election_priority=4, lease_timeout_ms=10), 0)
    rec = hb.touch(K, 50, 20)
    assert (rec.max_offset, rec.election_priority, rec.last_update_ms, rec.lease_timeout_ms) == (100, 4, 20, 50)
    hb.reset_sessions([K, ("bs", 2)], 30, 1_000)
    assert hb.is_alive(K, 1_030) and hb.is_alive(("bs", 2), 1_030) and not hb.is_alive(K, 1_031)
    assert hb.live_info(K).max_offset == 100  # progress kept
    assert "alive" in hb.describe(1_000) and "DEAD" in hb.describe(2_000)
    assert hb.keys() == [K, ("bs", 2)]


def test_heartbeat_info_validation() -> None:
    with pytest.raises(ValueError, match="lease_timeout_ms"):
        HeartbeatInfo(lease_timeout_ms=0)


# ---- elect policy ----------------------------------------------------------------------------
def info(i: int, epoch: int, offset: int, prio: int = 100) -> LiveInfo:
    return LiveInfo("bs", i, "", 1, epoch, offset, offset, prio, 1000, 0)


INFOS = {1: info(1, 1, 10), 2: info(2, 2, 5), 3: info(3, 2, 7), 4: info(4, 2, 7, prio=1), 5: info(5, 2, 7, prio=1)}


@pytest.mark.parametrize(
    ("case", "sss", "all_replicas", "old", "prefer", "alive", "expected"),
    [
        ("old_master_alive_kept", [1, 2, 3], None, 1, None, {1, 2, 3}, 1),
        ("old_master_dead_best_rank", [1, 2, 3], None, 1, None, {2, 3}, 3),
        ("priority_breaks_tie", [3, 4], None, None, None, {3, 4}, 4),
        ("lowest_id_breaks_full_tie", [5, 4], None, None, None, {4, 5}, 4),
        ("prefer_alive", [1, 2, 3], None, 1, 2, {1, 2, 3}, 2),
        ("prefer_old_master", [1, 2], None, 1, 1, {1, 2}, 1),
        ("prefer_dead_no_fallback", [1, 2, 3], None, 1, 2, {1, 3}, None),
        ("nobody_alive", [1, 2], None, None, None, set(), None),
        ("unclean_falls_back", [1], [1, 2, 3], 1, None, {2, 3}, 3),
        ("clean_only_no_fallback", [1], None, 1, None, {2, 3}, None),
        ("no_live_info_ranks_last", [2, 9], None, None, None, {2, 9}, 2),
    ],
)
def test_elect_policy(case: str, sss: list[int], all_replicas: list[int] | None, old: int | None,
                      prefer: int | None, alive: set[int], expected: int | None) -> None:
    got = elect(sss, all_replicas, old, prefer, lambda i: i in alive, INFOS.get)
    assert got == expected, case


def test_candidate_rank_orders_by_epoch_offset_priority_id() -> None:
    ranked = sorted(INFOS, key=lambda i: candidate_rank(i, INFOS[i]))
    assert ranked == [4, 5, 3, 2, 1]
    assert candidate_rank(9, None) > candidate_rank(1, INFOS[1])


def test_a_candidate_heard_recently_beats_a_better_ranked_silent_one() -> None:
    # leases of 1000 ms, all last heard at 0: at 500 everyone is heard recently, at 501 nobody is
    infos = {2: info(2, 2, 5), 3: info(3, 2, 7)}
    assert elect([2, 3], None, None, None, lambda i: True, infos.get, 500) == 3
    assert elect([2, 3], None, None, None, lambda i: True, infos.get, 900) == 3  # both silent: rank as before
    infos[2] = LiveInfo("bs", 2, "", 1, 2, 5, 5, 100, 1000, 400)  # 2 heard at 400
    assert elect([2, 3], None, None, None, lambda i: True, infos.get, 900) == 2
    assert elect([2, 3], None, None, None, lambda i: True, infos.get) == 3  # without a clock: RIP-44's order
    assert elect([2, 3], None, 3, None, lambda i: True, infos.get, 900) == 3  # a live old master stays


def test_scan_does_not_elect_a_slave_whose_lease_runs_out_with_the_masters(sim: Any) -> None:
    """A partition cuts master 1 and slave 3 off the controllers at once; slave 2 keeps heartbeating.  3 holds
    more of the log, so RIP-44's order elects it -- and half a second later its lease runs out too, the set is
    {3} and nobody is electable (a nightly queue x partition run).  The scan elects 2, which it hears."""
    for _ in range(3):
        sim.join("bs")
    sim.elect("bs", 1)
    sim.alter("bs", 1, [1, 2, 3])
    sim.heartbeat("bs", 1, master_epoch=1, max_offset=100)
    sim.advance(400)
    sim.heartbeat("bs", 3, master_epoch=1, max_offset=100)  # last heard: 400 ms after the master
    for _ in range(3):
        sim.advance(500)
        sim.heartbeat("bs", 2, master_epoch=1, max_offset=90)
    sim.advance(200)  # 2,100 ms after the master was last heard: its lease is out, 3's has 300 ms left
    assert sim.heartbeats.is_alive(("bs", 3), sim.now_ms) and not sim.heartbeats.is_alive(("bs", 1), sim.now_ms)
    sim.scan()
    assert sim.set_of().master_id == 2 and 2 in sim.set_of().sync_state_set
    sim.advance(500)
    sim.heartbeat("bs", 2, master_epoch=2, max_offset=90)
    sim.scan()  # 3's lease runs out: fenced, and the set keeps its master
    assert sim.set_of().master_id == 2 and sim.state.registration("bs", 3).fenced


# ---- scan ------------------------------------------------------------------------------------
def test_scan_nothing_to_do(sim: Any) -> None:
    sim.join("bs")
    sim.elect("bs", 1)
    assert scan(sim.state, sim.heartbeats, sim.config, sim.now_ms) == []
    assert describe_scan([]) == "scan: nothing to do"


def test_scan_fences_and_reelects_in_one_batch(sim: Any) -> None:
    for _ in range(3):
        sim.join("bs")
    sim.elect("bs", 1)
    sim.alter("bs", 1, [1, 2, 3])
    sim.advance(2_500)
    sim.heartbeat("bs", 3)
    events = scan(sim.state, sim.heartbeats, sim.config, sim.now_ms)
    assert [type(e) for e in events] == [FenceBroker, FenceBroker, ElectMaster]
    assert [e.broker_id for e in events] == [1, 2, 3]
    assert "FenceBroker bs/1" in describe_scan(events)
    results = sim.apply_entry(events)
    assert all(r.ok for r in results) and results[-1].notify_broker_set == "bs"
    assert sim.scan() == []  # stable afterwards


def test_scan_clears_master_when_nobody_electable_then_reelects(sim: Any) -> None:
    sim.join("bs")
    sim.join("bs")
    sim.elect("bs", 1)  # set {1}
    sim.advance(2_500)
    sim.heartbeat("bs", 2)  # 2 alive but not in the set
    sim.scan()
    bs = sim.set_of()
    assert bs.master_id is None and bs.master_epoch == 2
    assert sim.scan() == []  # no repeated clearing
    sim.register("bs", 1, "inc-bs-1")
    sim.heartbeat("bs", 1)
    sim.scan()
    assert sim.set_of().master_id == 1 and sim.set_of().master_epoch == 3


def test_scan_everyone_dead_keeps_master_record(sim: Any) -> None:
    sim.join("bs")
    sim.elect("bs", 1)
    sim.advance(5_000)
    results = sim.scan()
    assert [r.code for r in results] == [ResponseCode.SUCCESS]  # only the fence
    assert sim.set_of().master_id == 1 and sim.state.registration("bs", 1).fenced


def test_scan_never_elected_set_waits_for_first_election(sim: Any) -> None:
    sim.join("bs")
    assert scan(sim.state, sim.heartbeats, sim.config, sim.now_ms) == []


def test_scan_unclean(make_sim: Any) -> None:
    sim = make_sim(unclean=True)
    sim.join("bs")
    sim.join("bs")
    sim.elect("bs", 1)
    sim.advance(2_500)
    sim.heartbeat("bs", 2)
    sim.scan()
    assert sim.set_of().master_id == 2


def test_find_stale_brokers_oldest_first() -> None:
    """Kafka BrokerHeartbeatManagerTest.FindOneStaleBroker: the oldest contact is reported first."""
    hb = BrokerHeartbeatManager()
    for i, t in ((3, 0), (2, 2), (1, 4)):  # a clock reading lower than the last is a clock jump (rebased)
        hb.on_heartbeat(("bs", i), HeartbeatInfo(lease_timeout_ms=10), t)
    assert hb.expired(100) == [("bs", 3), ("bs", 2), ("bs", 1)]
    assert hb.next_expiry_ms(0) == 10


# ---- differential: elect against a naive pairwise definition ---------------------------------

candidate_infos = st.dictionaries(
    st.integers(1, 8),
    st.tuples(st.integers(0, 3), st.integers(0, 2**40), st.integers(0, 3)),
    max_size=8,
)


def better(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    """Naive: a beats b by higher master epoch, then higher offset, then lower priority, then lower id."""
    for x, y, higher_wins in zip(a, b, (True, True, False, False)):
        if x != y:
            return x > y if higher_wins else x < y
    return False


@given(candidate_infos, st.data())
def test_elect_matches_naive_definition(infos: dict[int, tuple[int, int, int]], data: st.DataObject) -> None:
    ids = list(infos)
    alive = set(data.draw(st.sets(st.sampled_from(ids))) if ids else set())
    order = data.draw(st.permutations(ids))
    heard = {i: data.draw(st.integers(0, 1000)) for i in ids}
    now = data.draw(st.sampled_from([None, 1000]))
    live = {i: LiveInfo("bs", i, "", 1, e, o, o, p, 1000, heard[i]) for i, (e, o, p) in infos.items()}
    got = elect(order, None, None, None, lambda i: i in alive, live.get, now)
    if not alive:
        assert got is None
        return
    assert got in alive
    recent = {i for i in alive if now is None or now - heard[i] <= 500}
    assert got in recent or not recent  # a candidate heard recently wins whenever there is one
    pool = recent or alive
    key = {i: (infos[i][0], infos[i][1], infos[i][2], i) for i in pool}
    assert not any(better(key[j], key[got]) for j in pool if j != got)
    assert elect(list(reversed(order)), None, None, None, lambda i: i in alive, live.get, now) == got
