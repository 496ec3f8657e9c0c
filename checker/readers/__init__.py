"""History file readers: our history.jsonl, Jepsen logs, and Jepsen/knossos/porcupine EDN, auto-detected.

``read_history(path)`` returns a ``History`` (format name + ``checker.history.Op`` list);
``format_defaults(fmt, model)`` gives the semantics a format implies (initial value, fail policy).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from checker.history import HistoryError, Op
from checker.readers._edn import EdnError, Keyword, parse_edn, parse_edn_all, plain
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
    "parse_edn_all", "parse_history", "plain", "read_history",
]
