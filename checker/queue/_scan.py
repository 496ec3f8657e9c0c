"""The streaming pass of the queue checker: one O(1)-per-record step per history op, then O(n) analysis.

Theory of operation.  ``QueueScan.feed`` consumes raw history ops (JSON dicts, or ``Op`` objects) in history
order and keeps, per queue: every sent value with its attempt counts and acknowledged offset, the value first
seen at each offset, the offset at which each value was first polled, the highest offset any poll read, and
*candidate gaps* (offset ranges a poll jumped over).  Per-value fields live in one int64 table per queue
(see ``_STRIDE``), not in a Python object per value.  Anomalies that are visible at once (two values at one
offset, a poll going backwards, a send landing below an earlier acknowledged send) are recorded on the spot.
``QueueScan.tally`` then walks the per-queue tables once to classify every sent value (delivered, lost,
unseen, recovered, duplicated, unexpected) and resolves the candidate gaps against the set of known offsets;
``QueueScan.result`` turns the tally into the verdict.

Parts: every piece of state except two op counters belongs to one queue, so ``QueueScan(part=i, parts=n)``
checks only the queues dealt to part ``i`` and ``merge_tallies`` adds the parts' tallies up to the verdict of
the whole history (``_parallel`` runs the parts in separate processes; a property test checks the sum).
Offsets and op indices must be 64-bit integers.

Rules of the file: no I/O except the ``iter_history_*`` readers (blocks are decoded in ``_lines``); an
``info`` send is never counted lost and never duplicated; every anomaly names its queue, op indices, expected
and observed values.  :meth:`QueueScan.feed` (dicts) is the reference; :meth:`QueueScan.feed_decoded` is its
specialisation for decoded structs and must stay step-for-step equal (``test_block_decoder_agrees...``).
"""

from __future__ import annotations

import json
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from itertools import compress
from pathlib import Path
from typing import Any, NamedTuple

from checker.compose import Anomaly, Result, result_from_anomalies
from checker.history import HistoryError
from checker.queue._lines import MISSING, QVal, as_dict, decode_records, iter_blocks
from checker.queue._records import BUILDERS
from checker.queue._types import ANOMALY_TYPES

try:  # orjson is ~4x faster than json for the 10M-op target; the checker works without it
    import orjson as _orjson

    _loads: Any = _orjson.loads
    _LoadError: Any = _orjson.JSONDecodeError
except ImportError:  # pragma: no cover - depends on the environment
    _loads = json.loads
    _LoadError = json.JSONDecodeError

# what decode_records raises on records that are not a list of pairs (msgspec's errors are ValueErrors)
_RECORD_ERRORS: tuple[type[BaseException], ...] = (ValueError, TypeError, RecursionError)

DEFAULT_MAX_RECORDS = 1000  # anomaly records kept per type (all are counted)
_SMALL_GAP = 64  # gaps up to this width are resolved by probing the offset table directly

# Per-value state lives in one int64 table per queue (``_Queue.st``), _STRIDE slots per value, so that 10M ops
# keep no Python object per field (a list per value and an int object per field cost ~2x the memory, and the
# allocation was a third of the run time).  A value's *base* ``b`` is the index of its first slot; its fields
# are at ``b + _N_OK`` etc.  _NONE marks an absent field (offsets and op indices are 64-bit integers).
# _CMP_IDX: the completion index of the first ok (of the first ok that carried an offset, once there is one);
# _FIRST: the offset at which a poll first read the value.  _INV_IDX is _NONE for a value polled but never sent.
_N_OK, _N_INFO, _N_FAIL, _ACK_OFF, _INV_IDX, _CMP_IDX, _FIRST = range(7)
_STRIDE = 8
_NONE = -(1 << 63)
_ROW = array("q", [0, 0, 0, _NONE, _NONE, _NONE, _NONE, 0])
_MAX_GROW_ROWS = 1 << 15
_OFF_SLACK = 1 << 12
_UNKNOWN_OFFS = array("q", [-1])
_FOREIGN: tuple[Any, ...] = ("another part's queue",)  # the open invoke of an op on a queue another part checks
_UNPAIRED: tuple[Any, ...] = ("no open invoke",)  # what a completion finds when its process has no open invoke


