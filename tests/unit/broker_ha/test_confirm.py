"""Confirm offset and put acks (reference 2.4; AutoSwitchHATest.ConfirmOffset / OptionAllAckInSyncStateSet)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from system_under_test.broker.ha.confirm import (
    ConfirmError,
    ack_satisfied,
    check_min_in_sync,
    compute_confirm_offset,
)
from system_under_test.protocol.codes import ResponseCode

S12 = frozenset({1, 2})
S123 = frozenset({1, 2, 3})

CONFIRM = [
    ("only-master", 500, frozenset({1}), {}, 0, 500),
    ("min-of-acks", 500, S123, {2: 300, 3: 400}, 0, 300),
    ("capped-by-master-max", 500, S12, {2: 700}, 0, 500),
    ("member-down-keeps-previous", 500, S123, {2: 450}, 200, 200),
    ("member-not-acked-yet-keeps-previous", 500, S12, {2: -1}, 200, 200),
    ("previous-capped-by-master-max", 100, S12, {}, 200, 100),
    ("non-member-acks-ignored", 500, S12, {2: 300, 9: 10}, 0, 300),
]


@pytest.mark.parametrize(("name", "mx", "members", "acks", "prev", "want"), CONFIRM, ids=[c[0] for c in CONFIRM])
def test_compute_confirm_offset(
    name: str, mx: int, members: frozenset[int], acks: dict[int, int], prev: int, want: int
) -> None:
    assert compute_confirm_offset(mx, members, 1, acks, prev) == want


def test_reference_mode_without_all_ack_reports_master_max() -> None:
    assert compute_confirm_offset(500, S12, 1, {2: 10}, 0, all_ack_in_sync_state_set=False) == 500


def test_bad_inputs() -> None:
    with pytest.raises(ConfirmError, match="must contain the master"):
        compute_confirm_offset(1, frozenset({2}), 1, {}, 0)
    with pytest.raises(ConfirmError, match=">= 0"):
        compute_confirm_offset(-1, S12, 1, {}, 0)
    with pytest.raises(ConfirmError):
        check_min_in_sync(1, 0)
    with pytest.raises(ConfirmError):
        ack_satisfied(1, S12, 1, {}, all_ack_in_sync_state_set=False, in_sync_replicas=0)


def test_confirm_offset_frozen_while_a_set_member_is_down() -> None:
    """AutoSwitchHATest.ConfirmOffset: set {1,2}, slave 2 down: puts time out and the confirm offset freezes."""
    confirm = compute_confirm_offset(100, S12, 1, {2: 100}, 0)
    assert confirm == 100
    for mx in (120, 140, 160):  # master keeps appending, slave 2 is disconnected
        confirm = compute_confirm_offset(mx, S12, 1, {}, confirm)
        assert confirm == 100
        assert not ack_satisfied(mx, S12, 1, {}, all_ack_in_sync_state_set=True)  # -> FLUSH_SLAVE_TIMEOUT
    assert compute_confirm_offset(160, S12, 1, {2: 160}, confirm) == 160  # back and caught up


@pytest.mark.parametrize(
    ("end", "members", "acks", "all_ack", "isr", "want"),
    [
        (100, frozenset({1}), {}, True, 1, True),  # set of one: immediately
        (100, S12, {2: 100}, True, 1, True),
        (100, S12, {2: 99}, True, 1, False),
        (100, S123, {2: 100}, True, 1, False),  # member 3 disconnected blocks
        (100, S123, {2: 100}, False, 2, True),  # 2 copies: master + 2
        (100, S123, {2: 50, 3: 60}, False, 2, False),
        (100, S123, {}, False, 1, True),  # inSyncReplicas 1: the master alone
        (100, S12, {9: 500}, False, 2, False),  # non-members do not count
    ],
)
def test_ack_satisfied(
    end: int, members: frozenset[int], acks: dict[int, int], all_ack: bool, isr: int, want: bool
) -> None:
    assert ack_satisfied(end, members, 1, acks, all_ack_in_sync_state_set=all_ack, in_sync_replicas=isr) is want


def test_min_in_sync_replicas() -> None:
    assert check_min_in_sync(1, 1) is None
    assert check_min_in_sync(1, 2) is ResponseCode.IN_SYNC_REPLICAS_NOT_ENOUGH
    assert check_min_in_sync(3, 2) is None


members_st = st.frozensets(st.integers(2, 5), max_size=4).map(lambda s: s | {1})


@settings(max_examples=300, deadline=None)
@given(members_st, st.integers(0, 10_000), st.dictionaries(st.integers(2, 5), st.integers(-1, 10_000)),
       st.integers(0, 10_000))
def test_confirm_never_exceeds_master_max_or_any_acked_member(
    members: frozenset[int], mx: int, acks: dict[int, int], prev: int
) -> None:
    c = compute_confirm_offset(mx, members, 1, acks, prev)
    assert 0 <= c <= mx
    others = members - {1}
    if all(acks.get(m, -1) >= 0 for m in others):
        assert all(c <= acks[m] for m in others)
    else:
        assert c == min(prev, mx)


@settings(max_examples=200, deadline=None)
@given(
    members_st,
    st.lists(st.tuples(st.integers(0, 200), st.dictionaries(st.integers(2, 5), st.integers(0, 200)),
                       st.sets(st.integers(2, 5))), max_size=25),
)
def test_confirm_never_decreases_while_the_set_is_unchanged(
    members: frozenset[int], steps: list[tuple[int, dict[int, int], set[int]]]
) -> None:
    """Master max and acks only grow (as in a stable epoch); members may disconnect and reconnect."""
    mx, acks, confirm = 0, {m: 0 for m in members - {1}}, 0
    for grow, bumps, down in steps:
        mx += grow
        for m, d in bumps.items():
            if m in acks:
                acks[m] = min(mx, acks[m] + d)
        connected = {m: a for m, a in acks.items() if m not in down}
        new = compute_confirm_offset(mx, members, 1, connected, confirm)
        assert new >= confirm
        assert all(new <= a for a in connected.values())
        confirm = new
