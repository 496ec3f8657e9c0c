"""The terminal table of many runs (``splitbrain test`` with ``--test-count``, ``splitbrain test-all``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.runs import RunSummary

__all__ = ["print_table", "summary_table"]

_STYLE = {"valid": "green", "invalid": "red", "unknown": "yellow", "crashed": "magenta", "incomplete": "dim"}


def summary_table(rows: Sequence[tuple[str, RunSummary]], *, title: str = "splitbrain runs") -> Any:
    """A ``rich`` table: spec, seed, verdict, anomalies, time, results dir -- one row per run."""
    from rich.table import Table

    t = Table(title=title)
    for col in ("spec", "seed", "verdict", "anomalies", "time", "results"):
        t.add_column(col, no_wrap=col in ("seed", "verdict", "time"))
    for spec, s in rows:
        an = ", ".join(f"{k}={v}" for k, v in sorted(s.anomaly_counts.items())) or "-"
        t.add_row(spec, "-" if s.seed is None else str(s.seed), f"[{_STYLE[s.verdict]}]{s.verdict}[/]", an,
                  "-" if s.duration_s is None else f"{s.duration_s:.1f}s", s.rel_path)
    return t


def print_table(rows: Sequence[tuple[str, RunSummary]], *, title: str = "splitbrain runs") -> None:
    """Print :func:`summary_table`; 220 columns when stdout is not a terminal (CI logs: never wrap the paths)."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console = Console(width=220)
    console.print(summary_table(rows, title=title))
