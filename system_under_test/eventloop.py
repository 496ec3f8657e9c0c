"""The event loop the cluster's processes run on: uvloop when it is installed, else asyncio's own.

Every controller and broker process spends most of its CPU in the event loop's socket and
callback machinery (one small RPC frame at a time).  uvloop runs the same asyncio programs with
about half that cost, which is what lets a Python controller handle tens of thousands of
heartbeats a second on one core.  ``SPLITBRAIN_EVENT_LOOP=asyncio`` selects the standard loop
(to rule uvloop out when chasing a bug); any other value is an error, not a silent fallback.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

ENV = "SPLITBRAIN_EVENT_LOOP"
CHOICES = ("uvloop", "asyncio")


def chosen(env: dict[str, str] | os._Environ[str] | None = None) -> str:
    """The loop implementation to use: ``uvloop`` (default when importable) or ``asyncio``.

    Raises:
        ValueError: ``SPLITBRAIN_EVENT_LOOP`` names neither choice, or asks for uvloop when it
            is not installed.
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
    """A fresh loop of the chosen implementation (for code that drives its own loop)."""
    if chosen() == "uvloop":
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on the chosen loop implementation."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)