def _freeze(v: Any) -> Any:
    """A hashable stand-in for a JSON value (lists and dicts become canonical JSON text)."""
    if isinstance(v, int | str | float | bool) or v is None:
        return v
    return json.dumps(v, sort_keys=True, separators=(",", ":"))


def _loads_lines(lines: list[bytes], lineno: int, path: str | Path, tolerate_torn_tail: bool) -> list[dict[str, Any]]:
    """Parse lines (with their newlines; the first is line ``lineno`` of ``path``) into op dicts.

    Raises:
        HistoryError: a malformed line other than a torn (unterminated) last line.
    """
    try:
        return list(map(_loads, lines))
    except _LoadError:
        out = []
        for i, line in enumerate(lines, lineno):
            try:
                out.append(_loads(line))
            except _LoadError as exc:
                if not line.strip():
                    continue
                if tolerate_torn_tail and not line.endswith(b"\n"):
                    break
                raise HistoryError(f"{path}:{i}: not JSON ({exc}); expected one op object per line") from None
        return out


def iter_history_chunks(path: str | Path, *, tolerate_torn_tail: bool = True,
                        chunk_bytes: int = 1 << 20) -> Iterator[list[dict[str, Any]]]:
    """Stream ``history.jsonl`` as lists of op dicts (about ``chunk_bytes`` of text each), no ``Op`` objects.

    Raises:
        HistoryError: a malformed line other than a torn (unterminated) last line.
    """
    with Path(path).open("rb") as fh:
        lineno = 1
        while True:
            lines = fh.readlines(chunk_bytes)
            if not lines:
                return
            yield _loads_lines(lines, lineno, path, tolerate_torn_tail)
            lineno += len(lines)


def iter_history_ops(path: str | Path, *, tolerate_torn_tail: bool = True,
                     block_bytes: int = 1 << 20) -> Iterator[tuple[bool, list[Any]]]:
    """Stream ``history.jsonl`` as ``(decoded, ops)`` blocks for :meth:`QueueScan.feed_decoded` (see ``_lines``).

    Raises:
        HistoryError: as :func:`iter_history_chunks`.
    """
    def loads_lines(lines: list[bytes], lineno: int) -> list[dict[str, Any]]:
        return _loads_lines(lines, lineno, path, tolerate_torn_tail)

    return iter_blocks(path, loads_lines, block_bytes=block_bytes)


def iter_history_dicts(path: str | Path, *, tolerate_torn_tail: bool = True) -> Iterator[dict[str, Any]]:
    """Stream ``history.jsonl`` as op dicts (see :func:`iter_history_chunks`)."""
    for chunk in iter_history_chunks(path, tolerate_torn_tail=tolerate_torn_tail):
        yield from chunk


