"""Link liveness: when a long-lived connection is dead, and how long to wait before redialing it.

Words:

* **link** -- one long-lived TCP connection between two splitbrain processes (controller <->
  controller Raft, broker <-> controller heartbeats and RPCs, master <-> slave replication,
  client <-> broker or controller).
* **sign of life** -- anything that proves the peer's process still reads and answers: a frame
  received, or our own backlog (bytes queued for the peer) shrinking.
* **silence** -- time since the last sign of life.
* **ping** -- a PING request the protocol layer sends when a link has been silent for
  ``ping_interval_s``; every peer answers it at once, before any handler, so a link whose traffic
  is one-way (Raft batches, replication acks) still hears from its peer.

Why: a partition that silently drops packets leaves TCP retransmitting with an exponentially
backed-off timer (RTO doubling up to minutes).  When the partition heals, nothing moves on that
connection until the timer fires -- 6 to 13 s after a 15 s partition (issue 17).  A link that has
been silent for ``dead_after_s`` is therefore closed and redialed: a fresh connection starts with
a fresh timer, and a fresh connect is tried every ``connect_attempt_s`` rather than waiting for
the kernel's SYN retransmissions (1 s, 3 s, 7 s...).

This module is pure (no clock, no socket, no randomness of its own): the shell
(:mod:`system_under_test.protocol.rpc`) passes the loop time and a seeded ``random.Random``.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import random

#: The environment variable read by :func:`link_timeouts_from_setting` (via the rpc shell).
LINK_ENV = "SPLITBRAIN_LINK"


class LinkSettingError(ValueError):
    """A bad ``SPLITBRAIN_LINK`` value or LinkTimeouts field (names the field, the value, the range)."""


@dataclass(frozen=True)
class LinkTimeouts:
    """How every long-lived link detects a silent peer and redials.

    The defaults suit the default cluster timing (Raft tick 50 ms x 4 election ticks, so a
    0.2-0.4 s election timeout; broker heartbeats every 500 ms with a 2 s lease): a dead link is
    noticed well inside a lease, and after a heal a link is back within about
    ``connect_attempt_s + max_backoff_s``.  See docs/operations.md, "Link timeouts".

    Attributes:
        ping_interval_s: a link silent this long sends a PING (and again every interval while
            silent).  Lower = faster detection, more idle traffic.  Must be < ``dead_after_s``.
        dead_after_s: a link silent this long is closed (requests in flight fail with
            ConnectionLost, outcome unknown) and its owner redials.  Too low closes healthy
            links whose peer's event loop stalls (a long fsync, a loaded machine); too high
            delays recovery from partitions shorter than it.
            Keep it above the longest pause you expect from a healthy process and below the
            broker lease (``lease_timeout_ms``).  The sockets' TCP_USER_TIMEOUT is a backstop at
            ten times this (see :attr:`tcp_user_timeout_ms`).
        connect_attempt_s: one connect attempt waits this long for the peer's SYN-ACK before a
            fresh attempt; must exceed the network's round trip.  Bounds how long after a heal
            a redial takes.  An attempt older than a tenth of this is also restarted at once when
            the peer's host connects to us (rpc duty 6: the path is back).
        min_backoff_s / max_backoff_s: the jittered wait between redials of a link that keeps
            failing: it starts below ``min_backoff_s`` and doubles up to ``max_backoff_s``.
        max_backlog_bytes: a link whose unsent backlog (bytes queued in the process for the
            peer) exceeds this is closed: a peer that does not read cannot make us buffer without
            limit.  Must exceed the largest frame (64 MiB by default).
    """

    ping_interval_s: float = 0.25
    dead_after_s: float = 1.5
    connect_attempt_s: float = 0.25
    min_backoff_s: float = 0.02
    max_backoff_s: float = 0.25
    max_backlog_bytes: int = 128 * 1024 * 1024

    def __post_init__(self) -> None:
        for name, lo, hi in (("ping_interval_s", 0.01, 60.0), ("dead_after_s", 0.05, 600.0),
                             ("connect_attempt_s", 0.01, 60.0), ("min_backoff_s", 0.0, 60.0),
                             ("max_backoff_s", 0.0, 60.0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= hi:
                raise LinkSettingError(f"LinkTimeouts.{name} must be a number in [{lo}, {hi}] seconds, got {value!r}")
        if self.ping_interval_s >= self.dead_after_s:
            raise LinkSettingError(
                f"LinkTimeouts.ping_interval_s={self.ping_interval_s} must be < dead_after_s={self.dead_after_s} "
                "(a silent link must be pinged before it is declared dead)")
        if self.min_backoff_s > self.max_backoff_s:
            raise LinkSettingError(f"LinkTimeouts.min_backoff_s={self.min_backoff_s} must be <= max_backoff_s="
                                   f"{self.max_backoff_s}")
        b = self.max_backlog_bytes
        if isinstance(b, bool) or not isinstance(b, int) or not 1 << 20 <= b <= 1 << 40:
            raise LinkSettingError(
                f"LinkTimeouts.max_backlog_bytes must be an int in [{1 << 20}, {1 << 40}], got {b!r}")

    @property
    def tcp_user_timeout_ms(self) -> int:
        """TCP_USER_TIMEOUT: the kernel aborts a connection whose sent data stays unacknowledged this long.

        A backstop only, ten times ``dead_after_s`` (at least 10 s): the kernel also counts a peer
        that advertises a zero window (alive, but slow to read under load) against this timeout,
        which the pings' rule -- a shrinking backlog is a sign of life -- does not.
        """
        return max(10_000, round(self.dead_after_s * 10_000))

    @property
    def keepalive_idle_s(self) -> int:
        """TCP keepalive: first probe after this many idle seconds (the kernel's unit is whole seconds)."""
        return max(1, math.ceil(self.dead_after_s))


def link_timeouts_from_setting(value: str | None) -> LinkTimeouts | None:
    """Parse ``SPLITBRAIN_LINK``: unset, ``""`` or ``on`` -> the defaults; ``off`` -> None (no
    liveness: the transport as it was before issue 17, for baselines); ``key=value,...`` -> the
    defaults with those LinkTimeouts fields replaced (e.g. ``dead_after_s=3,ping_interval_s=0.5``).

    Raises:
        LinkSettingError: naming the variable, the key and the value.
    """
    raw = (value or "").strip()
    if raw in ("", "on"):
        return LinkTimeouts()
    if raw == "off":
        return None
    names = {f.name: f.type for f in fields(LinkTimeouts)}
    changes: dict[str, float | int] = {}
    for item in raw.split(","):
        key, sep, val = item.strip().partition("=")
        if not sep or key not in names:
            raise LinkSettingError(
                f"{LINK_ENV}: expected 'on', 'off' or key=value pairs with keys {sorted(names)}, got {item!r}")
        try:
            changes[key] = int(val) if key == "max_backlog_bytes" else float(val)
        except ValueError:
            raise LinkSettingError(f"{LINK_ENV}: {key} must be a number, got {val!r}") from None
    try:
        return replace(LinkTimeouts(), **changes)  # type: ignore[arg-type]
    except LinkSettingError as exc:
        raise LinkSettingError(f"{LINK_ENV}={raw!r}: {exc}") from None


class LinkVerdict(enum.Enum):
    """What the shell must do after a check."""

    QUIET = "quiet"  # nothing
    PING = "ping"  # send one PING request
    DEAD = "dead"  # close the connection (its owner redials)


@dataclass(frozen=True)
class LinkWatch:
    """The liveness state of one link.

    Attributes:
        heard_at: loop time of the last sign of life.
        backlog_bytes: our unsent backlog at the previous check.
        pinged_at: loop time of the last PING sent during the current silence (None: none yet).
    """

    heard_at: float
    backlog_bytes: int = 0
    pinged_at: float | None = None


def next_link_watch(
    watch: LinkWatch, *, now: float, received_at: float, backlog_bytes: int, late_s: float, timeouts: LinkTimeouts,
) -> tuple[LinkWatch, LinkVerdict, str]:
    """One periodic check of a link.

    Args:
        watch: the state after the previous check.
        now: the loop time now.
        received_at: loop time of the last bytes received on the link.
        backlog_bytes: bytes queued in this process for the peer, not yet taken by the kernel.
        late_s: how late this check runs compared with when it was scheduled.  A check more than
            ``ping_interval_s`` late means our own event loop stalled: bytes may be waiting unread
            in the socket, so the silence is not the peer's fault and the count restarts.
        timeouts: the link's LinkTimeouts.

    Returns:
        The new state, the verdict and (for DEAD and an oversized backlog) the reason.
    """
    heard = watch.heard_at
    pinged = watch.pinged_at
    if received_at > heard:
        heard, pinged = received_at, None
    if backlog_bytes < watch.backlog_bytes or late_s > timeouts.ping_interval_s:
        heard, pinged = max(heard, now), None
    new = LinkWatch(heard, backlog_bytes, pinged)
    if backlog_bytes > timeouts.max_backlog_bytes:
        return new, LinkVerdict.DEAD, (f"{backlog_bytes} bytes queued for the peer, over max_backlog_bytes="
                                       f"{timeouts.max_backlog_bytes}: the peer is not reading")
    silence = now - heard
    if silence >= timeouts.dead_after_s:
        return new, LinkVerdict.DEAD, (f"nothing from the peer for {silence:.2f}s (dead_after_s="
                                       f"{timeouts.dead_after_s}): the link is silent, redial")
    if silence >= timeouts.ping_interval_s and (pinged is None or now - pinged >= timeouts.ping_interval_s):
        return LinkWatch(heard, backlog_bytes, now), LinkVerdict.PING, ""
    return new, LinkVerdict.QUIET, ""


def next_backoff_s(attempt: int, timeouts: LinkTimeouts, rng: random.Random) -> float:
    """The wait before redial number ``attempt`` (0 = the first after a failure).

    "Equal jitter": half of ``min(max_backoff_s, min_backoff_s * 2**attempt)`` plus a uniform share
    of the other half, so it starts small, never exceeds ``max_backoff_s``, and links that failed
    together (every peer of an isolated node) do not redial in lockstep.
    """
    if attempt < 0:
        raise LinkSettingError(f"attempt must be >= 0, got {attempt}")
    cap = min(timeouts.max_backoff_s, timeouts.min_backoff_s * 2.0 ** min(attempt, 60))
    return cap / 2 + rng.uniform(0.0, cap / 2)
