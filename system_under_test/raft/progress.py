"""Follower progress as seen by the leader: the probe / replicate / snapshot state machine.

Words (etcd-raft ``tracker/``):

* **match** -- highest index known to be replicated on the follower.
* **next** -- index of the next entry to send.
* **probe** -- the leader does not know where the follower's log diverges; it sends one APPEND
  at a time (``probe_sent`` pauses further sends until a response or a heartbeat response).
* **replicate** -- steady state; the leader streams APPENDs optimistically (``next`` jumps past
  what was sent) with at most ``max_inflight`` unacknowledged messages (the *inflight* window).
* **snapshot** -- the follower needs entries the leader compacted; the leader sent a SNAPSHOT
  and sends nothing else until the follower acknowledges an index >= ``pending_snapshot`` or
  the attempt times out (``snapshot_elapsed`` reaches an election timeout).

Rules of this file: every state change goes through :data:`TRANSITIONS` (one table keyed by
``(state, event)``, STYLE.md rule 6); an illegal transition raises :class:`IllegalTransition`
naming the follower, the state and the event, and leaves the progress unchanged.
"""

from __future__ import annotations

import enum
from collections import deque

__all__ = ["TRANSITIONS", "IllegalTransition", "Progress", "ProgressEvent", "ProgressState", "transition_diagram"]


class ProgressState(enum.Enum):
    PROBE = "probe"
    REPLICATE = "replicate"
    SNAPSHOT = "snapshot"


class ProgressEvent(enum.Enum):
    ACKED = "acked"  # an APPEND_RESP raised match
    REJECTED = "rejected"  # an APPEND_RESP rejection moved next back
    NEED_SNAPSHOT = "need-snapshot"  # next-1 is compacted on the leader
    SNAPSHOT_CAUGHT_UP = "snapshot-caught-up"  # follower acked an index >= pending_snapshot
    SNAPSHOT_ABORTED = "snapshot-aborted"  # no ack within an election timeout (message lost)
    RESET = "reset"  # a new leader term starts: probe from last_index + 1


P, R, S = ProgressState.PROBE, ProgressState.REPLICATE, ProgressState.SNAPSHOT
E = ProgressEvent

TRANSITIONS: dict[tuple[ProgressState, ProgressEvent], ProgressState] = {
    (P, E.ACKED): R,
    (R, E.ACKED): R,
    (P, E.REJECTED): P,
    (R, E.REJECTED): P,
    (P, E.NEED_SNAPSHOT): S,
    (R, E.NEED_SNAPSHOT): S,
    (S, E.SNAPSHOT_CAUGHT_UP): P,
    (S, E.SNAPSHOT_ABORTED): P,
    (P, E.RESET): P,
    (R, E.RESET): P,
    (S, E.RESET): P,
}


def transition_diagram() -> str:
    """A Mermaid state diagram generated from :data:`TRANSITIONS` (for docs; never drawn by hand)."""
    lines = ["stateDiagram-v2", "    [*] --> probe"]
    for (src, event), dst in TRANSITIONS.items():
        lines.append(f"    {src.value} --> {dst.value}: {event.value}")
    return "\n".join(lines)


class IllegalTransition(RuntimeError):
    """A progress event that the table does not allow in the current state (a bug in the leader)."""


class Progress:
    """The leader's view of one follower (mutable; owned by :class:`~.core.RaftCore`)."""

    __slots__ = ("inflight", "match", "max_inflight", "next", "node_id", "pending_snapshot", "probe_sent",
                 "recent_active", "snapshot_elapsed", "state")

    def __init__(self, node_id: str, *, next_index: int, max_inflight: int) -> None:
        self.node_id = node_id
        self.match = 0
        self.next = next_index
        self.state = ProgressState.PROBE
        self.probe_sent = False
        self.inflight: deque[int] = deque()  # last index of each unacked APPEND (replicate state)
        self.max_inflight = max_inflight
        self.pending_snapshot = 0
        self.snapshot_elapsed = 0
        self.recent_active = False

    def fire(self, event: ProgressEvent) -> ProgressState:
        """Apply ``event`` through :data:`TRANSITIONS` and do the entry actions of the new state."""
        new = TRANSITIONS.get((self.state, event))
        if new is None:
            raise IllegalTransition(
                f"progress of {self.node_id}: event {event.value} is not allowed in state {self.state.value} "
                f"(match={self.match} next={self.next}); allowed here: "
                f"{sorted(e.value for (s, e) in TRANSITIONS if s is self.state)}"
            )
        old = self.state
        self.state = new
        self.probe_sent = False
        if new is not ProgressState.REPLICATE or old is not ProgressState.REPLICATE:
            self.inflight.clear()
        if new is ProgressState.PROBE:
            if old is ProgressState.SNAPSHOT:
                self.next = max(self.match + 1, self.pending_snapshot + 1)
            else:
                self.next = self.match + 1
            self.pending_snapshot = 0
        elif new is ProgressState.REPLICATE and old is not ProgressState.REPLICATE:
            self.next = self.match + 1
        return new

    def become_snapshot(self, snapshot_index: int) -> None:
        self.fire(ProgressEvent.NEED_SNAPSHOT)
        self.pending_snapshot = snapshot_index
        self.snapshot_elapsed = 0

    def maybe_update(self, index: int) -> bool:
        """Record an ack of ``index``; False if it was stale (match already >= index)."""
        updated = index > self.match
        if updated:
            self.match = index
            self.probe_sent = False
        self.next = max(self.next, index + 1)
        return updated

    def maybe_decrease_to(self, rejected: int, match_hint: int) -> bool:
        """Handle a rejection of the APPEND at ``rejected``; False if the rejection is stale."""
        if self.state is ProgressState.REPLICATE:
            return rejected > self.match  # if True the caller fires REJECTED: probe from match + 1
        if self.state is ProgressState.SNAPSHOT or self.next - 1 != rejected:
            return False
        self.next = max(min(rejected, match_hint + 1), self.match + 1)
        self.probe_sent = False
        return True

    def sent_entries(self, last_sent: int, n_entries: int) -> None:
        """Bookkeeping after an APPEND carrying ``n_entries`` ending at ``last_sent`` went out."""
        if self.state is ProgressState.REPLICATE:
            if n_entries:
                self.next = last_sent + 1
                self.inflight.append(last_sent)
        elif self.state is ProgressState.PROBE:
            self.probe_sent = True

    def free_inflight_to(self, index: int) -> None:
        while self.inflight and self.inflight[0] <= index:
            self.inflight.popleft()

    def is_paused(self) -> bool:
        if self.state is ProgressState.PROBE:
            return self.probe_sent
        if self.state is ProgressState.REPLICATE:
            return len(self.inflight) >= self.max_inflight
        return True

    def describe(self) -> str:
        extra = f" pending_snapshot={self.pending_snapshot}" if self.state is ProgressState.SNAPSHOT else ""
        paused = " paused" if self.is_paused() else ""
        return (f"{self.node_id}: {self.state.value} match={self.match} next={self.next} "
                f"inflight={len(self.inflight)}{extra}{paused}")

    def abort_snapshot(self) -> None:
        """The SNAPSHOT went unacknowledged for an election timeout: probe again from match + 1."""
        self.pending_snapshot = 0
        self.fire(ProgressEvent.SNAPSHOT_ABORTED)
