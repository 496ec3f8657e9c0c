"""A broker's controlled shutdown (KIP-631) as a pure core: when the process may close its store and exit.

Why a core.  Two shells run the same shutdown: the real broker (``broker/lifecycle.py``, on SIGTERM or
ADMIN_SHUTDOWN) and the simulated one (``system_under_test/sim/broker.py``, on the membership workload's
``leave``).  Both ask this module what a begun shutdown, a heartbeat reply and an expired wait mean, so the
simulation plays the shutdown the real broker runs and a change to the rule changes both.

The sequence.  Once a shutdown has begun (:attr:`Shutdown.shutting_down`) the broker refuses writes
(NOT_MASTER), does not ask to be elected, and every heartbeat carries ``want_shutdown``.  The controller marks
the registration as in controlled shutdown -- never electable again -- and moves mastership away if the broker
held it (``controller/membership.py``).  A heartbeat reply with ``should_shutdown`` (the broker is no longer the
master) lets the broker close: :attr:`Shutdown.may_close`.  A broker that never registered has no mastership to
hand over and closes at once; one whose controller has not confirmed within :data:`SHUTDOWN_WAIT_MS` (the shell's
timer) closes anyway, as a crash would leave it -- the lease then runs out and the scan re-elects.

Pure: no clock (the shell's timer says when the wait ran out), no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["SHUTDOWN_WAIT_MS", "Shutdown", "ShutdownPhase", "begin_shutdown", "shutdown_reply", "shutdown_timed_out"]

SHUTDOWN_WAIT_MS = 15_000
"""How long a shutting-down broker waits for the controller's ``should_shutdown`` before closing anyway."""


class ShutdownPhase(enum.Enum):
    RUNNING = "running"  # no shutdown asked for
    WAITING = "waiting"  # asked: heartbeats carry want_shutdown until the controller confirms
    CLOSING = "closing"  # close the store cleanly and exit


@dataclass(frozen=True, slots=True)
class Shutdown:
    """Where a broker process is in its controlled shutdown; ``reason`` says why it may close (for the log)."""

    phase: ShutdownPhase = ShutdownPhase.RUNNING
    reason: str = ""

    @property
    def shutting_down(self) -> bool:
        """Refuse writes, ask for no election, heartbeat with ``want_shutdown``."""
        return self.phase is not ShutdownPhase.RUNNING

    @property
    def may_close(self) -> bool:
        """Close the store cleanly and exit now."""
        return self.phase is ShutdownPhase.CLOSING


def begin_shutdown(s: Shutdown, *, registered: bool) -> Shutdown:
    """SIGTERM or ADMIN_SHUTDOWN.  A second request changes nothing; an unregistered broker (no broker id yet)
    may close at once -- the controller holds no mastership of it to move."""
    if s.shutting_down:
        return s
    if not registered:
        return Shutdown(ShutdownPhase.CLOSING, "not registered: no mastership to hand over")
    return Shutdown(ShutdownPhase.WAITING)


def shutdown_reply(s: Shutdown, header: Mapping[str, Any]) -> Shutdown:
    """A heartbeat reply for the broker's current broker epoch: ``should_shutdown`` confirms the shutdown (the
    controller recorded it and the broker is not the master).  Before a shutdown began, or without the flag, it
    changes nothing."""
    if s.phase is ShutdownPhase.WAITING and header.get("should_shutdown"):
        return replace(s, phase=ShutdownPhase.CLOSING, reason="the controller confirmed: mastership moved away")
    return s


def shutdown_timed_out(s: Shutdown) -> Shutdown:
    """The shell's :data:`SHUTDOWN_WAIT_MS` timer ran out: a waiting broker closes anyway."""
    if s.phase is ShutdownPhase.WAITING:
        return replace(s, phase=ShutdownPhase.CLOSING,
                       reason=f"the controller did not confirm within {SHUTDOWN_WAIT_MS} ms; closing anyway")
    return s
