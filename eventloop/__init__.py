"""The event loop every process of this repository runs on: uvloop when it is installed, else asyncio's own.

Every controller and broker process spends most of its CPU in the event loop's socket and
callback machinery (one small RPC frame at a time).  uvloop runs the same asyncio programs with
about half that cost, which is what lets a Python controller handle tens of thousands of
heartbeats a second on one core.  The harness drives many clients, the nemesis and the observer in
one process and picks its loop the same way.  ``SPLITBRAIN_EVENT_LOOP=asyncio`` selects the standard
loop for harness and nodes alike (to rule uvloop out when chasing a bug); any other value but
``uvloop`` is an error, not a silent fallback.

It is a top-level package of its own, the lowest layer (docs/architecture.md), because both the
system under test and the harness need it and neither may import the other for it (issue 29): it
imports nothing of the project, and ``tests/unit/test_layers.py`` says so.  :func:`start_eagerly`
is the controller's fast path for steps that almost never wait.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Coroutine, Generator, Mapping
from typing import Any, TypeVar

__all__ = ["CHOICES", "ENV", "chosen", "new_event_loop", "run", "start_eagerly"]

T = TypeVar("T")

ENV = "SPLITBRAIN_EVENT_LOOP"
CHOICES = ("uvloop", "asyncio")


def chosen(env: Mapping[str, str] | None = None) -> str:
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
