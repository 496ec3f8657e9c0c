"""The node's event log: numbered, timed records of what this process saw happen in the protocol.

Why: a tester that wants to aim faults at interesting moments (right after a SyncStateSet shrink, right
after a master election) must learn them from the nodes, not guess them from timing.  Every controller
and broker process keeps a bounded in-memory log of *node events* and serves it over ``ADMIN_EVENTS``
(``{since, limit}`` -> ``{boot, now_ns, next, events, dropped}``); the harness (``harness/observe.py``)
polls it.

An event is ``{seq, mono_ns, kind, ...fields}``.  ``seq`` counts from 1 per process (``boot`` is a random id
per process start, so a reader notices a restart); ``mono_ns`` is the real monotonic clock -- not the
skewable process clock, so a clock nemesis does not move events -- and the reply's ``now_ns`` lets a reader
place an event on its own time axis (``recv - (now_ns - mono_ns)``).  Kinds (docs/nemeses.md, Observation):

* controller: ``raft-leader`` / ``raft-follower`` (``term``), ``apply`` of a committed controller event
  (``event``: RegisterBroker, ElectMaster, AlterSyncStateSet, Fence/UnfenceBroker, ...; ``change``:
  ``shrink``/``expand``/``elect``/``no-master`` where it applies; ``master_epoch``, ``sync_state_set``);
* broker: ``become-master`` / ``become-slave`` (``master_epoch``), ``sync-state-set`` (``change``, ``members``),
  ``fenced`` / ``unfenced``, ``registered`` (``broker_epoch``), ``truncate`` (``from``, ``to``);
* both: ``failpoint-armed``, ``failpoint-fired`` (``name``, ``action``; a ``crash`` is recorded but dies with
  the process, so readers see it as a restart).

Recording never fails the caller and costs a dict and a lock; the log keeps the last
:data:`CAPACITY` events (older ones are dropped, and a reader asking for them is told so).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import deque
from typing import Any

__all__ = ["BOOT_ID", "CAPACITY", "read", "record", "reset"]

CAPACITY = 4096
BOOT_ID = uuid.uuid4().hex[:12]
_lock = threading.Lock()
_events: deque[dict[str, Any]] = deque(maxlen=CAPACITY)
_seq = 0


def record(kind: str, **fields: Any) -> None:
    """Append one event (thread-safe; never raises for well-formed plain fields)."""
    global _seq
    with _lock:
        _seq += 1
        _events.append({"seq": _seq, "mono_ns": time.monotonic_ns(), "kind": kind, **fields})


def read(since: int = 0, limit: int = 1000) -> dict[str, Any]:
    """Events with ``seq > since`` (at most ``limit``), this process's ``boot`` id, the monotonic ``now_ns``,
    the ``next`` value of ``since`` to ask with, and ``dropped`` (events after ``since`` no longer kept)."""
    with _lock:
        oldest = _events[0]["seq"] if _events else _seq + 1
        out = [e for e in _events if e["seq"] > since][:max(0, limit)]
        nxt = out[-1]["seq"] if out else max(since, 0)
        return {"boot": BOOT_ID, "now_ns": time.monotonic_ns(), "next": nxt, "events": out,
                "dropped": since + 1 < oldest and since < _seq}


def reset() -> None:
    """Forget every event (unit tests only)."""
    global _seq
    with _lock:
        _events.clear()
        _seq = 0
