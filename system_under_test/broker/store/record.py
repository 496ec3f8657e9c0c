"""Commit-log records: the message as stored, and its self-checking binary frame (pure).

A **record** is one message as the commit log holds it: topic, queue id, key, body, properties,
the producer's born timestamp, the store timestamp, and the **queue offset** -- the record's
logical position in its consume queue ``(topic, queue_id)``, assigned by the master at append
time and carried verbatim to slaves, so every replica has the same consume queues.

Frame (all integers big-endian)::

    offset  size  field
    0       4     total length of the frame, header included (u32)
    4       4     magic 0x53425231 ("SBR1")
    8       4     CRC32 of bytes [0, 8) followed by bytes [12, total)  -- everything but itself
    12      4     queue id (u32)
    16      8     queue offset (u64)
    24      8     born timestamp ms (u64)
    32      8     store timestamp ms (u64)
    40      2     topic length (u16)
    42      2     key length (u16)
    44      4     properties length (u32)
    48      4     body length (u32)
    52      ...   topic utf-8, key utf-8, properties, body

Properties are encoded sorted by key as ``u16 len, key utf-8, u16 len, value utf-8`` pairs, so
equal records always encode to equal bytes.

Decoding a buffer (:func:`decode_many`) walks frames from the start and stops at the first frame
that is incomplete (a torn tail, or simply the end of a read) or damaged (bad magic, impossible
length, CRC mismatch); the stop is reported with its offset so the caller decides between
"truncate the torn tail" and "corruption in the middle" (see :func:`find_next_valid`).

This module is pure: no I/O, no clocks.
"""

from __future__ import annotations

import enum
import re
import struct
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

MAGIC = 0x53425231
_MAGIC_BYTES = struct.pack(">I", MAGIC)
_HEAD = struct.Struct(">IIIIQQQHHII")
HEADER_BYTES = _HEAD.size  # 52
FRAME_HEAD = _HEAD
"""The fixed frame header (the table above) as a :class:`struct.Struct`, for hot loops that
check headers without decoding records (``MessageStore.get_raw``)."""
_PREFIX = struct.Struct(">II")  # total length, magic
FRAME_PREFIX = _PREFIX  # (total length, magic): enough to walk trusted frames (``CommitLog.read``)
_U16 = struct.Struct(">H")
#: Largest frame the decoder accepts; anything claiming more is treated as damage.
MAX_FRAME_BYTES = 1 << 30
_U64_MAX = (1 << 64) - 1
_U32_MAX = (1 << 32) - 1
#: Topic names double as directory names in the consume-queue tree.
TOPIC_RE = re.compile(r"^(?!\.{1,2}$)[A-Za-z0-9_%|.-]{1,127}$")
#: The property whose hash goes into consume-queue entries (RocketMQ's message tag).
TAGS_PROPERTY = "TAGS"


