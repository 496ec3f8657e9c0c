"""What the release gate learns from one finished run: its cell's kind and the run as a gate observation.

Vocabulary (the gate's, :mod:`spark_analysis.sequential`): a *cell* is one workload x fault package x nemesis mode
of a spec; a *safety* cell runs with safe settings, where one definite anomaly is proof of a bug, and a *rate* cell
runs where anomalies are expected (a planted ``--bug``, an unclean election, acks before every in-sync replica
has the write), so only their frequency can be compared.

Pure: a parsed ``results.json`` and the run's history in, a
:class:`~spark_analysis.sequential.RunOutcome` out; no files, no clock.

* **Verdict**: ``crashed`` when the harness crashed (or left no ``results.json``), else the run's ``valid``
  (true -> ``valid``, false -> ``invalid``, anything else -> ``unknown``).
* **Anomaly kinds** of an invalid run: the anomaly types of every checker whose verdict is false
  (:func:`harness.explain.checker_verdicts`); a failing checker that names no type counts as its own name
  (``queue/stats``), so an invalid run always names at least one kind.
* **Figures per fault kind** (a window's ``f``: ``start-partition``, ``kill``, ...): recovery, how long no write
  succeeded (a failover's length) and p99 latency under each kind -- the per-run checker's own figures
  (:func:`checker.perf.fault_kind_figures`), read from ``results.json``'s ``perf.by_fault_kind``, or computed from
  the history for a run recorded before the checker wrote them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from checker.perf import WRITE_FS, fault_kind_figures, latency_points, nemesis_windows
from harness.explain import checker_verdicts
from harness.protocols import SafetySettings
from spark_analysis.sequential import FaultFigures, RunOutcome

__all__ = ["cell_kind", "fault_figures", "recorded_figures", "run_outcome"]


def cell_kind(options: object) -> str:
    """``rate`` when a cell's cluster options name a setting that makes anomalies expected
    (:class:`harness.protocols.SafetySettings`; our cluster's: :data:`systems.splitbrain.options.SAFE_DEFAULTS`),
    else ``safety`` -- also for options that cannot say (a system with no such settings)."""
    return "rate" if isinstance(options, SafetySettings) and options.unsafe_settings else "safety"


def _verdict(results: Mapping[str, Any] | None) -> str:
    if not isinstance(results, Mapping) or results.get("crashed"):
        return "crashed"
    valid = results.get("valid")
    return "valid" if valid is True else "invalid" if valid is False else "unknown"


def _anomaly_kinds(results: Mapping[str, Any]) -> tuple[str, ...]:
    kinds: set[str] = set()
    for v in checker_verdicts(results):
        if v.valid is False:
            kinds.update([t for t, _ in v.anomalies] or [v.name])
    return tuple(sorted(kinds)) or ("invalid",)


def fault_figures(history: Iterable[Mapping[str, Any]]) -> dict[str, FaultFigures]:
    """Per fault kind, the run's figures computed from its history (:func:`checker.perf.fault_kind_figures`)."""
    ops = list(history)
    end_s = max((float(op.get("time", 0)) / 1e9 for op in ops), default=0.0)
    figures = fault_kind_figures(latency_points(ops), nemesis_windows(ops), write_fs=WRITE_FS, end_s=end_s)
    return {k: FaultFigures(v.recovery_s, v.unavailable_s, v.p99_latency_ms) for k, v in figures.items()}


def recorded_figures(results: Mapping[str, Any]) -> dict[str, FaultFigures] | None:
    """The figures per fault kind ``results.json`` recorded (``perf.by_fault_kind``), or None if it has none."""
    perf = results.get("perf")
    recorded = perf.get("by_fault_kind") if isinstance(perf, Mapping) else None
    if not isinstance(recorded, Mapping):
        return None
    out = {}
    for kind, v in recorded.items():
        if isinstance(v, Mapping):
            try:
                out[str(kind)] = FaultFigures(v.get("recovery_s"), v.get("unavailable_s"), v.get("p99_latency_ms"))
            except ValueError:
                return None
    return out


def run_outcome(*, cell: str, build: str, seed: int, results: Mapping[str, Any] | None,
                history: Iterable[Mapping[str, Any]] | None, ref: str) -> RunOutcome:
    """The gate's view of one run (module docstring); ``ref`` says where it is (its directory)."""
    verdict = _verdict(results)
    if verdict == "crashed":
        return RunOutcome(cell, build, seed, "crashed", ref=ref)
    assert results is not None
    anomalies = _anomaly_kinds(results) if verdict == "invalid" else ()
    figures = recorded_figures(results)
    if figures is None:
        figures = fault_figures(history or ())
    return RunOutcome(cell, build, seed, verdict, anomalies, figures, ref)
