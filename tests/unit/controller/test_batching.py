"""ProposalBatcher: writes of one loop iteration share one entry, and each gets its own results."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from system_under_test.controller.batching import ProposalBatcher
from system_under_test.controller.events import UpdateBrokerAddress, decode_events
from system_under_test.controller.state_machine import ApplyResult
from system_under_test.raft import ProposalDropped


def _ev(i: int) -> UpdateBrokerAddress:
    return UpdateBrokerAddress("c", "b", 1, f"10.0.0.{i}:1")


class FakeRaft:
    """Applies each entry by echoing one result per event (index = position in the whole log)."""

    def __init__(self, fail: Exception | None = None) -> None:
        self.entries: list[list[Any]] = []
        self.fail = fail

    async def propose(self, data: bytes) -> tuple[int, Any]:
        events = decode_events(data)
        self.entries.append(events)
        await asyncio.sleep(0)
        if self.fail is not None:
            raise self.fail
        return len(self.entries), [ApplyResult(0, e.broker_addr, len(self.entries)) for e in events]


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=30),
       max_events=st.integers(min_value=5, max_value=40))
def test_each_write_gets_exactly_its_own_results_in_order(sizes: list[int], max_events: int) -> None:
    async def run() -> tuple[FakeRaft, list[list[ApplyResult]]]:
        raft = FakeRaft()
        b = ProposalBatcher(raft.propose, max_events=max_events)
        n = 0
        futs = []
        for size in sizes:
            futs.append(b.submit([_ev(n + k) for k in range(size)]))
            n += size
        return raft, list(await asyncio.gather(*futs))

    raft, results = asyncio.run(run())
    n = 0
    for size, res in zip(sizes, results, strict=True):
        assert [r.message for r in res] == [f"10.0.0.{n + k}:1" for k in range(size)]
        n += size
    assert all(len(entry) <= max_events for entry in raft.entries)
    assert sum(len(e) for e in raft.entries) == sum(sizes)
    # one loop iteration: only the event limit splits entries
    assert len(raft.entries) == len(_splits(sizes, max_events))


def _splits(sizes: list[int], limit: int) -> list[int]:
    out: list[int] = []
    cur = 0
    for s in sizes:
        if cur and cur + s > limit:
            out.append(cur)
            cur = 0
        cur += s
    return out + [cur]


def test_a_failed_entry_fails_every_write_in_it() -> None:
    async def run() -> list[BaseException | list[ApplyResult]]:
        raft = FakeRaft(fail=ProposalDropped("not leader", "c2"))
        b = ProposalBatcher(raft.propose)
        return list(await asyncio.gather(b.submit([_ev(1)]), b.submit([_ev(2), _ev(3)]), return_exceptions=True))

    assert all(isinstance(r, ProposalDropped) for r in asyncio.run(run()))


def test_a_cancelled_write_is_left_out_of_the_entry() -> None:
    async def run() -> FakeRaft:
        raft = FakeRaft()
        b = ProposalBatcher(raft.propose)
        gone = b.submit([_ev(1)])
        kept = b.submit([_ev(2)])
        gone.cancel()
        assert [r.message for r in await kept] == ["10.0.0.2:1"]
        return raft

    assert [[e.broker_addr for e in entry] for entry in asyncio.run(run()).entries] == [["10.0.0.2:1"]]


def test_writes_of_later_iterations_go_into_later_entries() -> None:
    async def run() -> FakeRaft:
        raft = FakeRaft()
        b = ProposalBatcher(raft.propose)
        first = b.submit([_ev(1)])
        await asyncio.sleep(0)
        second = b.submit([_ev(2)])
        await asyncio.gather(first, second)
        return raft

    assert len(asyncio.run(run()).entries) == 2


def test_max_events_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_events"):
        ProposalBatcher(FakeRaft().propose, max_events=0)
