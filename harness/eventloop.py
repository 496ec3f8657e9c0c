"""The event loop the harness's own process runs on: uvloop when it is installed, else asyncio's own.

The harness drives many clients, the nemesis and the observer in one process, so it picks its loop the way the
cluster's node processes do (``system_under_test/eventloop.py``), and answers to the same setting:
``SPLITBRAIN_EVENT_LOOP=asyncio`` selects the standard loop for harness and nodes alike (to rule uvloop out when
chasing a bug); any other value but ``uvloop`` is an error, not a silent fallback.  It is the harness's own copy
because the harness imports nothing of the system under test (issue 29): a system from elsewhere has no such
module, and a change to our nodes' loop must not change the harness's.  A unit test keeps the two answering the
same setting the same way.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

__all__ = ["CHOICES", "ENV", "chosen", "new_event_loop", "run"]

T = TypeVar("T")

ENV = "SPLITBRAIN_EVENT_LOOP"
CHOICES = ("uvloop", "asyncio")


def chosen(env: Mapping[str, str] | None = None) -> str:
    """The loop implementation to use: ``uvloop`` (default when importable) or ``asyncio``.

    Raises:
        ValueError: ``SPLITBRAIN_EVENT_LOOP`` names neither choice, or asks for uvloop when it is not installed.
    """
    value = (env if env is not None else os.environ).get(ENV, "").strip().lower()
    if value and value not in CHOICES:
        raise ValueError(f"{ENV} must be one of {', '.join(CHOICES)}, got {value!r}")
    if value == "asyncio":
        return "asyncio"
    try:
        import uvloop  # noqa: F401
    except ImportError:
        if value == "uvloop":
            raise ValueError(f"{ENV}=uvloop but uvloop is not installed") from None
        return "asyncio"
    return "uvloop"


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A fresh loop of the chosen implementation."""
    if chosen() == "uvloop":
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on the chosen loop implementation."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)
