"""Block decoding of ``history.jsonl`` for the queue checker: many lines per call, straight into slotted structs.

Why: with one ``orjson.loads`` per line into dicts, parsing was over half of the 10M-op benchmark.  msgspec
decodes a whole block of lines in one call into typed structs, skipping the fields the checker never reads
(``time``, unknown value keys), about 2.5x faster.  msgspec is optional: without it every block goes the dict
way (``decoded`` false), which is also the path for anything the fast shape does not cover exactly.

A block is decoded as structs only when it provably holds one JSON object per line: every newline sits between
``}`` and ``{`` (inside a JSON value ``}`` then ``{`` would need a comma, so each newline is at the top level)
and there are as many objects as lines.  Otherwise, or on any decoding error, the block is parsed line by line
with the dict reader, which gives the usual errors (and tolerates a torn last line).

A poll's ``records`` stay raw JSON text in the struct until the scan asks for them (``decode_records``).

Known difference: integers outside the 64-bit range stay exact ints here; orjson turns them into floats.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

try:
    import msgspec

    class QVal(msgspec.Struct, gc=False):
        """The ``value`` of a queue op; MISSING marks keys the dict path reads with ``[]`` (absent != null)."""

        queue: Any = msgspec.UNSET
        value: Any = msgspec.UNSET
        offset: Any = None  # read with .get on the dict path: absent == null
        consumer: Any = msgspec.UNSET
        # left as JSON text: decoded by ``decode_records`` only for an ok poll of a queue the scan checks (the
        # records are half the decoding work, a part skips other parts' queues, and a fail/info poll needs none)
        records: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET

    class QOp(msgspec.Struct, gc=False):
        """One history op; a missing top-level key other than ``value`` fails the block (dict path instead).

        ``index`` and ``type`` are typed (an int, one of the four op types): that makes decoding ~15-30% faster
        and ``type`` one shared string per kind; a block where they are anything else goes the dict way.
        """

        index: int
        type: Literal["invoke", "ok", "fail", "info"]
        process: Any
        f: Any
        value: QVal | list[Any] | str | int | float | bool | msgspec.UnsetType | None = msgspec.UNSET

    MISSING: Any = msgspec.UNSET
    # a poll's records, or None for JSON null; anything else raises (the op then takes the dict path)
    decode_records: Callable[[Any], list[tuple[Any, Any]] | None] = msgspec.json.Decoder(
        list[tuple[Any, Any]] | None).decode
    _decode_any: Callable[[Any], Any] = msgspec.json.decode
    _decode_lines: Callable[[Any], list[QOp]] | None = msgspec.json.Decoder(QOp).decode_lines
    _DECODE_ERRORS: tuple[type[BaseException], ...] = (msgspec.MsgspecError, UnicodeDecodeError, RecursionError,
                                                         ValueError)
except ImportError:  # pragma: no cover - depends on the environment
    QVal = QOp = None  # type: ignore[assignment,misc]
    MISSING = object()
    decode_records = _decode_any = json.loads
    _decode_lines = None
    _DECODE_ERRORS = ()

_VAL_FIELDS = ("queue", "value", "offset", "consumer", "records")


def as_dict(op: Any) -> dict[str, Any]:
    """The op as the dict reader would have produced it (for the fields the checker reads)."""
    d = {"index": op.index, "type": op.type, "process": op.process, "f": op.f}
    v = op.value
    if v.__class__ is QVal:
        d["value"] = val = {k: x for k in _VAL_FIELDS if (x := getattr(v, k)) is not MISSING}
        if "records" in val:
            val["records"] = _decode_any(val["records"])
    elif v is not MISSING:
        d["value"] = v
    return d


def iter_blocks(path: str | Path, loads_lines: Callable[[list[bytes], int], list[dict[str, Any]]], *,
                block_bytes: int = 1 << 20) -> Iterator[tuple[bool, list[Any]]]:
    """Yield ``(decoded, ops)`` per block of whole lines: ``QOp`` structs if ``decoded``, else dicts.

    ``loads_lines(lines, first_lineno)`` is the dict reader for a list of lines (with their newlines); it raises
    on a malformed line and decides what a torn last line means.
    """
    with Path(path).open("rb") as fh:
        lineno = 1
        tail = b""
        while True:
            data = fh.read(block_bytes)
            if not data:
                if tail:  # a last line without a newline: only the dict reader knows torn from whole
                    yield False, loads_lines([tail], lineno)
                return
            buf = tail + data if tail else data
            cut = buf.rfind(b"\n") + 1
            if cut == 0:
                tail = buf
                continue
            tail = buf[cut:]
            n_lines = buf.count(b"\n", 0, cut)
            ops = _decode_block(buf, cut, n_lines)
            if ops is not None:
                yield True, ops
            else:
                yield False, loads_lines(io.BytesIO(buf[:cut]).readlines(), lineno)
            lineno += n_lines


def _decode_block(buf: bytes, cut: int, n_lines: int) -> list[Any] | None:
    """``buf[:cut]`` decoded as structs, or None when it is not provably one JSON object per line."""
    if _decode_lines is None or buf[0:1] != b"{" or buf[cut - 2:cut] != b"}\n":
        return None
    if buf.count(b"}\n{", 0, cut) != n_lines - 1:
        return None
    try:
        ops = _decode_lines(memoryview(buf)[:cut])
    except _DECODE_ERRORS:
        return None
    return ops if len(ops) == n_lines else None