@dataclass(frozen=True)
class Record:
    """One message as stored in the commit log.

    Attributes:
        topic: ``[A-Za-z0-9_%|.-]{1,127}`` (it is also a directory name).
        queue_id: the queue within the topic, 0..2**32-1.
        body: the payload.
        key: an application key (may be empty).
        properties: string -> string metadata; ``TAGS`` feeds the consume-queue tag hash.
        born_timestamp_ms: when the producer created the message.
        store_timestamp_ms: when the master appended it (set by the store on put).
        queue_offset: logical offset in the consume queue (set by the store on put).
    """

    topic: str
    queue_id: int
    body: bytes
    key: str = ""
    properties: Mapping[str, str] = field(default_factory=dict)
    born_timestamp_ms: int = 0
    store_timestamp_ms: int = 0
    queue_offset: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.topic, str) or not TOPIC_RE.match(self.topic):
            raise ValueError(f"Record.topic must match {TOPIC_RE.pattern}, got {self.topic!r}")
        for name in ("queue_id",):
            value = getattr(self, name)
            if not isinstance(value, int) or not 0 <= value <= _U32_MAX:
                raise ValueError(f"Record.{name} must be an int in [0, 2**32), got {value!r}")
        for name in ("born_timestamp_ms", "store_timestamp_ms", "queue_offset"):
            value = getattr(self, name)
            if not isinstance(value, int) or not 0 <= value <= _U64_MAX:
                raise ValueError(f"Record.{name} must be an int in [0, 2**64), got {value!r}")
        if not isinstance(self.body, bytes | bytearray | memoryview):
            raise ValueError(f"Record.body must be bytes, got {type(self.body).__name__}")
        if not isinstance(self.body, bytes):
            object.__setattr__(self, "body", bytes(self.body))
        if not isinstance(self.key, str) or len(self.key.encode()) > 0xFFFF:
            raise ValueError(f"Record.key must be a str of at most 65535 utf-8 bytes, got {self.key!r:.80}")
        props = dict(self.properties)
        for k, v in props.items():
            if not isinstance(k, str) or not isinstance(v, str) or not k:
                raise ValueError(f"Record.properties must map non-empty str to str, got {k!r}: {v!r}")
            if len(k.encode()) > 0xFFFF or len(v.encode()) > 0xFFFF:
                raise ValueError(f"Record.properties entry {k!r:.40} is longer than 65535 utf-8 bytes")
        object.__setattr__(self, "properties", props)

    @property
    def tags(self) -> str:
        """The ``TAGS`` property, or "" when absent."""
        return self.properties.get(TAGS_PROPERTY, "")

    def describe(self) -> str:
        return (
            f"{self.topic}/{self.queue_id}@{self.queue_offset} key={self.key!r} "
            f"{len(self.body)}B props={len(self.properties)}"
        )


def trusted_record(
    topic: str,
    queue_id: int,
    body: bytes,
    key: str,
    properties: dict[str, str],
    born_timestamp_ms: int,
    store_timestamp_ms: int,
    queue_offset: int,
) -> Record:
    """Build a :class:`Record` without re-validating (for decoded, CRC-checked frames and for
    re-stamping an already validated record); the hot paths of put and get use it."""
    r = object.__new__(Record)
    r.__dict__.update(
        topic=topic,
        queue_id=queue_id,
        body=body,
        key=key,
        properties=properties,
        born_timestamp_ms=born_timestamp_ms,
        store_timestamp_ms=store_timestamp_ms,
        queue_offset=queue_offset,
    )
    return r


def trusted_records(topic: str, queue_id: int, born_timestamp_ms: int, bodies: Sequence[bytes],
                    keys: Sequence[str]) -> list[Record]:
    """Records of one queue without properties, from validated parts -- the caller checked the
    shared fields once (e.g. by building one :class:`Record`) and each body and key; what
    :func:`trusted_record` does per record, for a whole SEND_MESSAGE batch at once."""
    base = {"topic": topic, "queue_id": queue_id, "born_timestamp_ms": born_timestamp_ms, "store_timestamp_ms": 0,
            "queue_offset": 0}
    out = []
    new, set_dict = object.__new__, object.__setattr__
    for body, key in zip(bodies, keys, strict=True):
        fields = base.copy()
        fields["body"], fields["key"], fields["properties"] = body, key, {}
        r = new(Record)
        set_dict(r, "__dict__", fields)
        out.append(r)
    return out


def restamped(record: Record, queue_offset: int, store_timestamp_ms: int) -> Record:
    """``record`` with a new queue offset and store timestamp (both validated here)."""
    if not 0 <= queue_offset <= _U64_MAX or not 0 <= store_timestamp_ms <= _U64_MAX:
        raise ValueError(f"queue offset {queue_offset} / store timestamp {store_timestamp_ms} out of u64 range")
    return trusted_record(
        record.topic,
        record.queue_id,
        record.body,
        record.key,
        dict(record.properties),
        record.born_timestamp_ms,
        store_timestamp_ms,
        queue_offset,
    )


def _encode_properties(props: Mapping[str, str]) -> bytes:
    if not props:
        return b""
    parts: list[bytes] = []
    for k in sorted(props):
        kb, vb = k.encode(), props[k].encode()
        parts += (_U16.pack(len(kb)), kb, _U16.pack(len(vb)), vb)
    return b"".join(parts)


