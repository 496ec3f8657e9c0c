"""Master election policy (RIP-44 DefaultElectPolicy), as one pure function.

``elect`` picks the new master of a broker set:

1. Try the SyncStateSet; only if nobody there is electable and ``all_replicas`` is given (unclean
   election enabled) try every replica of the set.
2. Among candidates keep the electable ones (``is_alive``).
3. If the old master is electable and no other broker is preferred (or it is the preferred one),
   keep the old master (the caller turns that into MASTER_STILL_EXIST).
4. If a broker is preferred (admin designation): it, if electable, else nobody -- no fallback.
5. Otherwise rank by (heard recently first, master epoch desc, max offset desc, election priority asc,
   broker id asc) and take the first.  The broker id makes the order total, so the result never
   depends on set iteration order (the reference's TreeSet dropped equal candidates and its
   comparator cast a long difference to int; neither happens here).  A candidate without live info
   ranks last.

*Heard recently* (given the controller's ``now_ms``): the candidate's last heartbeat is at most half
its lease old.  Not in RIP-44.  Why it comes first: a partition that cuts the master and one in-sync
slave off the controller quorum at the same moment leaves both leases running out together; the
master's runs out first, the scan elects the slave whose lease is still nominally alive, the
election makes the SyncStateSet just that slave, and half a second later its lease runs out too.
Then no member of the set is electable, and the slave that did reach the quorum all along is not
in the set: the broker set has no master until the partition heals (seen in a nightly
queue x partition run: a `bridge` left the set without a master for 9 s against a bound of 8).
Every SyncStateSet member holds every acknowledged record when acks wait for the whole set (the
safe setting), so preferring a member that is demonstrably reachable loses nothing; under
min-in-sync acks (not a safe setting) a more complete but silent member may lose to it.

``elect_complete_replica`` is the one way past the SyncStateSet under clean election, for the case the
SyncStateSet cannot serve because a member's store lost durable records (docs/broker.md, Lost durable
records): it picks a replica whose log provably holds everything acknowledged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from system_under_test.controller.heartbeat import DEFAULT_ELECTION_PRIORITY, LiveInfo


def heard_recently(info: LiveInfo, now_ms: int) -> bool:
    """The broker's last heartbeat is at most half its lease old (see the module docstring)."""
    return now_ms - info.last_update_ms <= info.lease_timeout_ms // 2


def candidate_rank(broker_id: int, info: LiveInfo | None, now_ms: int | None = None) -> tuple[int, int, int, int, int]:
    """Sort key: smaller is better.  Without ``now_ms`` every candidate counts as heard recently."""
    if info is None:
        return (1, 1, 1, DEFAULT_ELECTION_PRIORITY + 1, broker_id)
    silent = 0 if now_ms is None or heard_recently(info, now_ms) else 1
    return (silent, -info.master_epoch, -info.max_offset, info.election_priority, broker_id)


def _try_elect(
    candidates: Iterable[int],
    old_master: int | None,
    prefer: int | None,
    is_alive: Callable[[int], bool],
    live_info: Callable[[int], LiveInfo | None],
    now_ms: int | None,
) -> int | None:
    alive = sorted({c for c in candidates if is_alive(c)})
    if not alive:
        return None
    if old_master is not None and old_master in alive and (prefer is None or prefer == old_master):
        return old_master
    if prefer is not None:
        return prefer if prefer in alive else None
    return min(alive, key=lambda c: candidate_rank(c, live_info(c), now_ms))


def elect(
    sync_state_set: Iterable[int],
    all_replicas: Iterable[int] | None,
    old_master: int | None,
    prefer: int | None,
    is_alive: Callable[[int], bool],
    live_info: Callable[[int], LiveInfo | None],
    now_ms: int | None = None,
) -> int | None:
    """Return the broker id to be master (possibly ``old_master``) or None if nobody is electable.

    Args:
        sync_state_set: the in-sync replicas (clean candidates).
        all_replicas: every replica of the set if unclean election is enabled, else None.
        old_master: the current master id (None if there is none).
        prefer: a designated broker id (admin-triggered election) or None.
        is_alive: electability predicate (lease alive, registered, unfenced, not shutting down).
        live_info: heartbeat record getter used for ranking.
        now_ms: the controller's clock, to rank candidates heard recently first; None ranks without it.
    """
    result = _try_elect(sync_state_set, old_master, prefer, is_alive, live_info, now_ms)
    if result is None and all_replicas is not None:
        result = _try_elect(all_replicas, old_master, prefer, is_alive, live_info, now_ms)
    return result


def _claims(sync_state_set: Iterable[int], live_info: Callable[[int], LiveInfo | None]) -> list[tuple[int, int]]:
    out = []
    for member in sorted(set(sync_state_set)):
        info = live_info(member)
        if info is not None and info.lost_durable_offset is not None and info.lost_durable_epoch is not None:
            out.append((info.lost_durable_offset, info.lost_durable_epoch))
    return out


def holds_claim(info: LiveInfo | None, durable_offset: int, epoch: int) -> bool:
    """Does the replica of ``info`` hold a copy of a log that was durable up to ``durable_offset`` in ``epoch``?

    Its last epoch must be ``epoch`` and its log must reach ``durable_offset`` -- by the ranked pair and by the
    last heartbeat alike (the ranked pair never goes down, a truncated log does) -- and it must not have lost
    durable records itself.
    """
    if info is None or info.lost_durable_offset is not None:
        return False
    return (info.master_epoch == epoch and info.reported_master_epoch == epoch
            and min(info.max_offset, info.reported_max_offset) >= durable_offset)


def elect_complete_replica(
    sync_state_set: Iterable[int],
    replicas: Iterable[int],
    is_alive: Callable[[int], bool],
    live_info: Callable[[int], LiveInfo | None],
) -> int | None:
    """A replica that provably holds everything acknowledged, for a SyncStateSet none of whose members is
    electable; None if there is none.  Call it only after :func:`elect` found nobody.

    Why it is safe.  Every SyncStateSet member holds every acknowledged record (a send is acknowledged once
    every member has appended and fsynced it, and a slave joins only once it reached the confirm offset), so a
    member whose store lost durable records and reports, in a heartbeat of its current incarnation, the offset
    ``D`` its log had been durable up to and the master epoch ``E`` of that last durable record, bounds what was
    acknowledged: every acknowledged record lies below ``D`` (a broker publishes its synced offset before it
    acknowledges, and ``D`` is the larger of that and its checkpoint's).  Epoch ``E`` had one master, the only
    writer of its records, and every replica's log is a prefix-consistent copy of the master it followed
    (a handshake truncates a slave to the consistent point before it appends), so a replica whose last epoch is
    ``E`` and whose log reaches ``D`` holds the member's whole durable log below ``D``: everything
    acknowledged.  Electing it loses nothing; the damaged member then refills from it.

    Args:
        sync_state_set: the broker set's SyncStateSet (where the claims come from).
        replicas: every replica of the set (the candidates; members with a claim never qualify).
        is_alive: electability predicate (lease alive, registered, unfenced, not shutting down).
        live_info: heartbeat record getter (claims, last epochs, max offsets, ranking).

    Returns:
        The best ranked candidate that holds every claim (all claims, when several members report one), or
        None when no member reports a claim with its epoch, or nobody holds it.
    """
    claims = _claims(sync_state_set, live_info)
    if not claims:
        return None
    complete = [c for c in sorted(set(replicas)) if is_alive(c)
                and all(holds_claim(live_info(c), offset, epoch) for offset, epoch in claims)]
    return min(complete, key=lambda c: candidate_rank(c, live_info(c)), default=None)
