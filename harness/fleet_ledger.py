"""The ledger of a fleet's runs: what each submitted run is doing, the counts and the ETA the progress line shows.

Theory of operation.  A *fleet* is a pool that runs ``splitbrain test`` children (:mod:`harness.fleet`): on this
machine's process pool or as Spark tasks.  Every submitted run has a *key* (its submission index) and one of three
states, moved only by this module's transition table:

* ``QUEUED``   -- submitted, no attempt running (not started yet, or its host was lost and it waits for a retry);
* ``RUNNING``  -- an attempt is running on some host;
* ``FINISHED`` -- its result arrived (exit code known).  Final.

The shells report what they *observe*, never what they guess: the local pool says "running" when it starts a child;
the Spark pool polls Spark's status tracker, which says per run whether a task is active and how many task attempts
failed (an attempt fails only when its executor is lost: the task itself never raises).  A poll is a snapshot taken
at some moment, so it may arrive after the run's result: an observation of a finished run is ignored, and lost
attempts only ever grow.  A result that arrives twice for one key is a bug in the shell and raises.

Rules of this file: no clock, no I/O; ``now_s`` is an argument (any monotonic clock, seconds).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

__all__ = [
    "TRANSITIONS", "Counts", "Ledger", "LedgerError", "RunRecord", "RunState", "counts", "eta_s", "finished",
    "observed", "progress_line", "submitted",
]


class LedgerError(ValueError):
    """An event the ledger cannot take (names the key, its state and the event): a bug in the calling shell."""


class RunState(enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"


# (state, event) -> next state.  Events: "run" (an attempt is active), "wait" (none is), "finish" (the result).
# A missing pair is illegal.  Observations of a finished run are stale polls and leave it finished.
TRANSITIONS: Mapping[tuple[RunState, str], RunState] = MappingProxyType({
    (RunState.QUEUED, "run"): RunState.RUNNING,
    (RunState.QUEUED, "wait"): RunState.QUEUED,
    (RunState.QUEUED, "finish"): RunState.FINISHED,
    (RunState.RUNNING, "run"): RunState.RUNNING,
    (RunState.RUNNING, "wait"): RunState.QUEUED,
    (RunState.RUNNING, "finish"): RunState.FINISHED,
    (RunState.FINISHED, "run"): RunState.FINISHED,
    (RunState.FINISHED, "wait"): RunState.FINISHED,
})


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One submitted run: its label, state, attempts lost with their host so far, and (finished) its exit code."""

    label: str
    state: RunState = RunState.QUEUED
    lost_attempts: int = 0
    exit_code: int | None = None

    def __post_init__(self) -> None:
        if self.lost_attempts < 0:
            raise ValueError(f"RunRecord {self.label!r}: lost_attempts must be >= 0, got {self.lost_attempts}")
        if (self.exit_code is None) != (self.state is not RunState.FINISHED):
            raise ValueError(f"RunRecord {self.label!r}: an exit code exactly when finished, got state "
                             f"{self.state.value} with exit code {self.exit_code!r}")


@dataclass(frozen=True, slots=True)
class Ledger:
    """Every run submitted to one pool, by key; ``started_s`` is when the pool opened (same clock as ``now_s``)."""

    started_s: float
    records: Mapping[int, RunRecord] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class Counts:
    """``total`` submitted = ``queued`` + ``running`` + ``done``; ``failed`` of the done exited non-zero;
    ``retried`` is the number of attempts lost with their host and run again."""

    total: int
    queued: int
    running: int
    done: int
    failed: int
    retried: int


def _step(ledger: Ledger, key: int, event: str, **changes: object) -> Ledger:
    record = ledger.records.get(key)
    if record is None:
        raise LedgerError(f"fleet ledger: event {event!r} for run {key}, which was never submitted")
    nxt = TRANSITIONS.get((record.state, event))
    if nxt is None:
        raise LedgerError(f"fleet ledger: run {key} ({record.label!r}) is {record.state.value}; "
                          f"event {event!r} is not allowed there (a result delivered twice?)")
    if record.state is RunState.FINISHED:
        return ledger  # a stale poll
    new = replace(record, state=nxt, **changes)  # type: ignore[arg-type]
    return replace(ledger, records=MappingProxyType({**ledger.records, key: new}))


def submitted(ledger: Ledger, key: int, label: str) -> Ledger:
    """``key`` joins the ledger, queued.

    Raises:
        LedgerError: ``key`` was submitted before.
    """
    if key in ledger.records:
        raise LedgerError(f"fleet ledger: run {key} ({label!r}) submitted twice")
    return replace(ledger, records=MappingProxyType({**ledger.records, key: RunRecord(label)}))


def observed(ledger: Ledger, key: int, *, running: bool, lost_attempts: int = 0) -> Ledger:
    """What a poll saw of ``key``: an attempt active or not, and how many attempts were lost so far (a count that
    never goes down: an older, smaller figure is ignored).  Ignored for a finished run."""
    record = ledger.records.get(key)
    lost = max(lost_attempts, record.lost_attempts) if record is not None else lost_attempts
    return _step(ledger, key, "run" if running else "wait", lost_attempts=lost)


def finished(ledger: Ledger, key: int, *, exit_code: int, lost_attempts: int = 0) -> Ledger:
    """The result of ``key`` arrived: its exit code and the attempts it lost (the result's figure is the truth)."""
    record = ledger.records.get(key)
    lost = max(lost_attempts, record.lost_attempts) if record is not None else lost_attempts
    return _step(ledger, key, "finish", exit_code=exit_code, lost_attempts=lost)


def counts(ledger: Ledger) -> Counts:
    by = {s: 0 for s in RunState}
    failed = retried = 0
    for r in ledger.records.values():
        by[r.state] += 1
        retried += r.lost_attempts
        failed += r.state is RunState.FINISHED and r.exit_code != 0
    return Counts(total=len(ledger.records), queued=by[RunState.QUEUED], running=by[RunState.RUNNING],
                  done=by[RunState.FINISHED], failed=failed, retried=retried)


def eta_s(ledger: Ledger, now_s: float) -> float | None:
    """Seconds until every submitted run is done, at the throughput seen so far (runs done per second since the
    pool opened: it already reflects how many run at once); None before the first run is done.  0 when all are."""
    c = counts(ledger)
    if c.done == c.total:
        return 0.0
    elapsed = now_s - ledger.started_s
    if c.done == 0 or elapsed <= 0:
        return None
    return (c.total - c.done) * elapsed / c.done


def _duration(seconds: float) -> str:
    s = round(seconds)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{sec:02d}s" if m else f"{sec}s")


def progress_line(ledger: Ledger, now_s: float, width: int | None = None) -> str:
    """``fleet: 12/40 done (2 failed), 4 running, 24 queued, 1 retried | 6m10s elapsed, ETA 14m30s``, cut to
    ``width`` characters (the elapsed/ETA part is dropped first)."""
    c = counts(ledger)
    eta = eta_s(ledger, now_s)
    head = (f"fleet: {c.done}/{c.total} done ({c.failed} failed), {c.running} running, {c.queued} queued, "
            f"{c.retried} retried")
    text = f"{head} | {_duration(max(0.0, now_s - ledger.started_s))} elapsed, ETA " \
           f"{'?' if eta is None else _duration(eta)}"
    if width is None or len(text) <= width:
        return text
    return head if len(head) <= width else head[: max(0, width - 1)] + "…"
