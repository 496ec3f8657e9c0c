"""How a simulated broker or client reaches the controller leader: follow NOT_LEADER hints, rotate on silence.

The real client (``system_under_test/client/controller_client.py``) is an asyncio shell; this is its
behaviour on simulated messages: send to the leader it believes in (or the next controller in turn), follow a
CONTROLLER_NOT_LEADER reply's ``leader_id`` hint, move on after a per-attempt timeout, and give up after a
bounded number of attempts (the callback then gets None: no controller answered).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from system_under_test.protocol.codes import ResponseCode
from system_under_test.sim.network import Reply, SimNode

__all__ = ["ControllerClient"]

_NOT_LEADER = int(ResponseCode.CONTROLLER_NOT_LEADER)
_FORMING = int(ResponseCode.FORMATION_PENDING)


class ControllerClient:
    def __init__(self, node: SimNode, controllers: tuple[str, ...], *, timeout_ms: int = 1000) -> None:
        self.node = node
        self.controllers = controllers
        self.timeout_ms = timeout_ms
        self.leader: str | None = None
        self._next = 0

    def _pick(self) -> str:
        if self.leader is not None:
            return self.leader
        target = self.controllers[self._next % len(self.controllers)]
        self._next += 1
        return target

    def call(self, code: int, header: dict[str, Any], on_reply: Callable[[Reply | None], None], *,
             attempts: int | None = None, resend_after_silence: bool = True) -> None:
        """Ask the leader; ``on_reply`` gets its reply (any code but NOT_LEADER), or None if none answered.

        ``resend_after_silence=False``: a request that got no answer in time is not sent to another controller
        (None at once), as the real client raises RequestTimeout -- a write whose outcome is unknown must not be
        sent again under the same op, or one op could take effect twice."""
        self._attempt(code, header, on_reply, attempts if attempts is not None else 2 * len(self.controllers) + 1,
                      resend_after_silence)

    def _attempt(self, code: int, header: dict[str, Any], on_reply: Callable[[Reply | None], None],
                 left: int, resend: bool = True) -> None:
        if left <= 0:
            on_reply(None)
            return
        target = self._pick()
        incarnation = self.node.incarnation

        def done(rep: Reply | None) -> None:
            if incarnation != self.node.incarnation:
                return
            if rep is None:
                if self.leader == target:
                    self.leader = None
                self._attempt(code, header, on_reply, left - 1 if resend else 0, resend)
                return
            if rep.code in (_NOT_LEADER, _FORMING):
                hint = rep.header.get("leader_id")
                self.leader = hint if isinstance(hint, str) and hint != target else None
                if self.leader is None:
                    self.node.timer(50, self._attempt, code, header, on_reply, left - 1, resend)
                else:
                    self._attempt(code, header, on_reply, left - 1, resend)
                return
            self.leader = target
            on_reply(rep)

        self.node.call(target, code, header, done, timeout_ms=self.timeout_ms)
