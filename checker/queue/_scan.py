"""The streaming pass of the queue checker: one O(1)-per-record step per history op, then O(n) analysis.

Theory of operation.  ``QueueScan.feed`` consumes raw history ops (JSON dicts, or ``Op`` objects) in history
order and keeps, per queue: every sent value with its attempt counts and acknowledged offset, the value first
seen at each offset, the offset at which each value was first polled, the highest offset any poll read, and
*candidate gaps* (offset ranges a poll jumped over).  Anomalies that are visible at once (two values at one
offset, a poll going backwards, a send landing below an earlier acknowledged send) are recorded on the spot.
``QueueScan.result`` then walks the per-queue tables once to classify every sent value (delivered, lost,
unseen, recovered, duplicated, unexpected) and resolves the candidate gaps against the set of known offsets.

Rules of the file: no I/O except the ``iter_history_*`` readers (blocks are decoded in ``_lines``); an
``info`` send is never counted lost and never duplicated; every anomaly names its queue, op indices, expected
and observed values.  :meth:`QueueScan.feed` (dicts) is the reference; :meth:`QueueScan.feed_decoded` is its
specialisation for decoded structs and must stay step-for-step equal (``test_block_decoder_agrees...``).
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from checker.compose import Anomaly, Result, result_from_anomalies
from checker.history import HistoryError
from checker.queue._lines import MISSING, QVal, as_dict, iter_blocks
from checker.queue._types import ANOMALY_TYPES

try:  # orjson is ~4x faster than json for the 10M-op target; the checker works without it
    import orjson as _orjson

    _loads: Any = _orjson.loads
    _LoadError: Any = _orjson.JSONDecodeError
except ImportError:  # pragma: no cover - depends on the environment
    _loads = json.loads
    _LoadError = json.JSONDecodeError

DEFAULT_MAX_RECORDS = 1000  # anomaly records kept per type (all are counted)
_SMALL_GAP = 64  # gaps up to this width are resolved by probing the offset table directly

# indices into a send record (a list, for memory and speed); _CMP_IDX: the completion index of the first ok
# (of the first ok that carried an offset, once there is one)
_N_OK, _N_INFO, _N_FAIL, _ACK_OFF, _INV_IDX, _CMP_IDX = range(6)


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
    __slots__ = ("drain_inv", "extra", "gaps", "max_acked", "max_polled", "max_polled_idx", "name",
                 "off_val", "reported", "seen", "sends", "unacked_seen")

    def __init__(self, name: str) -> None:
        self.name = name
        self.sends: dict[Any, list[Any]] = {}
        self.off_val: dict[int, Any] = {}
        self.drain_inv = -1  # invoke index of the latest ok drain of this queue
        self.seen: dict[Any, int] = {}  # value -> first polled offset
        self.extra: dict[Any, dict[int, int]] = {}  # value -> {other offset: op index}
        self.unacked_seen: dict[Any, int] = {}  # value polled before any ok ack -> poll op index
        self.gaps: list[tuple[int, int, str, int, Any]] = []  # (lo, hi) exclusive, type, op index, consumer
        self.max_polled = -1
        self.max_polled_idx = -1
        self.max_acked: tuple[int, int] | None = None  # (offset, op index)
        self.reported: set[tuple[int, Any]] = set()


class QueueScan:
    """Streaming queue checker.  Call :meth:`feed` any number of times, then :meth:`result` once."""

    def __init__(self, *, max_records: int = DEFAULT_MAX_RECORDS) -> None:
        self._queues: dict[str, _Queue] = {}
        self._open: dict[Any, tuple[Any, ...]] = {}
        self._cursor: dict[tuple[Any, str], int] = {}
        self._last_send: dict[tuple[Any, str], tuple[int, int]] = {}
        self._anoms: dict[str, list[Anomaly]] = {}
        self._counts: dict[str, int] = {}
        self._max_records = max_records
        self._drained = False
        self.stats: dict[str, int] = {"ops": 0, "attempted": 0, "acknowledged": 0, "failed": 0,
                                      "indeterminate": 0, "polls": 0, "records_read": 0,
                                      "unpaired_completions": 0}

    # -- recording -------------------------------------------------------------------------------
    def _add(self, type_: str, key: str, ops: tuple[int, ...], expected: Any, observed: Any, why: str) -> None:
        n = self._counts.get(type_, 0)
        self._counts[type_] = n + 1
        if n < self._max_records:
            self._anoms.setdefault(type_, []).append(Anomaly(type_, key, ops, expected, observed, why))

    def _inconsistent(self, q: _Queue, off: int, old: Any, new: Any, idx: int) -> None:
        if (off, new) in q.reported:
            return
        q.reported.add((off, new))
        rec = q.sends.get(old)
        ops = (rec[_INV_IDX], idx) if rec is not None else (idx,)
        self._add("inconsistent-offsets", q.name, ops, {"offset": off, "value": old}, {"offset": off, "value": new},
                  f"offset {off} of {q.name} was seen holding {old!r} and later {new!r}")

    # -- the pass --------------------------------------------------------------------------------
    def feed(self, ops: Iterable[Any]) -> None:
        """Consume history ops (dicts with the history.jsonl fields, or ``checker.history.Op``)."""
        open_ = self._open
        open_pop = open_.pop
        queues = self._queues
        cursor = self._cursor
        n_ops = n_att = n_ack = n_fail = n_info = n_polls = n_recs = n_unpaired = 0
        for d in ops:
            n_ops += 1
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
                    q = queues.get(qn)
                    if q is None:
                        q = queues[qn] = _Queue(qn)
                    idx = d["index"]
                    if val not in q.sends:
                        q.sends[val] = [0, 0, 0, None, idx, None]
                    open_[d["process"]] = (idx, q, val, q.max_acked)
                    n_att += 1
                    continue
                inv = open_pop(d["process"], None)
                if inv is None:
                    n_unpaired += 1
                    continue
                inv_idx, q, val, m = inv
                rec = q.sends[val]
                if t == "ok":
                    n_ack += 1
                    rec[0] += 1
                    if rec[_CMP_IDX] is None:
                        rec[_CMP_IDX] = d["index"]
                    v = d["value"]
                    off = v.get("offset") if v.__class__ is dict else None
                    if off is not None:
                        self._ack(d["index"], d["process"], q, rec, val, off, inv_idx, m)
                elif t == "fail":
                    n_fail += 1
                    rec[_N_FAIL] += 1
                else:
                    n_info += 1
                    rec[_N_INFO] += 1
                continue
            if f != "poll" and f != "drain":
                continue
            t = d["type"]
            if t == "invoke":
                v = d["value"]
                open_[d["process"]] = (d["index"], v["queue"], v.get("offset"), v.get("consumer", d["process"]))
                continue
            inv = open_pop(d["process"], None)
            if inv is None:
                n_unpaired += 1
                continue
            inv_idx, qn, frm, consumer = inv
            ckey = (consumer, qn)
            if t != "ok":
                if t == "info":
                    cursor.pop(ckey, None)  # we no longer know what this consumer has consumed
                continue
            v = d["value"]
            recs = (v.get("records") or ()) if v.__class__ is dict else ()
            n_polls += 1
            n_recs += self._poll_ok(f, inv_idx, qn, frm, consumer, ckey, d["index"], recs)
        self._tally(n_ops, n_att, n_ack, n_fail, n_info, n_polls, n_recs, n_unpaired)

    def feed_decoded(self, ops: Iterable[Any]) -> None:
        """Consume ``QOp`` structs from :func:`iter_history_ops`: the steps of :meth:`feed`, specialised.

        Why a second loop: attribute access on slotted structs is what makes the 10M-op target.  Any op whose
        shape this loop does not cover exactly (a value that is not an object, a missing key the dict path
        reads with ``[]``) goes through :meth:`feed` as a dict, so both ways agree (a property test checks it).
        """
        open_ = self._open
        open_pop = open_.pop
        queues = self._queues
        cursor = self._cursor
        feed = self.feed
        n_ops = n_att = n_ack = n_fail = n_info = n_polls = n_recs = n_unpaired = 0
        for d in ops:
            f = d.f
            if f == "send":
                v = d.value
                if v.__class__ is not QVal:
                    feed((as_dict(d),))
                    continue
                t = d.type
                if t == "invoke":
                    qn = v.queue
                    val = v.value
                    if qn is MISSING or val is MISSING:
                        feed((as_dict(d),))
                        continue
                    n_ops += 1
                    if val.__class__ is not int and val.__class__ is not str:
                        val = _freeze(val)
                    try:
                        q = queues[qn]
                    except KeyError:
                        q = queues[qn] = _Queue(qn)
                    idx = d.index
                    sends = q.sends
                    if val not in sends:
                        sends[val] = [0, 0, 0, None, idx, None]
                    open_[d.process] = (idx, q, val, q.max_acked)
                    n_att += 1
                    continue
                n_ops += 1
                inv = open_pop(d.process, None)
                if inv is None:
                    n_unpaired += 1
                    continue
                inv_idx, q, val, m = inv
                rec = q.sends[val]
                if t == "ok":
                    n_ack += 1
                    rec[0] += 1
                    if rec[_CMP_IDX] is None:
                        rec[_CMP_IDX] = d.index
                    off = v.offset
                    if off is not None:
                        self._ack(d.index, d.process, q, rec, val, off, inv_idx, m)
                elif t == "fail":
                    n_fail += 1
                    rec[_N_FAIL] += 1
                else:
                    n_info += 1
                    rec[_N_INFO] += 1
                continue
            if f != "poll" and f != "drain":
                n_ops += 1
                continue
            v = d.value
            if v.__class__ is not QVal:
                feed((as_dict(d),))
                continue
            t = d.type
            if t == "invoke":
                qn = v.queue
                if qn is MISSING:
                    feed((as_dict(d),))
                    continue
                n_ops += 1
                c = v.consumer
                open_[d.process] = (d.index, qn, v.offset, d.process if c is MISSING else c)
                continue
            n_ops += 1
            inv = open_pop(d.process, None)
            if inv is None:
                n_unpaired += 1
                continue
            inv_idx, qn, frm, consumer = inv
            ckey = (consumer, qn)
            if t != "ok":
                if t == "info":
                    cursor.pop(ckey, None)  # we no longer know what this consumer has consumed
                continue
            n_polls += 1
            n_recs += self._poll_ok(f, inv_idx, qn, frm, consumer, ckey, d.index, v.records or ())
        self._tally(n_ops, n_att, n_ack, n_fail, n_info, n_polls, n_recs, n_unpaired)

    def _tally(self, n_ops: int, n_att: int, n_ack: int, n_fail: int, n_info: int, n_polls: int, n_recs: int,
               n_unpaired: int) -> None:
        """Add one pass's counters (kept in locals while it runs) to the statistics."""
        st = self.stats
        st["ops"] += n_ops
        st["attempted"] += n_att
        st["acknowledged"] += n_ack
        st["failed"] += n_fail
        st["indeterminate"] += n_info
        st["polls"] += n_polls
        st["records_read"] += n_recs
        st["unpaired_completions"] += n_unpaired

    def _poll_ok(self, f: str, inv_idx: int, qn: Any, frm: int | None, consumer: Any, ckey: tuple[Any, Any],
                 idx: int, recs: Any) -> int:
        """One ok poll or drain of queue ``qn`` (invoked at ``inv_idx``, from offset ``frm`` if it named one):
        note a drain, move the consumer's cursor, check the records; return how many it read."""
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
                self._add("nonmonotonic-poll", q.name, (idx,), {"from_offset": start}, {"first_offset": first},
                          f"consumer {consumer!r} resumed at offset {start} but the poll returned offset {first} first")
            else:
                q.gaps.append((start - 1, first, "poll-skip", idx, consumer))
        off_val = q.off_val
        seen = q.seen
        seen_get = seen.get
        sends_get = q.sends.get
        last = first - 1
        top = None  # the highest offset read, when it is not the last one (records out of order)
        for o, val in recs:
            if val.__class__ is not int and val.__class__ is not str:
                val = _freeze(val)
            try:  # a hit is the rule (acks fill the table first), and try is cheaper than .get on a hit
                pv = off_val[o]
            except KeyError:
                pv = None
            if pv is None:
                off_val[o] = val
            elif pv != val:
                self._inconsistent(q, o, pv, val, idx)
            s = seen_get(val)
            if s is None:
                seen[val] = o
                rec = sends_get(val)
                if rec is None:
                    self._add("unexpected", q.name, (idx,), None, {"offset": o, "value": val},
                              f"poll read {val!r} at offset {o} of {q.name} but no send of that value was ever invoked")
                elif rec[0] == 0:
                    q.unacked_seen[val] = idx
            elif s != o:
                ex = q.extra.get(val)
                if ex is None:
                    q.extra[val] = {o: idx}
                elif o not in ex:
                    ex[o] = idx
            if o != last + 1:
                if o <= last:
                    self._add("int-nonmonotonic-poll", q.name, (idx,), {"after_offset": last}, {"offset": o},
                              f"one poll returned offset {o} after offset {last}")
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

    def _ack(self, idx: int, p: Any, q: _Queue, rec: list[Any], val: Any, off: int, inv_idx: int,
             m: tuple[int, int] | None) -> None:
        """Record an acknowledged offset: offset table, per-producer and real-time send order."""
        if rec[_ACK_OFF] is None:
            rec[_ACK_OFF] = off
            rec[_CMP_IDX] = idx
        pv = q.off_val.get(off)
        if pv is None:
            q.off_val[off] = val
        elif pv != val:
            self._inconsistent(q, off, pv, val, idx)
        key = (p, q.name)
        last = self._last_send.get(key)
        if last is not None and off < last[0]:
            self._add("nonmonotonic-send", q.name, (last[1], inv_idx, idx), {"offset_above": last[0]},
                      {"offset": off, "value": val},
                      f"process {p} sent {val!r} after a send acknowledged at offset {last[0]}, "
                      f"but it landed at lower offset {off}")
        elif m is not None and off < m[0]:
            self._add("nonmonotonic-send-realtime", q.name, (m[1], inv_idx, idx), {"offset_above": m[0]},
                      {"offset": off, "value": val},
                      f"send of {val!r} was invoked after a send to {q.name} was acknowledged at offset "
                      f"{m[0]}, yet it landed at lower offset {off}")
        self._last_send[key] = (off, idx)
        if q.max_acked is None or off > q.max_acked[0]:
            q.max_acked = (off, idx)

    # -- the analysis ----------------------------------------------------------------------------
    def result(self) -> Result:
        """Classify every sent value, resolve gaps, and return the verdict with the total-queue summary."""
        for inv in self._open.values():  # an invoke that never completed is an info op
            if len(inv) == 4 and isinstance(inv[1], _Queue):
                inv[1].sends[inv[2]][_N_INFO] += 1
                self.stats["indeterminate"] += 1
        self._open.clear()
        summary = {"delivered": 0, "lost": 0, "duplicated": 0, "recovered": 0, "unexpected": 0, "unseen": 0,
                   "unseen_after_drain": 0}
        for q in self._queues.values():
            self._classify(q, summary)
            self._resolve_gaps(q)
        summary["unexpected"] = self._counts.get("unexpected", 0)
        summary["lost"] = self._counts.get("lost-write", 0) + summary["unseen_after_drain"]
        stats: dict[str, Any] = dict(self.stats)
        stats.update(summary)
        stats["queues"] = len(self._queues)
        stats["drained"] = self._drained
        stats["drained_queues"] = sum(1 for q in self._queues.values() if q.drain_inv >= 0)
        bad = {t.name for t in ANOMALY_TYPES.values() if t.bad}
        if summary["unseen_after_drain"]:
            bad.add("unseen")  # some acknowledged send is missing from a drain that began after its ack
        return result_from_anomalies(self._anoms, bad_types=bad, stats=stats, counts=self._counts)

    def _classify(self, q: _Queue, summary: dict[str, int]) -> None:
        seen = q.seen
        for val, rec in q.sends.items():
            o = seen.get(val)
            if rec[_N_OK]:
                ack = rec[_ACK_OFF]
                if o is None:
                    if ack is not None and ack < q.max_polled:
                        self._add("lost-write", q.name, (rec[_INV_IDX], rec[_CMP_IDX], q.max_polled_idx),
                                  {"offset": ack, "value": val}, {"max_polled_offset": q.max_polled},
                                  f"{val!r} was acknowledged at offset {ack} of {q.name} but never polled, "
                                  f"although polls read up to offset {q.max_polled}")
                    else:
                        self._unseen(q, rec, val, summary)
                    continue
                summary["delivered"] += 1
                if ack is not None and ack != o:
                    ex = q.extra.setdefault(val, {})
                    ex.setdefault(ack, rec[_CMP_IDX])
            elif o is not None:
                summary["delivered"] += 1
                if rec[_N_INFO]:
                    summary["recovered"] += 1
                else:
                    poll_idx = q.unacked_seen.get(val, q.max_polled_idx)
                    self._add("unexpected", q.name, (rec[_INV_IDX], poll_idx), None, {"offset": o, "value": val},
                              f"poll read {val!r} at offset {o} of {q.name} but every send of it definitely "
                              f"failed (G1a-like aborted read)")
        for val, ex in q.extra.items():
            srec = q.sends.get(val)
            if srec is None or srec[_N_INFO] or not srec[_N_OK]:
                continue  # unexpected values are reported as such; info sends are never duplicates
            offsets = sorted({seen[val], *ex})
            rec = srec
            if len(offsets) > rec[_N_OK]:
                summary["duplicated"] += 1
                self._add("duplicate", q.name, (rec[_INV_IDX], *sorted(set(ex.values()))),
                          {"copies": rec[_N_OK]}, {"offsets": offsets, "value": val},
                          f"{val!r} was acknowledged {rec[_N_OK]} time(s) but appears at offsets {offsets} "
                          f"of {q.name}")

    def _unseen(self, q: _Queue, rec: list[Any], val: Any, summary: dict[str, int]) -> None:
        """An acknowledged send no poll read: bad only if a drain of its queue began after the acknowledgement."""
        summary["unseen"] += 1
        ack = rec[_ACK_OFF]
        at = f"at offset {ack}" if ack is not None else "(without an offset)"
        if rec[_CMP_IDX] < q.drain_inv:
            summary["unseen_after_drain"] += 1
            self._add("unseen", q.name, (rec[_INV_IDX], rec[_CMP_IDX], q.drain_inv), {"offset": ack, "value": val},
                      None, f"{val!r} was acknowledged {at} of {q.name} but no poll read it, not even the drain "
                      f"invoked after the acknowledgement (op {q.drain_inv})")
        else:
            self._add("unseen", q.name, (rec[_INV_IDX], rec[_CMP_IDX]), {"offset": ack, "value": val}, None,
                      f"{val!r} was acknowledged {at} of {q.name} but no poll read it (yet: no drain of "
                      f"{q.name} began after the acknowledgement)")

    def _resolve_gaps(self, q: _Queue) -> None:
        if not q.gaps:
            return
        off_val = q.off_val
        known: list[int] | None = None
        for lo, hi, kind, idx, consumer in q.gaps:
            if hi - lo <= _SMALL_GAP:
                missing = [o for o in range(lo + 1, hi) if o in off_val]
            else:
                if known is None:
                    known = sorted(off_val)
                i = bisect_right(known, lo)
                missing = []
                while i < len(known) and known[i] < hi and len(missing) < 10:
                    missing.append(known[i])
                    i += 1
            if missing:
                where = "between polls" if kind == "poll-skip" else "inside one poll"
                self._add(kind, q.name, (idx,), {"offsets": missing[:10]}, {"jumped_from": lo, "to": hi},
                          f"consumer {consumer!r} jumped {where} from offset {lo} to {hi} of {q.name}, skipping "
                          f"known offset(s) {missing[:10]}")
