"""Queue/log anomaly checker: did every acknowledged message survive, exactly once, in order?

The workload's ops (``f`` ``send``, ``poll`` and ``drain``) have these values (see docs/anomalies.md)::

    send  invoke  {"queue": "topic/broker-set/queue-id", "value": V}
    send  ok      {"queue": Q, "value": V, "offset": O}          # O: the offset the broker assigned
    send  fail / info                                              # value as in the invoke (offset unused)
    poll  invoke  {"queue": Q, "offset": F, "consumer": C}        # F optional: where to read from;
                                                                   # C optional: defaults to the process
    poll  ok      {"queue": Q, "records": [[O, V], ...]}           # in the order the broker returned them
    drain                                                          # same shapes as poll; final phase only

Vocabulary: a value ``V`` is unique per send in a well-formed workload (any JSON value; ints are fastest).
A send is *acknowledged* when it completes ``ok``.  An ``info`` send may or may not have happened: if it is
ever polled it is *recovered*; it is never counted as lost and never as a duplicate.  A consumer's *resume
point* is the poll's requested offset ``F`` if given, otherwise one past the last offset that consumer read
from that queue (unknown after an ``info`` poll).  *Known offsets* are offsets acknowledged to a send or
returned by any poll.

Anomaly types (``ANOMALY_TYPES``): lost-write, duplicate, unexpected, inconsistent-offsets, poll-skip,
int-poll-skip, nonmonotonic-poll, int-nonmonotonic-poll, nonmonotonic-send, nonmonotonic-send-realtime and
unseen.  ``unseen`` invalidates a history only for a send acknowledged before an ok ``drain`` of its own queue
was invoked (a queue whose drain never succeeded proves nothing).  Definitions, examples and likely causes:
``docs/anomalies.md``.  ``stats`` holds the total-queue summary: attempted, acknowledged, failed,
indeterminate, delivered, lost (lost-write + unseen_after_drain), duplicated, recovered, unexpected, unseen,
unseen_after_drain, plus polls, records_read, drained (any ok drain) and drained_queues.

Cost: one pass, O(1) work per op and per polled record, memory O(sends + distinct offsets).  Use
:func:`check_queue_file` for large histories.  When the compiled pass (``native/queuescan``, built by
``scripts/build_native.sh``) is installed it reads, decodes and checks the file in one process (``_native``),
about 1 us of CPU per op; it hands back any file with a shape it does not model exactly, and then, as without
it, the Python pass streams the file without building ``Op`` objects, decoding whole blocks of lines into
slotted structs when msgspec is installed (``_lines``), and for files over 64 MB splits the queues between one
process per CPU (``_parallel``).  ``stats["engine"]`` says which ran; figures in docs/anomalies.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from checker.compose import Result
from checker.queue._notation import NotationError, parse_history
from checker.queue._parallel import auto_workers, check_file
from checker.queue._scan import (
    DEFAULT_MAX_RECORDS,
    QueueScan,
    iter_history_chunks,
    iter_history_dicts,
    iter_history_ops,
)
from checker.queue._types import ANOMALY_TYPES, AnomalyType

__all__ = [
    "ANOMALY_TYPES", "AnomalyType", "DEFAULT_MAX_RECORDS", "NotationError", "QueueScan", "check_queue",
    "check_queue_file", "iter_history_chunks", "iter_history_dicts", "iter_history_ops", "parse_history",
]


def check_queue(history: Iterable[Any], *, max_records: int = DEFAULT_MAX_RECORDS) -> Result:
    """Check a send/poll history (``Op`` objects or history dicts, in history order).

    Args:
        history: the ops; ops with other ``f`` values are ignored.
        max_records: anomaly records kept per type (``Result.counts`` always has the full number).

    Returns:
        A Result: invalid iff a bad anomaly type was found; ``stats`` holds the total-queue summary.

    Raises:
        KeyError / TypeError: an op missing a field of the shapes above (wrap in ``check_safe``).
    """
    scan = QueueScan(max_records=max_records)
    scan.feed(history)
    return scan.result()


def check_queue_file(path: str | Path, *, max_records: int = DEFAULT_MAX_RECORDS, workers: int | None = None,
                     engine: str = "auto") -> Result:
    """Stream ``history.jsonl`` at ``path`` through the checker (a torn last line is ignored).

    Args:
        engine: ``"auto"``: the compiled pass (``native/queuescan``, one process) when it is installed and the
            file has only the shapes it models, else the Python pass; ``"python"``: the Python pass.
            ``Result.stats["engine"]`` says which ran (and why not the compiled one).
        workers: processes of the Python pass, this one included (each checks a share of the queues; see
            ``_parallel``).  None: one for files under 64 MB, else one per CPU this process may use, at most 4.

    Raises:
        HistoryError: a malformed line other than a torn last one.
        ValueError: ``workers`` < 1, or an unknown ``engine``.
    """
    n = auto_workers(path) if workers is None else workers
    return check_file(path, workers=n, max_records=max_records, engine=engine)
