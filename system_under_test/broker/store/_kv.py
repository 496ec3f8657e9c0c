"""``key=value`` line files ending in a CRC line (pure; private).

Used by the checkpoint and the signature files: human-readable, and a torn or edited file is
detected by the ``crc=`` line (CRC32 of every preceding line with its newline).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping


def encode_kv(fields: Mapping[str, object]) -> bytes:
    body = "".join(f"{k}={v}\n" for k, v in fields.items())
    return f"{body}crc={zlib.crc32(body.encode())}\n".encode()


def parse_kv(raw: bytes, where: str, required: tuple[str, ...]) -> dict[str, str]:
    """Parse and check the CRC.

    Raises:
        ValueError: naming ``where`` and what is wrong.
    """
    try:
        text = raw.decode()
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where}: not utf-8 ({exc})") from exc
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines or not lines[-1].startswith("crc="):
        raise ValueError(f"{where}: expected a final 'crc=' line, found {lines[-1:]!r}")
    body = "".join(line + "\n" for line in lines[:-1])
    try:
        stored = int(lines[-1][4:])
    except ValueError as exc:
        raise ValueError(f"{where}: crc line {lines[-1]!r} is not an integer") from exc
    actual = zlib.crc32(body.encode())
    if stored != actual:
        raise ValueError(f"{where}: CRC mismatch, stored {stored}, computed {actual}")
    out: dict[str, str] = {}
    for n, line in enumerate(lines[:-1], start=1):
        k, sep, v = line.partition("=")
        if not sep:
            raise ValueError(f"{where}:{n}: expected key=value, found {line!r}")
        out[k] = v
    missing = [k for k in required if k not in out]
    if missing:
        raise ValueError(f"{where}: missing keys {missing}, found {sorted(out)}")
    return out
