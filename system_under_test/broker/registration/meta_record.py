"""The content of ``.broker.meta`` and ``.broker.meta.temp``: records, encoding, decoding (pure).

A *meta record* is what a broker remembers about its persistent identity: the cluster name and
broker (set) name from its config and the broker id the controller agreed to.  A *temp meta
record* is written before the id is claimed (seed "CreateTempMetaFile") and adds the register
code that identifies this broker's claim, so a restart can retry ApplyBrokerId idempotently.

On-disk form (UTF-8, two lines)::

    {"cluster": "c1", "broker_name": "b1", "broker_id": 1}
    crc32=1a2b3c4d

The first line is canonical JSON (sorted keys, no spaces); the second is the CRC-32 of the first
line's bytes.  A file that does not decode exactly like this is *corrupt*: the broker stops with
:class:`MetaCorruptError` naming the file instead of inventing a new id (a torn write must never
turn into a second identity).

This module does no I/O; :mod:`.meta_files` reads and writes the bytes.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from typing import Any

from system_under_test.broker.registration.errors import MetaCorruptError

_KEYS_META = ("broker_id", "broker_name", "cluster")
_KEYS_TEMP = ("broker_id", "broker_name", "cluster", "register_code")


def _check_name(field: str, value: object) -> None:
    if not isinstance(value, str) or not value or any(c in value for c in "\r\n\0"):
        raise ValueError(f"{field} must be a non-empty single-line string, got {value!r}")


def _check_id(value: object) -> None:
    if type(value) is not int or value < 1:
        raise ValueError(f"broker_id must be an int >= 1 (ids are assigned from 1), got {value!r}")


@dataclass(frozen=True)
class MetaRecord:
    """Content of ``.broker.meta``: the broker's agreed persistent identity."""

    cluster: str
    broker_name: str
    broker_id: int

    def __post_init__(self) -> None:
        _check_name("cluster", self.cluster)
        _check_name("broker_name", self.broker_name)
        _check_id(self.broker_id)

    def describe(self) -> str:
        return f"meta(cluster={self.cluster} broker={self.broker_name} id={self.broker_id})"


@dataclass(frozen=True)
class TempMetaRecord:
    """Content of ``.broker.meta.temp``: an id this broker is claiming, with its register code."""

    cluster: str
    broker_name: str
    broker_id: int
    register_code: str

    def __post_init__(self) -> None:
        _check_name("cluster", self.cluster)
        _check_name("broker_name", self.broker_name)
        _check_id(self.broker_id)
        _check_name("register_code", self.register_code)

    def to_meta(self) -> MetaRecord:
        """The meta record this temp record becomes once the controller accepted the claim."""
        return MetaRecord(self.cluster, self.broker_name, self.broker_id)

    def describe(self) -> str:
        return (
            f"temp-meta(cluster={self.cluster} broker={self.broker_name} id={self.broker_id} "
            f"code={self.register_code})"
        )


def _encode(fields: dict[str, Any]) -> bytes:
    line = json.dumps(fields, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return line + b"\n" + f"crc32={zlib.crc32(line):08x}\n".encode("ascii")


def encode_meta(record: MetaRecord) -> bytes:
    """Bytes of ``.broker.meta`` for ``record``."""
    return _encode({"cluster": record.cluster, "broker_name": record.broker_name, "broker_id": record.broker_id})


def encode_temp_meta(record: TempMetaRecord) -> bytes:
    """Bytes of ``.broker.meta.temp`` for ``record``."""
    return _encode(
        {
            "cluster": record.cluster,
            "broker_name": record.broker_name,
            "broker_id": record.broker_id,
            "register_code": record.register_code,
        }
    )


def _decode(data: bytes, where: str, keys: tuple[str, ...]) -> dict[str, Any]:
    def corrupt(why: str) -> MetaCorruptError:
        return MetaCorruptError(
            f"{where} is corrupt: {why} ({len(data)} bytes: {data[:120]!r}). The broker will not invent a new "
            f"id; restore the file from a backup or, if this broker's data is disposable, remove the store dir"
        )

    parts = data.split(b"\n")
    if len(parts) != 3 or parts[2] != b"":
        raise corrupt(f"expected 2 newline-terminated lines, found {len(parts) - 1} newline(s)")
    line, crc_line = parts[0], parts[1]
    if not crc_line.startswith(b"crc32="):
        raise corrupt(f"second line must be 'crc32=<8 hex>', found {crc_line[:40]!r}")
    try:
        want = int(crc_line[len(b"crc32=") :].decode("ascii"), 16)
    except (UnicodeDecodeError, ValueError):
        raise corrupt(f"bad crc line {crc_line[:40]!r}") from None
    got = zlib.crc32(line)
    if got != want:
        raise corrupt(f"crc mismatch: file says {want:08x}, content has {got:08x}")
    try:
        fields = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise corrupt(f"first line is not JSON ({exc})") from None
    if not isinstance(fields, dict) or tuple(sorted(fields)) != keys:
        found = sorted(fields) if isinstance(fields, dict) else type(fields).__name__
        raise corrupt(f"expected keys {list(keys)}, found {found}")
    return fields


def decode_meta(data: bytes, *, where: str = ".broker.meta") -> MetaRecord:
    """Parse ``.broker.meta`` bytes.

    Raises:
        MetaCorruptError: the bytes are torn, fail the CRC or hold invalid fields (message names ``where``).
    """
    fields = _decode(data, where, _KEYS_META)
    try:
        return MetaRecord(fields["cluster"], fields["broker_name"], fields["broker_id"])
    except ValueError as exc:
        raise MetaCorruptError(f"{where} is corrupt: {exc}") from None


def decode_temp_meta(data: bytes, *, where: str = ".broker.meta.temp") -> TempMetaRecord:
    """Parse ``.broker.meta.temp`` bytes.

    Raises:
        MetaCorruptError: as :func:`decode_meta`.
    """
    fields = _decode(data, where, _KEYS_TEMP)
    try:
        return TempMetaRecord(fields["cluster"], fields["broker_name"], fields["broker_id"], fields["register_code"])
    except ValueError as exc:
        raise MetaCorruptError(f"{where} is corrupt: {exc}") from None
