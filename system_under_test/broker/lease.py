"""The broker's own lease (pure): when an acknowledged heartbeat renews it, and when it has run out.

The controller keeps a lease per broker and counts it from when a heartbeat *arrived* there
(``controller/heartbeat.py``); once it runs out the controller may fence the broker and elect another master.
The broker must stop acting as master no later than that, without hearing from the controller, so it counts
its own lease from when the acknowledged heartbeat was *sent* -- never later than the controller's receipt.
Counting from the reply's arrival would stretch the broker's lease by the reply's delay (a slow link, a paused
broker that reads the reply late), past the moment the controller may already have elected someone else.

Both the broker process (``broker/lifecycle.py``) and the simulator (``sim/broker.py``) call these; the
clock arrives as ``now_ms`` (the broker's monotonic clock, which a clock nemesis may skew or set back).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LeaseCheck", "check_lease", "renewed_at"]


def renewed_at(last_renew_ms: int, sent_ms: int, now_ms: int) -> int | None:
    """The lease's renewal time after the controller acknowledged a heartbeat sent at ``sent_ms``, read at
    ``now_ms``; None when the reply proves nothing (it was sent before the clock went back, so how long ago is
    unknown).  A late reply of an older heartbeat never moves the renewal back."""
    if sent_ms > now_ms:
        return None
    renewed = max(last_renew_ms, sent_ms)
    return renewed


@dataclass(frozen=True)
class LeaseCheck:
    """The outcome of :func:`check_lease`: the new state, and why the broker fenced itself just now (None: it
    did not -- it was fenced already, or the lease holds)."""

    fenced: bool
    last_renew_ms: int
    fenced_because: str | None = None

    @property
    def valid(self) -> bool:
        return not self.fenced


def check_lease(fenced: bool, last_renew_ms: int, last_check_ms: int, now_ms: int,
                lease_timeout_ms: int) -> LeaseCheck:
    """Is the broker still allowed to act (unfenced, renewed within ``lease_timeout_ms``)?

    ``last_check_ms`` is the clock at the previous check.  A clock that went back (``now_ms <
    last_check_ms``) makes the time since the last renewal unknown: the broker fences itself until the next
    acknowledged heartbeat, and the renewal is pulled down to ``now_ms`` so a reply sent before the jump cannot
    count (:func:`renewed_at`).  ``fenced_because`` is ``"clock-went-back"`` or ``"lease-expired"`` when this
    check fenced a broker that was not fenced.
    """
    why: str | None = None
    if now_ms < last_check_ms:
        if not fenced:
            why = "clock-went-back"
        fenced = True
        last_renew_ms = min(last_renew_ms, now_ms)
    if not fenced and now_ms - last_renew_ms > lease_timeout_ms:
        fenced = True
        why = "lease-expired"
    return LeaseCheck(fenced, last_renew_ms, why)
