"""timeline.html and the failing-window picture: a run's ops on a real time axis, with its faults, anomalies
and node logs.

* :func:`timeline_data` (pure) -> :func:`render_page`: the self-contained timeline page (:mod:`._page` says
  what it shows); :func:`render_timeline` is both in one call; :func:`write_timeline` and
  :func:`render_run_timeline` read a run directory's ``results.json`` (marks) and node logs first.
* :func:`anomaly_records` / :func:`marks_by_op`: the anomalies of a ``results.json`` with their ops.
* :func:`align_logs`: node log lines on the history's clock.
* :func:`failure_windows` / :func:`window_from_history` / :func:`window_svg`: a linearizability failure's
  window in the manner of Jepsen's ``linear.svg``; :func:`write_windows` writes ``linear-<checker>.svg``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from checker.timeline._data import TYPE_CODES, describe_pair, timeline_data
from checker.timeline._files import (
    read_node_logs,
    read_results,
    render_run_timeline,
    write_timeline,
    write_windows,
)
from checker.timeline._logs import LogLine, align_logs, origin_from_run_name, parse_log_time
from checker.timeline._marks import AnomalyRecord, anomaly_records, first_failure, marks_by_op
from checker.timeline._page import render_page
from checker.timeline._window import failure_windows, window_from_history, window_svg

__all__ = [
    "TYPE_CODES", "AnomalyRecord", "LogLine", "align_logs", "anomaly_records", "describe_pair", "failure_windows",
    "first_failure",
    "marks_by_op", "origin_from_run_name", "parse_log_time", "read_node_logs", "read_results", "render_page",
    "render_run_timeline", "render_timeline", "timeline_data", "window_from_history", "window_svg",
    "write_timeline", "write_windows",
]


def render_timeline(history: Iterable[Any], *, title: str = "timeline",
                    marks: Mapping[int, Sequence[str]] | None = None, logs: Sequence[LogLine] = ()) -> str:
    """The complete timeline page as a string (pure)."""
    return render_page(timeline_data(history, marks=marks, logs=logs), title=title)
