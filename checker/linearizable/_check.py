"""The entry point: build calls, partition them, and schedule one WGL search per partition fairly.

When the compiled witness search is installed (``_native``), a kv or register history goes first to the fast
path (``_fast``: the compiled core reads it and searches every partition; a witness for each is the verdict).
Otherwise only the partitions the fast path missed get Calls, the pre-check and the Python search; without a
fast path, and when the pre-check doubts no partition, each partition the compiled search covers is offered
to it: a witness it finds is a proof that the partition is linearizable, and a partition it misses goes on to
the Python search as if it had not been tried (``Result.engine`` says which decided).  A valid Result's
linearization of a compiled witness is built, and checked against the Python model, when first read.

Scheduling: partitions that the model's cheap ``impossible`` pre-check proves invalid go first (each search
stops where its frontier reaches the impossible call, having found the first op that cannot be linearized;
a wrong hint caught by the search's guard just means a full search).  Then the others are searched
round-robin, smallest first (a hinted search counts the calls invoked before its impossible call returns),
each round with twice the step quantum of the last, so a cheap partition is never stuck behind an expensive
one; the first invalid partition decides the verdict and stops the rest.  Budgets: a time limit (needs an
injected ``clock``) and a cap on cache entries summed over partitions; exceeding either gives ``"unknown"``
with the cause, never a hang or an out-of-memory crash.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
from collections.abc import Callable, Hashable, Iterable
from operator import itemgetter
from typing import Any

from checker.history import HistoryError, Op, pair_ops
from checker.linearizable._calls import Call, calls_of_pairs, partition_calls
from checker.linearizable._fast import fast_witnesses
from checker.linearizable._native import ENGINE_MISSING, NATIVE_AVAILABLE, Witnessed, native_witness
from checker.linearizable._race import RacedSearch
from checker.linearizable._result import UNKNOWN_VERDICT, Linearization, Result, Shown
from checker.linearizable._search import INVALID, RUNNING, VALID
from checker.models import Inconsistent, Model, ModelError

DEFAULT_MAX_CACHE_ENTRIES = 1_000_000
# (input, output, call_time, ret_time) of a Call, what Model.impossible reads, picked in C
_INTERVAL = itemgetter(*(Call._fields.index(f) for f in ("input", "output", "call_time", "ret_time")))
_FIRST_QUANTUM = 512


def check(
    history: Iterable[Op],
    model: Model,
    *,
    time_limit_s: float | None = None,
    clock: Callable[[], float] | None = None,
    max_cache_entries: int = DEFAULT_MAX_CACHE_ENTRIES,
    fail_policy: str | None = None,
    partition: bool = True,
) -> Result:
    """Check a history for linearizability against ``model``.

    Args:
        history: ops in history order (``checker.history.Op``); nemesis ops are ignored.
        model: a ``checker.models.Model``.
        time_limit_s: give up with valid="unknown", cause="timeout" after this many seconds (needs ``clock``).
        clock: a monotonic seconds clock (e.g. ``time.monotonic``), injected so this core does no I/O.
        max_cache_entries: give up with cause="memory" once the search caches hold this many entries.
        fail_policy: ``"drop"`` / ``"definite"``; overrides ``model.fail_policy``.
        partition: use the model's partition function (P-compositionality).

    Returns:
        A Result; never raises for a bad history or a failing model (those give "unknown" with the error).

    Raises:
        ValueError: ``time_limit_s`` without ``clock``.
    """
    if time_limit_s is not None and clock is None:
        raise ValueError("check(): time_limit_s needs a clock, e.g. clock=time.monotonic")
    start = clock() if clock is not None else None
    deadline = None if time_limit_s is None or start is None else start + time_limit_s
    # The search allocates millions of small acyclic objects; each burst of them starts a cyclic collection that
    # walks every live object, the history's ops included, and on long histories that cost more than the search
    # (register c5 10k: 21 -> 9 us per op).  It makes no reference cycles, so pausing the collector defers
    # nothing of its own; cycles made meanwhile elsewhere are collected once it resumes.
    paused = gc.isenabled()
    gc.disable()
    try:
        result = _check(history, model, deadline, clock, max_cache_entries, fail_policy, partition)
    except (HistoryError, ModelError) as exc:
        result = Result(UNKNOWN_VERDICT, model.describe(), cause=f"error: {exc}")
    except Exception as exc:  # a broken model must not crash the run (jepsen check-safe)
        result = Result(UNKNOWN_VERDICT, model.name, cause=f"error: {type(exc).__name__}: {exc}")
    finally:
        if paused:
            gc.enable()
    if clock is not None and start is not None:
        return _with(result, seconds=clock() - start)
    return result


def _with(result: Result, **changes: Any) -> Result:
    return dataclasses.replace(result, **changes)


def _check(
    history: Iterable[Op], model: Model, deadline: float | None, clock: Callable[[], float] | None,
    max_cache_entries: int, fail_policy: str | None, partition: bool,
) -> Result:
    policy = fail_policy or model.fail_policy
    desc = model.describe()
    known: dict[Hashable, Witnessed] = {}  # partitions the fast path linearized
    fast = None
    if NATIVE_AVAILABLE and partition:
        history = history if isinstance(history, list) else list(history)
        # The compiled search cannot be interrupted (its step budget bounds it): the deadline is read around it,
        # as around each compiled search of the general path.
        fast = None if _late(deadline, clock) else fast_witnesses(history, model, policy)
        if fast is not None and not fast.missed:
            if _late(deadline, clock):
                decided: list[Any] = list(fast.found)
                return dataclasses.replace(_unknown(desc, "timeout", decided, len(fast.found)), engine="native")
            return _valid(desc, fast.found, len(fast.found), "native", model, deadline, clock, max_cache_entries)
    # Partitions as (key, calls); a partition the fast path linearized has its witness in ``known`` and its
    # calls are built only if a search needs them (None here).
    groups: list[tuple[Hashable, list[Call] | None]]
    if fast is not None:
        known = {w.key: w for w in fast.found}
        groups = [(key, fast.missed.get(key)) for key in fast.keys]
    else:
        calls = calls_of_pairs(pair_ops(history), policy)
        groups = list(partition_calls(calls, model)) if partition else [(None, calls)]
    missed = fast.missed if fast is not None else {}  # offered to the compiled search in vain: not again
    nparts = len(groups)
    # Partitions the model's cheap pre-check proves invalid are searched first (each stops at its impossible
    # call), before the others are even set up.  (A history whose partitions all have a compiled witness never
    # gets here when the fast path reads it; this path is for the others, where the pre-check pays, and only
    # the partitions the fast path missed are pre-checked.)
    hinted: list[tuple[float, Hashable, list[Call], Call]] = []
    plain: list[tuple[Hashable, list[Call] | None]] = []
    for key, group in groups:
        # a partition the fast path linearized has no impossible call (the pre-check is sound): not asked
        hit = None if group is None else model.impossible(list(map(_INTERVAL, group)))
        if hit is not None and group is not None and group[hit].determinate:
            hinted.append((group[hit].ret_time, key, group, group[hit]))
        else:
            plain.append((key, group))
    hinted.sort(key=lambda h: h[0])
    searches: list[Any] = []  # RacedSearch, or Witnessed for a partition the compiled search linearized
    # The compiled witness search, on the partitions no pre-check doubts, once none does (a witness is a proof,
    # so a linearized partition needs no Python search; a miss leaves the partition to it).  When some partition
    # is doubted, the Python search of that one usually settles the verdict before the others matter.  The
    # compiled search cannot be interrupted (its step budget bounds it), so the deadline is read around each call.
    native = 0
    if NATIVE_AVAILABLE and not hinted:
        rest: list[tuple[Hashable, list[Call] | None]] = []
        for key, group in plain:
            if deadline is not None and clock is not None and clock() > deadline:
                return dataclasses.replace(_unknown(desc, "timeout", searches, nparts), engine="native")
            if group is None:
                w: Witnessed | None = known[key]
            else:
                w = None if key in missed else native_witness(model, group, key)
            if w is None:
                rest.append((key, group))
            else:
                searches.append(w)
                native += 1
        plain = rest
    engine = ENGINE_MISSING if not NATIVE_AVAILABLE else (
        "native" if native == nparts else ("native+python" if native else "python"))
    if native and deadline is not None and clock is not None and clock() > deadline:
        return dataclasses.replace(_unknown(desc, "timeout", searches, nparts), engine=engine)
    batches: list[list[tuple[Hashable, list[Call] | None, Call | None]]] = [
        [(key, group, hint) for _, key, group, hint in hinted], [(key, group, None) for key, group in plain],
    ]
    for batch in batches:
        live: list[RacedSearch] = []
        for key, group, hint in batch:
            s = RacedSearch(model, known[key].built_calls() if group is None else group, key, hint)
            searches.append(s)
            live.append(s)
            if deadline is not None and clock is not None and clock() > deadline:
                return dataclasses.replace(_unknown(desc, "timeout", searches, nparts), engine=engine)
        outcome = _drive(live, searches, deadline, clock, max_cache_entries)
        if outcome is not None:
            if outcome[0] == INVALID:
                return dataclasses.replace(_invalid(desc, outcome[1], searches, nparts), engine=engine)
            return dataclasses.replace(_unknown(desc, outcome[0], searches, nparts), engine=engine)
    assert all(s.status == VALID for s in searches)
    return _valid(desc, searches, nparts, engine, model, deadline, clock, max_cache_entries)


def _late(deadline: float | None, clock: Callable[[], float] | None) -> bool:
    return deadline is not None and clock is not None and clock() > deadline


def _valid(
    desc: str, searches: list[Any], nparts: int, engine: str, model: Model, deadline: float | None,
    clock: Callable[[], float] | None, max_cache_entries: int,
) -> Result:
    """The Result of a history every partition of which is linearized (``searches``: one per partition), showing
    the largest partition's linearization; a Python search's is read now, a compiled witness's when it is read
    (``_replayed``)."""
    witness = max(searches, key=lambda s: s.n, default=None)  # show the largest partition's linearization
    if witness is None:
        shown = Shown()
    elif isinstance(witness, Witnessed):
        shown = Shown(build=functools.partial(_replayed, witness, model, max_cache_entries))
    else:
        shown = Shown(tuple(witness.all_calls), tuple(witness.linearization()))
    return Result(True, desc, partitions=nparts, steps=sum(s.steps for s in searches),
                  cache_entries=sum(s.cache_entries for s in searches),
                  partition=witness.key if witness else None, shown=shown, engine=engine)


def _replayed(witness: Witnessed, model: Model, max_cache_entries: int) -> tuple[tuple[Call, ...], Linearization]:
    """A compiled witness's calls and linearization, stepped through the Python model.  A witness the model
    refuses is a bug in the compiled core (the differential tests hold it to the Python search): the partition
    is then searched in Python (its linearization is shown; none if it runs out of cache entries), and if it
    proves the partition not linearizable, the verdict was wrong and this raises RuntimeError."""
    calls = tuple(witness.all_calls)
    try:
        return calls, tuple(witness.linearization())
    except ValueError as refused:
        redo = RacedSearch(model, calls, witness.key)
        outcome = _drive([redo], [redo], None, None, max_cache_entries)
        if outcome is not None and outcome[0] != INVALID:
            return calls, ()
        if outcome is not None:
            raise RuntimeError(f"the compiled search linearized partition {witness.key!r}, the Python search does "
                               f"not ({refused}): a bug in native/lincheck; check with the compiled core "
                               "uninstalled") from refused
        return calls, tuple(redo.linearization())


def _drive(
    searches: list[RacedSearch], everyone: list[RacedSearch], deadline: float | None,
    clock: Callable[[], float] | None, max_cache_entries: int,
) -> tuple[str, RacedSearch] | None:
    """Run searches round-robin, smallest first, doubling the quantum each round.

    Returns None when all are valid, (INVALID, search) at the first invalid one, or ("timeout" | "memory", search).
    """
    for s in searches:
        if s.status == INVALID:
            return INVALID, s
    live = sorted((s for s in searches if s.status == RUNNING), key=lambda s: s.size)
    quantum = _FIRST_QUANTUM
    while live:
        still: list[RacedSearch] = []
        for s in live:
            others = sum(x.cache_entries for x in everyone) - s.cache_entries
            status = s.run(quantum, deadline, clock, max(max_cache_entries - others, 0))
            if status == INVALID:
                return INVALID, s
            if status == RUNNING:
                still.append(s)
            if deadline is not None and clock is not None and clock() > deadline:
                return "timeout", s
            if sum(x.cache_entries for x in everyone) > max_cache_entries:
                return "memory", s
        live = still
        quantum *= 2
    return None


def _unknown(desc: str, cause: str, searches: list[RacedSearch], nparts: int) -> Result:
    running = [s for s in searches if s.status == RUNNING]
    biggest = max(running, key=lambda s: s.size, default=None)
    return Result(
        UNKNOWN_VERDICT, desc, cause=cause, partitions=nparts, steps=sum(s.steps for s in searches),
        cache_entries=sum(s.cache_entries for s in searches),
        partition=biggest.key if biggest else None,
        shown=Shown(tuple(biggest.all_calls), tuple(biggest.linearization())) if biggest else Shown(),
    )


def _invalid(desc: str, s: RacedSearch, searches: list[RacedSearch], nparts: int) -> Result:
    call = s.failing_call()
    assert call is not None
    before = [c for c in s.all_calls if c.completion is not None and c.completion.type == "ok"
              and c.ret_time < call.ret_time]
    prev = max(before, key=lambda c: (c.ret_time, c.completion.index if c.completion else 0), default=None)
    res = s.model.step(s.state_at_best(), call.input, call.output)
    reason = res.reason if isinstance(res, Inconsistent) else "no order of the concurrent ops lets it complete"
    return Result(
        False, desc, op=call.completion or call.invoke, call=call,
        previous_ok=prev.completion if prev is not None else None, reason=reason, partition=s.key,
        shown=Shown(tuple(s.all_calls), tuple(s.linearization())), partitions=nparts,
        steps=sum(x.steps for x in searches), cache_entries=sum(x.cache_entries for x in searches),
        frontier_states=tuple(s.frontier_states()),
    )
