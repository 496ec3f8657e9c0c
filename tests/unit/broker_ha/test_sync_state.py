"""Sync-state set maintenance on the master (reference 2.4, AutoSwitchHATest scenarios as pure logic)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from system_under_test.broker.ha.sync_state import (
    DEFAULT_HA_MAX_TIME_SLAVE_NOT_CATCHUP_MS,
    SlaveTracking,
    SyncStateError,
    SyncStateSetView,
    abandon_proposal,
    apply_controller_set,
    effective_set,
    in_sync_replicas_nums,
    maybe_expand,
    maybe_shrink,
    new_tracking,
    on_ack,
    on_disconnect,
    on_transfer,
    propose,
)


def test_default_not_catchup_window_is_3000_ms() -> None:
    assert DEFAULT_HA_MAX_TIME_SLAVE_NOT_CATCHUP_MS == 3000


CATCHUP = [
    # (name, tracking before, ack, master max now, now, expected last_caught_up_ms)
    ("ack-reaches-current-max", SlaveTracking(2, last_transfer_master_max=100, last_transfer_ms=10), 150, 150, 50, 50),
    ("ack-reaches-max-at-last-transfer", SlaveTracking(2, last_transfer_master_max=100, last_transfer_ms=10), 120, 150,
     50, 10),
    ("ack-behind-last-transfer", SlaveTracking(2, last_transfer_master_max=100, last_transfer_ms=10,
                                               last_caught_up_ms=3), 90, 150, 50, 3),
    ("never-goes-back", SlaveTracking(2, last_transfer_master_max=100, last_transfer_ms=10, last_caught_up_ms=40), 100,
     150, 50, 40),
]


@pytest.mark.parametrize(("name", "t", "ack", "mx", "now", "want"), CATCHUP, ids=[c[0] for c in CATCHUP])
def test_catch_up_rule(name: str, t: SlaveTracking, ack: int, mx: int, now: int, want: int) -> None:
    after = on_ack(t, ack, mx, now)
    assert after.ack_offset == ack and after.last_caught_up_ms == want


def test_idle_transfer_refreshes_catch_up_time_of_a_caught_up_slave() -> None:
    t = SlaveTracking(2, ack_offset=100, last_caught_up_ms=5)
    assert on_transfer(t, 100, 900).last_caught_up_ms == 900
    assert on_transfer(t, 101, 900).last_caught_up_ms == 5  # there is data it lacks
    assert on_transfer(t, 101, 900).last_transfer_master_max == 101


def test_shrink_drops_a_stopped_slave_after_3_s_check_sync_state_set() -> None:
    """AutoSwitchRoleIntegrationTest.CheckSyncStateSet: set of 2 becomes 1 after the slave stops."""
    t = on_ack(on_transfer(new_tracking(2, 0), 100, 0), 100, 100, 0)
    assert maybe_shrink(frozenset({1, 2}), 1, {2: t}, 3000) is None
    assert maybe_shrink(frozenset({1, 2}), 1, {2: t}, 3001) == frozenset({1})
    assert maybe_shrink(frozenset({1, 2}), 1, {2: t}, 1001, ha_max_time_slave_not_catchup_ms=1000) == frozenset({1})


@pytest.mark.parametrize(
    ("trackings", "want"),
    [
        ({2: SlaveTracking(2, last_caught_up_ms=0), 3: SlaveTracking(3, last_caught_up_ms=900)}, None),
        ({2: on_disconnect(SlaveTracking(2, last_caught_up_ms=900)), 3: SlaveTracking(3, last_caught_up_ms=900)},
         frozenset({1, 3})),
        ({3: SlaveTracking(3, last_caught_up_ms=900)}, frozenset({1, 3})),  # no connection at all
        ({}, frozenset({1})),
    ],
    ids=["all-in-sync", "disconnected-dropped", "untracked-dropped", "only-self-kept"],
)
def test_shrink(trackings: dict[int, SlaveTracking], want: frozenset[int] | None) -> None:
    assert maybe_shrink(frozenset({1, 2, 3}), 1, trackings, 1000) == want


def test_shrink_rejects_bad_window() -> None:
    with pytest.raises(SyncStateError, match="ha_max_time_slave_not_catchup_ms"):
        maybe_shrink(frozenset({1}), 1, {}, 0, ha_max_time_slave_not_catchup_ms=0)


@pytest.mark.parametrize(
    ("slave", "ack", "confirm", "epoch_start", "learner", "want"),
    [
        (2, 100, 100, 50, False, frozenset({1, 2})),
        (2, 99, 100, 50, False, None),  # behind the confirm offset
        (2, 100, 80, 120, False, None),  # lacks part of the current epoch
        (2, 500, 100, 50, True, None),  # async learner never joins
        (1, 500, 100, 50, False, None),  # already a member
    ],
    ids=["joins", "behind-confirm", "behind-epoch-start", "async-learner", "member"],
)
def test_expand(
    slave: int, ack: int, confirm: int, epoch_start: int, learner: bool, want: frozenset[int] | None
) -> None:
    assert maybe_expand(frozenset({1}), slave, ack, confirm, epoch_start, learner) == want


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 10_000)), max_size=30))
def test_async_learner_never_enters_the_set(acks: list[tuple[int, int]]) -> None:
    """AutoSwitchHATest.AsyncLearner: replicates, acks anything, never enters the set."""
    members = frozenset({1})
    for ack, confirm in acks:
        grown = maybe_expand(members, 3, ack, confirm, 0, True)
        assert grown is None


def test_union_while_synchronizing_check_flag() -> None:
    """AutoSwitchHATest.CheckSynchronizingSyncStateSetFlag."""
    view = SyncStateSetView(frozenset({1}), 1)
    grown = maybe_expand(view.members, 2, 100, 100, 0, False)
    assert grown is not None
    view2 = propose(view, grown)
    assert view2 is not None and view2.synchronizing
    assert effective_set(view2) == frozenset({1, 2}) and in_sync_replicas_nums(view2) == 2
    assert propose(view2, frozenset({1, 3})) is None  # one proposal at a time
    # A shrink proposal also counts the union (old members still must ack).
    shrinking = propose(SyncStateSetView(frozenset({1, 2, 3}), 4), frozenset({1, 3}))
    assert shrinking is not None
    assert effective_set(shrinking) == frozenset({1, 2, 3}) and in_sync_replicas_nums(shrinking) == 3
    # The controller accepted with a higher epoch: applied locally, flag cleared.
    done = apply_controller_set(view2, frozenset({1, 2}), 2)
    assert done == SyncStateSetView(frozenset({1, 2}), 2, None) and not done.synchronizing


def test_controller_set_applies_only_with_a_higher_epoch() -> None:
    view = SyncStateSetView(frozenset({1, 2}), 5, frozenset({1}))
    assert apply_controller_set(view, frozenset({1, 3}), 5) is view
    assert apply_controller_set(view, frozenset({1, 3}), 4) is view
    assert apply_controller_set(view, frozenset({1, 3}), 6) == SyncStateSetView(frozenset({1, 3}), 6)
    assert abandon_proposal(view) == SyncStateSetView(frozenset({1, 2}), 5)
    assert propose(SyncStateSetView(frozenset({1}), 1), frozenset({1})) is None


@settings(max_examples=200, deadline=None)
@given(
    st.frozensets(st.integers(2, 6), max_size=5),
    st.dictionaries(st.integers(2, 6), st.tuples(st.booleans(), st.integers(0, 10_000)), max_size=5),
    st.integers(0, 20_000),
)
def test_shrink_always_keeps_self_and_only_removes(
    members: frozenset[int], raw: dict[int, tuple[bool, int]], now: int
) -> None:
    trackings = {i: SlaveTracking(i, connected=c, last_caught_up_ms=t) for i, (c, t) in raw.items()}
    current = members | {1}
    new = maybe_shrink(current, 1, trackings, now)
    result = current if new is None else new
    assert 1 in result and result <= current
    for m in result - {1}:
        assert trackings[m].connected and now - trackings[m].last_caught_up_ms <= 3000
