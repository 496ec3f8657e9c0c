"""HA connection states (READY, HANDSHAKE, TRANSFER, SUSPEND, SHUTDOWN) as one transition table (pure).

A replication *connection* links a slave to its master.  Both ends walk the same states:

* READY      -- not connected, or connected and not yet handshaking; the slave truncates incomplete
               tail records here before it connects.
* HANDSHAKE  -- the slave sent (broker id, async-learner flag, ...) and waits for the master's epoch
               entries; it then truncates its log to the consistent point.
* TRANSFER   -- the master streams batches (each inside one epoch) and the slave acks its max offset.
* SUSPEND    -- transfer paused during a role change; only resume (back to READY) or shutdown leave it.
* SHUTDOWN   -- terminal.

Rules of this file: all transition logic is in :data:`CONNECTION_TRANSITIONS`; a pair not in the table
raises :class:`IllegalConnectionTransition` naming the state and the event, and returns nothing new.
"""

from __future__ import annotations

import enum


class ConnState(enum.Enum):
    READY = "READY"
    HANDSHAKE = "HANDSHAKE"
    TRANSFER = "TRANSFER"
    SUSPEND = "SUSPEND"
    SHUTDOWN = "SHUTDOWN"


class ConnEvent(enum.Enum):
    CONNECTED = "connected"  # TCP connection established, handshake sent/received
    HANDSHAKE_DONE = "handshake_done"  # epochs exchanged and the slave truncated to the consistent point
    NO_CONSISTENT_POINT = "no_consistent_point"  # the epoch caches share no (epoch, start offset)
    OFFSET_MISMATCH = "offset_mismatch"  # a batch did not start at the slave's max offset
    DISCONNECTED = "disconnected"  # socket closed or errored
    IDLE_TIMEOUT = "idle_timeout"  # nothing read for ha_housekeeping_interval_ms
    SUSPEND = "suspend"  # role change in progress
    RESUME = "resume"
    SHUTDOWN = "shutdown"


S, V = ConnState, ConnEvent

CONNECTION_TRANSITIONS: dict[tuple[ConnState, ConnEvent], ConnState] = {
    (S.READY, V.CONNECTED): S.HANDSHAKE,
    (S.READY, V.DISCONNECTED): S.READY,
    (S.READY, V.SUSPEND): S.SUSPEND,
    (S.READY, V.SHUTDOWN): S.SHUTDOWN,
    (S.HANDSHAKE, V.HANDSHAKE_DONE): S.TRANSFER,
    (S.HANDSHAKE, V.NO_CONSISTENT_POINT): S.READY,
    (S.HANDSHAKE, V.DISCONNECTED): S.READY,
    (S.HANDSHAKE, V.IDLE_TIMEOUT): S.READY,
    (S.HANDSHAKE, V.SUSPEND): S.SUSPEND,
    (S.HANDSHAKE, V.SHUTDOWN): S.SHUTDOWN,
    (S.TRANSFER, V.OFFSET_MISMATCH): S.READY,
    (S.TRANSFER, V.DISCONNECTED): S.READY,
    (S.TRANSFER, V.IDLE_TIMEOUT): S.READY,
    (S.TRANSFER, V.SUSPEND): S.SUSPEND,
    (S.TRANSFER, V.SHUTDOWN): S.SHUTDOWN,
    (S.SUSPEND, V.RESUME): S.READY,
    (S.SUSPEND, V.DISCONNECTED): S.SUSPEND,
    (S.SUSPEND, V.SHUTDOWN): S.SHUTDOWN,
}


class IllegalConnectionTransition(Exception):
    """(state, event) is not in the connection table.  Seeing one is a bug in the HA shell."""

    def __init__(self, role: str, state: ConnState, event: ConnEvent) -> None:
        self.role, self.state, self.event = role, state, event
        super().__init__(
            f"HA connection ({role}): illegal transition from state {state.value} on event {event.value}; "
            f"state unchanged"
        )


def next_conn_state(state: ConnState, event: ConnEvent, *, role: str = "slave") -> ConnState:
    """The state after ``event``.

    Raises:
        IllegalConnectionTransition: the pair is not in :data:`CONNECTION_TRANSITIONS`.
    """
    try:
        return CONNECTION_TRANSITIONS[(state, event)]
    except KeyError:
        raise IllegalConnectionTransition(role, state, event) from None


def describe_connection_table() -> list[str]:
    """One line per transition (for docs and golden tests)."""
    return [f"{src.value} --{ev.value}--> {dst.value}" for (src, ev), dst in CONNECTION_TRANSITIONS.items()]
