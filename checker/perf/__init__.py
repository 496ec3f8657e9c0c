"""Performance analysis: latency and throughput plots with fault windows as labelled bands, and availability.

Vocabulary (see ``_stats``): a *latency point* is one completed client op (invoke time, latency, type, f); a
*nemesis window* is a fault from its starting nemesis op to its healing op (``NEMESIS_PAIRS`` plus any
``start-X``/``stop-X``); *availability* of a window is how long client ops kept failing after the fault
started and the RTO, the time from the heal to the first ok completion.  These are figures (the release gate
compares them between builds), never a verdict: whether writes resumed in time is :mod:`checker.availability`'s.

Entry point for the harness: :func:`analyze_perf` writes ``latency.png`` and ``rate.png`` into a directory and
returns the statistics (op counts by f and type, latency quantiles, windows, availability) as JSON data.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from checker.perf._colours import FAULT_COLOURS, OP_COLOURS, TYPE_COLOURS, fault_colour, op_colour, op_colours
from checker.perf._plot import plot_latency, plot_rate
from checker.perf._stats import (
    NEMESIS_PAIRS,
    QUANTILES,
    Availability,
    FaultKindFigures,
    LatencyPoint,
    Window,
    availability,
    fault_detail,
    fault_kind_figures,
    healing_f,
    latency_points,
    nemesis_windows,
    op_counts,
    quantile,
    quantile_series,
    rate_series,
    write_gap_s,
)

__all__ = [
    "FAULT_COLOURS", "NEMESIS_PAIRS", "OP_COLOURS", "QUANTILES", "TYPE_COLOURS", "WRITE_FS", "Availability",
    "FaultKindFigures", "LatencyPoint", "Window", "analyze_perf", "availability", "fault_colour", "fault_detail",
    "fault_kind_figures", "healing_f", "latency_points", "nemesis_windows", "op_colour", "op_colours", "op_counts",
    "perf_stats", "plot_latency", "plot_rate", "quantile", "quantile_series", "rate_series", "write_gap_s",
]


def _write_fs() -> frozenset[str]:
    from checker.availability import WORKLOAD_OPS

    return frozenset(f for ops in WORKLOAD_OPS.values() for f in ops.writes)


WRITE_FS = _write_fs()  # every workload's writes (checker.availability.WORKLOAD_OPS, the one table)


def perf_stats(points: list[LatencyPoint], windows: list[Window], *, end_s: float | None = None) -> dict[str, Any]:
    """JSON-ready statistics: counts, ok-latency quantiles per f (ms), windows, availability, and the figures per
    fault kind the release gate compares (``by_fault_kind``; ``end_s``: the history's end, default the last
    completion)."""
    if end_s is None:
        end_s = max((p.time_s + p.latency_ms / 1000.0 for p in points), default=0.0)
    lat: dict[str, dict[str, float]] = {}
    for f in sorted({p.f for p in points}):
        vals = sorted(p.latency_ms for p in points if p.f == f and p.type == "ok")
        if vals:
            lat[f] = {f"p{q * 100:g}": round(quantile(vals, q), 3) for q in QUANTILES}
    return {
        "op_counts": op_counts(points),
        "latency_ms": lat,
        "windows": [{"f": w.f, "detail": w.detail, "start_s": w.start_s, "end_s": w.end_s, "healed_by": w.stop_f}
                    for w in windows],
        "availability": [a.to_dict() for a in availability(points, windows)],
        "by_fault_kind": {k: v.to_dict() for k, v in fault_kind_figures(points, windows, write_fs=WRITE_FS,
                                                                         end_s=end_s).items()},
    }


def analyze_perf(history: Iterable[Any], out_dir: str | Path, *, plots: bool = True) -> dict[str, Any]:
    """Write ``latency.png`` and ``rate.png`` to ``out_dir`` (if ``plots`` and some client op completed) and
    return :func:`perf_stats`.

    Args:
        history: ``Op`` objects or history dicts, in order (iterated once).
        out_dir: an existing directory.
    """
    ops = list(history)
    points = latency_points(ops)
    windows = nemesis_windows(ops)
    if plots and points:  # no completed client op (e.g. a run that crashed in setup): no empty plots
        out = Path(out_dir)
        plot_latency(points, windows, out / "latency.png")
        plot_rate(points, windows, out / "rate.png")
    end_s = max((_time_s(op) for op in ops), default=0.0)
    return perf_stats(points, windows, end_s=end_s)


def _time_s(op: Any) -> float:
    t = op.get("time", 0) if isinstance(op, dict) else getattr(op, "time", 0)
    return float(t or 0) / 1e9
