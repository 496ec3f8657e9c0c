"""PNG perf plots (matplotlib, Agg canvas, no pyplot global state): latency and rate, fault windows shaded."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from checker.perf._stats import LatencyPoint, Window, quantile_series, rate_series

TYPE_COLOURS = {"ok": "#2ca02c", "info": "#ff7f0e", "fail": "#d62728"}
_WINDOW_COLOURS = ("#1f77b4", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def _shade(ax: Axes, windows: Sequence[Window]) -> None:
    """Shade each fault window, one colour and one legend entry per nemesis f."""
    colours: dict[str, str] = {}
    for w in windows:
        first = w.f not in colours
        c = colours.setdefault(w.f, _WINDOW_COLOURS[len(colours) % len(_WINDOW_COLOURS)])
        ax.axvspan(w.start_s, max(w.end_s, w.start_s + 1e-3), color=c, alpha=0.15, label=w.f if first else None)


def bucket_seconds(points: Sequence[LatencyPoint]) -> float:
    """A time bucket giving about 100 buckets over the history (at least 10 ms)."""
    span = max((p.time_s for p in points), default=0.0)
    return max(0.01, span / 100.0)


def plot_latency(points: Sequence[LatencyPoint], windows: Sequence[Window], path: str | Path, *,
                 title: str = "latency") -> None:
    """Scatter of every op's latency (colour = type, marker = f), ok-quantile lines, fault windows shaded."""
    fig = Figure(figsize=(11, 5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    _shade(ax, windows)
    fs = sorted({p.f for p in points})
    for i, f in enumerate(fs):
        for ty, colour in TYPE_COLOURS.items():
            sel = [p for p in points if p.f == f and p.type == ty]
            if sel:
                ax.scatter([p.time_s for p in sel], [max(p.latency_ms, 1e-3) for p in sel], s=4, c=colour,
                           marker=_MARKERS[i % len(_MARKERS)], alpha=0.5, linewidths=0, label=f"{f} {ty}")
    for f, series in quantile_series(points, bucket_s=bucket_seconds(points)).items():
        for q, pts in series.items():
            if pts:
                ax.plot([t for t, _ in pts], [max(v, 1e-3) for _, v in pts], linewidth=1, label=f"{f} p{q * 100:g}")
    if points:
        ax.set_yscale("log")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("latency (ms)")
    ax.set_title(title)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", fontsize=6, ncol=3, markerscale=3)
    fig.tight_layout()
    fig.savefig(str(path), format="png")


def plot_rate(points: Sequence[LatencyPoint], windows: Sequence[Window], path: str | Path, *,
              title: str = "throughput") -> None:
    """Completions per second by f and type (ok solid, info dashed, fail dotted), fault windows shaded."""
    fig = Figure(figsize=(11, 4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    _shade(ax, windows)
    styles = {"ok": "-", "info": "--", "fail": ":"}
    for (f, ty), pts in sorted(rate_series(points, bucket_s=bucket_seconds(points)).items()):
        ax.plot([t for t, _ in pts], [r for _, r in pts], styles.get(ty, "-"), color=TYPE_COLOURS.get(ty, "k"),
                linewidth=1, label=f"{f} {ty}")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("ops / s")
    ax.set_title(title)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", fontsize=7, ncol=4)
    fig.tight_layout()
    fig.savefig(str(path), format="png")
