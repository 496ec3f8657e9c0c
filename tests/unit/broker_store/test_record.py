"""Record frame codec: round trips, decode stops, damage detection (record.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from system_under_test.broker.store import Record, StopKind, decode, decode_many, decode_pulled, encode
from system_under_test.broker.store.record import (
    HEADER_BYTES,
    encode_stamped,
    find_next_valid,
    frame_facts,
    frame_header,
    tag_hash,
)

CASES = [
    ("minimal", Record("t", 0, b"")),
    ("body", Record("orders", 3, b"hello", key="k1", born_timestamp_ms=5, store_timestamp_ms=6, queue_offset=7)),
    ("props", Record("a.b-c_d%e|f", 2**32 - 1, b"\x00" * 300, properties={"TAGS": "red", "x": "", "\u00e9": "v"})),
    ("big-offsets", Record("t", 1, b"z", born_timestamp_ms=2**64 - 1, queue_offset=2**64 - 1)),
]


@pytest.mark.parametrize("record", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_round_trip(record: Record) -> None:
    frame = encode(record)
    assert decode(frame) == record
    assert len(frame) == HEADER_BYTES + len(record.topic.encode()) + len(record.key.encode()) + len(
        b"".join(
            len(k.encode()).to_bytes(2, "big") + k.encode() + len(v.encode()).to_bytes(2, "big") + v.encode()
            for k, v in record.properties.items()
        )
    ) + len(record.body)
    total, qid, qo, topic, tags = frame_header(frame, 0)
    assert (total, qid, qo, topic, tags) == (
        len(frame),
        record.queue_id,
        record.queue_offset,
        record.topic,
        record.tags,
    )


INVALID = [
    ("empty-topic", dict(topic="", queue_id=0, body=b"")),
    ("slash-topic", dict(topic="a/b", queue_id=0, body=b"")),
    ("dotdot-topic", dict(topic="..", queue_id=0, body=b"")),
    ("negative-queue", dict(topic="t", queue_id=-1, body=b"")),
    ("queue-too-big", dict(topic="t", queue_id=2**32, body=b"")),
    ("str-body", dict(topic="t", queue_id=0, body="x")),
    ("negative-offset", dict(topic="t", queue_id=0, body=b"", queue_offset=-1)),
    ("non-str-prop", dict(topic="t", queue_id=0, body=b"", properties={"a": 1})),
    ("empty-prop-key", dict(topic="t", queue_id=0, body=b"", properties={"": "v"})),
]


@pytest.mark.parametrize("kwargs", [c[1] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_records_rejected_naming_the_field(kwargs: dict) -> None:
    with pytest.raises(ValueError, match=r"Record\."):
        Record(**kwargs)


records_st = st.builds(
    Record,
    topic=st.from_regex(r"[A-Za-z0-9_]{1,20}", fullmatch=True),
    queue_id=st.integers(0, 2**32 - 1),
    body=st.binary(max_size=200),
    key=st.text(max_size=10),
    properties=st.dictionaries(st.text(min_size=1, max_size=5), st.text(max_size=5), max_size=3),
    born_timestamp_ms=st.integers(0, 2**64 - 1),
    store_timestamp_ms=st.integers(0, 2**64 - 1),
    queue_offset=st.integers(0, 2**64 - 1),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(records_st, max_size=8), st.integers(0, 10**12))
def test_decode_many_round_trip(records: list[Record], base: int) -> None:
    buf = b"".join(encode(r) for r in records)
    got = decode_many(buf, base)
    assert got.stop is None
    assert [d.record for d in got.records] == records
    assert got.end == base + len(buf)
    assert [d.offset for d in got.records] == [
        base + sum(len(encode(r)) for r in records[:i]) for i in range(len(records))
    ]


@settings(max_examples=100, deadline=None)
@given(st.lists(records_st, min_size=1, max_size=5), st.data())
def test_decode_many_stops_at_incomplete_tail(records: list[Record], data: st.DataObject) -> None:
    buf = b"".join(encode(r) for r in records)
    cut = data.draw(st.integers(0, len(buf) - 1))
    got = decode_many(buf[:cut], 100)
    whole = [d for d in decode_many(buf, 100).records if d.end <= 100 + cut]
    assert [d.record for d in got.records] == [d.record for d in whole]
    if got.end < 100 + cut:
        assert got.stop is not None and got.stop.kind is StopKind.INCOMPLETE and got.stop.offset == got.end


@settings(max_examples=100, deadline=None)
@given(st.lists(records_st, min_size=2, max_size=5), st.data())
def test_flipped_byte_is_reported_with_its_frame_offset(records: list[Record], data: st.DataObject) -> None:
    frames = [encode(r) for r in records]
    i = data.draw(st.integers(0, len(frames) - 1))
    pos = data.draw(st.integers(0, len(frames[i]) - 1))
    damaged = bytearray(frames[i])
    damaged[pos] ^= 0xFF
    buf = b"".join(frames[:i]) + bytes(damaged) + b"".join(frames[i + 1 :])
    start = sum(map(len, frames[:i]))
    got = decode_many(buf, 1000)
    assert len(got.records) == i
    assert got.stop is not None and got.stop.offset == 1000 + start
    # the frames after the damaged one are still findable (that is how recovery detects middle corruption)
    if i + 1 < len(frames):
        nxt = find_next_valid(buf, start + 1)
        assert nxt is not None and nxt <= start + len(frames[i])


def test_crc_error_detail_names_stored_and_computed() -> None:
    frame = bytearray(encode(Record("t", 0, b"abc")))
    frame[-1] ^= 1
    got = decode_many(bytes(frame), 42)
    assert got.stop is not None and got.stop.kind is StopKind.CORRUPT and got.stop.offset == 42
    assert "CRC mismatch" in got.stop.detail
    with pytest.raises(ValueError, match="not a valid record frame at byte 0"):
        decode(bytes(frame))


def test_tag_hash_is_stable_and_zero_for_no_tag() -> None:
    assert tag_hash("") == 0
    assert tag_hash("red") == tag_hash("red") != tag_hash("blue")
    assert 0 < tag_hash("red") < 2**64


# -- the hot-path codecs: each checked against the plain one (differential) ----------------------


@settings(max_examples=100, deadline=None)
@given(st.lists(records_st, max_size=8), st.integers(0, 2**64 - 1))
def test_encode_stamped_equals_encode_record_by_record(records: list[Record], now: int) -> None:
    offsets = list(range(3, 3 + len(records)))
    data, sizes = encode_stamped(records, offsets, now)
    frames = [encode(r, queue_offset=qo, store_timestamp_ms=now) for r, qo in zip(records, offsets, strict=True)]
    assert data == b"".join(frames)
    assert sizes == [len(f) for f in frames]


@settings(max_examples=100, deadline=None)
@given(st.lists(records_st, max_size=8), st.integers(0, 10**12))
def test_frame_facts_agree_with_decode_many(records: list[Record], base: int) -> None:
    buf = b"".join(encode(r) for r in records)
    facts = frame_facts(buf, base)
    assert facts == [(d.offset, d.size, d.record.topic, d.record.queue_id, d.record.queue_offset, d.record.tags)
                     for d in decode_many(buf, base).records]


@settings(max_examples=100, deadline=None)
@given(st.lists(records_st, min_size=1, max_size=5), st.data())
def test_frame_facts_refuse_damage_naming_the_offset(records: list[Record], data: st.DataObject) -> None:
    frames = [encode(r) for r in records]
    i = data.draw(st.integers(0, len(frames) - 1))
    damaged = bytearray(frames[i])
    damaged[data.draw(st.integers(0, len(damaged) - 1))] ^= 0xFF
    start = 500 + sum(map(len, frames[:i]))
    with pytest.raises(ValueError, match=f"at offset {start}"):
        frame_facts(b"".join(frames[:i]) + bytes(damaged) + b"".join(frames[i + 1 :]), 500)


def _queue_records(n: int, first_qo: int = 0) -> list[Record]:
    return [Record("q", 2, b"m%d" % i, key=("k" if i % 2 else ""), properties=({"TAGS": "a"} if i % 3 else {}),
                   queue_offset=first_qo + i, store_timestamp_ms=i) for i in range(n)]


def _spans_of(records: list[Record], base: int, split: int) -> tuple[bytes, list[list[int]]]:
    frames = [encode(r) for r in records]
    a, b = b"".join(frames[:split]), b"".join(frames[split:])
    spans = [[base, len(a)], [base + len(a) + 999, len(b)]]  # a gap: another queue's records
    return a + b, [s for s in spans if s[1]]


def test_decode_pulled_round_trip_with_offsets_and_fields() -> None:
    records = _queue_records(5, first_qo=10)
    data, spans = _spans_of(records, 7000, 2)
    got = decode_pulled(data, spans, "q", 2, 10, 15, tuple)
    assert [g[0] for g in got] == [10, 11, 12, 13, 14]
    assert [g[2] for g in got] == [r.body for r in records]
    assert [(g[3], g[4], g[5]) for g in got] == [(r.key, r.properties, r.store_timestamp_ms) for r in records]
    assert got[0][1] == 7000 and got[2][1] == spans[1][0]


PULL_BAD = [
    ("flipped-body-byte", lambda d: d[:-1] + bytes([d[-1] ^ 1]), "CRC mismatch"),
    ("truncated", lambda d: d[:-3], "passes the end"),
    ("extra-bytes", lambda d: d + b"xx", "beyond the spans"),
]


@pytest.mark.parametrize(("mutate", "why"), [c[1:] for c in PULL_BAD], ids=[c[0] for c in PULL_BAD])
def test_decode_pulled_refuses_damaged_data(mutate: object, why: str) -> None:
    data, spans = _spans_of(_queue_records(3), 0, 1)
    with pytest.raises(ValueError, match=why):
        decode_pulled(mutate(data), spans, "q", 2, 0, 3, tuple)  # type: ignore[operator]


@pytest.mark.parametrize(("topic", "queue_id", "first", "nxt"), [("other", 2, 0, 3), ("q", 1, 0, 3), ("q", 2, 1, 3),
                                                                  ("q", 2, 0, 2)],
                         ids=["other-topic", "other-queue", "before-first", "at-next-offset"])
def test_decode_pulled_refuses_records_of_another_queue_or_range(topic: str, queue_id: int, first: int,
                                                                  nxt: int) -> None:
    data, spans = _spans_of(_queue_records(3), 0, 1)
    with pytest.raises(ValueError, match="expected"):
        decode_pulled(data, spans, topic, queue_id, first, nxt, tuple)
