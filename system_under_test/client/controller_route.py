"""Where a controller client sends its next request: the leader it believes in, and who went silent.

Why.  A controller that stops answering -- paused (SIGSTOP), stalled, cut off -- still looks alive to a
client: the kernel completes a TCP handshake for a stopped process, so a fresh connection opens and a
request sent on it simply gets no reply.  A client that kept the silent controller as "the leader" sent
every later write there and waited out a full request timeout each time, for as long as the fault lasted
(10-s write stalls under a 10-s pause of the controller leader, while the other two controllers had
elected a new leader within half a second).  And while the survivors have not yet noticed, their
``NOT_LEADER`` replies hint at the silent controller.

The rule.  A controller whose request or probe went unanswered (a timeout or a lost connection) is
*silent*.  A silent controller is never the believed leader; it comes last in the order of a pass; and
before anything is sent to it -- also when a ``NOT_LEADER`` hint names it -- the client asks it for a PING,
which the protocol layer answers at once and which changes nothing.  An answer to anything (a reply, a
refusal, a PING) makes it ordinary again.  Safety is untouched: a write still only succeeds when the real
leader commits it and replies; what changes is only *where* a client knocks first, and a write whose outcome
is unknown is still reported as unknown (never retried elsewhere by the client).

A controller the client still believes in is probed too when its link has gone quiet or was closed (the
liveness closes a link silent for ``dead_after_s``, and a new connection proves nothing): :mod:`.quiet_link`.
So a client whose leader was paused meanwhile finds out with a PING instead of sending a write whose outcome
then stays unknown.

Words: a *pass* is one walk over :meth:`ControllerRoute.plan`; an *attempt* is one controller of it, with
``probe`` set when the client must PING it first.

Pure: no clock, no I/O; the shell (:mod:`.controller_client`) reports what happened and asks for the order.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["Attempt", "ControllerRoute"]


@dataclass(frozen=True, slots=True)
class Attempt:
    """One controller to try: ``probe`` = PING it first (it went silent on us; see the module docstring)."""

    addr: str
    probe: bool


@dataclass(frozen=True, slots=True)
class ControllerRoute:
    """What a client knows about the controllers.

    Attributes:
        addrs: every controller address, in the configured order (addresses learnt from hints appended).
        leader: the controller believed to lead (the last one that accepted a request or a hint named), or None.
        silent: controllers whose last request or probe got no answer; never the leader.
    """

    addrs: tuple[str, ...]
    leader: str | None = None
    silent: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not self.addrs:
            raise ValueError("ControllerRoute.addrs: a client needs at least one controller address")
        if len(set(self.addrs)) != len(self.addrs):
            raise ValueError(f"ControllerRoute.addrs: duplicate addresses in {list(self.addrs)}")
        if self.leader is not None and self.leader not in self.addrs:
            raise ValueError(f"ControllerRoute.leader: {self.leader!r} is not among addrs {list(self.addrs)}")
        if not self.silent <= set(self.addrs):
            raise ValueError(f"ControllerRoute.silent: {sorted(self.silent - set(self.addrs))} not among addrs")
        if self.leader is not None and self.leader in self.silent:
            raise ValueError(f"ControllerRoute: the leader {self.leader!r} cannot be silent")

    @classmethod
    def of(cls, addrs: list[str] | tuple[str, ...]) -> ControllerRoute:
        """A route over ``addrs`` (duplicates dropped, order kept), no leader known, nobody silent."""
        return cls(tuple(dict.fromkeys(addrs)))

    def plan(self) -> tuple[Attempt, ...]:
        """The order of one pass: the believed leader, then the answering controllers in configured order, then
        the silent ones (each to be probed first).  Every address appears exactly once."""
        first = () if self.leader is None else (self.leader,)
        rest = [a for a in self.addrs if a != self.leader]
        answering = [a for a in rest if a not in self.silent]
        quiet = [a for a in rest if a in self.silent]
        return (*(Attempt(a, False) for a in (*first, *answering)), *(Attempt(a, True) for a in quiet))

    def answered(self, addr: str) -> ControllerRoute:
        """``addr`` answered something (a reply, a refusal, a PING): it is alive, no longer silent.  (An address
        that is not a known controller -- a node the caller asked directly -- changes nothing.)"""
        return self if addr not in self.silent else replace(self, silent=self.silent - {addr})

    def accepted(self, addr: str) -> ControllerRoute:
        """``addr`` accepted a request as leader (or gave a leader's definite refusal): believe it leads."""
        route = self._known(addr).answered(addr)
        return replace(route, leader=addr)

    def not_leader(self, addr: str, hint: str | None) -> tuple[ControllerRoute, bool]:
        """``addr`` refused as not the leader, naming ``hint`` (None or "": it knows no leader).

        Returns the new route and whether to follow the hint (it names another controller: see
        :meth:`after_hint`).  A hint is believed -- it becomes the leader -- unless it names a silent controller:
        a survivor that has not yet noticed the leader's silence still names it, so the leader stays unknown
        and the hint is only probed."""
        route = self._known(addr).answered(addr)
        if route.leader == addr:
            route = replace(route, leader=None)
        if not hint or hint == addr:
            return route, False
        route = route._known(hint)
        if hint in route.silent:
            return route, True
        return replace(route, leader=hint), True

    def went_silent(self, addr: str) -> ControllerRoute:
        """``addr`` did not answer (a request or probe timed out, its connection was lost or could not be
        opened): it is silent and no longer the believed leader.  (An unknown address changes nothing.)"""
        if addr not in self.addrs:
            return self
        return replace(self, leader=None if self.leader == addr else self.leader, silent=self.silent | {addr})

    def after_hint(self, pass_: tuple[Attempt, ...], next_index: int, hint: str) -> tuple[Attempt, ...]:
        """The attempts to make after a ``NOT_LEADER`` named ``hint`` (call it after :meth:`not_leader`), while
        ``pass_`` was being walked and ``next_index`` was its next attempt.

        A believed hint starts a new pass at it.  A silent hint is probed next and the pass goes on with the
        controllers it had not reached yet: a follower that keeps naming a controller the client cannot reach
        (the client alone is cut off from it) must not keep the client from asking the others."""
        if hint not in self.silent:
            return (Attempt(hint, False), *(a for a in self.plan() if a.addr != hint))
        return (Attempt(hint, True), *(a for a in pass_[next_index:] if a.addr != hint))

    def _known(self, addr: str) -> ControllerRoute:
        return self if addr in self.addrs else replace(self, addrs=(*self.addrs, addr))
