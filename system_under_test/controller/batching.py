"""Group commit for controller writes: the events of every write decided in one event-loop
iteration go into one Raft entry.

Under load most of a write's cost is per Raft entry, not per event: the core's bookkeeping, the
log record with its CRC, the AppendEntries encoding on the leader and decoding on each follower,
one pending future.  Pipelined clients deliver many requests per socket read, so their decisions
arrive together; proposing them as one entry pays those costs once.  Apply order is unchanged
(the events apply one after another, in submit order, exactly as if proposed one by one), and
each write still gets its own apply results and its own failure: a dropped or unconfirmed entry
fails every write in it with the same outcome (definitely not committed, or unknown).

Broker epochs stay what KIP-631 makes them, the Raft index of the registration record: two
registrations that share an entry belong to different brokers (a second claim of the same broker
id in one entry is refused at apply time by its epoch precondition), so no broker sees one epoch
twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from system_under_test import grouping
from system_under_test.controller.events import Event, encode_events
from system_under_test.controller.state_machine import ApplyResult

Propose = Callable[[bytes], Awaitable[tuple[int, Any]]]


class ProposalBatcher:
    """Collects event lists submitted in one loop iteration and proposes them as one entry.

    Args:
        propose: proposes one encoded entry and resolves with (index, apply results), as
            ``RaftNode.propose`` does; its exceptions reach every write of the entry.
        max_events: an entry never carries more events than this (a larger backlog is split).
        encode: turns the events of one entry into its data (the server's remembers them, so the
            leader applies its own entries without decoding them again).
    """

    def __init__(self, propose: Propose, *, max_events: int = 1024,
                 encode: Callable[[list[Event]], bytes] = encode_events) -> None:
        if max_events < 1:
            raise ValueError(f"max_events must be >= 1, got {max_events}")
        self._propose = propose
        self._encode = encode
        self.max_events = max_events
        self._batch: list[tuple[Sequence[Event], asyncio.Future[list[ApplyResult]]]] = []
        self._batch_events = 0
        self._flush_scheduled = False
        self._tasks: set[asyncio.Task[None]] = set()

    def submit(self, events: Sequence[Event]) -> asyncio.Future[list[ApplyResult]]:
        """Queue one write's events; the future resolves with their apply results, in order."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[list[ApplyResult]] = loop.create_future()
        if self._batch and self._batch_events + len(events) > self.max_events:
            self._flush()
        self._batch.append((events, fut))
        self._batch_events += len(events)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._flush)
        return fut

    def _flush(self) -> None:
        self._flush_scheduled = False
        batch = [(evs, fut) for evs, fut in self._batch if not fut.done()]  # cancelled writes drop out
        self._batch = []
        self._batch_events = 0
        if not batch:
            return
        task = asyncio.get_running_loop().create_task(self._commit(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _commit(self, batch: list[tuple[Sequence[Event], asyncio.Future[list[ApplyResult]]]]) -> None:
        try:
            _, results = await self._propose(self._encode([e for evs, _ in batch for e in evs]))
        except asyncio.CancelledError:
            grouping.cancel(batch)
            raise
        except Exception as exc:
            grouping.fail(batch, exc)
            return
        grouping.settle(batch, list(results or []))
