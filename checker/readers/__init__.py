"""History file readers: our history.jsonl, Jepsen logs, and Jepsen/knossos/porcupine EDN, auto-detected.

``read_history(path)`` returns a ``History`` (format name + ``checker.history.Op`` list);
``format_defaults(fmt, model)`` gives the semantics a format implies (initial value, fail policy).

A history.jsonl file is read by the fast reader (``_fast``: msgspec, one value per line, straight into ``Op``)
when it can answer exactly as the reference reader would, by the reference (``_formats``) otherwise; the
reference is also the one that words every error.  Tests hold the two to the same ops and the same errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from checker.history import HistoryError, Op
from checker.readers._edn import EdnError, Keyword, parse_edn, parse_edn_all, plain
from checker.readers._fast import read_jsonl_fast
from checker.readers._formats import FORMAT_DEFAULTS, detect_format, format_defaults, parse_history


@dataclass(frozen=True, slots=True)
class History:
    """A history read from a file: its detected format and its ops (time = file order for foreign formats)."""

    path: str
    format: str
    ops: tuple[Op, ...]


def read_history(path: str | Path, *, fmt: str | None = None) -> History:
    """Read and parse a history file, detecting its format from the content.

    Raises:
        HistoryError: the file is missing, unreadable, or malformed (the message names the file).
    """
    p = Path(path)
    if fmt in (None, "jsonl"):  # the fast reader: the same ops, or None where only the reference may answer
        try:
            data: bytes | None = p.read_bytes()
        except OSError:
            data = None  # the reference reads the file again and words the error
        ops = None if data is None else read_jsonl_fast(data, detect=fmt is None)
        if ops is not None:
            return History(str(p), "jsonl", tuple(ops))
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise HistoryError(f"{p}: no such history file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise HistoryError(f"{p}: cannot read history file: {exc}") from None
    detected, ops = parse_history(text, fmt=fmt, where=f"{p}: ")
    return History(str(p), detected, tuple(ops))


__all__ = [
    "FORMAT_DEFAULTS", "EdnError", "History", "Keyword", "detect_format", "format_defaults", "parse_edn",
    "parse_edn_all", "parse_history", "plain", "read_history", "read_jsonl_fast",
]
