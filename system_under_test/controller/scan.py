"""The leader's periodic work, as a pure function: fence expired leases, re-elect dead masters.

``scan(state, heartbeats, config, now_ms)`` returns the events the leader should propose (one Raft
entry); the server calls it every ``scan_interval_ms`` while it leads (after a one-lease grace
following a leadership change, so live brokers can reach the new leader first).

1. **Fencing (KIP-631).**  Every registered, unfenced broker whose lease expired gets a
   FenceBroker record for its current broker epoch.  Fencing is replicated, so a new leader knows
   who is fenced.
2. **Re-election (RIP-44 ``scanNeedReelectBrokerSets``).**  For every set whose master is not
   electable any more (lease expired, fenced, or in controlled shutdown) while at least one member
   of the set is alive: a controller-triggered ElectMaster -- the policy's pick, or
   ``new_master_elected=False`` (clearing the master) if nobody is electable.  A set whose master was
   cleared gets a new master as soon as a SyncStateSet member is electable again -- or, when a member's
   store lost durable records, as soon as a replica is electable whose log provably holds everything
   acknowledged (``elect_policy.elect_complete_replica``; docs/broker.md, Lost durable records).

Deliberate bug ``slow-failover`` (``bugs``; for testing the tester, docs/bugs.md): a master whose lease ran out
is fenced as usual, but re-elected only once its last heartbeat is :data:`SLOW_FAILOVER_LEASES` leases old
instead of one.  Nothing unsafe happens -- the fenced master takes no writes and the election is the same --
only the broker set has no serving master for five leases longer.

Events computed in one scan are consistent with each other: the elections treat brokers fenced
in the same scan as not electable.  Duplicate proposals from overlapping scans are harmless: the
state machine rejects an ElectMaster computed on an old master epoch and a Fence for an old epoch
is rejected or a no-op.
"""

from __future__ import annotations

from system_under_test.controller.config import ControllerConfig
from system_under_test.controller.elect_policy import elect, elect_complete_replica
from system_under_test.controller.events import ElectMaster, Event, FenceBroker
from system_under_test.controller.heartbeat import BrokerHeartbeatManager, LiveInfo
from system_under_test.controller.queries import electable
from system_under_test.controller.state_machine import BrokerSet, ControllerState

SLOW_FAILOVER = "slow-failover"
SLOW_FAILOVER_LEASES = 6  # the bug re-elects a dead master after this many leases instead of one


def _fence_events(bs: BrokerSet, heartbeats: BrokerHeartbeatManager, now_ms: int) -> list[Event]:
    out: list[Event] = []
    for b in bs.brokers:
        reg = b.registration
        if reg is not None and not reg.fenced and not heartbeats.is_alive((bs.broker_name, b.broker_id), now_ms):
            out.append(FenceBroker(bs.cluster_name, bs.broker_name, b.broker_id, reg.broker_epoch))
    return out


def _waits_for_slow_failover(bs: BrokerSet, heartbeats: BrokerHeartbeatManager, now_ms: int) -> bool:
    """Bug ``slow-failover``: the dead master's last heartbeat is not yet SLOW_FAILOVER_LEASES leases old."""
    assert bs.master_id is not None
    live = heartbeats.live_info((bs.broker_name, bs.master_id))
    if live is None or heartbeats.is_alive((bs.broker_name, bs.master_id), now_ms):
        return False  # not dead by its lease (fenced, shutting down, unknown here): not what the bug delays
    return now_ms < live.last_update_ms + SLOW_FAILOVER_LEASES * live.lease_timeout_ms


def _elect_event(bs: BrokerSet, heartbeats: BrokerHeartbeatManager, config: ControllerConfig,
                 now_ms: int, bugs: frozenset[str] = frozenset()) -> Event | None:
    def can_lead(i: int) -> bool:
        return electable(bs, i, heartbeats, now_ms)

    if bs.master_id is not None and can_lead(bs.master_id):
        return None
    if SLOW_FAILOVER in bugs and bs.master_id is not None and _waits_for_slow_failover(bs, heartbeats, now_ms):
        return None
    if bs.master_id is None and bs.is_first_election():
        return None  # never had a master: the first broker to ask gets it (requests._elect_master)
    if not any(heartbeats.is_alive((bs.broker_name, i), now_ms) for i in bs.broker_ids()):
        return None  # everyone is gone: keep the record of the last master until someone returns
    everyone = bs.broker_ids() if config.enable_elect_unclean_master else None

    def live(i: int) -> LiveInfo | None:
        return heartbeats.live_info((bs.broker_name, i))

    new = elect(bs.sync_state_set, everyone, None, None, can_lead, live, now_ms)
    if new is None:
        new = elect_complete_replica(bs.sync_state_set, bs.broker_ids(), can_lead, live)
    if new is None and bs.master_id is None:
        return None  # already cleared; wait for an electable member
    return ElectMaster(bs.cluster_name, bs.broker_name, new is not None, new, bs.master_epoch,
                       bs.sync_state_set_epoch)


def scan(state: ControllerState, heartbeats: BrokerHeartbeatManager, config: ControllerConfig,
         now_ms: int, *, bugs: frozenset[str] = frozenset()) -> list[Event]:
    """Events the leader should propose now: fences first, then elections (set name order).  ``bugs``: the
    node's deliberate bugs (only ``slow-failover`` changes the scan)."""
    events: list[Event] = []
    for bs in state.broker_sets():
        events.extend(_fence_events(bs, heartbeats, now_ms))
        elect_event = _elect_event(bs, heartbeats, config, now_ms, bugs)
        if elect_event is not None:
            events.append(elect_event)
    return events


def describe_scan(events: list[Event]) -> str:
    return "scan: " + ("; ".join(e.describe() for e in events) if events else "nothing to do")
