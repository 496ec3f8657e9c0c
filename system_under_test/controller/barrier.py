"""One read barrier shared by every request that waits for one.

The leader decides reads, broker heartbeats and controlled-shutdown requests after a read-index barrier
(``controller/routing.py``).  Heartbeats arrive from every broker every interval, and a barrier is a heartbeat
round to the followers, so the controller shares barriers the way etcd's linearizable-read loop does: a
request may only use a barrier that *started after it arrived* (a barrier confirms leadership and the commit
index as of its start), so one arriving while a barrier is in flight waits for the next, which starts as soon
as the one in flight ends; every request that arrives meanwhile shares that next barrier.  At most one barrier
runs and one waits, however many requests there are.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

__all__ = ["SharedBarrier"]


class SharedBarrier:
    """Coalesces ``run`` (one read barrier) over concurrent waiters (module docstring)."""

    def __init__(self, run: Callable[[], Awaitable[None]]) -> None:
        self._run = run
        self._running: asyncio.Future[None] | None = None
        self._next: asyncio.Future[None] | None = None

    async def wait(self) -> None:
        """Return once a barrier that started after this call has passed; raise what it raised."""
        if self._next is None:
            self._next = asyncio.ensure_future(self._start_after(self._running))
        await asyncio.shield(self._next)

    async def _start_after(self, running: asyncio.Future[None] | None) -> None:
        if running is not None:
            with contextlib.suppress(BaseException):  # its waiters got its outcome; this one starts afresh
                await asyncio.shield(running)
        self._running, self._next = self._next, None
        await self._run()