def _decode_properties(raw: bytes) -> dict[str, str]:
    props: dict[str, str] = {}
    pos, end = 0, len(raw)
    while pos < end:
        if pos + 2 > end:
            raise ValueError(f"properties truncated at byte {pos}")
        (klen,) = _U16.unpack_from(raw, pos)
        k = raw[pos + 2 : pos + 2 + klen].decode()
        pos += 2 + klen
        if pos + 2 > end:
            raise ValueError(f"properties truncated at byte {pos}")
        (vlen,) = _U16.unpack_from(raw, pos)
        v = raw[pos + 2 : pos + 2 + vlen].decode()
        pos += 2 + vlen
        if pos > end:
            raise ValueError(f"properties truncated at byte {end}")
        props[k] = v
    return props


def encode(record: Record, *, queue_offset: int | None = None, store_timestamp_ms: int | None = None) -> bytes:
    """The frame of ``record`` (see the module docstring for the layout), optionally with another
    queue offset and store timestamp (a put stamps records without copying them first).

    Raises:
        ValueError: the frame would exceed MAX_FRAME_BYTES, or a stamp is outside u64.
    """
    qo = record.queue_offset if queue_offset is None else queue_offset
    stored = record.store_timestamp_ms if store_timestamp_ms is None else store_timestamp_ms
    if not 0 <= qo <= _U64_MAX or not 0 <= stored <= _U64_MAX:
        raise ValueError(f"queue offset {qo} / store timestamp {stored} out of u64 range")
    topic = record.topic.encode()
    key = record.key.encode()
    props = _encode_properties(record.properties)
    total = HEADER_BYTES + len(topic) + len(key) + len(props) + len(record.body)
    if total > MAX_FRAME_BYTES:
        raise ValueError(f"record frame of {total} bytes exceeds MAX_FRAME_BYTES={MAX_FRAME_BYTES}")
    head = _HEAD.pack(
        total,
        MAGIC,
        0,
        record.queue_id,
        qo,
        record.born_timestamp_ms,
        stored,
        len(topic),
        len(key),
        len(props),
        len(record.body),
    )
    rest = b"".join((head[12:], topic, key, props, record.body))
    crc = zlib.crc32(rest, zlib.crc32(head[:8]))
    return b"".join((head[:8], struct.pack(">I", crc), rest))


_META = struct.Struct(">IQQQHHII")  # frame bytes [12, 52): queue id .. body length
_CRC = struct.Struct(">I")


def encode_stamped(records: Sequence[Record], queue_offsets: Sequence[int],
                   store_timestamp_ms: int) -> tuple[bytes, list[int]]:
    """The frames of ``records`` with the given queue offsets and store timestamp, back to back, and
    their sizes: what :func:`encode` gives record by record (a test checks it), in one pass -- a
    master's put encodes every record it appends.

    Raises:
        ValueError: a frame would exceed MAX_FRAME_BYTES, or a stamp is outside u64.
    """
    if not 0 <= store_timestamp_ms <= _U64_MAX:
        raise ValueError(f"store timestamp {store_timestamp_ms} out of u64 range")
    parts: list[bytes] = []
    sizes: list[int] = []
    topics: dict[str, bytes] = {}
    crc32, prefix_pack, meta_pack, crc_pack = zlib.crc32, _PREFIX.pack, _META.pack, _CRC.pack
    for r, qo in zip(records, queue_offsets, strict=True):
        tb = topics.get(r.topic)
        if tb is None:
            tb = topics[r.topic] = r.topic.encode()
        kb = r.key.encode() if r.key else b""
        pb = _encode_properties(r.properties) if r.properties else b""
        body = r.body
        total = HEADER_BYTES + len(tb) + len(kb) + len(pb) + len(body)
        if total > MAX_FRAME_BYTES:
            raise ValueError(f"record frame of {total} bytes exceeds MAX_FRAME_BYTES={MAX_FRAME_BYTES}")
        if not 0 <= qo <= _U64_MAX:
            raise ValueError(f"queue offset {qo} out of u64 range")
        prefix = prefix_pack(total, MAGIC)
        meta = meta_pack(r.queue_id, qo, r.born_timestamp_ms, store_timestamp_ms, len(tb), len(kb), len(pb),
                         len(body)) + tb + kb + pb
        parts += (prefix, crc_pack(crc32(body, crc32(meta, crc32(prefix)))), meta, body)
        sizes.append(total)
    return b"".join(parts), sizes


