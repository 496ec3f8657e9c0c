"""Frame codec: round trips, incremental feeding, and hostile input never crashing the decoder."""

from __future__ import annotations

import struct

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from system_under_test.protocol import (
    Frame,
    FrameDecoder,
    Kind,
    LocalProtocolError,
    RemoteProtocolError,
    encode_frame,
)

headers = st.dictionaries(st.text(max_size=8), st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=10),
                                                          st.booleans(), st.none()), max_size=5)
frames = st.builds(
    Frame,
    kind=st.sampled_from(list(Kind)),
    request_id=st.integers(0, 2**32),
    code=st.integers(-(2**31), 2**31),
    header=headers,
    body=st.one_of(st.none(), st.binary(max_size=64), st.integers(0, 100)),
)


@given(st.lists(frames, max_size=5), st.integers(1, 17))
def test_round_trip_with_arbitrary_chunking(fs: list[Frame], chunk: int) -> None:
    data = b"".join(encode_frame(f) for f in fs)
    dec = FrameDecoder()
    out: list[Frame] = []
    for i in range(0, len(data), chunk):
        dec.feed(data[i : i + chunk])
        out.extend(dec.frames())
    assert out == fs
    assert dec.buffered == 0


@given(st.binary(max_size=300))
@settings(max_examples=300)
def test_garbage_raises_remote_error_or_waits(data: bytes) -> None:
    dec = FrameDecoder(max_frame_bytes=1024)
    dec.feed(data)
    try:
        dec.frames()
    except RemoteProtocolError:
        with pytest.raises(RemoteProtocolError):
            dec.frames()  # a failed decoder stays failed: the connection must be closed


@pytest.mark.parametrize(
    "payload, fragment",
    [
        (msgpack.packb([0, 1, 2, {}]), "5-element array"),
        (msgpack.packb([9, 1, 2, {}, None]), "'kind'"),
        (msgpack.packb([0, -1, 2, {}, None]), "'request_id'"),
        (msgpack.packb([0, 1, "x", {}, None]), "'code'"),
        (msgpack.packb([0, 1, 2, [1], None]), "'header'"),
        (b"\xc1", "not valid msgpack"),
    ],
    ids=["short-array", "bad-kind", "negative-id", "string-code", "list-header", "reserved-byte"],
)
def test_malformed_payload_names_the_field(payload: bytes, fragment: str) -> None:
    dec = FrameDecoder()
    dec.feed(struct.pack(">I", len(payload)) + payload)
    with pytest.raises(RemoteProtocolError, match=fragment.replace("(", r"\(")):
        dec.frames()


def test_oversized_length_is_refused_before_buffering() -> None:
    dec = FrameDecoder(max_frame_bytes=100)
    dec.feed(struct.pack(">I", 101))
    with pytest.raises(RemoteProtocolError, match="exceeds the limit of 100"):
        dec.frames()


def test_local_error_for_unencodable_header() -> None:
    with pytest.raises(LocalProtocolError, match="cannot encode"):
        encode_frame(Frame(Kind.REQUEST, 1, 1, {"x": object()}))
    with pytest.raises(LocalProtocolError, match="request_id"):
        encode_frame(Frame(Kind.REQUEST, -5, 1, {}))
