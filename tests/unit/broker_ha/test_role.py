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
