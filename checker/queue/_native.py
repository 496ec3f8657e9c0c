"""The compiled queue pass (``native/queuescan``, built by ``scripts/build_native.sh``), when it is installed.

Why: the Python pass costs about 4 us per op per process (a third of it decoding JSON), so a 10M-op history
took 25-35 s in two processes.  The compiled pass reads, decodes and checks the whole file in one process
(a reader thread and the pass, without the GIL), at about 1 us of CPU per op.  It models the common shapes
exactly -- integer and string values, queues, processes and consumers; 64-bit op indices; offsets within
+-2^62 -- and hands anything else back with the reason (malformed JSON, a torn last line, a float value, a
send completing a poll ...); the caller then runs the Python pass over the whole file.  The Python pass is
the reference the compiled one is property-tested against (tests/unit/checker_queue/test_queue_native.py);
both word their records with ``_records``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from checker.compose import Anomaly
from checker.queue._records import BUILDERS
from checker.queue._scan import ScanTally

try:  # the compiled module is optional: scripts/build_native.sh builds and installs it
    import queuescan_native as _native_mod

    _native: Any = _native_mod
except ImportError:  # pragma: no cover - depends on the environment
    _native = None

NATIVE_AVAILABLE = _native is not None
#: ``stats["engine"]`` when the compiled module is not installed.
ENGINE_MISSING = "python (no native queue pass; scripts/build_native.sh builds it)"
_MAX_U64_RECORDS = (1 << 63) - 1


def scan_file_native(path: str | Path, *, max_records: int) -> ScanTally | str:
    """The tally of the whole history at ``path``, or why the compiled pass handed it back (a sentence)."""
    if _native is None:
        return ENGINE_MISSING
    try:
        out = _native.scan_file(os.fsdecode(path), min(max(max_records, 0), _MAX_U64_RECORDS))
    except UnicodeError:  # a path that is not valid UTF-8
        return "the path is not valid UTF-8"
    if out[0] == "fallback":
        return str(out[1])
    _, stats, counts, recs, drained = out
    anoms: dict[str, list[Anomaly]] = {}
    for code, key, ops, args in recs:
        type_, build = BUILDERS[code]
        anoms.setdefault(type_, []).append(build(key, ops, *args))
    return ScanTally(anoms, dict(counts), dict(stats), bool(drained))
