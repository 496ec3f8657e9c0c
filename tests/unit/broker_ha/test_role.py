"""Role-change decisions and the changeToMaster / changeToSlave step lists (reference 2.1/2.3)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from system_under_test.broker.ha.role import (
    AcceptWrites,
    AppendEpochEntry,
    DropSlaveConnections,
    RecomputeConfirmOffset,
    RegisterRouting,
    RoleDecisionKind,
    RoleError,
    StartHaClient,
    StopAcceptingWrites,
    StopHaClient,
    change_to_master_steps,
    change_to_slave_steps,
    decide_role_change,
    may_lead_again,
    routing_broker_id,
)

K = RoleDecisionKind


@pytest.mark.parametrize(
    ("local", "new", "master", "want"),
    [
        (1, 1, 2, K.IGNORE),  # duplicate notification
        (3, 2, 1, K.IGNORE),  # stale notification
        (1, 2, 1, K.BECOME_MASTER),
        (1, 2, 2, K.BECOME_SLAVE),
        (1, 2, None, K.NO_MASTER),
        (2, 2, None, K.NO_MASTER),  # a set without a master: ask to be elected whatever the epoch
        (0, 0, None, K.NO_MASTER),  # a new set, no master yet
        (0, 1, 1, K.BECOME_MASTER),
    ],
)
def test_decide_role_change_only_on_a_higher_master_epoch(local: int, new: int, master: int | None, want: K) -> None:
    d = decide_role_change(local, new, master, 1)
    assert d.kind is want
    if want is K.IGNORE:
        assert d.master_epoch == local and str(new) in d.reason
    else:
        assert d.master_epoch == new and d.master_id == master


@given(local=st.integers(0, 6), new=st.integers(0, 6), master=st.one_of(st.none(), st.integers(1, 4)))
def test_a_broker_that_lost_durable_records_never_leads_nor_asks_to(local: int, new: int, master: int | None) -> None:
    """The durable-loss rule (role.py docstring): where a whole store would adopt mastership -- of any epoch,
    its own old one included -- or ask for an election, a store that lost fsynced records refuses; every
    other decision (follow another master, ignore a stale report) is the one a whole store gets."""
    whole = decide_role_change(local, new, master, 1)
    lost = decide_role_change(local, new, master, 1, lost_durable_records=True)
    assert lost.kind not in (K.BECOME_MASTER, K.NO_MASTER)
    if master in (None, 1):
        assert lost.kind is K.REFUSE_TO_LEAD and lost.master_epoch == local and "lost durable records" in lost.reason
    else:
        assert lost == whole


def test_the_restarted_master_named_in_its_own_epoch_refuses() -> None:
    """The bench's finding (docs/bugs.md, seed 2001): restarted, the master of epoch 1 learns from its
    registration that it is master of epoch 1; with a store that lost records it must not take it."""
    assert decide_role_change(0, 1, 1, 1).kind is K.BECOME_MASTER
    assert decide_role_change(0, 1, 1, 1, lost_durable_records=True).kind is K.REFUSE_TO_LEAD
    assert decide_role_change(0, 2, None, 1, lost_durable_records=True).kind is K.REFUSE_TO_LEAD  # master cleared
    assert decide_role_change(0, 3, 2, 1, lost_durable_records=True) == decide_role_change(0, 3, 2, 1)


@pytest.mark.parametrize(("confirm", "max_offset", "want"), [
    (None, 0, False),  # no transfer applied yet: nothing known about the master's log
    (None, 5000, False),
    (1200, 1199, False),  # one byte short of what the master confirmed
    (1200, 1200, True),
    (1200, 4000, True),
    (0, 0, True),  # a master with nothing confirmed: nothing acknowledged can be missing
])
def test_may_lead_again_once_the_log_reaches_the_masters_confirm_offset(confirm: int | None, max_offset: int,
                                                                          want: bool) -> None:
    assert may_lead_again(confirm, max_offset) is want


@given(confirm=st.one_of(st.none(), st.integers(0, 10**12)), max_offset=st.integers(0, 10**12),
       more=st.integers(0, 10**6))
def test_may_lead_again_is_monotonic_in_the_log(confirm: int | None, max_offset: int, more: int) -> None:
    """Replication only appends: once allowed, a longer log stays allowed; never before a transfer."""
    if may_lead_again(confirm, max_offset):
        assert may_lead_again(confirm, max_offset + more)
    if confirm is None:
        assert not may_lead_again(confirm, max_offset)


def test_routing_ids() -> None:
    assert routing_broker_id(True, 3) == 0
    assert routing_broker_id(False, 3) == 3


def test_change_to_master_stops_the_ha_client_first() -> None:
    # the client may be appending a batch: the steps are computed from the log it leaves
    assert change_to_master_steps(3, [(1, 0), (2, 300)], 500, ha_client_running=True) == [StopHaClient()]


def test_change_to_master_plain() -> None:
    assert change_to_master_steps(3, [(1, 0), (2, 300)], 500, ha_client_running=False) == [
        DropSlaveConnections(),
        AppendEpochEntry(3, 500),
        RegisterRouting(0),
        AcceptWrites(3),
        RecomputeConfirmOffset(),
    ]


def test_change_to_master_keeps_its_own_epoch_entry_after_restart() -> None:
    steps = change_to_master_steps(2, [(1, 0), (2, 300)], 500, ha_client_running=False)
    assert not [s for s in steps if isinstance(s, AppendEpochEntry)]
    assert steps[-2:] == [AcceptWrites(2), RecomputeConfirmOffset()]


def test_change_to_master_with_empty_epoch_file() -> None:
    assert AppendEpochEntry(1, 0) in change_to_master_steps(1, [], 0, ha_client_running=False)


@pytest.mark.parametrize(
    ("epoch", "entries", "mx", "match"),
    [(2, [(3, 0)], 10, "already has epoch 3"), (3, [(1, 0), (2, 11)], 10, "beyond the max offset 10")],
    ids=["stale-election", "entry-beyond-the-log"],
)
@pytest.mark.parametrize("running", [False, True], ids=["client-stopped", "client-running"])
def test_change_to_master_refusals(epoch: int, entries: list[tuple[int, int]], mx: int, match: str,
                                   running: bool) -> None:
    # refused before the HA client is stopped: a refused change leaves the slave replicating
    with pytest.raises(RoleError, match=match):
        change_to_master_steps(epoch, entries, mx, ha_client_running=running)


@st.composite
def epoch_files(draw: st.DrawFn) -> tuple[list[tuple[int, int]], int]:
    """Epoch entries ``(epoch, start)`` with growing epochs and starts, and a max offset >= the last start."""
    epochs = sorted(draw(st.sets(st.integers(1, 50), max_size=6)))
    starts = sorted(draw(st.lists(st.integers(0, 10_000), min_size=len(epochs), max_size=len(epochs))))
    max_offset = draw(st.integers(starts[-1] if starts else 0, 20_000))
    return list(zip(epochs, starts, strict=True)), max_offset


@given(epoch_files(), st.integers(0, 60))
def test_change_to_master_never_truncates_and_starts_the_epoch_at_the_max_offset(
    log: tuple[list[tuple[int, int]], int], epoch: int
) -> None:
    entries, max_offset = log
    if entries and epoch < entries[-1][0]:
        with pytest.raises(RoleError):
            change_to_master_steps(epoch, entries, max_offset, ha_client_running=False)
        return
    steps = change_to_master_steps(epoch, entries, max_offset, ha_client_running=False)
    kept = bool(entries) and entries[-1][0] == epoch
    assert steps == [DropSlaveConnections(), *([] if kept else [AppendEpochEntry(epoch, max_offset)]),
                     RegisterRouting(0), AcceptWrites(epoch), RecomputeConfirmOffset()]


def test_change_to_slave() -> None:
    assert change_to_slave_steps(1, "10.0.0.1:10912", 4, 2) == [
        StopAcceptingWrites(),
        DropSlaveConnections(),
        StopHaClient(),
        RegisterRouting(2),
        StartHaClient(1, "10.0.0.1:10912", 4),
    ]
    with pytest.raises(RoleError, match="itself"):
        change_to_slave_steps(2, "x", 4, 2)
