"""Role-change decisions and the changeToMaster / changeToSlave step lists (reference 2.1/2.3)."""

from __future__ import annotations

import pytest

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
    TruncateEpochsFrom,
    TruncateInvalidTail,
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


def test_change_to_master_full_sequence() -> None:
    # Our own epoch-3 entry starts in the torn tail: it is dropped and re-appended at the valid end.
    steps = change_to_master_steps(3, [(1, 0), (2, 300), (3, 900)], 1000, 800)
    assert steps == [
        StopHaClient(),
        DropSlaveConnections(),
        TruncateInvalidTail(800),
        TruncateEpochsFrom(3),
        AppendEpochEntry(3, 800),
        RecomputeConfirmOffset(),
        RegisterRouting(0),
        AcceptWrites(3),
    ]


def test_change_to_master_plain() -> None:
    assert change_to_master_steps(3, [(1, 0), (2, 300)], 500, 500) == [
        StopHaClient(),
        DropSlaveConnections(),
        AppendEpochEntry(3, 500),
        RecomputeConfirmOffset(),
        RegisterRouting(0),
        AcceptWrites(3),
    ]


def test_change_to_master_keeps_its_own_epoch_entry_after_restart() -> None:
    steps = change_to_master_steps(2, [(1, 0), (2, 300)], 500, 500)
    assert not [s for s in steps if isinstance(s, AppendEpochEntry | TruncateEpochsFrom)]
    assert steps[-1] == AcceptWrites(2)


def test_change_to_master_when_last_role_was_master_only_appends() -> None:
    assert change_to_master_steps(5, [(4, 0)], 700, 700, last_role_was_master=True) == [
        AppendEpochEntry(5, 700),
        RegisterRouting(0),
        AcceptWrites(5),
    ]


def test_change_to_master_with_empty_epoch_file() -> None:
    assert AppendEpochEntry(1, 0) in change_to_master_steps(1, [], 0, 0)


@pytest.mark.parametrize(
    ("epoch", "entries", "mx", "valid", "match"),
    [(2, [(3, 0)], 10, 10, "already has epoch 3"), (3, [], 10, 11, "valid_end_offset")],
)
def test_change_to_master_refusals(epoch: int, entries: list[tuple[int, int]], mx: int, valid: int, match: str) -> None:
    with pytest.raises(RoleError, match=match):
        change_to_master_steps(epoch, entries, mx, valid)


def test_change_to_slave() -> None:
    assert change_to_slave_steps(1, "10.0.0.1:10912", 2) == [
        StopAcceptingWrites(),
        DropSlaveConnections(),
        RegisterRouting(2),
        StartHaClient(1, "10.0.0.1:10912"),
    ]
    with pytest.raises(RoleError, match="itself"):
        change_to_slave_steps(2, "x", 2)
