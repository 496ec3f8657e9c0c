"""Named fault points: crash, error, delay or pause the process at an exact protocol step.

Cluster code declares each point once at import time and calls :func:`hit` (sync code) or
:func:`ahit` (async code) at that step::

    BEFORE_RENAME = declare("broker.meta.before_rename", "after the temp meta is fsynced, before rename")
    ...
    await ahit(BEFORE_RENAME)

Points are armed

* at start, by the environment: ``SPLITBRAIN_FAILPOINTS="name=action;name2=action2"``;
* at run time, by the ADMIN_FAILPOINT_ARM / DISARM RPCs (``splitbrain admin failpoint``).

Action grammar: ``[COUNT*]KIND[(ARG)]`` where KIND is

* ``crash``     -- log one line and ``os._exit(CRASH_EXIT_CODE)`` (no cleanup, no flush of our files);
* ``error``     -- raise :class:`FailpointError` (servers turn it into FAILPOINT_ERROR replies);
  ``error(ERRNO)`` carries an errno for points at a system call (the store maps 28 to
  ENOSPC / disk full and anything else, e.g. 5, to an I/O error);
* ``delay(MS)`` -- sleep MS milliseconds, then continue;
* ``pause``     -- block until the point is disarmed (or re-armed with another action);
* ``off``       -- disarm.

``COUNT*`` fires only the next COUNT hits, then disarms itself (``1*crash``).  Every hit is
counted whether armed or not, so the harness can wait for a step to be reached.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
import threading
import time
from dataclasses import dataclass, field

from system_under_test import node_events

log = logging.getLogger("splitbrain.failpoints")

CRASH_EXIT_CODE = 86
ENV_VAR = "SPLITBRAIN_FAILPOINTS"
_ACTION_RE = re.compile(r"^(?:(\d+)\*)?(crash|error|delay|pause|off)(?:\((\d+(?:\.\d+)?)\))?$")


class FailpointError(Exception):
    """Raised by a failpoint armed with ``error``; ``errno`` is the argument of ``error(ERRNO)``."""

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno


class FailpointSpecError(ValueError):
    """An unknown failpoint name or a malformed action."""


@dataclass
class Action:
    kind: str
    arg: float = 0.0
    remaining: int | None = None  # None = forever

    def describe(self) -> str:
        s = f"{self.kind}({self.arg:g})" if self.kind == "delay" or (self.kind == "error" and self.arg) else self.kind
        return f"{self.remaining}*{s}" if self.remaining is not None else s


@dataclass
class _Point:
    name: str
    doc: str
    action: Action | None = None
    hits: int = 0
    fired: int = 0
    released: threading.Event = field(default_factory=threading.Event)


_lock = threading.Lock()
_points: dict[str, _Point] = {}
_pending_env: dict[str, Action] = {}


def parse_action(spec: str) -> Action | None:
    """Parse an action string; returns None for ``off``.

    Raises:
        FailpointSpecError: naming the spec and the grammar.
    """
    m = _ACTION_RE.match(spec.strip())
    if not m:
        raise FailpointSpecError(
            f"bad failpoint action {spec!r}; expected [COUNT*]crash|error[(ERRNO)]|delay(MS)|pause|off, e.g. '1*crash'"
        )
    count, kind, arg = m.groups()
    if kind == "delay" and arg is None:
        raise FailpointSpecError(f"bad failpoint action {spec!r}: delay needs milliseconds, e.g. delay(50)")
    if kind not in ("delay", "error") and arg is not None:
        raise FailpointSpecError(f"bad failpoint action {spec!r}: only delay(MS) and error(ERRNO) take an argument")
    if kind == "error" and arg is not None and (not float(arg).is_integer() or not 0 < float(arg) < 4096):
        raise FailpointSpecError(f"bad failpoint action {spec!r}: error(ERRNO) needs a whole errno in 1..4095")
    if kind == "off":
        return None
    remaining = int(count) if count is not None else None
    if remaining == 0:
        return None
    return Action(kind, float(arg or 0), remaining)


def declare(name: str, doc: str) -> str:
    """Register a failpoint name (idempotent).  Returns ``name`` for use as a constant."""
    with _lock:
        if name not in _points:
            _points[name] = _Point(name, doc)
            if name in _pending_env:
                _points[name].action = _pending_env.pop(name)
    return name


def arm(name: str, spec: str) -> None:
    """Arm a declared failpoint.

    Raises:
        FailpointSpecError: unknown name (the message lists similar known names) or bad action.
    """
    action = parse_action(spec)
    with _lock:
        point = _points.get(name)
        if point is None:
            near = [n for n in _points if n.split(".")[0] == name.split(".")[0]]
            raise FailpointSpecError(f"unknown failpoint {name!r}; known: {sorted(near) or sorted(_points)}")
        point.action = action
        point.released.set()
        point.released = threading.Event()
    log.info("failpoint %s armed: %s", name, action.describe() if action else "off")
    node_events.record("failpoint-armed" if action else "failpoint-disarmed", name=name,
                       action=action.describe() if action else "off")


def disarm(name: str) -> None:
    """Disarm one point, or every point with ``'*'``.  Releases paused callers."""
    with _lock:
        targets = list(_points.values()) if name == "*" else [_points[name]] if name in _points else []
        if not targets:
            raise FailpointSpecError(f"unknown failpoint {name!r}")
        for point in targets:
            point.action = None
            point.released.set()
            point.released = threading.Event()
    node_events.record("failpoint-disarmed", name=name)


def list_points() -> list[dict[str, object]]:
    """Every declared point with its action and hit counts (for the admin RPC)."""
    with _lock:
        return [
            {
                "name": p.name,
                "doc": p.doc,
                "action": p.action.describe() if p.action else "off",
                "hits": p.hits,
                "fired": p.fired,
            }
            for p in sorted(_points.values(), key=lambda p: p.name)
        ]


def load_env(environ: dict[str, str] | None = None) -> None:
    """Arm points from ``SPLITBRAIN_FAILPOINTS``.  Names not yet declared are armed when declared.

    Raises:
        FailpointSpecError: a malformed entry (naming the variable and the entry).
    """
    raw = (environ if environ is not None else os.environ).get(ENV_VAR, "")
    for entry in filter(None, (e.strip() for e in raw.split(";"))):
        name, sep, spec = entry.partition("=")
        if not sep or not name:
            raise FailpointSpecError(f"{ENV_VAR}: entry {entry!r} must be NAME=ACTION")
        action = parse_action(spec)
        with _lock:
            if name in _points:
                _points[name].action = action
            elif action is not None:
                _pending_env[name] = action


def undeclared_env_points() -> list[str]:
    """Names armed from the environment that no module declared (likely typos)."""
    with _lock:
        return sorted(_pending_env)


def _take(name: str) -> tuple[Action | None, threading.Event | None]:
    with _lock:
        point = _points.get(name)
        if point is None:
            raise FailpointSpecError(f"failpoint {name!r} hit but never declared (a bug)")
        point.hits += 1
        action = point.action
        if action is None:
            return None, None
        point.fired += 1
        if action.remaining is not None:
            action.remaining -= 1
            if action.remaining <= 0:
                point.action = None
        return Action(action.kind, action.arg), point.released


def _crash(name: str) -> None:
    msg = f"FAILPOINT {name}: crash (os._exit({CRASH_EXIT_CODE}))\n"
    try:
        sys.stderr.write(msg)
        sys.stderr.flush()
    finally:
        os._exit(CRASH_EXIT_CODE)


def _error(name: str, action: Action) -> FailpointError:
    if action.arg:
        return FailpointError(f"failpoint {name} injected error errno {int(action.arg)}", int(action.arg))
    return FailpointError(f"failpoint {name} injected an error")


def hit(name: str) -> None:
    """Pass failpoint ``name`` from synchronous code."""
    action, released = _take(name)
    if action is None:
        return
    log.warning("failpoint %s fired: %s", name, action.describe())
    node_events.record("failpoint-fired", name=name, action=action.describe())
    if action.kind == "crash":
        _crash(name)
    elif action.kind == "error":
        raise _error(name, action)
    elif action.kind == "delay":
        time.sleep(action.arg / 1000)
    elif action.kind == "pause" and released is not None:
        released.wait()


async def ahit(name: str) -> None:
    """Pass failpoint ``name`` from async code (delay and pause do not block the loop)."""
    action, released = _take(name)
    if action is None:
        return
    log.warning("failpoint %s fired: %s", name, action.describe())
    node_events.record("failpoint-fired", name=name, action=action.describe())
    if action.kind == "crash":
        _crash(name)
    elif action.kind == "error":
        raise _error(name, action)
    elif action.kind == "delay":
        await asyncio.sleep(action.arg / 1000)
    elif action.kind == "pause" and released is not None:
        while not released.is_set():
            await asyncio.sleep(0.01)
