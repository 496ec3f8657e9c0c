"""The per-run plots and pages written after checking: ``latency.png``, ``rate.png`` (fault windows shaded),
``timeline.html`` and, for each linearizability failure, ``linear-<checker>.svg`` (the failing window), plus
the perf statistics added to ``results.json`` under ``perf``.

Uses :mod:`checker.perf` and :mod:`checker.timeline` when they are importable; a failure here is logged and
never changes the run's verdict or exit code.
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import Any

from checker.history import read_jsonl
from harness.store import add_to_results

__all__ = ["write_artifacts"]

log = logging.getLogger("splitbrain.commands")


def _optional(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def write_artifacts(run_dir: str | Path, *, title: str = "timeline", plots: bool = True) -> list[str]:
    """Write the plots and the timeline into ``run_dir``; returns the file names written."""
    run = Path(run_dir)
    written: list[str] = []
    try:
        history = read_jsonl(run / "history.jsonl")
    except (OSError, ValueError) as exc:
        log.warning("no plots for %s: cannot read history (%s)", run, exc)
        return written
    perf = _optional("checker.perf")
    if perf is not None:
        try:
            stats = perf.analyze_perf(history, run, plots=plots)
            written += [f for f in ("latency.png", "rate.png") if (run / f).exists()]
            add_to_results(run, "perf", stats)
        except Exception as exc:  # plots are a convenience: never fail the run over them
            log.warning("perf plots for %s failed: %r", run, exc)
    timeline = _optional("checker.timeline")
    if timeline is not None:
        try:
            timeline.write_timeline(history, run / "timeline.html", title=title)
            written.append("timeline.html")
        except Exception as exc:
            log.warning("timeline for %s failed: %r", run, exc)
        try:
            written += [p.name for p in timeline.write_windows(run, history)]
        except Exception as exc:
            log.warning("failing-window pictures for %s failed: %r", run, exc)
    return written

