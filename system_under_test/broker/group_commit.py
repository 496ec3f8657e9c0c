"""Group commit for the SYNC flush mode: sends that arrive while an fsync is running share the
next append (one write, one fsync) instead of queueing for an fsync each.

Under SYNC a send is acknowledged only after its records are durable, and ``MessageStore.put``
writes and fsyncs under the store lock.  Put once per send, 32 concurrent producers wait for 32
fsyncs in a row, and the lock held during each fsync also stalls the event loop whenever it reads
the log for the slaves.  Here at most one put runs (in a worker thread); everything submitted
meanwhile goes into the following one.  The batch size follows the fsync latency by itself.

Per-send semantics are those of one put per send: each send's records stay contiguous, in submit
order; a store failure (full disk, I/O error) fails every send of that put and none of their
records was appended (``put`` is all or nothing).  A record refused for its own size
(``OffsetError``) must not fail its neighbours, so a group refused that way is put again one send
at a time.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence

from system_under_test import grouping
from system_under_test.broker.store import OffsetError, PutResult, Record

Put = Callable[[Sequence[Record]], list[PutResult]]
_Item = tuple[Sequence[Record], "asyncio.Future[list[PutResult]]"]


class GroupCommit:
    """Serialises puts of one store through a worker thread, merging the ones that wait.

    Args:
        put: the store's ``put`` (blocking: write + fsync).
        max_records: the most records merged into one put (a longer queue is split).
    """

    def __init__(self, put: Put, *, max_records: int = 4096) -> None:
        if max_records < 1:
            raise ValueError(f"max_records must be >= 1, got {max_records}")
        self._put = put
        self.max_records = max_records
        self._queue: deque[_Item] = deque()
        self._runner: asyncio.Task[None] | None = None
        self.puts = 0  # store puts made, counting the one-by-one retries after an OffsetError
        self.sends = 0  # sends carried by them (sends / puts = how much merging happened)

    async def put(self, records: Sequence[Record]) -> list[PutResult]:
        """Append ``records`` durably; returns where each landed.  Raises what ``put`` raises."""
        fut: asyncio.Future[list[PutResult]] = asyncio.get_running_loop().create_future()
        self._queue.append((records, fut))
        if self._runner is None or self._runner.done():
            self._runner = asyncio.get_running_loop().create_task(self._drain())
        return await fut

    def _take(self) -> list[_Item]:
        group: list[_Item] = []
        n = 0
        while self._queue and (not group or n + len(self._queue[0][0]) <= self.max_records):
            item = self._queue.popleft()
            if not item[1].done():  # a cancelled send drops out before it is written
                group.append(item)
                n += len(item[0])
        return group

    async def _drain(self) -> None:
        while self._queue:
            group = self._take()
            if not group:
                continue
            try:
                await self._commit(group)
            except asyncio.CancelledError:
                grouping.cancel(group)
                raise

    async def _commit(self, group: list[_Item]) -> None:
        self.puts += 1
        self.sends += len(group)
        try:
            results = await asyncio.to_thread(self._put, [r for records, _ in group for r in records])
        except OffsetError as exc:
            if len(group) == 1:
                grouping.fail(group, exc)
                return
            for item in group:  # someone's record was refused for its size: find whose, one by one
                await self._commit([item])
            return
        except Exception as exc:
            grouping.fail(group, exc)
            return
        grouping.settle(group, results)
