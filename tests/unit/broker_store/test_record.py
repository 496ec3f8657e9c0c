"""Record frame codec: round trips, decode stops, damage detection (record.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from system_under_test.broker.store import Record, StopKind, decode, decode_many, encode
from system_under_test.broker.store.record import HEADER_BYTES, find_next_valid, frame_header, tag_hash

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
