"""Length-prefixed msgpack framing: a sans-IO encoder and decoder.

Wire format (see docs/protocol.md)::

    +----------------+--------------------------------------------------+
    | length: uint32 | msgpack array [kind, request_id, code, header, body] |
    | big endian     | (length bytes)                                   |
    +----------------+--------------------------------------------------+

* ``kind``: 0 = request, 1 = response, 2 = one-way (no response expected).
* ``request_id``: non-negative int chosen by the requester; a response repeats it.
* ``code``: a RequestCode for requests/one-ways, a ResponseCode for responses.
* ``header``: a map of str -> msgpack value, validated against the request's schema.
* ``body``: any msgpack value (usually bytes or nil); passed through untouched.

The decoder is a pure buffer: feed bytes with :meth:`FrameDecoder.feed`, take complete
:class:`Frame` objects from :meth:`FrameDecoder.frames`.  It raises RemoteProtocolError for an
oversized length or an undecodable payload, after which the connection must be closed.
"""

from __future__ import annotations

import enum
import struct
import threading
from dataclasses import dataclass, field
from typing import Any

import msgpack

from system_under_test.protocol.errors import LocalProtocolError, RemoteProtocolError

DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024
_LEN = struct.Struct(">I")


class Kind(enum.IntEnum):
    REQUEST = 0
    RESPONSE = 1
    ONEWAY = 2


_KINDS = (Kind.REQUEST, Kind.RESPONSE, Kind.ONEWAY)  # by value: cheaper than Kind(kind) per frame
_is_str = str.__instancecheck__  # isinstance(k, str) without a generator frame per key


class _Packers(threading.local):
    """One reusable msgpack Packer per thread: ``msgpack.packb`` builds a new Packer (and its
    buffer) per call, a visible share of every RPC; a Packer is not safe to share between threads."""

    def __init__(self) -> None:
        self.packer = msgpack.Packer(use_bin_type=True)


_PACKERS = _Packers()


@dataclass(slots=True)
class Frame:
    """One decoded message.  Treat as immutable; not ``frozen`` because a frozen dataclass's
    ``__init__`` costs several times a plain one, paid twice per RPC."""

    kind: Kind
    request_id: int
    code: int
    header: dict[str, Any] = field(default_factory=dict)
    body: Any = None

    def describe(self) -> str:
        return f"{self.kind.name.lower()} id={self.request_id} code={self.code} header={self.header!r}"


def encode_frame(frame: Frame) -> bytes:
    """Serialize ``frame`` with its length prefix.

    Raises:
        LocalProtocolError: if a field has the wrong type or the header cannot be packed.
    """
    if not isinstance(frame.request_id, int) or frame.request_id < 0:
        raise LocalProtocolError(f"request_id must be a non-negative int, got {frame.request_id!r}")
    if not isinstance(frame.header, dict):
        raise LocalProtocolError(f"header must be a dict, got {type(frame.header).__name__}")
    try:
        payload = _PACKERS.packer.pack([int(frame.kind), frame.request_id, int(frame.code), frame.header, frame.body])
    except (TypeError, ValueError, OverflowError) as exc:
        raise LocalProtocolError(f"cannot encode {frame.describe()}: {exc}") from exc
    return _LEN.pack(len(payload)) + payload


def _decode_payload(payload: bytes) -> Frame:
    try:
        obj = msgpack.unpackb(payload, raw=False, strict_map_key=True, use_list=True)
    except Exception as exc:  # msgpack raises several unrelated types on garbage
        raise RemoteProtocolError(f"payload is not valid msgpack: {exc.__class__.__name__}: {exc}") from exc
    if not isinstance(obj, list) or len(obj) != 5:
        raise RemoteProtocolError(f"expected a 5-element array [kind, id, code, header, body], got {obj!r:.200}")
    kind, request_id, code, header, body = obj
    if type(kind) is not int or kind not in (0, 1, 2):
        raise RemoteProtocolError(f"field 'kind' must be 0, 1 or 2, got {kind!r:.50}")
    if type(request_id) is not int or request_id < 0:
        raise RemoteProtocolError(f"field 'request_id' must be a non-negative int, got {request_id!r:.50}")
    if type(code) is not int:
        raise RemoteProtocolError(f"field 'code' must be an int, got {code!r:.50}")
    if header is None:
        header = {}
    if not isinstance(header, dict) or not all(map(_is_str, header)):
        raise RemoteProtocolError(f"field 'header' must be a map with string keys, got {header!r:.200}")
    return Frame(_KINDS[kind], request_id, code, header, body)


class FrameDecoder:
    """Incremental decoder.  Not thread-safe; one per connection."""

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._closed = False

    def feed(self, data: bytes) -> None:
        self._buf += data

    def frames(self) -> list[Frame]:
        """Return every complete frame buffered so far.

        Raises:
            RemoteProtocolError: oversized or malformed frame; the decoder is then unusable.
        """
        if self._closed:
            raise RemoteProtocolError("decoder already failed; close the connection")
        out: list[Frame] = []
        buf = self._buf
        pos = 0
        try:
            while len(buf) - pos >= 4:
                (length,) = _LEN.unpack_from(buf, pos)
                if length > self.max_frame_bytes:
                    raise RemoteProtocolError(
                        f"frame length {length} exceeds the limit of {self.max_frame_bytes} bytes"
                    )
                if len(buf) - pos - 4 < length:
                    break
                out.append(_decode_payload(bytes(buf[pos + 4 : pos + 4 + length])))
                pos += 4 + length
        except RemoteProtocolError:
            self._closed = True
            raise
        finally:
            if pos:
                del buf[:pos]
        return out

    @property
    def buffered(self) -> int:
        return len(self._buf)
