"""What the two group commits share (controller writes merged into one Raft entry, broker SYNC
sends merged into one put): handing each member of a merged operation its own slice of the
results, in submit order, or the failure or cancellation they all share."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence, Sized
from typing import TypeVar

T = TypeVar("T")


def settle(group: Sequence[tuple[Sized, asyncio.Future[list[T]]]], results: Sequence[T]) -> None:
    """Give member i the ``len(items_i)`` results after those of members before it (a member whose
    future is already done -- cancelled -- is skipped, its slice still counted)."""
    pos = 0
    for items, fut in group:
        part = list(results[pos:pos + len(items)])
        pos += len(items)
        if not fut.done():
            fut.set_result(part)


def fail(group: Sequence[tuple[Sized, asyncio.Future[list[T]]]], exc: BaseException) -> None:
    """Every member still waiting fails with ``exc``."""
    for _, fut in group:
        if not fut.done():
            fut.set_exception(exc)


def cancel(group: Sequence[tuple[Sized, asyncio.Future[list[T]]]]) -> None:
    """The merged operation was cancelled (the process is stopping): so is every member."""
    for _, fut in group:
        fut.cancel()
