"""Delta debugging (ddmin) over a schedule's fault units: the smallest schedule that still fails.

Zeller and Hildebrandt's ddmin, as a pure coroutine so the caller decides how to test a candidate
(here: rerun the cluster with that schedule, K times) and the algorithm never sees a clock or a
process.  :func:`ddmin` yields candidates -- sorted tuples of unit indices -- and is sent back whether
the candidate still fails; its return value (``StopIteration.value``) is the smallest failing set found.
Candidates already answered are not asked again.  The empty set is asked first: when the failure
needs no fault at all, shrinking is over at once.

Units are a schedule's faults each with its undo step (:func:`nemesis.schedule.units`), so removing a
unit never leaves a fault without its heal.

Guarantee (ddmin's): the result is 1-minimal when the test is deterministic -- removing any single unit
makes it pass.  Real reruns are not deterministic; answering "fails" when any of K reruns failed makes
the result the smallest set that *can* still fail.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence

__all__ = ["Candidate", "ddmin", "run_ddmin"]

Candidate = tuple[int, ...]


def _split(items: Sequence[int], n: int) -> list[tuple[int, ...]]:
    size, rest = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < rest else 0)
        out.append(tuple(items[start:end]))
        start = end
    return [c for c in out if c]


def ddmin(count: int) -> Generator[Candidate, bool, Candidate]:
    """ddmin over units ``0..count-1``, assuming the full set fails (see the module docstring)."""
    seen: dict[Candidate, bool] = {}

    def ask(c: Candidate) -> Generator[Candidate, bool, bool]:
        if c not in seen:
            seen[c] = bool((yield c))
        return seen[c]

    current: Candidate = tuple(range(count))
    if count == 0:
        return current
    if (yield from ask(())):
        return ()
    n = 2
    while len(current) >= 2:
        n = min(n, len(current))
        chunks = _split(current, n)
        reduced = False
        for chunk in chunks:  # does one chunk alone still fail?
            if (yield from ask(chunk)):
                current, n, reduced = chunk, 2, True
                break
        if not reduced:
            for chunk in chunks:  # does everything but one chunk still fail?
                rest = tuple(i for i in current if i not in chunk)
                if (yield from ask(rest)):
                    current, n, reduced = rest, max(n - 1, 2), True
                    break
        if not reduced:
            if n >= len(current):
                break
            n = min(2 * n, len(current))
    return current


def run_ddmin(count: int, fails: dict[Candidate, bool]) -> tuple[Candidate, list[Candidate]]:
    """Drive :func:`ddmin` with known answers (``fails``; unknown candidates pass): the result and
    the candidates asked, in order.  For tests and for planning."""
    gen = ddmin(count)
    asked: list[Candidate] = []
    try:
        c = next(gen)
        while True:
            asked.append(c)
            c = gen.send(fails.get(c, False))
    except StopIteration as stop:
        return stop.value, asked
