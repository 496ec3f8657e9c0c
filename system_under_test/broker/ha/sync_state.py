"""Master-side sync-state set maintenance (pure): per-slave catch-up tracking, shrink, expand, in-flight changes.

Vocabulary (seed RIP-44, reference 2.4): the *sync-state set* is the master plus the slaves that keep up
with it; only its members can be elected master.  The master proposes changes to the controller
(AlterSyncStateSet) and applies a change locally only after the controller accepted it with a higher
*sync-state set epoch*.

Catch-up rule (reference 2.4): each time the master transfers data to a slave it records its max offset
(``last_transfer_master_max``) and the time (``last_transfer_ms``).  When the slave acks an offset
>= that recorded max, the slave was caught up at ``last_transfer_ms``; an ack >= the master's current max
means caught up *now*.  A slave whose last catch-up is older than ``ha_max_time_slave_not_catchup_ms``
(default 3000 here) or that has no connection is dropped by :func:`maybe_shrink`; the master itself is
always kept.  A slave joins (:func:`maybe_expand`) when it is not an async learner and its ack is
>= the confirm offset and >= the start of the current master epoch.

While a proposal is in flight ("synchronizing"), :func:`effective_set` is the union of the applied and
proposed sets and :func:`in_sync_replicas_nums` the larger size, so acks wait for both (rocketmq#5663).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

DEFAULT_HA_MAX_TIME_SLAVE_NOT_CATCHUP_MS = 3000


class SyncStateError(ValueError):
    """An input that breaks a sync-state invariant (names the values)."""


@dataclass(frozen=True)
class SlaveTracking:
    """What the master knows about one slave connection.

    Attributes:
        slave_id: the slave's broker id.
        connected: a replication connection is up.
        is_async_learner: the slave said so in its handshake; it never joins the set.
        ack_offset: the slave's last acked max offset (-1 before the first ack).
        last_transfer_master_max: master max offset at the last transfer to this slave.
        last_transfer_ms: when that transfer happened.
        last_caught_up_ms: last time the slave was known to be caught up.
    """

    slave_id: int
    connected: bool = True
    is_async_learner: bool = False
    ack_offset: int = -1
    last_transfer_master_max: int = 0
    last_transfer_ms: int = 0
    last_caught_up_ms: int = 0

    def describe(self) -> str:
        return (
            f"slave {self.slave_id} {'up' if self.connected else 'down'}{' learner' if self.is_async_learner else ''} "
            f"ack={self.ack_offset} caught_up@{self.last_caught_up_ms}"
        )


def new_tracking(slave_id: int, now_ms: int, *, is_async_learner: bool = False) -> SlaveTracking:
    """Tracking for a slave that just connected (counts as caught up at connection time)."""
    return SlaveTracking(slave_id, True, is_async_learner, -1, 0, now_ms, now_ms)


def on_transfer(t: SlaveTracking, master_max_offset: int, now_ms: int) -> SlaveTracking:
    """Record a transfer (data or idle heartbeat) to the slave.

    An idle transfer to a slave whose ack already equals the master max refreshes its catch-up time.
    """
    caught = now_ms if t.ack_offset >= master_max_offset else t.last_caught_up_ms
    return replace(t, last_transfer_master_max=master_max_offset, last_transfer_ms=now_ms, last_caught_up_ms=caught)


def on_ack(t: SlaveTracking, ack_offset: int, master_max_offset: int, now_ms: int) -> SlaveTracking:
    """Record an ack of ``ack_offset`` from the slave and apply the catch-up rule."""
    caught = t.last_caught_up_ms
    if ack_offset >= master_max_offset:
        caught = max(caught, now_ms)
    elif ack_offset >= t.last_transfer_master_max:
        caught = max(caught, t.last_transfer_ms)
    return replace(t, ack_offset=ack_offset, last_caught_up_ms=caught)


def on_disconnect(t: SlaveTracking) -> SlaveTracking:
    return replace(t, connected=False)


def maybe_shrink(
    sync_state_set: frozenset[int],
    self_id: int,
    trackings: Mapping[int, SlaveTracking],
    now_ms: int,
    *,
    ha_max_time_slave_not_catchup_ms: int = DEFAULT_HA_MAX_TIME_SLAVE_NOT_CATCHUP_MS,
) -> frozenset[int] | None:
    """The shrunk set to propose, or None if every member is still in sync.

    A member other than ``self_id`` is dropped if it has no tracking, is disconnected, or its last
    catch-up is more than ``ha_max_time_slave_not_catchup_ms`` ago.  ``self_id`` is always kept.
    """
    if ha_max_time_slave_not_catchup_ms <= 0:
        raise SyncStateError(f"ha_max_time_slave_not_catchup_ms must be > 0, got {ha_max_time_slave_not_catchup_ms}")
    keep = {self_id}
    for member in sync_state_set:
        if member == self_id:
            continue
        t = trackings.get(member)
        if t is None or not t.connected:
            continue
        if now_ms - t.last_caught_up_ms > ha_max_time_slave_not_catchup_ms:
            continue
        keep.add(member)
    new = frozenset(keep)
    return None if new == sync_state_set else new


def maybe_expand(
    sync_state_set: frozenset[int],
    slave_id: int,
    ack_offset: int,
    confirm_offset: int,
    current_epoch_start: int,
    is_async_learner: bool,
) -> frozenset[int] | None:
    """The grown set to propose when ``slave_id`` has caught up, or None.

    Joins iff not already a member, not an async learner, ``ack_offset >= confirm_offset`` and
    ``ack_offset >= current_epoch_start`` (it holds everything of the current master epoch).
    """
    if slave_id in sync_state_set or is_async_learner:
        return None
    if ack_offset >= confirm_offset and ack_offset >= current_epoch_start:
        return sync_state_set | {slave_id}
    return None


# ---------------------------------------------------------------------------------------------
# The applied set and the proposal in flight


@dataclass(frozen=True)
class SyncStateSetView:
    """The master's local view: the applied set, its epoch, and a proposal in flight (or None).

    Attributes:
        members: the set the controller last accepted (always contains the master).
        epoch: that set's sync-state set epoch.
        proposed: the set sent in an AlterSyncStateSet that has not been answered yet.
    """

    members: frozenset[int]
    epoch: int
    proposed: frozenset[int] | None = None

    @property
    def synchronizing(self) -> bool:
        return self.proposed is not None

    def describe(self) -> str:
        s = f"set{sorted(self.members)}@{self.epoch}"
        return s + (f" proposing{sorted(self.proposed)}" if self.proposed is not None else "")


def effective_set(view: SyncStateSetView) -> frozenset[int]:
    """Members whose acks count: the union of the applied and proposed sets while synchronizing."""
    return view.members | view.proposed if view.proposed is not None else view.members


def in_sync_replicas_nums(view: SyncStateSetView) -> int:
    """Size used for the min-in-sync check: the larger of the applied and proposed sets."""
    return max(len(view.members), len(view.proposed)) if view.proposed is not None else len(view.members)


def propose(view: SyncStateSetView, new_members: frozenset[int]) -> SyncStateSetView | None:
    """Start a proposal (the shell then sends AlterSyncStateSet); None if one is already in flight or no change."""
    if view.proposed is not None or new_members == view.members:
        return None
    return replace(view, proposed=new_members)


def apply_controller_set(view: SyncStateSetView, members: frozenset[int], epoch: int) -> SyncStateSetView:
    """Adopt a set the controller reports (AlterSyncStateSet reply or GetReplicaInfo); only a higher epoch wins.

    A higher epoch replaces the applied set and ends any proposal in flight; an equal or lower epoch is
    stale and changes nothing.
    """
    if epoch <= view.epoch:
        return view
    return SyncStateSetView(frozenset(members), epoch, None)


def abandon_proposal(view: SyncStateSetView) -> SyncStateSetView:
    """The AlterSyncStateSet failed (fenced, timeout): forget the proposal; the applied set is unchanged."""
    return replace(view, proposed=None)