class StopKind(enum.Enum):
    """Why :func:`decode_many` stopped before the end of the buffer."""

    INCOMPLETE = "incomplete"  # the buffer ends inside a frame (torn tail, or a read that ended mid-frame)
    CORRUPT = "corrupt"  # bad magic, impossible length, CRC mismatch or malformed fields


@dataclass(frozen=True)
class DecodeStop:
    """Where and why decoding stopped.  ``offset`` is absolute (``base_offset`` + position)."""

    kind: StopKind
    offset: int
    detail: str


@dataclass(frozen=True)
class Decoded:
    """A decoded frame: its absolute offset, its frame size, and the record."""

    offset: int
    size: int
    record: Record

    @property
    def end(self) -> int:
        return self.offset + self.size


@dataclass(frozen=True)
class DecodeResult:
    """Output of :func:`decode_many`.

    Attributes:
        records: the whole, valid frames from the start of the buffer, in order.
        end: absolute offset just past the last valid frame (``base_offset`` if none).
        stop: None if the buffer ended exactly at a frame boundary, else why decoding stopped.
    """

    records: list[Decoded]
    end: int
    stop: DecodeStop | None


def frame_length_at(buf: bytes | memoryview, pos: int) -> int | None:
    """The total length claimed by the frame at ``pos``, or None if fewer than 8 bytes remain
    or the magic is wrong.  Does not check the CRC (use it only to walk trusted data)."""
    if pos + 8 > len(buf):
        return None
    total, magic = _PREFIX.unpack_from(buf, pos)
    if magic != MAGIC or total < HEADER_BYTES:
        return None
    return int(total)


def _check_frame(buf: bytes | memoryview, pos: int) -> tuple[int, StopKind | None, str]:
    """(total, None, "") if a whole valid frame starts at pos, else (0, kind, detail)."""
    avail = len(buf) - pos
    if avail < 8:
        return 0, StopKind.INCOMPLETE, f"only {avail} bytes left, a frame needs at least {HEADER_BYTES}"
    total, magic = _PREFIX.unpack_from(buf, pos)
    if magic != MAGIC:
        return 0, StopKind.CORRUPT, f"bad magic 0x{magic:08x}, expected 0x{MAGIC:08x}"
    if total < HEADER_BYTES or total > MAX_FRAME_BYTES:
        return 0, StopKind.CORRUPT, f"impossible frame length {total} (expected {HEADER_BYTES}..{MAX_FRAME_BYTES})"
    if total > avail:
        return 0, StopKind.INCOMPLETE, f"frame claims {total} bytes but only {avail} remain"
    mv = memoryview(buf)
    stored = struct.unpack_from(">I", buf, pos + 8)[0]
    crc = zlib.crc32(mv[pos + 12 : pos + total], zlib.crc32(mv[pos : pos + 8]))
    if crc != stored:
        return 0, StopKind.CORRUPT, f"CRC mismatch: stored 0x{stored:08x}, computed 0x{crc:08x}"
    return int(total), None, ""


def _decode_fields(buf: bytes | memoryview, pos: int, total: int) -> Record:
    (_, _, _, queue_id, queue_offset, born, stored, tlen, klen, plen, blen) = _HEAD.unpack_from(buf, pos)
    if HEADER_BYTES + tlen + klen + plen + blen != total:
        raise ValueError(f"field lengths {tlen}+{klen}+{plen}+{blen} do not add up to frame length {total}")
    p = pos + HEADER_BYTES
    raw = bytes(buf[p : pos + total])
    topic = raw[:tlen].decode()
    key = raw[tlen : tlen + klen].decode()
    props = _decode_properties(raw[tlen + klen : tlen + klen + plen])
    body = raw[tlen + klen + plen :]
    if not TOPIC_RE.match(topic):
        raise ValueError(f"topic {topic!r} is not a valid topic name")
    return trusted_record(topic, queue_id, body, key, props, born, stored, queue_offset)


_topic_cache: dict[bytes, str] = {}


