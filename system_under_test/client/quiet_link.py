"""When a client must PING a peer before sending it a request: the link has *gone quiet*.

A stopped process (SIGSTOP, a stalled host) keeps its sockets: the kernel still completes TCP handshakes for it
and takes the bytes sent to it, so neither a fresh connection nor a successful write proves that the peer will
answer.  What does is hearing from it.  The protocol's liveness (:mod:`system_under_test.protocol.liveness`)
pings a link that has been silent for ``ping_interval_s`` and a live peer answers at once, so a live peer is
heard about every ping interval even when the link is idle.  A link that has heard nothing for
:data:`QUIET_PINGS` ping intervals has gone quiet: before a request whose outcome would otherwise be unknown is
sent on it, the client sends a PING, which changes nothing -- an unanswered PING is a definite failure, and the
client can go elsewhere.  Without liveness (``SPLITBRAIN_LINK=off``) nothing pings, silence proves nothing, and
the rule is off.

Pure: the shells (:mod:`.controller_client`, :mod:`.producer`) pass the silence they measured.
"""

from __future__ import annotations

__all__ = ["QUIET_PINGS", "link_gone_quiet"]

QUIET_PINGS = 2.0
"""How many ping intervals without a byte from the peer make a link quiet.  A live peer is heard within about
1.5 intervals when idle (the link is checked every half interval, pinged after one) plus a round trip; two
leave room for a loaded machine, and a false alarm costs one PING round trip."""


def link_gone_quiet(silence_s: float, ping_interval_s: float | None) -> bool:
    """Whether a link that has heard nothing for ``silence_s`` must be probed before a request is sent on it;
    ``ping_interval_s`` None = liveness off, when silence proves nothing."""
    return ping_interval_s is not None and silence_s > QUIET_PINGS * ping_interval_s
