"""Pure codec of raft storage records: framing, scanning, entry/hard-state/snapshot payloads (no files)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from system_under_test.raft.storage import (
    HEADER,
    decode_entry,
    decode_hard_state,
    decode_snapshot,
    encode_entry,
    encode_hard_state,
    encode_record,
    encode_snapshot,
    scan_records,
)
from system_under_test.raft.types import Entry, EntryKind, HardState, Snapshot, StorageCorruption

# One table for both directions: each value is encoded then decoded (h11 test_io style).
ROUND_TRIPS = [
    pytest.param(encode_entry, decode_entry, Entry(1, 1), id="entry-empty"),
    pytest.param(encode_entry, decode_entry, Entry(7, 42, b"\x00\xffdata", EntryKind.NORMAL), id="entry-binary"),
    pytest.param(encode_entry, decode_entry, Entry(3, 9, b"", EntryKind.NOOP), id="entry-noop"),
    pytest.param(encode_hard_state, decode_hard_state, HardState(), id="hardstate-zero"),
    pytest.param(encode_hard_state, decode_hard_state, HardState(5, "n2", 17), id="hardstate-vote"),
    pytest.param(encode_snapshot, decode_snapshot, Snapshot(10, 2, b"state", ("n1", "n2", "n3")), id="snapshot"),
    pytest.param(encode_snapshot, decode_snapshot, Snapshot(0, 0, b"", ("n1",)), id="snapshot-empty"),
]


@pytest.mark.parametrize(("encode", "decode", "value"), ROUND_TRIPS)
def test_payload_round_trip(encode, decode, value) -> None:  # type: ignore[no-untyped-def]
    assert decode(encode(value)) == value
    rec = encode_record(encode(value))
    scan = scan_records(rec, where="mem")
    assert [p for _, p in scan.records] == [encode(value)]
    assert scan.valid_end == len(rec) and scan.torn is None


@pytest.mark.parametrize("decode", [decode_entry, decode_hard_state, decode_snapshot], ids=lambda f: f.__name__)
def test_decode_rejects_garbage(decode) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="not a"):
        decode(b"\x93\x01")


def test_empty_payload_is_refused() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        encode_record(b"")


def _log(n: int) -> tuple[bytes, list[int]]:
    buf, offsets = b"", []
    for i in range(1, n + 1):
        offsets.append(len(buf))
        buf += encode_record(encode_entry(Entry(1, i, bytes([i]) * i)))
    return buf, offsets


@given(st.integers(min_value=1, max_value=6), st.data())
def test_any_cut_inside_the_last_record_is_a_torn_tail(n: int, data: st.DataObject) -> None:
    buf, offsets = _log(n)
    cut = data.draw(st.integers(min_value=offsets[-1] + 1, max_value=len(buf) - 1))
    scan = scan_records(buf[:cut], where="seg")
    assert len(scan.records) == n - 1
    assert scan.valid_end == offsets[-1]
    assert scan.torn is not None and f"byte offset {offsets[-1]}" in scan.torn


@given(st.integers(min_value=2, max_value=6), st.data())
def test_any_flipped_byte_before_the_last_record_is_corruption(n: int, data: st.DataObject) -> None:
    buf, offsets = _log(n)
    pos = data.draw(st.integers(min_value=0, max_value=offsets[-1] - 1))
    bad = bytearray(buf)
    bad[pos] ^= data.draw(st.integers(min_value=1, max_value=255))
    with pytest.raises(StorageCorruption, match=r"seg-x: .* at byte offset \d+") as info:
        scan_records(bytes(bad), where="seg-x")
    record_start = max(o for o in offsets if o <= pos)
    assert f"byte offset {record_start} " in str(info.value)


@given(st.integers(min_value=1, max_value=6), st.data())
def test_a_crc_bad_final_record_is_a_torn_tail(n: int, data: st.DataObject) -> None:
    buf, offsets = _log(n)
    # bytes 8.. of the record: its payload CRC and payload (a torn write leaves the length intact)
    pos = data.draw(st.integers(min_value=offsets[-1] + 8, max_value=len(buf) - 1))
    bad = bytearray(buf)
    bad[pos] ^= 0x5A
    scan = scan_records(bytes(bad), where="seg")
    assert scan.valid_end == offsets[-1] and len(scan.records) == n - 1


@pytest.mark.parametrize("pos", [0, 3, 4, 7], ids=lambda p: f"header-byte-{p}")
def test_a_damaged_length_in_the_final_record_is_corruption(pos: int) -> None:
    # A torn write cannot produce a complete header with a bad length check; a flipped length
    # byte could otherwise make a good record look like a long torn one and silently drop it.
    buf, offsets = _log(3)
    bad = bytearray(buf)
    bad[offsets[-1] + pos] ^= 0x01
    with pytest.raises(StorageCorruption, match=f"bad record header .* at byte offset {offsets[-1]} "):
        scan_records(bytes(bad), where="seg")


def test_torn_tail_not_allowed_outside_the_last_segment() -> None:
    buf, _ = _log(3)
    with pytest.raises(StorageCorruption, match="not a torn tail"):
        scan_records(buf[:-1], where="older-seg", allow_torn_tail=False)


def test_zero_filled_tail_is_torn_not_corrupt() -> None:
    buf, _ = _log(3)
    scan = scan_records(buf + bytes(3 * HEADER.size + 5), where="seg")
    assert len(scan.records) == 3 and scan.valid_end == len(buf)
    assert scan.torn is not None and "bad record header" in scan.torn
