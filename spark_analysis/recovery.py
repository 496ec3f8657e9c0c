"""Recovery per fault window, computed by the per-run checker's own function (pure; no Spark).

Each run's ``results.json`` carries ``perf.availability``: per fault window, how long client ops kept failing
after the fault started and the RTO, the time from the heal to the first ``ok`` completion
(:func:`checker.perf.availability`).  The warehouse must report the same figures, so this module does not
define recovery a second time: it hands the warehouse's fault windows (:mod:`spark_analysis.faults`) and the
run's client completions (:func:`checker.perf.latency_points`) to that very function.

Vocabulary (the checker's): **unavailable_s** is the time from the window's start to the last ``fail``/``info``
completion before the next window starts; **recovery_s** (RTO) is the time from the window's end (its heal) to
the first ``ok`` completion at or after it, wherever that falls -- a later fault window starting in between
does not hide it.  Both are None when there is no such op; recovery is None for a window never healed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from spark_analysis.faults import FaultWindow

__all__ = ["WindowRecovery", "window_recovery"]

_NS_PER_S = 1e9


@dataclass(frozen=True, slots=True)
class WindowRecovery:
    """Recovery figures of one fault window (seconds; see the module docstring)."""

    seq: int
    unavailable_s: float | None
    recovery_s: float | None


def window_recovery(ops: Sequence[Mapping[str, Any]], windows: Sequence[FaultWindow]) -> list[WindowRecovery]:
    """Per window of ``windows`` (start order), its unavailability and RTO as the per-run checker computes them.

    Args:
        ops: the run's history ops (dicts with ``index``, ``time``, ``type``, ``process``, ``f``) in history
            order; ops without a ``process`` are skipped (they cannot be paired with their invocation).
        windows: the run's fault windows, as :func:`spark_analysis.faults.fault_windows` returns them.
    """
    if not windows:
        return []
    # imported here: checker.perf also holds the plots, and matplotlib would slow every `import spark_analysis`
    from checker.perf import Window, availability, latency_points

    points = latency_points(o for o in ops if "process" in o)
    perf_windows = [Window(w.kind, w.start_ns / _NS_PER_S, w.end_ns / _NS_PER_S, "heal" if w.healed else None, 0, 0)
                    for w in windows]
    return [WindowRecovery(w.seq, a.last_failure_s, a.rto_s)
            for w, a in zip(windows, availability(points, perf_windows))]