def _fast_decode(buf: bytes | memoryview, pos: int, base_offset: int) -> Decoded | None:
    """The common case in one pass: a whole, valid frame with a known-good topic; None otherwise
    (the caller then takes the slow path, which says exactly what is wrong)."""
    if len(buf) - pos < HEADER_BYTES:
        return None
    (total, magic, stored, queue_id, queue_offset, born, st, tlen, klen, plen, blen) = _HEAD.unpack_from(buf, pos)
    end = pos + total
    if magic != MAGIC or end > len(buf) or HEADER_BYTES + tlen + klen + plen + blen != total:
        return None
    mv = memoryview(buf)
    if zlib.crc32(mv[pos + 12 : end], zlib.crc32(mv[pos : pos + 8])) != stored:
        return None
    p = pos + HEADER_BYTES
    raw_topic = bytes(mv[p : p + tlen])
    topic = _topic_cache.get(raw_topic)
    if topic is None:
        try:
            topic = raw_topic.decode()
        except UnicodeDecodeError:
            return None
        if not TOPIC_RE.match(topic):
            return None
        if len(_topic_cache) < 4096:
            _topic_cache[raw_topic] = topic
    p += tlen
    try:
        key = bytes(mv[p : p + klen]).decode() if klen else ""
        props = _decode_properties(bytes(mv[p + klen : p + klen + plen])) if plen else {}
    except (ValueError, UnicodeDecodeError):
        return None
    body = bytes(mv[p + klen + plen : end])
    return Decoded(base_offset + pos, total, trusted_record(topic, queue_id, body, key, props, born, st, queue_offset))


def decode_at(buf: bytes | memoryview, pos: int = 0, base_offset: int = 0) -> Decoded | DecodeStop:
    """Decode the one frame at ``pos``: a :class:`Decoded`, or a :class:`DecodeStop` saying why not."""
    fast = _fast_decode(buf, pos, base_offset)
    if fast is not None:
        return fast
    total, kind, detail = _check_frame(buf, pos)
    if kind is not None:
        return DecodeStop(kind, base_offset + pos, detail)
    try:
        record = _decode_fields(buf, pos, total)
    except (ValueError, UnicodeDecodeError) as exc:
        return DecodeStop(StopKind.CORRUPT, base_offset + pos, f"malformed fields: {exc}")
    return Decoded(base_offset + pos, total, record)


def decode(frame: bytes) -> Record:
    """Decode exactly one frame.

    Raises:
        ValueError: the bytes are not exactly one whole valid frame (the message says why).
    """
    got = decode_at(frame)
    if isinstance(got, DecodeStop):
        raise ValueError(f"not a valid record frame at byte {got.offset}: {got.detail}")
    if got.size != len(frame):
        raise ValueError(f"expected one frame of {len(frame)} bytes, the frame is {got.size} bytes")
    return got.record


def decode_many(buf: bytes | memoryview, base_offset: int = 0, *, start: int = 0) -> DecodeResult:
    """Decode consecutive frames from ``buf[start:]``; stop at the first incomplete or damaged one.

    Args:
        buf: bytes holding frames back to back.
        base_offset: the absolute (physical) offset of ``buf[0]``, added to every reported offset.
        start: where in ``buf`` to begin.
    """
    out: list[Decoded] = []
    pos, n = start, len(buf)
    while pos < n:
        got = decode_at(buf, pos, base_offset)
        if isinstance(got, DecodeStop):
            return DecodeResult(out, base_offset + pos, got)
        out.append(got)
        pos += got.size
    return DecodeResult(out, base_offset + pos, None)


