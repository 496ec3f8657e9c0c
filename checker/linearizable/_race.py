"""Two search orders raced over one partition, so that neither order's worst case decides the running time.

The first lane tries candidates earliest return first, indeterminate calls last: on most histories it walks
straight down the real order, about one step per call.  It starves indeterminate calls, though: when a valid
order needs an ``info`` write early (a read sees its value), it explores every order of the determinate calls
first, and on histories with a tiny value alphabet that is exponential.  The second lane, started only once
the first has spent ``4 n + 1024`` steps on an ``n``-call partition that has indeterminate calls (without
them the first lane's order is the faster one), tries candidates in invoke order, as
porcupine does, which finds such witnesses at once.  From then on the two lanes take turns of ``_SLICE``
steps and the first to finish decides.  Both are exhaustive searches of the same (linearized set, state)
graph, so they reach the same verdict; an invalid verdict names the same first failing call either way (the
deepest return frontier over all reachable nodes does not depend on the order; see ``_search`` rule 8 for
the early stop, which also depends only on the node).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from checker.linearizable._calls import Call
from checker.linearizable._search import RUNNING, PartitionSearch
from checker.models import Model

_SLICE = 256
_RACE_MIN = 1024
_NEVER = 1 << 62


class RacedSearch:
    """A ``PartitionSearch`` of one partition, raced against an invoke-order lane once it has struggled.

    Same interface as ``PartitionSearch`` where ``_check`` uses it: ``run``, ``status``, ``steps``,
    ``cache_entries``, ``size``, ``n``, ``key``, ``model``, ``all_calls``, ``failing_call``, ``linearization``,
    ``state_at_best`` and ``frontier_states`` (the last four from the lane that finished, or the first lane while
    both run).
    """

    def __init__(self, model: Model, calls: Sequence[Call], key: Hashable = None, hint: Call | None = None,
                 *, race_after: int | None = None) -> None:
        self.first = PartitionSearch(model, calls, key, hint)
        self.rival: PartitionSearch | None = None
        self.winner = self.first
        if race_after is None:
            # Only indeterminate calls starve in the first lane; without them it alone is the faster order.
            race_after = 4 * self.first.n + _RACE_MIN if self.first.info_mask else _NEVER
        self.race_after = race_after
        self.model = model
        self.key = key
        self.size = self.first.size
        self.n = self.first.n
        self.all_calls = self.first.all_calls

    @property
    def status(self) -> str:
        return self.winner.status

    @property
    def steps(self) -> int:
        return self.first.steps + (self.rival.steps if self.rival is not None else 0)

    @property
    def cache_entries(self) -> int:
        return self.first.cache_entries + (self.rival.cache_entries if self.rival is not None else 0)

    def run(
        self, max_steps: int, deadline: float | None = None, clock: Callable[[], float] | None = None,
        cache_limit: int | None = None,
    ) -> str:
        """Advance by at most about ``max_steps`` steps in all; return RUNNING, VALID or INVALID.

        Returns RUNNING early, as ``PartitionSearch.run`` does, once the deadline passes or the caches of
        both lanes together hold more than ``cache_limit`` entries.
        """
        first = self.first
        if self.winner.status != RUNNING:
            return self.winner.status
        done = 0
        if self.rival is None:
            budget = max(min(max_steps, self.race_after - first.steps), 1)
            before = first.steps
            status = first.run(budget, deadline, clock, cache_limit)
            done = first.steps - before
            if status != RUNNING or done < budget or done >= max_steps:
                return status
            self.rival = first.fork()
            if self.rival.status != RUNNING:
                return self._finish(self.rival, first)
        rival = self.rival
        while done < max_steps:
            for lane, other in ((first, rival), (rival, first)):
                quantum = min(_SLICE, max(max_steps - done, 1))
                limit = None if cache_limit is None else max(cache_limit - other.cache_entries, 0)
                before = lane.steps
                status = lane.run(quantum, deadline, clock, limit)
                done += lane.steps - before
                if status != RUNNING:
                    return self._finish(lane, other)
                if lane.steps - before < quantum:
                    return RUNNING  # the deadline passed or the caches are full: the caller decides
        return RUNNING

    def _finish(self, lane: PartitionSearch, other: PartitionSearch) -> str:
        self.winner = lane
        other.release()
        return lane.status

    def failing_call(self) -> Call | None:
        return self.winner.failing_call()

    def linearization(self) -> list[tuple[Call, Hashable]]:
        return self.winner.linearization()

    def state_at_best(self) -> Hashable:
        return self.winner.state_at_best()

    def frontier_states(self) -> list[Hashable]:
        return self.winner.frontier_states()
