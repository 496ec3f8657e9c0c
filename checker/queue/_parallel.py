"""One history file checked by several processes, each taking a share of its queues.

Why: past a few million ops the pass is CPU-bound in one interpreter.  All of its state but two op counters
is per queue, so ``QueueScan(part=i, parts=n)`` scans check disjoint sets of queues and their tallies add up
(``merge_tallies``).  Every process reads and decodes every line itself (handing decoded ops from one
process to another costs as much as decoding them: measured with msgpack, ~1x the JSON decode), but a poll's
records -- half the decoding -- only for its own queues; the scan, the classification and the memory they
hold are split.  The parts slow each other down (memory traffic), so two processes take well over half the
time of one; figures in docs/anomalies.md.

The calling process checks part 0 while parts 1.. run as ``python -m checker.queue._parallel`` children that
print their pickled tally (not multiprocessing: spawn would re-import the caller's main module, which a
script without a ``__main__`` guard does not survive, and fork is unsafe in a caller with threads).  An error
in any part is raised here, and the other processes are killed.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

from checker.compose import Result
from checker.queue._native import ENGINE_MISSING, scan_file_native
from checker.queue._scan import DEFAULT_MAX_RECORDS, QueueScan, ScanTally, iter_history_ops, merge_tallies

PARALLEL_MIN_BYTES = 64 << 20  # below ~0.5M ops, starting a process costs more than it saves
MAX_AUTO_WORKERS = 4  # each worker decodes the whole file: more buys less and less


def auto_workers(path: str | Path) -> int:
    """How many processes :func:`check_file` should use for ``path`` when the caller does not say."""
    try:
        size = Path(path).stat().st_size
    except OSError:
        return 1  # the reader will raise the precise error
    if size < PARALLEL_MIN_BYTES:
        return 1
    return max(1, min(MAX_AUTO_WORKERS, len(os.sched_getaffinity(0))))


def scan_file(path: str | Path, *, part: int = 0, parts: int = 1,
              max_records: int = DEFAULT_MAX_RECORDS) -> ScanTally:
    """Stream ``path`` through a scan of part ``part`` of ``parts`` and return its tally."""
    # The pass builds millions of small acyclic containers; the cyclic GC would rescan them over and over
    # (measured: 2-3x slower), so it is paused for the duration and restored afterwards.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        scan = QueueScan(max_records=max_records, part=part, parts=parts)
        for decoded, ops in iter_history_ops(path):
            if decoded:
                scan.feed_decoded(ops)
            else:
                scan.feed(ops)
        return scan.tally()
    finally:
        if was_enabled:
            gc.enable()


def check_file(path: str | Path, *, workers: int = 1, max_records: int = DEFAULT_MAX_RECORDS,
               engine: str = "auto") -> Result:
    """Check ``path``; the result does not depend on the engine or on how many workers, except which anomaly
    records are kept when a type has more than ``max_records``.  ``stats["engine"]`` says which pass ran.

    ``engine="auto"`` runs the compiled pass (``_native``, one process) when it is installed and falls back to
    the Python pass when it is not or when it hands the file back; ``"python"`` runs the Python pass.
    ``workers``: processes of the Python pass, this one included.
    """
    if workers < 1:
        raise ValueError(f"check_queue_file: workers must be >= 1, got {workers}")
    if engine not in ("auto", "python"):
        raise ValueError(f"check_queue_file: engine must be 'auto' or 'python', got {engine!r}")
    how = "python"
    if engine == "auto":
        got = scan_file_native(path, max_records=max_records)
        if isinstance(got, ScanTally):
            return _with_engine(merge_tallies([got], max_records=max_records), "native")
        how = got if got == ENGINE_MISSING else f"python (the native pass handed the file back: {got})"
    if workers == 1:
        return _with_engine(merge_tallies([scan_file(path, max_records=max_records)], max_records=max_records), how)
    root = str(Path(__file__).resolve().parents[2])  # the directory holding the checker package
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    children = [subprocess.Popen([sys.executable, "-m", __name__, str(path), str(i), str(workers), str(max_records)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
                for i in range(1, workers)]
    try:
        tallies = [scan_file(path, part=0, parts=workers, max_records=max_records)]
        for child in children:
            out, err = child.communicate()
            tallies.append(_child_tally(child.returncode, out, err))
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    return _with_engine(merge_tallies(tallies, max_records=max_records), how)


def _with_engine(r: Result, engine: str) -> Result:
    return dataclasses.replace(r, stats={**r.stats, "engine": engine})


def _child_tally(returncode: int, out: bytes, err: bytes) -> ScanTally:
    """The tally a child printed, or the exception it raised, raised here."""
    try:
        status, payload = pickle.loads(out)
    except Exception:  # no pickle at all: the child died before it could print one
        tail = err.decode(errors="replace").strip()[-2000:]
        raise RuntimeError(f"queue checker worker exited with status {returncode} without a result: {tail}") from None
    if status == "error":
        raise payload
    return cast(ScanTally, payload)


def _main(argv: list[str]) -> int:
    """Child side: ``PATH PART PARTS MAX_RECORDS``; prints ``("ok", tally)`` or ``("error", exc)`` pickled."""
    path, part, parts, max_records = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    try:
        reply: tuple[str, Any] = ("ok", scan_file(path, part=part, parts=parts, max_records=max_records))
    except Exception as exc:  # handed to the parent, which raises it
        reply = ("error", exc)
    try:
        data = pickle.dumps(reply)
    except Exception as exc:  # an exception that does not pickle: send its text
        data = pickle.dumps(("error", RuntimeError(f"queue checker worker: {type(exc).__name__}: {reply[1]}")))
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