def check_identity(buf: bytes | memoryview, pos: int, size: int, topic: bytes, queue_id: int,
                   queue_offset: int) -> str | None:
    """None if the frame at ``pos`` claims ``size`` bytes and holds record ``topic/queue_id@queue_offset``;
    else what differs.  Header fields only, no CRC: the cheap check a broker makes before it hands
    raw frames to a consumer, which verifies the CRC itself (:func:`decode_pulled`)."""
    if pos + HEADER_BYTES > len(buf):
        return f"only {len(buf) - pos} bytes where a {size}-byte frame should start"
    (total, magic, _, qid, qo, _, _, tlen, _, _, _) = _HEAD.unpack_from(buf, pos)
    if magic != MAGIC or total != size:
        return f"magic 0x{magic:08x} / length {total}, expected 0x{MAGIC:08x} / {size} (the index's size)"
    p = pos + HEADER_BYTES
    if qid != queue_id or qo != queue_offset or buf[p : p + tlen] != topic:
        return (f"holds {bytes(buf[p : p + tlen]).decode(errors='replace')}/{qid}@{qo}, expected "
                f"{topic.decode()}/{queue_id}@{queue_offset}")
    return None


T = TypeVar("T")


PulledFields = tuple[int, int, bytes, str, dict[str, str], int]
"""``(queue_offset, phys_offset, body, key, properties, store_timestamp_ms)`` of a pulled record."""


def decode_pulled(data: bytes, spans: Sequence[Sequence[int]], topic: str, queue_id: int, first_offset: int,
                  next_offset: int, make: Callable[[PulledFields], T]) -> list[T]:
    """Decode the frames of a PULL_MESSAGE reply, checking every CRC (the consumer's side of the pull).

    Args:
        data: the frames of ``spans`` back to back.
        spans: ``[(phys_offset, size), ...]`` runs of the commit log that ``data`` holds.
        topic, queue_id: the queue asked for; every record must belong to it.
        first_offset, next_offset: every queue offset must lie in ``[first_offset, next_offset)`` and
            increase from record to record.
        make: builds one result from a :data:`PulledFields` tuple -- the caller's message type, built
            once (``functools.partial(tuple.__new__, SomeNamedTuple)`` costs no Python call).

    Raises:
        ValueError: a damaged frame, a record of another queue or out of order, or frames that do not
            exactly tile their spans (names the physical offset).
    """
    out: list[T] = []
    append = out.append
    mv = memoryview(data)
    n = len(data)
    unpack, crc32 = _HEAD.unpack_from, zlib.crc32
    prefix_crcs: dict[int, int] = {}  # CRC of bytes [0, 8) by frame length (the magic is checked)
    topic_b = topic.encode()
    prev = first_offset - 1
    pos = 0
    for span in spans:
        phys, size = int(span[0]), int(span[1])
        end = pos + size
        if size < 0 or end > n:
            raise ValueError(f"span ({phys}, {size}) passes the end of the {n}-byte data")
        base = phys - pos
        while pos < end:
            if pos + HEADER_BYTES > end:
                raise ValueError(f"record at offset {base + pos}: {end - pos} bytes left, a frame needs {HEADER_BYTES}")
            (total, magic, stored, qid, qo, _, st, tlen, klen, plen, blen) = unpack(data, pos)
            fend = pos + total
            pcrc = prefix_crcs.get(total)
            if pcrc is None:
                pcrc = prefix_crcs[total] = crc32(_PREFIX.pack(total, MAGIC))
            if (magic != MAGIC or fend > end or HEADER_BYTES + tlen + klen + plen + blen != total
                    or crc32(mv[pos + 12 : fend], pcrc) != stored):
                got = decode_at(mv[:end], pos, base)  # says exactly what is wrong
                why = got.detail if isinstance(got, DecodeStop) else "field lengths do not add up"
                raise ValueError(f"record at offset {base + pos}: {why}")
            p = pos + HEADER_BYTES
            if qid != queue_id or not prev < qo < next_offset or data[p : p + tlen] != topic_b:
                raise ValueError(f"record at offset {base + pos} is {bytes(data[p : p + tlen])!r}/{qid}@{qo}, "
                                 f"expected {topic}/{queue_id} at a queue offset in ({prev}, {next_offset})")
            prev = qo
            p += tlen
            try:
                key = data[p : p + klen].decode() if klen else ""
                props = _decode_properties(data[p + klen : p + klen + plen]) if plen else {}
            except (ValueError, UnicodeDecodeError) as exc:
                raise ValueError(f"record at offset {base + pos}: malformed key or properties: {exc}") from exc
            append(make((qo, base + pos, data[p + klen + plen : fend], key, props, st)))
            pos = fend
    if pos != n:
        raise ValueError(f"{n - pos} bytes of data beyond the spans {list(spans)!r:.80}")
    return out


