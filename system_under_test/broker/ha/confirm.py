"""Confirm offset and put-ack rules of the master (pure).

Vocabulary (seed RIP-44, reference 2.4): the *confirm offset* is the largest log offset that every
member of the sync-state set holds; consumers never see records at or beyond it, and a new master
elected from the set is guaranteed to hold everything below it.

Rules:

* :func:`compute_confirm_offset` = min(master max offset, acks of the set members other than the
  master).  If any such member is disconnected (or connected but has not acked yet), the previous
  value is kept (rocketmq#6662): its position is unknown, so the confirm offset must not move past it.
  (The reference skips members whose ack is still 0; we treat them like a disconnected member, so
  the confirm offset never passes a member that has not acked.)  The result never exceeds the
  master max offset.
* With ``all_ack_in_sync_state_set=False`` or a set of only the master, the reference reports the
  master max offset itself; the caller chooses with the flag.
* :func:`ack_satisfied` decides when a put may be answered; :func:`check_min_in_sync` refuses a put
  up front with IN_SYNC_REPLICAS_NOT_ENOUGH.
"""

from __future__ import annotations

from collections.abc import Mapping

from system_under_test.protocol.codes import ResponseCode


class ConfirmError(ValueError):
    """Inputs that break a confirm-offset invariant (names the values)."""


def compute_confirm_offset(
    master_max_offset: int,
    sync_state_set: frozenset[int],
    self_id: int,
    acks: Mapping[int, int],
    previous: int,
    *,
    all_ack_in_sync_state_set: bool = True,
) -> int:
    """The master's confirm offset.

    Args:
        master_max_offset: end of the master's log.
        sync_state_set: the effective set (union while synchronizing); must contain ``self_id``.
        self_id: the master's broker id.
        acks: last acked max offset of each *connected* slave (a member missing here is disconnected;
            a negative value means connected but not yet acked).
        previous: the confirm offset computed last time.
        all_ack_in_sync_state_set: False -> the reference's mode where the master max is reported.

    Raises:
        ConfirmError: the set does not contain the master, or offsets are negative.
    """
    if self_id not in sync_state_set:
        raise ConfirmError(f"sync-state set {sorted(sync_state_set)} must contain the master {self_id}")
    if master_max_offset < 0 or previous < 0:
        raise ConfirmError(f"offsets must be >= 0, got master_max={master_max_offset} previous={previous}")
    others = sync_state_set - {self_id}
    if not others or not all_ack_in_sync_state_set:
        return master_max_offset
    confirm = master_max_offset
    for member in others:
        ack = acks.get(member)
        if ack is None or ack < 0:
            return min(previous, master_max_offset)
        confirm = min(confirm, ack)
    return confirm


def check_min_in_sync(in_sync_replicas_nums: int, min_in_sync_replicas: int) -> ResponseCode | None:
    """IN_SYNC_REPLICAS_NOT_ENOUGH if the set is smaller than ``min_in_sync_replicas``, else None."""
    if min_in_sync_replicas < 1:
        raise ConfirmError(f"min_in_sync_replicas must be >= 1, got {min_in_sync_replicas}")
    if in_sync_replicas_nums < min_in_sync_replicas:
        return ResponseCode.IN_SYNC_REPLICAS_NOT_ENOUGH
    return None


def ack_satisfied(
    request_end_offset: int,
    sync_state_set: frozenset[int],
    self_id: int,
    acks: Mapping[int, int],
    *,
    all_ack_in_sync_state_set: bool,
    in_sync_replicas: int = 1,
) -> bool:
    """True once a put ending at ``request_end_offset`` may be acknowledged to the producer.

    ``all_ack_in_sync_state_set``: every member of the (effective) set other than the master must have
    acked >= the end offset; a disconnected member blocks until the shell's timeout (FLUSH_SLAVE_TIMEOUT);
    a set of only the master is satisfied at once.  Otherwise ``in_sync_replicas`` copies are needed,
    counting the master itself and connected set members that acked far enough.
    """
    others = sync_state_set - {self_id}
    if all_ack_in_sync_state_set:
        return all(acks.get(m, -1) >= request_end_offset for m in others)
    if in_sync_replicas < 1:
        raise ConfirmError(f"in_sync_replicas must be >= 1, got {in_sync_replicas}")
    copies = 1 + sum(1 for m in others if acks.get(m, -1) >= request_end_offset)
    return copies >= in_sync_replicas
