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
from collections.abc import Awaitable, Coroutine, Generator
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


def start_eagerly(coro: Coroutine[Any, Any, Any]) -> Awaitable[Any] | None:
    """Run ``coro`` now, up to its first suspension, in the caller's stack (no task).

    Returns None when it finished without suspending (its return value is dropped; an exception
    propagates to the caller), else an awaitable that finishes the rest.  For steps that almost
    never wait, such as an unarmed failpoint on every write: a task per step would cost more than
    the step (Python 3.12's eager tasks do the same).
    """
    try:
        first = coro.send(None)
    except StopIteration:
        return None
    return _Resume(coro, first)


class _Resume:
    """Awaitable for the rest of a coroutine :func:`start_eagerly` suspended: ``yield from`` by
    hand, starting with the value the coroutine already yielded (the future it waits on)."""

    __slots__ = ("_coro", "_first")

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self._coro = coro
        self._first = first

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, value = self._coro, self._first
        while True:
            try:
                sent = yield value
            except BaseException as exc:  # cancellation (or a thrown error) goes to the coroutine
                try:
                    value = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    value = coro.send(sent)
                except StopIteration as stop:
                    return stop.value
