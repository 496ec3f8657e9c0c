"""Streams the history to ``history.jsonl`` while the test runs.

Duties:

1. Every op is encoded as one JSON line the moment it happens; the lines reach the kernel on
   :meth:`HistoryWriter.flush`, which the interpreter calls whenever it is about to wait (so only
   the ops of one loop iteration are ever held in user space, and a burst costs one write, not one
   per op); :meth:`HistoryWriter.sync` fsyncs (the runner calls it at the end of every phase).  A
   crashed run therefore leaves a valid prefix that :func:`checker.history.read_jsonl` can read (a
   torn last line is dropped).
2. ``index`` is dense from 0 and ``time`` is nanoseconds since the writer was created, taken from
   the clock passed in (monotonic by default).
3. Process renumbering: after an ``info`` completion the worker thread continues under a new
   process id (old + number of client threads); :meth:`HistoryWriter.process_after` tells the
   runner which id to use next.
4. In-flight bookkeeping: :meth:`HistoryWriter.open_invocations` lists invocations without a
   completion, so an interrupted run can close them as ``info``.

The schema itself is :mod:`checker.history` (imported, never redefined here).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from checker.history import NEMESIS, OP_TYPES, HistoryError, Op
from harness.generator import next_process

__all__ = ["HistoryWriter"]

_JSON_ENCODE = json.JSONEncoder(separators=(",", ":"), default=str).encode


def _encode(rec: dict[str, Any]) -> bytes:
    """One history line (orjson; the standard library for what orjson refuses, e.g. ints beyond 64 bits)."""
    try:
        return orjson.dumps(rec, default=str, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE)
    except (TypeError, orjson.JSONEncodeError):
        return (_JSON_ENCODE(rec) + "\n").encode("utf-8")


_BASE = frozenset(("index", "time", "type", "process", "f", "value"))
_OPTIONAL = frozenset(("node", "error"))


class HistoryWriter:
    """Appends ops to a history file with dense indices and test-relative times.

    Args:
        path: the ``history.jsonl`` to create (truncated if present).
        client_threads: number of client worker threads (for process renumbering).
        clock_ns: monotonic nanosecond clock (injected for tests).
        keep: also keep the written :class:`Op` objects in memory (``ops``) for the checkers.
    """

    def __init__(
        self, path: str | Path, *, client_threads: int, clock_ns: Callable[[], int] = time.monotonic_ns,
        keep: bool = True,
    ) -> None:
        self.path = Path(path)
        self.client_threads = client_threads
        self._clock_ns = clock_ns
        self._start_ns = clock_ns()
        self._fh = self.path.open("wb", buffering=1 << 16)
        self._next_index = 0
        self._open: dict[Any, dict[str, Any]] = {}
        self.keep = keep
        self.ops: list[Op] = []
        self.counts = {t: 0 for t in OP_TYPES}
        self.closed = False
        self.tap: list[dict[str, Any]] | None = None  # when set, every recorded op is appended (the observer drains it)

    def now_ns(self) -> int:
        """Nanoseconds since the history started."""
        return self._clock_ns() - self._start_ns

    def append(self, op: dict[str, Any], *, time_ns: int | None = None) -> dict[str, Any]:
        """Write one invocation or completion; returns the recorded op as a dict (the JSON line's content).

        Raises:
            HistoryError: the op breaks the schema or the lifecycle (a second invoke by an open
                process, a completion with no open invoke, a mismatched f).
        """
        if self.closed:
            raise HistoryError(f"{self.path}: history is closed; cannot append {op!r:.120}")
        kind, process = op.get("type"), op.get("process")
        if not (isinstance(process, int) or process == NEMESIS):
            raise HistoryError(f"{self.path}: op process must be an int or 'nemesis', got {process!r} in {op!r:.120}")
        if kind not in self.counts:
            raise HistoryError(f"{self.path}: op type must be one of {OP_TYPES}, got {kind!r} in {op!r:.120}")
        if process != NEMESIS:
            if kind == "invoke" and process in self._open:
                raise HistoryError(f"{self.path}: process {process} invoked {op.get('f')!r} while its "
                                   f"{self._open[process].get('f')!r} is still open")
            if kind != "invoke":
                inv = self._open.get(process)
                if inv is None:
                    raise HistoryError(f"{self.path}: {kind} completion by process {process} with no open invoke")
                if inv.get("f") != op.get("f"):
                    raise HistoryError(f"{self.path}: completion f {op.get('f')!r} does not match invoke "
                                       f"f {inv.get('f')!r} of process {process}")
        rec: dict[str, Any] = {
            "index": self._next_index, "time": self.now_ns() if time_ns is None else time_ns, "type": kind,
            "process": process, "f": str(op.get("f")), "value": op.get("value"),
        }
        extra = op.keys() - _BASE
        if extra:
            for k in sorted(extra):
                v = op[k]
                if not k.startswith("_") and (v is not None or k not in _OPTIONAL):
                    rec[k] = v
        self._fh.write(_encode(rec))
        self._next_index += 1
        self.counts[kind] += 1
        if process != NEMESIS:
            if kind == "invoke":
                self._open[process] = op
            else:
                self._open.pop(process, None)
        if self.keep:
            self.ops.append(Op.from_dict(rec))
        if self.tap is not None:
            self.tap.append(rec)
        return rec

    def process_after(self, completion: dict[str, Any]) -> int | str:
        """The process id the completing worker uses next (renumbered after ``info``)."""
        process: int | str = completion["process"]
        if completion["type"] == "info" and process != NEMESIS:
            return next_process(process, self.client_threads)
        return process

    def open_invocations(self) -> list[dict[str, Any]]:
        return list(self._open.values())

    def flush(self) -> None:
        """Hand the buffered lines to the kernel (survives a crash of this process, not of the machine)."""
        if not self.closed:
            self._fh.flush()

    def sync(self) -> None:
        """Flush and fsync (called at phase ends and on close)."""
        if not self.closed:
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        if not self.closed:
            self.sync()
            self._fh.close()
            self.closed = True
