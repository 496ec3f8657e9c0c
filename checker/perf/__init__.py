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
    LatencyPoint,
    Window,
    availability,
    fault_detail,
    healing_f,
    latency_points,
    nemesis_windows,
    op_counts,
    quantile,
    quantile_series,
    rate_series,
)

__all__ = [
    "FAULT_COLOURS", "NEMESIS_PAIRS", "OP_COLOURS", "QUANTILES", "TYPE_COLOURS", "Availability", "LatencyPoint",
    "Window", "analyze_perf", "availability", "fault_colour", "fault_detail", "healing_f", "latency_points",
    "nemesis_windows", "op_colour", "op_colours", "op_counts", "perf_stats", "plot_latency", "plot_rate", "quantile",
    "quantile_series", "rate_series",
]


def perf_stats(points: list[LatencyPoint], windows: list[Window]) -> dict[str, Any]:
    """JSON-ready statistics: counts, ok-latency quantiles per f (ms), windows and availability."""
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
    return perf_stats(points, windows)
