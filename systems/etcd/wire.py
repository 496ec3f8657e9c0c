"""The pure core of the etcd register client: op <-> etcd v3 JSON gateway requests and replies.

No I/O here, so every rule is unit-tested without a server (``tests/unit/systems/test_etcd_client.py``).

The op shape is the ``cas-register`` model's (``checker/models/_registers.py``), one register per ``key``:

===========  ============================  =====================================================
``f``        invoke ``value``               ``ok`` completion ``value``
===========  ============================  =====================================================
``read``     ``None``                       the value read, ``None`` if the key does not exist
``write``    ``v``                          ``v``
``cas``      ``[expected, new]``            ``[expected, new]``; a compare that did not match is ``fail``
===========  ============================  =====================================================

The register's name travels in the op's own ``key`` field (kept in ``history.jsonl`` like any extra key), so
:func:`checker.per_key.split_by_key` turns one history into one ``cas-register`` history per key, and the existing
linearizability checker judges each unchanged (initial value ``None``: a key nobody wrote).

Values are stored as their JSON text, so ints, strings and lists read back as written.  The gateway wants keys
and values base64-encoded; int64 fields come back as JSON strings and fields at their default value (a ``false``
``succeeded``, an empty ``kvs``) are left out of a reply altogether.

An etcd error reply carries a gRPC status ``code``.  :data:`DEFINITE_CODES` are the codes etcd returns before a
request is proposed to raft (bad argument, auth, too many requests, ...): such a write certainly had no effect.
Any other code (``Unavailable`` for "request timed out" or "leader changed", ``DeadlineExceeded``, ``Unknown``
...) may come after the proposal was committed, so the write's outcome is unknown.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any

from checker.per_key import REGISTER_FS as PER_KEY_FS

__all__ = [
    "DEFINITE_CODES", "READ_MODES", "REGISTER_FS", "EtcdError", "cas_pair", "cas_request", "decode_value", "encode_key",
    "encode_value", "error_from_reply", "put_request", "range_request", "read_value", "txn_succeeded",
]

REGISTER_FS = PER_KEY_FS
"""The register ops' fs (the one definition is :data:`checker.per_key.REGISTER_FS`)."""

#: read mode -> the range request's ``serializable`` flag.  A serializable read is answered from the local
#: member's store without a quorum round (it may be stale); a linearizable one goes through the leader.
READ_MODES: Mapping[str, bool] = {"linearizable": False, "serializable": True}

#: gRPC status codes (name, as etcd's gateway sends the number) that mean "refused before proposing".
DEFINITE_CODES: Mapping[int, str] = {
    3: "InvalidArgument", 5: "NotFound", 6: "AlreadyExists", 7: "PermissionDenied", 8: "ResourceExhausted",
    9: "FailedPrecondition", 11: "OutOfRange", 12: "Unimplemented", 16: "Unauthenticated",
}


class EtcdError(Exception):
    """An etcd request that did not return a usable reply.

    Attributes:
        definite: True when the request certainly had no effect (never sent, or refused before proposing);
            ``workloads.common.completion_for`` reads it to choose ``fail`` over ``info``.
    """

    def __init__(self, message: str, *, definite: bool) -> None:
        super().__init__(message)
        self.definite = definite


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def encode_key(key: str) -> str:
    """The gateway's form of a key: base64 of its UTF-8 bytes."""
    return _b64(key.encode("utf-8"))


def encode_value(value: Any) -> str:
    """The gateway's form of a register value: base64 of its compact JSON text (sorted keys, so equal values
    are equal bytes, which a cas compare needs)."""
    return _b64(json.dumps(value, separators=(",", ":"), sort_keys=True).encode("utf-8"))


def decode_value(b64: str) -> Any:
    """The register value a gateway ``value`` field holds (the inverse of :func:`encode_value`).

    Raises:
        EtcdError: not base64 of JSON text (someone else wrote the key); definite, since reading changed nothing.
    """
    try:
        return json.loads(base64.b64decode(b64, validate=True).decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise EtcdError(f"etcd value {b64!r} is not base64 of JSON text: {exc}", definite=True) from None


def range_request(key: str, *, serializable: bool) -> dict[str, Any]:
    """Body of ``/v3/kv/range`` reading one key."""
    return {"key": encode_key(key), "serializable": serializable}


def put_request(key: str, value: Any) -> dict[str, Any]:
    """Body of ``/v3/kv/put`` writing one key."""
    return {"key": encode_key(key), "value": encode_value(value)}


def cas_request(key: str, expected: Any, new: Any) -> dict[str, Any]:
    """Body of ``/v3/kv/txn``: put ``new`` if the key holds ``expected``.

    ``expected`` None means "the key does not exist" (version 0): etcd fails every value compare on a missing
    key, so a value compare could never match the register's initial nil.
    """
    if expected is None:
        compare = {"key": encode_key(key), "target": "VERSION", "result": "EQUAL", "version": "0"}
    else:
        compare = {"key": encode_key(key), "target": "VALUE", "result": "EQUAL", "value": encode_value(expected)}
    return {"compare": [compare], "success": [{"request_put": put_request(key, new)}]}


def read_value(reply: Mapping[str, Any]) -> Any:
    """The register value a ``/v3/kv/range`` reply of one key holds (``None``: no such key).

    Raises:
        EtcdError: the reply holds more than one key or a value this client did not write.
    """
    kvs = reply.get("kvs") or []
    if len(kvs) > 1:
        raise EtcdError(f"etcd range of one key returned {len(kvs)} keys", definite=True)
    return decode_value(kvs[0].get("value", "")) if kvs else None


def txn_succeeded(reply: Mapping[str, Any]) -> bool:
    """Whether a ``/v3/kv/txn`` reply took its success branch (the gateway omits ``succeeded: false``)."""
    return reply.get("succeeded") is True


def error_from_reply(status: int, body: Any) -> EtcdError:
    """The error an HTTP reply other than 200 stands for (``body`` as parsed JSON, or the raw text).

    The gateway sends ``{"error"|"message": text, "code": grpc code}``; the code decides whether the request is
    known to have had no effect (:data:`DEFINITE_CODES`).  A reply without a code is unknown.
    """
    code = body.get("code") if isinstance(body, Mapping) else None
    text = (body.get("message") or body.get("error")) if isinstance(body, Mapping) else None
    text = text or str(body)[:200]
    if isinstance(code, int) and code in DEFINITE_CODES:
        return EtcdError(f"HTTP {status}, {DEFINITE_CODES[code]} ({code}): {text}", definite=True)
    return EtcdError(f"HTTP {status}, gRPC code {code}: {text}", definite=False)


def cas_pair(value: Any) -> Sequence[Any]:
    """The ``[expected, new]`` of a cas op's value.

    Raises:
        EtcdError: not a two-item list (definite: nothing was sent).
    """
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise EtcdError(f"cas value must be [expected, new], got {value!r}", definite=True)
    return value