class _Queue:
    __slots__ = ("drain_inv", "extra", "gaps", "last_send", "max_acked", "max_polled", "max_polled_idx", "name",
                 "off_far", "offs", "reported", "rows", "st", "unacked_seen", "vals")

    def __init__(self, name: str) -> None:
        self.name = name
        self.rows: dict[Any, int] = {}  # value -> base of its row in st (every value sent or polled)
        self.vals: list[Any] = []  # row number (base // _STRIDE) -> value
        self.st = array("q")  # the rows; see _N_OK etc.
        # offset -> base of the value first known there (by an ack or a poll): a dense table for offsets
        # 0..len(offs)-1 (-1: unknown), a dict for the rest (negative, or far beyond the known ones)
        self.offs = array("q")
        self.off_far: dict[int, int] = {}
        self.drain_inv = -1  # invoke index of the latest ok drain of this queue
        self.extra: dict[Any, dict[int, int]] = {}  # value -> {other offset: op index}
        self.unacked_seen: dict[Any, int] = {}  # value polled before any ok ack -> poll op index
        self.gaps: list[tuple[int, int, str, int, Any]] = []  # (lo, hi) exclusive, type, op index, consumer
        self.max_polled = -1
        self.max_polled_idx = -1
        self.max_acked: tuple[int, int] | None = None  # (offset, op index)
        self.last_send: dict[Any, tuple[int, int]] = {}  # process -> (offset, op index) of its latest ack here
        self.reported: set[tuple[int, int]] = set()  # (offset, base) pairs reported inconsistent

    def row(self, val: Any, inv_idx: int = _NONE) -> int:
        """The base of ``val``'s row, made on first sight (sent or polled).  ``inv_idx``: the op sending it,
        kept only if no send of ``val`` was seen before (a value polled before it was sent gets it now)."""
        b = self.rows.get(val)
        if b is None:
            vals = self.vals
            b = len(vals) * _STRIDE
            st = self.st
            if b == len(st):  # grow in place by up to _MAX_GROW_ROWS rows (small queues stay small)
                st.extend(_ROW * min(_MAX_GROW_ROWS, max(16, len(vals))))
            self.rows[val] = b
            vals.append(val)
            if inv_idx != _NONE:
                st[b + _INV_IDX] = inv_idx
        elif inv_idx != _NONE and self.st[b + _INV_IDX] == _NONE:
            self.st[b + _INV_IDX] = inv_idx
        return b

    def off_get(self, o: int) -> int | None:
        """The base of the value known at offset ``o``, or None."""
        if o.__class__ is int and 0 <= o < len(self.offs):
            b = self.offs[o]
            return None if b == -1 else b
        if o.__class__ is not int:
            raise HistoryError(f"queue {self.name!r}: offset {o!r} is not an integer")
        return self.off_far.get(o)

    def off_put(self, o: int, b: int) -> None:
        """Note that offset ``o`` (not known before) holds the value with base ``b``."""
        offs = self.offs
        n = len(offs)
        if o.__class__ is not int:
            raise HistoryError(f"queue {self.name!r}: offset {o!r} is not an integer")
        if 0 <= o < n:
            offs[o] = b
        elif n <= o < 2 * n + _OFF_SLACK:  # grow the dense table (amortised); farther offsets stay sparse
            grow = max(o + 1 - n, n // 2 + _OFF_SLACK)
            offs.extend(_UNKNOWN_OFFS * grow)
            offs[o] = b
            far = self.off_far
            for k in [k for k in far if n <= k < n + grow]:
                offs[k] = far.pop(k)
        elif _NONE < o < -_NONE:
            self.off_far[o] = b
        else:
            raise HistoryError(f"queue {self.name!r}: offset {o} does not fit in 64 bits")

    def known_offsets(self) -> list[int]:
        """Every known offset, ascending."""
        offs = self.offs
        dense = list(compress(range(len(offs)), map((-1).__ne__, offs)))
        return sorted(dense + list(self.off_far)) if self.off_far else dense


class ScanTally(NamedTuple):
    """What one (part of a) pass found: anomaly records and counts, statistics, and whether any drain was ok."""

    anomalies: dict[str, list[Anomaly]]
    counts: dict[str, int]
    stats: dict[str, Any]
    drained: bool


# statistics of the whole history, not of a part's queues: every part counts them alike
_WHOLE_HISTORY_STATS = ("ops", "unpaired_completions")


def merge_tallies(tallies: list[ScanTally], *, max_records: int = DEFAULT_MAX_RECORDS) -> Result:
    """The verdict and total-queue summary of a history from the tallies of the parts that split its queues.

    Counts and per-queue statistics add up; with several parts, each type keeps, of the records the parts
    kept, the ``max_records`` whose first op comes earliest.
    """
    counts: dict[str, int] = {}
    anoms: dict[str, list[Anomaly]] = {}
    stats: dict[str, Any] = {}
    for t in tallies:
        for k, n in t.counts.items():
            counts[k] = counts.get(k, 0) + n
        for k, recs in t.anomalies.items():
            anoms.setdefault(k, []).extend(recs)
        for k, v in t.stats.items():
            stats[k] = v if k in _WHOLE_HISTORY_STATS else stats.get(k, 0) + v
    if len(tallies) > 1:
        anoms = {k: sorted(recs, key=lambda a: a.ops[:1])[:max_records] for k, recs in anoms.items()}
    stats["unexpected"] = counts.get("unexpected", 0)
    stats["lost"] = counts.get("lost-write", 0) + stats.get("unseen_after_drain", 0)
    stats["drained"] = any(t.drained for t in tallies)
    bad = {t.name for t in ANOMALY_TYPES.values() if t.bad}
    if stats.get("unseen_after_drain"):
        bad.add("unseen")  # some acknowledged send is missing from a drain that began after its ack
    return result_from_anomalies(anoms, bad_types=bad, stats=stats, counts=counts)


class QueueScan:
    """Streaming queue checker.  Call :meth:`feed` any number of times, then :meth:`result` once."""

    def __init__(self, *, max_records: int = DEFAULT_MAX_RECORDS, part: int = 0, parts: int = 1) -> None:
        """``part`` of ``parts``: check only every ``parts``-th queue (see :meth:`_claim`); the default is all."""
        if not 0 <= part < parts:
            raise ValueError(f"QueueScan: part must be in 0..{parts - 1} (parts={parts}), got {part}")
        self._part = part
        self._parts = parts
        self._owner: dict[Any, bool] = {}  # queue -> whether this scan checks it
        self._queues: dict[str, _Queue] = {}
        self._open: dict[Any, tuple[Any, ...]] = {}
        self._cursor: dict[tuple[Any, str], int] = {}
        self._anoms: dict[str, list[Anomaly]] = {}
        self._counts: dict[str, int] = {}
        self._max_records = max_records
        self._drained = False
        self.stats: dict[str, int] = {"ops": 0, "attempted": 0, "acknowledged": 0, "failed": 0,
                                      "indeterminate": 0, "polls": 0, "records_read": 0,
                                      "unpaired_completions": 0}

    def _claim(self, qn: Any) -> bool:
        """Whether this scan checks queue ``qn``: queues are dealt round-robin in order of first appearance, so
        scans of the same history with different ``part`` split its queues between them and agree on who has
        which (all state but the op counters is per queue, so the parts are independent)."""
        own = self._owner.get(qn)
        if own is None:
            own = self._owner[qn] = len(self._owner) % self._parts == self._part
        return own

    # -- recording -------------------------------------------------------------------------------
    def _add(self, code: str, key: Any, ops: tuple[int, ...], *args: Any) -> None:
        """Count one anomaly of builder ``code`` (see ``_records``); keep its record if its type has room."""
        type_, build = BUILDERS[code]
        n = self._counts.get(type_, 0)
        self._counts[type_] = n + 1
        if n < self._max_records:
            self._anoms.setdefault(type_, []).append(build(key, ops, *args))

    def _inconsistent(self, q: _Queue, off: int, old: int, new: int, idx: int) -> None:
        """Offset ``off`` holds the value of row ``old`` and now the value of row ``new`` (bases)."""
        if (off, new) in q.reported:
            return
        q.reported.add((off, new))
        inv = q.st[old + _INV_IDX]
        ops = (inv, idx) if inv != _NONE else (idx,)
        self._add("inconsistent-offsets", q.name, ops, off, q.vals[old // _STRIDE], q.vals[new // _STRIDE])

    # -- the pass --------------------------------------------------------------------------------
    def feed(self, ops: Iterable[Any]) -> None:
        """Consume history ops (dicts with the history.jsonl fields, or ``checker.history.Op``)."""
        # The per-op loop: its steps stay inline (a method call per op costs ~5% of the 10M-op run); what is not
        # per op (a new queue, an ok send, an ok poll) is a method.
        open_ = self._open
        open_pop = open_.pop
        queues = self._queues
        n_ops = n_att = n_polls = n_recs = n_unpaired = 0
        for n_ops, d in enumerate(ops, 1):  # noqa: B007 - n_ops counts the ops, read after the loop
            if d.__class__ is not dict:
                d = d.to_dict()
            f = d["f"]
            if f == "send":
                t = d["type"]
                if t == "invoke":
                    v = d["value"]
                    qn = v["queue"]
                    val = v["value"]
                    if val.__class__ is not int and val.__class__ is not str:
                        val = _freeze(val)
                    q = queues.get(qn) or self._new_queue(qn)
                    if q is None:
                        open_[d["process"]] = _FOREIGN
                        continue
                    n_att += 1
                    open_[d["process"]] = (d["index"], q, q.row(val, d["index"]), q.max_acked)
                    continue
                inv = open_pop(d["process"], _UNPAIRED)
                if inv is _UNPAIRED or inv is _FOREIGN:
                    n_unpaired += inv is _UNPAIRED
                elif t == "ok":
                    v = d["value"]
                    self._send_ok(d["index"], d["process"], inv, v.get("offset") if v.__class__ is dict else None)
                else:  # fail or info: the send's row counts it (see _count_sends)
                    inv[1].st[inv[2] + (_N_FAIL if t == "fail" else _N_INFO)] += 1
                continue
            if f != "poll" and f != "drain":
                continue
            if d["type"] == "invoke":
                v = d["value"]
                qn = v["queue"]
                if qn not in queues and not self._claim(qn):
                    open_[d["process"]] = _FOREIGN
                else:
                    open_[d["process"]] = (d["index"], qn, v.get("offset"), v.get("consumer", d["process"]))
                continue
            inv = open_pop(d["process"], _UNPAIRED)
            if inv is _UNPAIRED or inv is _FOREIGN:
                n_unpaired += inv is _UNPAIRED
            elif d["type"] != "ok":
                self._poll_not_ok(d["type"], inv)
            else:
                n_polls += 1
                v = d["value"]
                recs = (v.get("records") or ()) if v.__class__ is dict else ()
                n_recs += self._poll_ok(f, inv, d["index"], recs)
        self._tally(n_ops, n_att, n_polls, n_recs, n_unpaired)

    def feed_decoded(self, ops: Iterable[Any]) -> None:
        """Consume ``QOp`` structs from :func:`iter_history_ops`: the steps of :meth:`feed`, specialised.

        Why a second loop: attribute access on slotted structs is what makes the 10M-op target.  Any op whose
        shape this loop does not cover exactly (a value that is not an object, a missing key the dict path
        reads with ``[]``) goes through :meth:`feed` as a dict, so both ways agree (a property test checks it).
        """
        # inline per-op steps for the same reason as in feed
        open_ = self._open
        open_pop = open_.pop
        queues = self._queues
        n_ops = n_fed = n_att = n_polls = n_recs = n_unpaired = 0
        for n_ops, d in enumerate(ops, 1):  # noqa: B007 - n_ops counts the ops, read after the loop
            f = d.f
            v = d.value
            if f != "send" and f != "poll" and f != "drain":
                continue
            if v.__class__ is not QVal:
                n_fed += 1  # feed counts it
                self.feed((as_dict(d),))
                continue
            t = d.type
            if t == "invoke":
                qn = v.queue
                if qn is MISSING or (f == "send" and v.value is MISSING):
                    n_fed += 1
                    self.feed((as_dict(d),))
                    continue
                if f != "send":  # a poll's queue is made by its first ok completion
                    if qn not in queues and not self._claim(qn):
                        open_[d.process] = _FOREIGN
                    else:
                        c = v.consumer
                        open_[d.process] = (d.index, qn, v.offset, d.process if c is MISSING else c)
                    continue
                q = queues.get(qn) or self._new_queue(qn)
                if q is None:
                    open_[d.process] = _FOREIGN
                    continue
                val = v.value
                if val.__class__ is not int and val.__class__ is not str:
                    val = _freeze(val)
                n_att += 1
                open_[d.process] = (d.index, q, q.row(val, d.index), q.max_acked)
                continue
            inv = open_pop(d.process, _UNPAIRED)
            if inv is _UNPAIRED or inv is _FOREIGN:
                n_unpaired += inv is _UNPAIRED
            elif f == "send":
                if t == "ok":
                    self._send_ok(d.index, d.process, inv, v.offset)
                else:
                    inv[1].st[inv[2] + (_N_FAIL if t == "fail" else _N_INFO)] += 1
            elif t != "ok":
                self._poll_not_ok(t, inv)
            else:
                raw = v.records
                try:
                    recs = () if raw is MISSING else decode_records(raw) or ()
                except _RECORD_ERRORS:  # not a list of pairs: the dict path, from the invoke on, decides
                    open_[d.process] = inv
                    n_fed += 1
                    self.feed((as_dict(d),))
                    continue
                n_polls += 1
                n_recs += self._poll_ok(f, inv, d.index, recs)
        self._tally(n_ops - n_fed, n_att, n_polls, n_recs, n_unpaired)

    def _tally(self, n_ops: int, n_att: int, n_polls: int, n_recs: int, n_unpaired: int) -> None:
        """Add one pass's counters (kept in locals while it runs) to the statistics."""
        st = self.stats
        st["ops"] += n_ops
        st["attempted"] += n_att
        st["polls"] += n_polls
        st["records_read"] += n_recs
        st["unpaired_completions"] += n_unpaired

    def _new_queue(self, qn: Any) -> _Queue | None:
        """The state of queue ``qn``, first seen now, if this scan checks it (else None: another part's)."""
        if not self._claim(qn):
            return None
        q = self._queues[qn] = _Queue(qn)
        return q

    def _poll_not_ok(self, t: str, inv: tuple[Any, ...]) -> None:
        """A poll that failed (read nothing) or is indeterminate: after the latter we no longer know what its
        consumer has consumed."""
        if t == "info":
            self._cursor.pop((inv[3], inv[1]), None)

    def _poll_ok(self, f: str, inv: tuple[Any, ...], idx: int, recs: Any) -> int:
        """One ok poll or drain (``inv``: its open invoke, of queue ``qn`` at ``inv_idx``, from offset ``frm``
        if it named one): note a drain, move the consumer's cursor, check the records; return how many it read."""
        inv_idx, qn, frm, consumer = inv
        ckey = (consumer, qn)
        queues = self._queues
        try:
            q = queues[qn]
        except KeyError:
            q = queues[qn] = _Queue(qn)
        if f == "drain":
            self._drained = True
            if inv_idx > q.drain_inv:
                q.drain_inv = inv_idx
        cursor = self._cursor
        if not recs:
            if frm is not None:
                cursor[ckey] = frm - 1
            return 0
        start = frm
        if start is None:
            c = cursor.get(ckey)
            start = None if c is None else c + 1
        cursor[ckey] = self._poll_records(q, recs, start, idx, consumer)
        return len(recs)

    def _poll_records(self, q: _Queue, recs: Any, start: int | None, idx: int, consumer: Any) -> int:
        """Check one ok poll's records (``start``: where the consumer resumed, if known); return the last offset."""
        first = recs[0][0]
        if start is not None and first != start:
            if first < start:
                self._add("nonmonotonic-poll", q.name, (idx,), start, first, consumer)
            else:
                q.gaps.append((start - 1, first, "poll-skip", idx, consumer))
        offs = q.offs
        n_offs = len(offs)
        rows_get = q.rows.get
        st = q.st
        last = first - 1
        top = None  # the highest offset read, when it is not the last one (records out of order)
        for o, val in recs:
            if val.__class__ is not int and val.__class__ is not str:
                val = _freeze(val)
            b = rows_get(val)
            if b is None:  # never sent (so far): reported as unexpected below
                b = q.row(val)
                st = q.st
            if o.__class__ is int and 0 <= o < n_offs:  # the rule: acks filled the dense table first
                pb = offs[o]
                if pb == -1:
                    offs[o] = b
                elif pb != b:
                    self._inconsistent(q, o, pb, b, idx)
            else:
                far = q.off_get(o)
                if far is None:
                    q.off_put(o, b)
                    n_offs = len(offs)
                elif far != b:
                    self._inconsistent(q, o, far, b, idx)
            s = st[b + _FIRST]
            if s == _NONE:
                st[b + _FIRST] = o
                if st[b + _INV_IDX] == _NONE:
                    self._add("unexpected-unsent", q.name, (idx,), o, val)
                elif st[b] == 0:
                    q.unacked_seen[val] = idx
            elif s != o:
                ex = q.extra.get(val)
                if ex is None:
                    q.extra[val] = {o: idx}
                elif o not in ex:
                    ex[o] = idx
            if o != last + 1:
                if o <= last:
                    self._add("int-nonmonotonic-poll", q.name, (idx,), last, o)
                    if top is None or last > top:
                        top = last
                else:
                    q.gaps.append((last, o, "int-poll-skip", idx, consumer))
            last = o
        hi = last if top is None or last > top else top
        if hi > q.max_polled:
            q.max_polled = hi
            q.max_polled_idx = idx
        return last

    def _send_ok(self, idx: int, p: Any, inv: tuple[Any, ...], off: int | None) -> None:
        """An ok send (op ``idx`` of process ``p``; ``inv``: its open invoke): count it in its row and, if it
        carried an offset, record that in the offset table and check per-producer and real-time send order."""
        inv_idx, q, b, m = inv
        st = q.st
        st[b] += 1
        if off is None:
            if st[b + _CMP_IDX] == _NONE:
                st[b + _CMP_IDX] = idx
            return
        pb = q.off_get(off)  # first: it refuses an offset that is not an integer
        if pb is None:
            q.off_put(off, b)
        elif pb != b:
            self._inconsistent(q, off, pb, b, idx)
        if st[b + _ACK_OFF] == _NONE:
            st[b + _ACK_OFF] = off
            st[b + _CMP_IDX] = idx
        last = q.last_send.get(p)
        if last is not None and off < last[0]:
            self._add("nonmonotonic-send", q.name, (last[1], inv_idx, idx), last[0], off, q.vals[b // _STRIDE], p)
        elif m is not None and off < m[0]:
            self._add("nonmonotonic-send-realtime", q.name, (m[1], inv_idx, idx), m[0], off, q.vals[b // _STRIDE])
        q.last_send[p] = (off, idx)
        if q.max_acked is None or off > q.max_acked[0]:
            q.max_acked = (off, idx)

    # -- the analysis ----------------------------------------------------------------------------
    def result(self) -> Result:
        """Classify every sent value, resolve gaps, and return the verdict with the total-queue summary."""
        return merge_tallies([self.tally()], max_records=self._max_records)

    def tally(self) -> ScanTally:
        """Finish the pass: classify every sent value and resolve gaps (call once, after the last feed)."""
        for inv in self._open.values():  # an invoke that never completed is an info op
            if len(inv) == 4 and isinstance(inv[1], _Queue):
                inv[1].st[inv[2] + _N_INFO] += 1
        self._open.clear()
        self._count_sends()
        summary = {"delivered": 0, "duplicated": 0, "recovered": 0, "unseen": 0, "unseen_after_drain": 0}
        for q in self._queues.values():
            self._classify(q, summary)
            self._resolve_gaps(q)
        stats: dict[str, Any] = dict(self.stats)
        stats.update(summary)
        stats["queues"] = len(self._queues)
        stats["drained_queues"] = sum(1 for q in self._queues.values() if q.drain_inv >= 0)
        return ScanTally(self._anoms, self._counts, stats, self._drained)

    def _count_sends(self) -> None:
        """The ok, fail and info send completions, summed from the rows (the feed loops count them only there)."""
        for name, col in (("acknowledged", _N_OK), ("failed", _N_FAIL), ("indeterminate", _N_INFO)):
            self.stats[name] = sum(sum(q.st[col::_STRIDE]) for q in self._queues.values())

    def _classify(self, q: _Queue, summary: dict[str, int]) -> None:
        st = q.st
        delivered = 0
        for b, val in zip(range(0, len(q.vals) * _STRIDE, _STRIDE), q.vals):
            if st[b + _INV_IDX] == _NONE:
                continue  # polled but never sent: reported as unexpected when it was read
            o = st[b + _FIRST]
            if st[b]:
                ack = st[b + _ACK_OFF]
                if o == _NONE:
                    if ack != _NONE and ack < q.max_polled:
                        self._add("lost-write", q.name, (st[b + _INV_IDX], st[b + _CMP_IDX], q.max_polled_idx),
                                  ack, val, q.max_polled)
                    else:
                        self._unseen(q, b, val, summary)
                    continue
                delivered += 1
                if ack != _NONE and ack != o:
                    ex = q.extra.setdefault(val, {})
                    ex.setdefault(ack, st[b + _CMP_IDX])
            elif o != _NONE:
                delivered += 1
                if st[b + _N_INFO]:
                    summary["recovered"] += 1
                else:
                    poll_idx = q.unacked_seen.get(val, q.max_polled_idx)
                    self._add("unexpected-failed", q.name, (st[b + _INV_IDX], poll_idx), o, val)
        summary["delivered"] += delivered
        for val, ex in q.extra.items():
            b = q.rows[val]
            n_ok = st[b]
            if st[b + _INV_IDX] == _NONE or st[b + _N_INFO] or not n_ok:
                continue  # unexpected values are reported as such; info sends are never duplicates
            offsets = sorted({st[b + _FIRST], *ex})
            if len(offsets) > n_ok:
                summary["duplicated"] += 1
                self._add("duplicate", q.name, (st[b + _INV_IDX], *sorted(set(ex.values()))), n_ok, offsets, val)

    def _unseen(self, q: _Queue, b: int, val: Any, summary: dict[str, int]) -> None:
        """An acknowledged send no poll read: bad only if a drain of its queue began after the acknowledgement."""
        summary["unseen"] += 1
        st = q.st
        ack = st[b + _ACK_OFF]
        ack_or_none = None if ack == _NONE else ack
        inv_idx, cmp_idx = st[b + _INV_IDX], st[b + _CMP_IDX]
        if cmp_idx < q.drain_inv:
            summary["unseen_after_drain"] += 1
            self._add("unseen-after-drain", q.name, (inv_idx, cmp_idx, q.drain_inv), ack_or_none, val, q.drain_inv)
        else:
            self._add("unseen", q.name, (inv_idx, cmp_idx), ack_or_none, val)

    def _resolve_gaps(self, q: _Queue) -> None:
        if not q.gaps:
            return
        known: list[int] | None = None
        for lo, hi, kind, idx, consumer in q.gaps:
            if hi - lo <= _SMALL_GAP:
                missing = [o for o in range(lo + 1, hi) if q.off_get(o) is not None]
            else:
                if known is None:
                    known = q.known_offsets()
                i = bisect_right(known, lo)
                missing = []
                while i < len(known) and known[i] < hi and len(missing) < 10:
                    missing.append(known[i])
                    i += 1
            if missing:
                self._add(kind, q.name, (idx,), missing, lo, hi, consumer)
