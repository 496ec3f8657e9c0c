"""``controller/barrier.py``: a waiter only ever uses a barrier that started after it arrived, and concurrent
waiters share barriers (at most one running and one waiting)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from system_under_test.controller.barrier import SharedBarrier


class Recorder:
    """A barrier that takes one loop turn per step and records when each one started and ended."""

    def __init__(self, fail_at: frozenset[int] = frozenset()) -> None:
        self.clock = 0
        self.spans: list[tuple[int, int]] = []
        self.fail_at = fail_at

    async def run(self) -> None:
        start = self.clock
        n = len(self.spans)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        self.spans.append((start, self.clock))
        if n in self.fail_at:
            raise RuntimeError(f"barrier {n} failed")


@settings(max_examples=60, deadline=None)
@given(gaps=st.lists(st.integers(0, 3), min_size=1, max_size=25), fail_at=st.frozensets(st.integers(0, 10)))
def test_each_waiter_passes_a_barrier_that_started_after_it_arrived(gaps: list[int], fail_at: frozenset[int]) -> None:
    async def main() -> list[tuple[int, object]]:
        rec = Recorder(fail_at)
        b = SharedBarrier(rec.run)

        async def waiter(arrived: int) -> tuple[int, object]:
            try:
                await b.wait()
            except RuntimeError as exc:
                return arrived, exc
            return arrived, rec.spans[-1]

        tasks = []
        for gap in gaps:
            for _ in range(gap):
                rec.clock += 1
                await asyncio.sleep(0)
            tasks.append(asyncio.ensure_future(waiter(rec.clock)))
            rec.clock += 1
        results = await asyncio.gather(*tasks)
        # every barrier that ran started after some waiter arrived, and runs never overlap
        for (s1, e1), (s2, _) in zip(rec.spans, rec.spans[1:], strict=False):
            assert s1 <= e1 <= s2
        assert len(rec.spans) <= len(gaps)
        return results

    for arrived, outcome in asyncio.run(main()):
        if isinstance(outcome, tuple):
            assert outcome[0] >= arrived, f"a waiter that arrived at {arrived} used a barrier started at {outcome[0]}"


def test_waiters_that_arrive_together_share_one_barrier_and_its_failure() -> None:
    async def main() -> None:
        rec = Recorder(frozenset({0}))
        b = SharedBarrier(rec.run)
        results = await asyncio.gather(*(b.wait() for _ in range(10)), return_exceptions=True)
        assert len(rec.spans) == 1
        assert all(isinstance(r, RuntimeError) for r in results)
        await b.wait()  # the next barrier starts afresh and passes
        assert len(rec.spans) == 2

    asyncio.run(main())


def test_a_cancelled_waiter_does_not_cancel_the_shared_barrier() -> None:
    async def main() -> None:
        rec = Recorder()
        b = SharedBarrier(rec.run)
        first = asyncio.ensure_future(b.wait())
        second = asyncio.ensure_future(b.wait())
        await asyncio.sleep(0)
        first.cancel()
        await second
        with pytest.raises(asyncio.CancelledError):
            await first
        assert len(rec.spans) == 1

    asyncio.run(main())
