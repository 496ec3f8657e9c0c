"""Linearizability checking: Wing-Gong-Lowe search with P-compositional partitioning.

``check(history, model, ...) -> Result`` is the entry point; ``render_html(result, path)`` writes a
self-contained timeline of the failure neighbourhood.  Models live in ``checker.models``.  ``NATIVE_AVAILABLE``
says whether the compiled witness search (``scripts/build_native.sh``) is installed.
"""

from __future__ import annotations

from checker.linearizable._calls import INF, Call, build_calls, partition_calls
from checker.linearizable._check import DEFAULT_MAX_CACHE_ENTRIES, check
from checker.linearizable._html import failure_window, render_html
from checker.linearizable._native import NATIVE_AVAILABLE
from checker.linearizable._result import UNKNOWN_VERDICT, Result, merge_valid

__all__ = [
    "DEFAULT_MAX_CACHE_ENTRIES", "INF", "NATIVE_AVAILABLE", "UNKNOWN_VERDICT", "Call", "Result", "build_calls", "check",
    "failure_window", "merge_valid", "partition_calls", "render_html",
]
