"""Linearizability checking: Wing-Gong-Lowe search with P-compositional partitioning.

``check(history, model, ...) -> Result`` is the entry point; ``render_html(result, path)`` writes a
self-contained timeline of the failure neighbourhood.  Models live in ``checker.models``.
"""

from __future__ import annotations

from checker.linearizable._calls import INF, Call, build_calls, partition_calls
from checker.linearizable._check import DEFAULT_MAX_CACHE_ENTRIES, check
from checker.linearizable._html import render_html
from checker.linearizable._result import UNKNOWN_VERDICT, Result, merge_valid

__all__ = [
    "DEFAULT_MAX_CACHE_ENTRIES", "INF", "UNKNOWN_VERDICT", "Call", "Result", "build_calls", "check", "merge_valid",
    "partition_calls", "render_html",
]
