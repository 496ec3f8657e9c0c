"""The live view of a running test: progress, ops/s and faults, read from the ``history.jsonl`` it streams.

Why the history and not a status file: the runner already appends every op to ``history.jsonl`` as it
happens (:mod:`harness.history_writer`), so a reader that follows that file sees the same ops the
progress line counts -- and a run started by any version of the harness, on any backend, is followed
the same way.  :class:`LiveState` is the pure accumulator (feed it op dicts, ask for a snapshot);
:class:`LiveTail` is the shell that reads only the bytes appended since the last poll.

A run is *running* while it has no ``results.json`` and its history was written in the last
``STALE_S`` seconds; *stalled* when it has none and the history is older (killed, or hung).
"""

from __future__ import annotations

import os
import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from checker.perf import fault_colour, healing_f

__all__ = ["LiveState", "LiveTail", "STALE_S", "live_status"]

STALE_S = 60.0
_RATE_WINDOW_NS = 5_000_000_000
_BUCKET_NS = 1_000_000_000
_MAX_BUCKETS = 600


@dataclass
class LiveState:
    """Counts and rates of a history so far.  Pure: ops in (dicts in history order), a snapshot out."""

    counts: dict[str, int] = field(default_factory=lambda: {"invoke": 0, "ok": 0, "fail": 0, "info": 0})
    last_ns: int = 0
    ops: int = 0
    completions: deque[int] = field(default_factory=deque)  # completion times in the last rate window
    buckets: dict[int, int] = field(default_factory=dict)  # second -> client completions
    faults: list[dict[str, Any]] = field(default_factory=list)  # [{"f", "value", "start_s", "end_s"}]
    _open: dict[str, int] = field(default_factory=dict)  # fault f -> position in faults

    def feed(self, op: dict[str, Any]) -> None:
        t = int(op.get("time") or 0)
        kind = str(op.get("type"))
        self.ops += 1
        self.last_ns = max(self.last_ns, t)
        if op.get("process") == "nemesis":
            if kind != "invoke":
                return
            f = str(op.get("f"))
            if healing_f(f) is not None and f not in self._open:
                self._open[f] = len(self.faults)
                self.faults.append({"f": f, "value": str(op.get("value"))[:60], "start_s": t / 1e9, "end_s": None,
                                    "colour": fault_colour(f)})
            else:
                for start_f, i in list(self._open.items()):
                    if healing_f(start_f) == f:
                        self.faults[i]["end_s"] = t / 1e9
                        del self._open[start_f]
            return
        if kind in self.counts:
            self.counts[kind] += 1
        if kind != "invoke":
            self.completions.append(t)
            b = t // _BUCKET_NS
            self.buckets[b] = self.buckets.get(b, 0) + 1
            if len(self.buckets) > _MAX_BUCKETS:
                del self.buckets[min(self.buckets)]
        while self.completions and self.completions[0] < self.last_ns - _RATE_WINDOW_NS:
            self.completions.popleft()

    def snapshot(self) -> dict[str, Any]:
        """JSON-ready: elapsed seconds, op counts, ops/s over the last 5 s, per-second series, faults."""
        span = min(_RATE_WINDOW_NS, max(self.last_ns, 1)) / 1e9
        return {
            "elapsed_s": round(self.last_ns / 1e9, 3), "ops": self.ops, "counts": dict(self.counts),
            "ops_per_s": round(len(self.completions) / span, 1),
            "series": sorted([b, n] for b, n in self.buckets.items()),
            "faults": [dict(f) for f in self.faults[-50:]],
            "active_faults": [self.faults[i]["f"] for i in self._open.values()],
        }


class LiveTail:
    """Follows ``history.jsonl`` files: each :meth:`poll` reads only the bytes appended since the last one."""

    def __init__(self, max_runs: int = 64) -> None:
        self._runs: dict[str, tuple[LiveState, int, bytes]] = {}
        self._lock = threading.Lock()
        self.max_runs = max_runs

    def poll(self, history: Path) -> dict[str, Any]:
        key = str(history)
        with self._lock:
            state, offset, partial = self._runs.pop(key, (LiveState(), 0, b""))
            try:
                size = history.stat().st_size
                if size < offset:  # rewritten: start over
                    state, offset, partial = LiveState(), 0, b""
                with history.open("rb") as fh:
                    fh.seek(offset)
                    data = fh.read(64 * 1024 * 1024)
            except OSError:
                data = b""
            offset += len(data)
            lines = (partial + data).split(b"\n")
            partial = lines.pop()  # a torn last line waits for the rest
            for line in lines:
                if line.strip():
                    try:
                        op = orjson.loads(line)
                    except orjson.JSONDecodeError:
                        continue
                    if isinstance(op, dict):
                        state.feed(op)
            self._runs[key] = (state, offset, partial)
            while len(self._runs) > self.max_runs:
                del self._runs[next(iter(self._runs))]
            return state.snapshot()


def live_status(run_dir: Path, *, now: float, has_results: bool) -> str:
    """``finished`` (results.json exists), ``running`` (history written in the last STALE_S s) or ``stalled``."""
    if has_results:
        return "finished"
    try:
        mtime = os.stat(run_dir / "history.jsonl").st_mtime
    except OSError:
        return "stalled"
    return "running" if now - mtime <= STALE_S else "stalled"
