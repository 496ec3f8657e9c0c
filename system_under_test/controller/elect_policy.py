"""Master election policy (RIP-44 DefaultElectPolicy), as one pure function.

``elect`` picks the new master of a broker set:

1. Try the SyncStateSet; only if nobody there is electable and ``all_replicas`` is given (unclean
   election enabled) try every replica of the set.
2. Among candidates keep the electable ones (``is_alive``).
3. If the old master is electable and no other broker is preferred (or it is the preferred one),
   keep the old master (the caller turns that into MASTER_STILL_EXIST).
4. If a broker is preferred (admin designation): it, if electable, else nobody -- no fallback.
5. Otherwise rank by (master epoch desc, max offset desc, election priority asc, broker id asc)
   and take the first.  The broker id makes the order total, so the result never depends on set
   iteration order (the reference's TreeSet dropped equal candidates and its comparator cast a
   long difference to int; neither happens here).  A candidate without live info ranks last.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from system_under_test.controller.heartbeat import DEFAULT_ELECTION_PRIORITY, LiveInfo


def candidate_rank(broker_id: int, info: LiveInfo | None) -> tuple[int, int, int, int]:
    """Sort key: smaller is better."""
    if info is None:
        return (1, 1, DEFAULT_ELECTION_PRIORITY + 1, broker_id)
    return (-info.master_epoch, -info.max_offset, info.election_priority, broker_id)


def _try_elect(
    candidates: Iterable[int],
    old_master: int | None,
    prefer: int | None,
    is_alive: Callable[[int], bool],
    live_info: Callable[[int], LiveInfo | None],
) -> int | None:
    alive = sorted({c for c in candidates if is_alive(c)})
    if not alive:
        return None
    if old_master is not None and old_master in alive and (prefer is None or prefer == old_master):
        return old_master
    if prefer is not None:
        return prefer if prefer in alive else None
    return min(alive, key=lambda c: candidate_rank(c, live_info(c)))


def elect(
    sync_state_set: Iterable[int],
    all_replicas: Iterable[int] | None,
    old_master: int | None,
    prefer: int | None,
    is_alive: Callable[[int], bool],
    live_info: Callable[[int], LiveInfo | None],
) -> int | None:
    """Return the broker id to be master (possibly ``old_master``) or None if nobody is electable.

    Args:
        sync_state_set: the in-sync replicas (clean candidates).
        all_replicas: every replica of the set if unclean election is enabled, else None.
        old_master: the current master id (None if there is none).
        prefer: a designated broker id (admin-triggered election) or None.
        is_alive: electability predicate (lease alive, registered, unfenced, not shutting down).
        live_info: heartbeat record getter used for ranking.
    """
    result = _try_elect(sync_state_set, old_master, prefer, is_alive, live_info)
    if result is None and all_replicas is not None:
        result = _try_elect(all_replicas, old_master, prefer, is_alive, live_info)
    return result
