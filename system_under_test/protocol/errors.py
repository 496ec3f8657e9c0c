"""Protocol errors, split by who broke the protocol (the h11 convention).

    ProtocolError                  base; carries a reason naming the offending field/value
    ├── LocalProtocolError         we were about to send something invalid (a bug on our side)
    └── RemoteProtocolError        the peer sent a malformed or oversized frame/message
    RpcError                       a well-formed reply with a non-SUCCESS response code
    ConnectionLost                 the connection closed before the reply arrived (outcome unknown)
    RequestTimeout                 no reply in time (outcome unknown)
"""

from __future__ import annotations

from typing import Any

from system_under_test.protocol.codes import ResponseCode, is_definite


class ProtocolError(Exception):
    """A frame or message that violates docs/protocol.md."""


class LocalProtocolError(ProtocolError):
    """We tried to send an invalid message.  Seeing one is a bug in splitbrain."""


class RemoteProtocolError(ProtocolError):
    """The peer sent an invalid frame or message; the connection is closed."""


class RpcError(Exception):
    """A reply with a non-SUCCESS code.

    Attributes:
        code: the response code.
        message: the server's explanation.
        header: the reply header (e.g. ``leader_id``/``leader_addr`` hints for NOT_LEADER).
        definite: True if the code proves the request had no effect.
    """

    def __init__(self, code: int, message: str = "", header: dict[str, Any] | None = None) -> None:
        try:
            self.code: ResponseCode | int = ResponseCode(code)
            name = self.code.name
        except ValueError:
            self.code = code
            name = f"UNKNOWN_{code}"
        self.message = message
        self.header = header or {}
        self.definite = is_definite(code)
        super().__init__(f"{name}: {message}" if message else name)


class ConnectionLost(Exception):
    """The connection closed with requests in flight; their outcome is unknown."""


class RequestTimeout(Exception):
    """No reply within the timeout; the outcome is unknown."""
