"""What every node serves alike: the cluster-token check and the admin requests.

The broker (:mod:`.broker.server`) and the controller (:mod:`.controller.server`) both refuse a
state-changing request without the cluster token (:func:`unauthorized`; the codes come from the
header schemas, :data:`~.protocol.schemas.TOKEN_CODES`) and answer the codes in :data:`ADMIN_CODES`
with :func:`handle_admin`: failpoints, the skewable process clock, the node's recorded events,
status and shutdown.  The two nodes differ only in what their status says and how they shut down,
which they pass in.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Any

from system_under_test import failpoints, node_events
from system_under_test.clock import CLOCK
from system_under_test.protocol import TOKEN_CODES, Frame, Reply, RequestCode, ResponseCode

ADMIN_CODES = frozenset({
    RequestCode.ADMIN_FAILPOINT_LIST, RequestCode.ADMIN_FAILPOINT_ARM, RequestCode.ADMIN_FAILPOINT_DISARM,
    RequestCode.ADMIN_CLOCK_SET, RequestCode.ADMIN_CLOCK_GET, RequestCode.ADMIN_STATUS, RequestCode.ADMIN_SHUTDOWN,
    RequestCode.ADMIN_EVENTS,
})


def code_name(code: int) -> str:
    """The request code's name, or the number if it is no request code."""
    try:
        return RequestCode(code).name
    except ValueError:
        return str(code)


def unauthorized(frame: Frame, token: str) -> Reply | None:
    """UNAUTHORIZED if ``frame``'s code needs the cluster token and the frame lacks it, else None."""
    if frame.code not in TOKEN_CODES:
        return None
    given = frame.header.get("token")
    if isinstance(given, str) and hmac.compare_digest(given, token):
        return None
    return Reply.error(ResponseCode.UNAUTHORIZED,
                       f"{code_name(frame.code)} changes cluster state and needs the cluster token")


def handle_admin(frame: Frame, status: Callable[[], dict[str, Any]],
                 shutdown: Callable[[dict[str, Any]], None]) -> Reply:
    """The reply to an admin request (``frame.code`` in :data:`ADMIN_CODES`).

    Args:
        frame: the request, its token already checked.
        status: the node's ADMIN_STATUS header.
        shutdown: starts the node's orderly shutdown in the background, given the request header.
    """
    code, h = frame.code, frame.header
    if code == RequestCode.ADMIN_FAILPOINT_LIST:
        return Reply(header={"failpoints": failpoints.list_points()})
    if code in (RequestCode.ADMIN_FAILPOINT_ARM, RequestCode.ADMIN_FAILPOINT_DISARM):
        try:
            if code == RequestCode.ADMIN_FAILPOINT_ARM:
                failpoints.arm(str(h["name"]), str(h["action"]))
            else:
                failpoints.disarm(str(h["name"]))
        except failpoints.FailpointSpecError as exc:
            return Reply.error(ResponseCode.MALFORMED_REQUEST, str(exc))
        return Reply()
    if code == RequestCode.ADMIN_CLOCK_SET:
        try:
            CLOCK.set(offset_ms=h.get("offset_ms"), rate=h.get("rate"))
        except ValueError as exc:
            return Reply.error(ResponseCode.MALFORMED_REQUEST, str(exc))
        return Reply(header=dict(CLOCK.describe()))
    if code == RequestCode.ADMIN_CLOCK_GET:
        return Reply(header=dict(CLOCK.describe()))
    if code == RequestCode.ADMIN_STATUS:
        return Reply(header=status())
    if code == RequestCode.ADMIN_EVENTS:
        return Reply(header=node_events.read(int(h.get("since") or 0), int(h.get("limit") or 1000)))
    if code == RequestCode.ADMIN_SHUTDOWN:
        shutdown(h)
        return Reply(header={"shutting_down": True})
    return Reply.error(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"{code_name(code)} is not an admin request")
