"""BrokerHeartbeatManager: per-controller soft state of broker leases (NOT replicated).

Each controller keeps, for every broker that heartbeats it, the time of the last heartbeat, the
lease length it granted, and the broker's replication progress (master epoch of its last epoch
entry, max offset, confirm offset, election priority).  The leader uses it to decide liveness
(KIP-631 sessions: ``alive`` = last heartbeat + lease >= now) and to rank election candidates.

Refresh rule (RIP-44 ``DefaultBrokerHeartbeatManager``): the timestamp, lease and priority are
always refreshed; (master epoch, max offset, confirm offset) are replaced only if the new master
epoch is higher, or equal with a higher max offset -- so a reordered, older heartbeat never makes a
broker look further behind.  Exception: a heartbeat from a different *broker epoch* (a new
incarnation, whose store may have been truncated) replaces everything.

Two things are kept exactly as the last heartbeat said them, for the one rule that needs a lower bound
rather than a ranking (``elect_policy.elect_complete_replica``): ``reported_master_epoch`` /
``reported_max_offset`` (a log truncated by a handshake reports less, and the refreshed pair would not
show it), and the durable-loss claim ``lost_durable_offset`` / ``lost_durable_epoch`` (None unless the
broker's store lost durable records; None again once replication refilled it).

Time is an argument (``now_ms``); nothing here reads a clock.  Keys are ``(broker_name, broker_id)``.

A clock that goes backwards (the controller's process clock reset after running fast -- the clock nemesis does
exactly that) re-bases the table: every entry stamped later than the new reading is taken as heard at the new
reading.  Without it, entries stamped by the fast clock stay in the future and every lease is extended by the size
of the jump: a simulated run whose leader's clock had run 10 s fast, then was reset, failed over a paused master
in 8.2 s instead of 3.  Re-basing is safe: the moment of the new reading is later, in real time, than every
heartbeat the entries record, so no lease ends earlier than one counted from its real heartbeat.  Every method
that takes ``now_ms`` re-bases first (cheaply: only when ``now_ms`` is below the highest reading seen).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

BrokerKey = tuple[str, int]

DEFAULT_ELECTION_PRIORITY = 2**31 - 1


@dataclass(slots=True)  # treat as immutable; not frozen: one per heartbeat (see protocol.Frame)
class HeartbeatInfo:
    """What one heartbeat reports."""

    broker_addr: str = ""
    broker_epoch: int = 0
    master_epoch: int = 0
    max_offset: int = 0
    confirm_offset: int = 0
    election_priority: int = DEFAULT_ELECTION_PRIORITY
    lease_timeout_ms: int = 2000
    lost_durable_offset: int | None = None
    lost_durable_epoch: int | None = None

    def __post_init__(self) -> None:
        if self.lease_timeout_ms <= 0:
            raise ValueError(f"HeartbeatInfo.lease_timeout_ms must be > 0, got {self.lease_timeout_ms}")


@dataclass(slots=True)  # treat as immutable; not frozen: one per heartbeat (see protocol.Frame)
class LiveInfo:
    """The manager's record of one broker (the value of the elect policy's live-info getter)."""

    broker_name: str
    broker_id: int
    broker_addr: str
    broker_epoch: int
    master_epoch: int
    max_offset: int
    confirm_offset: int
    election_priority: int
    lease_timeout_ms: int
    last_update_ms: int
    reported_master_epoch: int = 0
    reported_max_offset: int = 0
    lost_durable_offset: int | None = None
    lost_durable_epoch: int | None = None

    def expires_at_ms(self) -> int:
        return self.last_update_ms + self.lease_timeout_ms

    def describe(self) -> str:
        lost = ("" if self.lost_durable_offset is None else
                f" LOST-DURABLE-TO={self.lost_durable_offset}@epoch{self.lost_durable_epoch}")
        return (
            f"{self.broker_name}/{self.broker_id} addr={self.broker_addr} epoch={self.broker_epoch} "
            f"master_epoch={self.master_epoch} max={self.max_offset} confirm={self.confirm_offset} "
            f"prio={self.election_priority} last={self.last_update_ms} lease={self.lease_timeout_ms}ms{lost}"
        )


class BrokerHeartbeatManager:
    """Lease table of one controller node; see the module docstring."""

    def __init__(self) -> None:
        self._table: dict[BrokerKey, LiveInfo] = {}
        self._latest_ms: int | None = None  # the highest ``now_ms`` seen

    def _rebase(self, now_ms: int) -> None:
        """After the clock went backwards, no entry is later than ``now_ms`` (module docstring)."""
        if self._latest_ms is not None and now_ms < self._latest_ms:
            for key, rec in self._table.items():
                if rec.last_update_ms > now_ms:
                    self._table[key] = dataclasses.replace(rec, last_update_ms=now_ms)
        self._latest_ms = now_ms

    def on_heartbeat(self, key: BrokerKey, info: HeartbeatInfo, now_ms: int) -> LiveInfo:
        """Record a heartbeat (or a registration) from ``key`` at ``now_ms``; returns the new record."""
        self._rebase(now_ms)
        old = self._table.get(key)
        progress_from = info
        if old is not None and old.broker_epoch == info.broker_epoch:
            newer = info.master_epoch > old.master_epoch or (
                info.master_epoch == old.master_epoch and info.max_offset > old.max_offset
            )
            if not newer:
                progress_from = HeartbeatInfo(
                    master_epoch=old.master_epoch, max_offset=old.max_offset, confirm_offset=old.confirm_offset
                )
        last = now_ms  # no entry is later than now_ms after _rebase
        rec = LiveInfo(
            broker_name=key[0],
            broker_id=key[1],
            broker_addr=info.broker_addr or (old.broker_addr if old else ""),
            broker_epoch=info.broker_epoch,
            master_epoch=progress_from.master_epoch,
            max_offset=progress_from.max_offset,
            confirm_offset=progress_from.confirm_offset,
            election_priority=info.election_priority,
            lease_timeout_ms=info.lease_timeout_ms,
            last_update_ms=last,
            reported_master_epoch=info.master_epoch,
            reported_max_offset=info.max_offset,
            lost_durable_offset=info.lost_durable_offset,
            lost_durable_epoch=info.lost_durable_epoch,
        )
        self._table[key] = rec
        return rec

    def touch(self, key: BrokerKey, lease_timeout_ms: int, now_ms: int, *, broker_addr: str = "") -> LiveInfo:
        """Renew the lease of ``key`` without changing its progress info (e.g. on registration)."""
        self._rebase(now_ms)
        old = self._table.get(key)
        if old is None:
            rec = LiveInfo(key[0], key[1], broker_addr, 0, 0, 0, 0, DEFAULT_ELECTION_PRIORITY, lease_timeout_ms, now_ms)
        else:
            rec = dataclasses.replace(old, broker_addr=broker_addr or old.broker_addr,
                                      lease_timeout_ms=lease_timeout_ms, last_update_ms=now_ms)
        self._table[key] = rec
        return rec

    def is_alive(self, key: BrokerKey, now_ms: int) -> bool:
        """True iff ``key`` heartbeat within its lease: last + lease >= now."""
        self._rebase(now_ms)
        rec = self._table.get(key)
        return rec is not None and rec.expires_at_ms() >= now_ms

    def live_info(self, key: BrokerKey) -> LiveInfo | None:
        """The last record of ``key`` (alive or not), or None if it never heartbeat this controller."""
        return self._table.get(key)

    def expired(self, now_ms: int) -> list[BrokerKey]:
        """Keys whose lease has run out at ``now_ms``, oldest expiry first (ties by key).

        Entries are kept until :meth:`remove`, so a dead broker stays listed (KIP-631: fencing is
        decided from this list, and the fenced flag -- not this table -- records that it happened).
        """
        self._rebase(now_ms)
        dead = [(r.expires_at_ms(), k) for k, r in self._table.items() if r.expires_at_ms() < now_ms]
        return [k for _, k in sorted(dead)]

    def next_expiry_ms(self, now_ms: int) -> int | None:
        """When the earliest live lease runs out (Kafka ``nextCheckTimeNs``); None if none is live."""
        self._rebase(now_ms)
        live = [r.expires_at_ms() for r in self._table.values() if r.expires_at_ms() >= now_ms]
        return min(live, default=None)

    def remove(self, key: BrokerKey) -> None:
        """Forget ``key`` (its channel closed, or its metadata was cleaned)."""
        self._table.pop(key, None)

    def reset_sessions(self, keys: Iterable[BrokerKey], lease_timeout_ms: int, now_ms: int) -> None:
        """Restart the session clock of each registered broker that has no live lease here.

        Call when this controller becomes leader: its table may be cold (KIP-631 rebuilds the
        heartbeat state on activation), and fencing every broker at once would be wrong.  Known
        progress info is kept; a dead broker is fenced one lease later than it would have been.
        """
        self._rebase(now_ms)
        for key in keys:
            old = self._table.get(key)
            if old is None:
                self._table[key] = LiveInfo(key[0], key[1], "", 0, 0, 0, 0, DEFAULT_ELECTION_PRIORITY,
                                            lease_timeout_ms, now_ms)
            elif old.expires_at_ms() < now_ms:
                self._table[key] = dataclasses.replace(old, last_update_ms=now_ms, lease_timeout_ms=lease_timeout_ms)

    def keys(self) -> list[BrokerKey]:
        return sorted(self._table)

    def describe(self, now_ms: int) -> str:
        lines = [f"heartbeats @{now_ms}ms"]
        for key in sorted(self._table):
            rec = self._table[key]
            lines.append(f"  {'alive' if rec.expires_at_ms() >= now_ms else 'DEAD '} {rec.describe()}")
        return "\n".join(lines)
