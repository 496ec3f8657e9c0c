"""Who answers a controller request, and when the leader's scan may run (pure).

The controller shell (``server.py``) and the cluster simulator (``system_under_test/sim``) both route every
client request through :func:`route` and gate the leader's periodic scan with :func:`scan_due`, so the rules
below run the same in a real process and in a simulated one.

Routing rules (RIP-44 controller, KIP-631 soft leases):

1. On the Raft leader, a read (:data:`READ_CODES`) passes a read-index barrier first and is then decided
   against the leader's state (linearizable); any other request is decided and, if it has events, proposed
   and answered after commit (:data:`Route.READ_AFTER_BARRIER`, :data:`Route.DECIDE`).
   A broker heartbeat and a controlled-shutdown request (:data:`VOUCHED_CODES`) are decided after the same
   barrier (:data:`Route.DECIDE_AFTER_BARRIER`): their SUCCESS vouches for the sender's broker epoch and renews
   its lease, and a leader that was deposed without knowing it yet (cut off, its clock slowed or reset) would
   vouch from an old state -- the mutation bench's control run caught one accepting a zombie incarnation's
   heartbeat (docs/broker.md, *Who vouches for a heartbeat*).
2. On a follower, a broker heartbeat is decided all the same -- only to record the lease, so a new leader's
   table is warm -- and then refused with CONTROLLER_NOT_LEADER (:data:`Route.RECORD_THEN_REFUSE`); every
   other request is refused with the leader hint (:data:`Route.REFUSE_NOT_LEADER`).
3. Deliberate bug ``stale-read`` (docs/bugs.md): a follower answers reads from its own, possibly stale,
   memory (:data:`Route.ANSWER_FROM_MEMORY`).

Scan rule: the leader scans every ``scan_interval_ms``, but not within one lease of becoming leader, so every
live broker can reach the new leader before its lease is judged.
"""

from __future__ import annotations

import enum

from system_under_test.protocol.codes import RequestCode

__all__ = ["READ_CODES", "STALE_READ", "VOUCHED_CODES", "Route", "route", "scan_due"]

STALE_READ = "stale-read"

READ_CODES = frozenset({
    RequestCode.CONTROLLER_GET_REPLICA_INFO, RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
    RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, RequestCode.CONTROLLER_GET_BROKER_EPOCHS,
})
"""Requests that change nothing: answered after a read barrier on the leader."""

VOUCHED_CODES = frozenset({RequestCode.BROKER_HEARTBEAT, RequestCode.CONTROLLER_CONTROLLED_SHUTDOWN})
"""Requests whose answer vouches for the sender's registration: decided on the leader after a read barrier."""

_HEARTBEAT = RequestCode.BROKER_HEARTBEAT


class Route(enum.Enum):
    READ_AFTER_BARRIER = "read-after-barrier"
    DECIDE = "decide"
    DECIDE_AFTER_BARRIER = "decide-after-barrier"
    RECORD_THEN_REFUSE = "record-then-refuse"
    REFUSE_NOT_LEADER = "refuse-not-leader"
    ANSWER_FROM_MEMORY = "answer-from-memory"


def route(code: RequestCode, *, is_leader: bool, bugs: frozenset[str] = frozenset()) -> Route:
    """How a controller handles request ``code`` (see the module docstring)."""
    if is_leader:
        if code in READ_CODES:
            return Route.READ_AFTER_BARRIER
        return Route.DECIDE_AFTER_BARRIER if code in VOUCHED_CODES else Route.DECIDE
    if code == _HEARTBEAT:
        return Route.RECORD_THEN_REFUSE
    if code in READ_CODES and STALE_READ in bugs:
        return Route.ANSWER_FROM_MEMORY
    return Route.REFUSE_NOT_LEADER


def scan_due(now_ms: int, leader_since_ms: int | None, lease_timeout_ms: int) -> bool:
    """Whether the leader may scan at ``now_ms``: it leads (``leader_since_ms`` set) and has for a lease."""
    return leader_since_ms is not None and now_ms - leader_since_ms >= lease_timeout_ms
