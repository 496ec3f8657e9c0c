"""What an applied controller event looks like in the node's event log (:mod:`system_under_test.node_events`).

Pure: :func:`applied_event` takes the event, the broker set's replica info before and after applying it and
whether it applied, and returns the fields of one ``apply`` node event (or None for a rejected event, which
changed nothing).  ``change`` says what happened to the broker set: ``elect`` (a new master from the
SyncStateSet, master epoch bumped), ``elect-unclean`` (a new master from outside it), ``no-master``,
``shrink`` / ``expand`` (the SyncStateSet lost or gained members), ``same``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["applied_event"]


def _change(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> str | None:
    if after is None:
        return None
    old = before or {}
    if after.get("master_epoch") != old.get("master_epoch"):
        master = after.get("master_id")
        if not master:
            return "no-master"
        return "elect" if master in (old.get("sync_state_set") or ()) or not old else "elect-unclean"
    was, now = set(old.get("sync_state_set") or ()), set(after.get("sync_state_set") or ())
    if now < was:
        return "shrink"
    if now > was:
        return "expand"
    return "same" if now == was else "replace"


def applied_event(event: Any, before: Mapping[str, Any] | None, after: Mapping[str, Any] | None,
                  ok: bool) -> dict[str, Any] | None:
    """The ``apply`` node event's fields for ``event`` (None when it was rejected)."""
    if not ok:
        return None
    out: dict[str, Any] = {"event": type(event).__name__, "broker_name": getattr(event, "broker_name", None)}
    broker_id = getattr(event, "broker_id", None)
    if broker_id is not None:
        out["broker_id"] = broker_id
    change = _change(before, after)
    if change is not None and type(event).__name__ in ("ElectMaster", "AlterSyncStateSet"):
        out["change"] = change
    if after is not None:
        out["master_epoch"] = after.get("master_epoch")
        out["sync_state_set"] = list(after.get("sync_state_set") or ())
    return out
