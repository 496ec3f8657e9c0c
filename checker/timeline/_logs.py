"""Node log lines lined up with the history's clock.

The history's ``time`` is nanoseconds since the history started (monotonic); a node's log line starts with
the wall-clock time it was written (``2026-11-25 18:22:56,174 INFO ...``, the daemons' logging format, local
time).  The *origin* is the wall-clock time of history time 0, in Unix nanoseconds: the run directory's name
is the UTC time it was created, a few milliseconds before the history writer started, so a run directory
gives the origin to within milliseconds (:func:`origin_from_run_name`).  A line without a timestamp (a
traceback's continuation) takes the time of the line before it.

Pure: texts, an origin and a ``tzinfo`` in; ``(time_ns, node, text)`` tuples out.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Iterable, Mapping
from typing import NamedTuple

__all__ = ["LogLine", "align_logs", "origin_from_run_name", "parse_log_time"]

_STAMP = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[,.](\d{1,6}))?")
_RUN_NAME = re.compile(r"^(\d{8})T(\d{6})\.(\d{3})Z(?:-\d+)?$")
MAX_LINE_CHARS = 400


class LogLine(NamedTuple):
    """One node log line: ``time_ns`` on the history's clock (may be negative: before the history started)."""

    time_ns: int
    node: str
    text: str


def parse_log_time(line: str, tz: _dt.tzinfo) -> int | None:
    """Unix nanoseconds of a line's leading ``YYYY-MM-DD HH:MM:SS[,fff]`` stamp read in ``tz``; None if none."""
    m = _STAMP.match(line)
    if m is None:
        return None
    frac = (m.group(7) or "0").ljust(6, "0")
    try:
        t = _dt.datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5)),
                         int(m.group(6)), int(frac), tzinfo=tz)
    except ValueError:
        return None
    return int(t.timestamp()) * 1_000_000_000 + t.microsecond * 1000


def origin_from_run_name(name: str) -> int | None:
    """Unix nanoseconds of a run directory name ``YYYYMMDDTHHMMSS.mmmZ[-n]`` (UTC); None if it is not one."""
    m = _RUN_NAME.match(name)
    if m is None:
        return None
    try:
        t = _dt.datetime.strptime(m.group(1) + m.group(2), "%Y%m%d%H%M%S").replace(tzinfo=_dt.UTC)
    except ValueError:
        return None
    return int(t.timestamp()) * 1_000_000_000 + int(m.group(3)) * 1_000_000


def align_logs(logs: Mapping[str, Iterable[str]], *, origin_ns: int, tz: _dt.tzinfo,
               limit: int = 50_000) -> list[LogLine]:
    """Every node's lines on the history's clock, in time order (ties: node, then file order).

    Lines before a node's first timestamp are dropped (they cannot be placed); each line is cut at
    ``MAX_LINE_CHARS``; at most ``limit`` lines are kept, warnings and errors first, then the earliest.
    """
    out: list[tuple[int, str, int, str]] = []
    for node, lines in logs.items():
        last: int | None = None
        for n, raw in enumerate(lines):
            line = raw.rstrip("\r\n")
            if not line.strip():
                continue
            t = parse_log_time(line, tz)
            if t is not None:
                last = t
            if last is None:
                continue
            text = line if len(line) <= MAX_LINE_CHARS else line[: MAX_LINE_CHARS - 1] + "…"
            out.append((last - origin_ns, node, n, text))
    if len(out) > limit:
        def keep_first(x: tuple[int, str, int, str]) -> tuple[int, int]:
            loud = any(w in x[3][:60] for w in (" ERROR ", " WARNING ", " CRITICAL ", "Traceback"))
            return (0 if loud else 1, x[0])
        out = sorted(out, key=keep_first)[:limit]
    out.sort(key=lambda x: (x[0], x[1], x[2]))
    return [LogLine(t, node, text) for t, node, _, text in out]