def frame_facts(buf: bytes, base_offset: int = 0) -> list[tuple[int, int, str, int, int, str]]:
    """``(offset, size, topic, queue_id, queue_offset, tags)`` of every frame of ``buf``, which must be
    whole, CRC-valid frames back to back (replicated data); cheaper than :func:`decode_many`, which
    builds every record.

    Raises:
        ValueError: a frame is incomplete or damaged (names the absolute offset and why).
    """
    out: list[tuple[int, int, str, int, int, str]] = []
    mv = memoryview(buf)
    n = len(buf)
    unpack, crc32, topics = _HEAD.unpack_from, zlib.crc32, _topic_cache
    pos = 0
    while pos < n:
        fast = pos + HEADER_BYTES <= n
        if fast:
            (total, magic, stored, queue_id, queue_offset, _, _, tlen, klen, plen, blen) = unpack(buf, pos)
            end = pos + total
            p = pos + HEADER_BYTES
            topic = topics.get(buf[p : p + tlen])
            fast = (topic is not None and magic == MAGIC and end <= n
                    and HEADER_BYTES + tlen + klen + plen + blen == total
                    and crc32(mv[pos + 12 : end], crc32(mv[pos : pos + 8])) == stored)
        if not fast:  # unusual topic or damage: the full decoder validates the topic or says what is wrong
            got = decode_at(buf, pos, base_offset)
            if isinstance(got, DecodeStop):
                raise ValueError(f"{got.kind.value} at offset {got.offset}: {got.detail}")
            r = got.record
            out.append((got.offset, got.size, r.topic, r.queue_id, r.queue_offset, r.tags))
            pos += got.size
            continue
        tags = ""
        if plen:
            q = p + tlen + klen
            tags = _decode_properties(buf[q : q + plen]).get(TAGS_PROPERTY, "")
        out.append((base_offset + pos, total, topic, queue_id, queue_offset, tags))  # type: ignore[arg-type]
        pos = end
    return out


def iter_frames(buf: bytes | memoryview, base_offset: int = 0) -> Iterator[tuple[int, int]]:
    """(absolute offset, size) of each whole, valid frame from the start of ``buf``; stops silently
    at the first incomplete or damaged one."""
    pos, n = 0, len(buf)
    while pos < n:
        total, kind, _ = _check_frame(buf, pos)
        if kind is not None:
            return
        yield base_offset + pos, total
        pos += total


def find_next_valid(buf: bytes | memoryview, start: int) -> int | None:
    """Position of the first whole, CRC-valid frame beginning at or after ``start``, or None.

    Used after a decode stop to tell a torn tail (nothing valid follows) from damage in the
    middle of the log (valid frames follow the damaged one)."""
    data = bytes(buf) if isinstance(buf, memoryview) else buf
    pos = start
    while True:
        idx = data.find(_MAGIC_BYTES, max(pos, 4))
        if idx < 0:
            return None
        cand = idx - 4
        if cand >= start:
            total, kind, _ = _check_frame(data, cand)
            if kind is None and total:
                return cand
        pos = idx + 1


def tag_hash(tags: str) -> int:
    """Stable 64-bit hash of a tag string for consume-queue entries (0 for no tag)."""
    if not tags:
        return 0
    raw = tags.encode()
    return (zlib.crc32(raw) << 32) | zlib.adler32(raw)


def frame_header(buf: bytes | memoryview, pos: int) -> tuple[int, int, int, str, str]:
    """(total, queue_id, queue_offset, topic, tags) of the frame at ``pos`` without checking its CRC
    (for re-walking data already verified)."""
    (total, _, _, queue_id, queue_offset, _, _, tlen, klen, plen, _) = _HEAD.unpack_from(buf, pos)
    p = pos + HEADER_BYTES
    topic = bytes(buf[p : p + tlen]).decode()
    tags = ""
    if plen:
        q = p + tlen + klen
        tags = _decode_properties(bytes(buf[q : q + plen])).get(TAGS_PROPERTY, "")
    return total, queue_id, queue_offset, topic, tags
