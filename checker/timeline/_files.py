"""The timeline's shell: reads a run directory's ``results.json`` (anomaly marks) and node logs
(``nodes/<node>/*.log``) and writes ``timeline.html``.  Everything it reads is optional: a run that crashed
before checking still gets a timeline, without marks."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from checker.timeline._data import timeline_data
from checker.timeline._logs import LogLine, align_logs, origin_from_run_name
from checker.timeline._marks import anomaly_records, marks_by_op
from checker.timeline._page import render_page
from checker.timeline._window import failure_windows, window_svg

__all__ = ["read_node_logs", "read_results", "render_run_timeline", "write_timeline", "write_windows"]

MAX_LOG_BYTES = 8 * 1024 * 1024  # per file: the tail is kept (the end of a run is where failures are)


def read_results(run_dir: Path) -> dict[str, Any]:
    """``results.json`` of ``run_dir`` ({} when missing or unreadable)."""
    try:
        doc = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _local_tz() -> Any:
    import datetime as _dt

    return _dt.datetime.now().astimezone().tzinfo or _dt.UTC


def read_node_logs(run_dir: Path, *, origin_ns: int | None = None) -> list[LogLine]:
    """Every ``nodes/<node>/*.log`` line on the history's clock (origin: ``history_start_unix_ns`` in
    results.json if the runner recorded it, else the run directory's name); [] if neither gives an origin."""
    if origin_ns is None:
        origin_ns = origin_from_run_name(run_dir.name)
    if origin_ns is None:
        return []
    texts: dict[str, list[str]] = {}
    nodes = run_dir / "nodes"
    try:
        entries = sorted(os.scandir(nodes), key=lambda e: e.name)
    except OSError:
        return []
    for e in entries:
        if not e.is_dir(follow_symlinks=False):
            continue
        for f in sorted(Path(e.path).glob("*.log")):
            if f.is_symlink():
                continue
            try:
                with f.open("rb") as fh:
                    size = fh.seek(0, os.SEEK_END)
                    fh.seek(max(0, size - MAX_LOG_BYTES))
                    data = fh.read().decode("utf-8", errors="replace")
            except OSError:
                continue
            label = e.name if f.name == "node.log" else f"{e.name}/{f.stem}"
            texts[label] = data.splitlines()
    return align_logs(texts, origin_ns=origin_ns, tz=_local_tz())


def render_run_timeline(run_dir: Path, history: Iterable[Any], *, title: str = "timeline") -> str:
    """The timeline page of a run: its history, the anomalies of its results.json marked, its node logs."""
    doc = read_results(run_dir)
    origin = doc.get("history_start_unix_ns")
    logs = read_node_logs(run_dir, origin_ns=origin if isinstance(origin, int) else None)
    data = timeline_data(history, marks=marks_by_op(anomaly_records(doc)), logs=logs)
    if doc.get("crashed"):  # where the history stops, say why
        data["crash"] = f"crashed: {doc['crashed']}" + (f" (at {doc['crashed_at']})" if doc.get("crashed_at") else "")
    return render_page(data, title=title)


def write_timeline(history: Iterable[Any], path: str | Path, *, title: str = "timeline",
                   run_dir: str | Path | None = None) -> None:
    """Write timeline.html to ``path``; marks and node logs come from ``run_dir`` (default: ``path``'s
    directory, i.e. the run directory the page is written into)."""
    out = Path(path)
    page = render_run_timeline(Path(run_dir) if run_dir is not None else out.parent, history, title=title)
    out.write_text(page, encoding="utf-8")


def write_windows(run_dir: str | Path, history: Iterable[Any]) -> list[Path]:
    """Write ``linear-<checker>.svg`` into ``run_dir`` for each linearizability failure of its results.json
    (the failing window, :func:`checker.timeline.window_svg`); returns the files written."""
    run = Path(run_dir)
    written = []
    for name, window in failure_windows(read_results(run), lambda: list(history)):
        safe = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in name) or "checker"
        path = run / f"linear-{safe}.svg"
        path.write_text('<?xml version="1.0" encoding="utf-8"?>\n' + window_svg(window) + "\n", encoding="utf-8")
        written.append(path)
    return written
