"""Linearizability checking: Wing-Gong-Lowe search with P-compositional partitioning.

``check(history, model, ...) -> Result`` is the entry point; ``render_html(result, path)`` writes a
self-contained timeline of the failure neighbourhood.  Models live in ``checker.models``.  ``NATIVE_AVAILABLE``
says whether the compiled witness search (``scripts/build_native.sh``) is installed.

The drawing functions (``render_html``, ``failure_window``) are loaded on first use: they pull in the timeline
and its plotting libraries, which cost ``splitbrain check`` several times its whole search on a long history,
and a check that draws nothing never needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from checker.linearizable._calls import INF, Call, build_calls, partition_calls
from checker.linearizable._check import DEFAULT_MAX_CACHE_ENTRIES, check
from checker.linearizable._native import NATIVE_AVAILABLE
from checker.linearizable._result import UNKNOWN_VERDICT, Result, merge_valid

if TYPE_CHECKING:
    from checker.linearizable._html import failure_window, render_html

__all__ = [
    "DEFAULT_MAX_CACHE_ENTRIES", "INF", "NATIVE_AVAILABLE", "UNKNOWN_VERDICT", "Call", "Result", "build_calls", "check",
    "failure_window", "merge_valid", "partition_calls", "render_html",
]

_LAZY = {"failure_window": "checker.linearizable._html", "render_html": "checker.linearizable._html"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'checker.linearizable' has no attribute {name!r}")
