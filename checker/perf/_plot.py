"""PNG perf plots (matplotlib, Agg canvas, no pyplot global state): latency and rate, fault windows as bands.

Readable when printed in a PR: colour is the op kind (``f``) and the line style/marker the completion type
(:mod:`._colours`, the same table as the timeline), every fault window is a band in its fault kind's colour
with its label written at the top of the band, and both legends (ops, faults) sit to the right of the axes,
never over the data.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from checker.perf._colours import TYPE_STYLES, fault_colour, op_colours
from checker.perf._stats import LatencyPoint, Window, quantile_series, rate_series

_LEGEND_STYLE: dict[str, Any] = {"borderaxespad": 0.0, "fontsize": 7}


def _bands(ax: Axes, windows: Sequence[Window]) -> list[Patch]:
    """Draw each fault window as a band in its kind's colour, labelled at the top; one legend patch per kind."""
    kinds: dict[str, str] = {}
    transform = ax.get_xaxis_transform()  # x in data, y in axes fraction: labels stay at the top
    for i, w in enumerate(windows):
        c = kinds.setdefault(w.f, fault_colour(w.f))
        end = max(w.end_s, w.start_s + 1e-3)
        ax.axvspan(w.start_s, end, color=c, alpha=0.18, linewidth=0)
        ax.axvline(w.start_s, color=c, linewidth=0.8, alpha=0.8)
        ax.text(w.start_s, 0.99 - 0.07 * (i % 3), " " + w.label, transform=transform, fontsize=6.5, color=c,
                va="top", ha="left", clip_on=True, fontweight="bold")
    return [Patch(facecolor=c, alpha=0.35, label=f"fault: {f}") for f, c in kinds.items()]


def bucket_seconds(points: Sequence[LatencyPoint]) -> float:
    """A time bucket giving about 100 buckets over the history (at least 10 ms)."""
    span = max((p.time_s for p in points), default=0.0)
    return max(0.01, span / 100.0)


def _finish(fig: Figure, ax: Axes, fault_patches: list[Patch], path: str | Path, *,
            markerscale: float = 1) -> Figure:
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        legend = ax.legend(handles, labels, title="ops", markerscale=markerscale, loc="upper left",
                           bbox_to_anchor=(1.01, 1.0), **_LEGEND_STYLE)
        if fault_patches:  # a second ax.legend() replaces the first: keep the first as a plain artist
            ax.add_artist(legend)
    if fault_patches:
        ax.legend(handles=fault_patches, title="faults", loc="lower left", bbox_to_anchor=(1.01, 0.0),
                  **_LEGEND_STYLE)
    fig.tight_layout()
    fig.savefig(str(path), format="png", bbox_inches="tight")
    return fig


def plot_latency(points: Sequence[LatencyPoint], windows: Sequence[Window], path: str | Path, *,
                 title: str = "latency") -> Figure:
    """Scatter of every op's latency (colour = f, marker = type), ok-quantile lines, fault windows as bands."""
    fig = Figure(figsize=(12, 5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    patches = _bands(ax, windows)
    colour = op_colours(p.f for p in points)
    for f in sorted(colour):
        for ty, (_, marker) in TYPE_STYLES.items():
            sel = [p for p in points if p.f == f and p.type == ty]
            if sel:
                ax.scatter([p.time_s for p in sel], [max(p.latency_ms, 1e-3) for p in sel], s=6 if ty != "ok" else 4,
                           c=colour[f], marker=marker, alpha=0.55, linewidths=0.6 if marker == "x" else 0,
                           label=f"{f} {ty}")
    dashes = {0.5: (None, 1.6), 0.95: ((0, (4, 2)), 1.0), 0.99: ((0, (1, 1)), 1.0), 1.0: ((0, (6, 2, 1, 2)), 0.8)}
    for f, series in quantile_series(points, bucket_s=bucket_seconds(points)).items():
        for q, pts in series.items():
            if pts and q in (0.5, 0.99):  # median and tail: more lines hide the points
                style, width = dashes[q]
                ax.plot([t for t, _ in pts], [max(v, 1e-3) for _, v in pts], color=colour[f], linewidth=width,
                        linestyle=style or "-", label=f"{f} ok p{q * 100:g}")
    if points:
        ax.set_yscale("log")
    ax.set_xlabel("time since test start (s)")
    ax.set_ylabel("latency (ms, log)")
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    return _finish(fig, ax, patches, path, markerscale=2.5)


def plot_rate(points: Sequence[LatencyPoint], windows: Sequence[Window], path: str | Path, *,
              title: str = "throughput") -> Figure:
    """Completions per second by f (colour) and type (ok solid, info dashed, fail dotted), fault windows as bands."""
    fig = Figure(figsize=(12, 4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    patches = _bands(ax, windows)
    colour = op_colours(p.f for p in points)
    for (f, ty), pts in sorted(rate_series(points, bucket_s=bucket_seconds(points)).items()):
        style = TYPE_STYLES.get(ty, ("-", "o"))[0]
        ax.plot([t for t, _ in pts], [r for _, r in pts], linestyle=style, color=colour[f],
                linewidth=1.4 if ty == "ok" else 1.0, label=f"{f} {ty}")
    ax.set_xlabel("time since test start (s)")
    ax.set_ylabel("completions / s")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    return _finish(fig, ax, patches, path)
