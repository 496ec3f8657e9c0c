"""One wire format for every RPC in splitbrain: 4-byte length + msgpack frames over asyncio streams.

Public surface: the code tables, the frame codec, the header schemas and the asyncio
connection/server/client shell.  See docs/protocol.md.
"""

from system_under_test.protocol.codes import RESPONSE_INFO, CodeInfo, RequestCode, ResponseCode, is_definite
from system_under_test.protocol.errors import (
    ConnectionLost,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    RequestTimeout,
    RpcError,
)
from system_under_test.protocol.frame import DEFAULT_MAX_FRAME_BYTES, Frame, FrameDecoder, Kind, encode_frame
from system_under_test.protocol.liveness import LinkSettingError, LinkTimeouts
from system_under_test.protocol.rpc import Connection, Handler, Reply, RpcServer, connect, link_timeouts, split_addr
from system_under_test.protocol.schemas import SCHEMAS, TOKEN_CODES, FieldSpec, SchemaError, validate_header

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "RESPONSE_INFO",
    "SCHEMAS",
    "TOKEN_CODES",
    "CodeInfo",
    "Connection",
    "ConnectionLost",
    "FieldSpec",
    "Frame",
    "FrameDecoder",
    "Handler",
    "Kind",
    "LinkSettingError",
    "LinkTimeouts",
    "LocalProtocolError",
    "ProtocolError",
    "RemoteProtocolError",
    "Reply",
    "RequestCode",
    "RequestTimeout",
    "ResponseCode",
    "RpcError",
    "RpcServer",
    "SchemaError",
    "connect",
    "encode_frame",
    "is_definite",
    "link_timeouts",
    "split_addr",
    "validate_header",
]
