"""The fast reader of ``history.jsonl``: the file's bytes straight into ``Op`` objects by msgspec, or None.

Why: reading a long history through ``json.loads`` and ``Op.from_dict`` took 1.2 s of the 1.8 s that
``splitbrain check`` spent on a 200,000-line kv history whose search takes 0.07 s.  msgspec decodes each line
into an ``Op`` (a msgspec Struct) in C, type checks included, in about a tenth of that.

It is exact or it abstains: it returns ops only for input on which they are the reference reader's
(``read_text`` then ``_formats.parse_history``), and None otherwise -- the caller then runs the reference,
which so remains the one source of every op and every error message (a bad line still gets its file and line
number).  It abstains on:

* a carriage return anywhere (``read_text`` turns ``\\r`` and ``\\r\\n`` into line ends) and bytes that are not
  UTF-8 (the reference cannot read the file);
* text ``detect_format`` would not call jsonl (only its first line decides);
* a line msgspec does not decode into an Op, which covers every line the reference refuses or reads
  differently: not JSON, or JSON msgspec is stricter about (``NaN``, lone surrogate escapes, numbers beyond
  a float, which ``json.loads`` takes); a field of a type the reference would convert (a float or string
  ``index``, an int ``f``) or refuse; a boolean ``process``; a key that is not a field (the reference files
  it under ``extra``); an op that fails ``Op``'s own checks; a line of blanks (the reference skips it); a
  torn last line (the reference drops it);
* a line that might nest within 50 levels of what is left of the recursion limit (as many opening brackets):
  ``json.loads`` and msgspec both stop at the recursion limit, each counted from its own stack depth;
* a line spelling ``EXTRA_WIRE_NAME``, the JSON name msgspec would file under ``extra``.

Lines are decoded as the reference decodes them, one JSON value per line.  msgspec's ``decode_lines`` (a third
faster than a call per line) only looks for whitespace between values, so it would also take two objects on a
line, or one object spread over two; it is used only when every line ends with ``}`` and the next begins with
``{`` (no blanks between, no empty line), and it finds as many values as there are lines.  That is exact: no
value goes on past such a line end (inside an object or array only ``,``, ``}`` or ``]`` may follow a ``}``, and
a string cannot hold a raw line end), so each line holds at least one whole value, and as many values as lines
means one each.  Other files are decoded with a call per line.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from operator import attrgetter
from types import FrameType
from typing import Any

import msgspec

from checker.history import EXTRA_WIRE_NAME, HistoryError, Op
from checker.readers._formats import detect_format

_DECODER = msgspec.json.Decoder(Op)
_DECODE: Callable[[bytes], Op] = _DECODER.decode
_DECODE_LINES: Callable[[bytes], list[Op]] = _DECODER.decode_lines
_EXTRA = attrgetter("extra")
# levels of nesting kept clear of the recursion limit: the reference's json.loads runs a few frames deeper
_MARGIN = 50
# msgspec's errors (ValidationError covers a HistoryError raised by Op's checks), UnicodeDecodeError (a
# ValueError), and a value nested too deep
_ABSTAIN: tuple[type[BaseException], ...] = (msgspec.MsgspecError, ValueError, TypeError, RecursionError)


def read_jsonl_fast(data: bytes, *, detect: bool = True) -> list[Op] | None:
    """The ops of a history.jsonl file's ``data``, or None where only the reference reader may answer.

    Args:
        data: the whole file.
        detect: also abstain unless ``detect_format`` would name the text jsonl (False: the caller named it).
    """
    if b"\r" in data:
        return None
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if detect and not _looks_jsonl(data):
        return None
    lines = data.split(b"\n")
    if not lines[-1]:
        lines.pop()  # the newline that ends the last line
    if b"\n\n" in data or data.startswith(b"\n"):
        lines = [line for line in lines if line]  # empty lines, which the reference skips
    if _maybe_deep(lines):
        return None
    # Each burst of new objects starts a cyclic collection that walks every op read so far: paused, reading
    # kv c5 100k takes 0.2 s instead of 1.7 s.  Decoding JSON makes no reference cycles, so nothing is deferred.
    paused = gc.isenabled()
    gc.disable()
    try:
        ops = _DECODE_LINES(data) if data.count(b"}\n{") == len(lines) - 1 else []  # see the module docstring
        if len(ops) != len(lines):
            ops = list(map(_DECODE, lines))
    except _ABSTAIN:
        return None
    finally:
        if paused:
            gc.enable()
    if _may_spell(data, EXTRA_WIRE_NAME) and any(map(_EXTRA, ops)):
        return None
    return ops


def _may_spell(data: bytes, name: str) -> bool:
    """Whether a JSON string in ``data`` may spell ``name`` (ASCII letters and ``-``): only as written, unless a
    ``\\u`` escape, the one way to write those otherwise, is somewhere in the file."""
    return name.encode() in data or b"\\u" in data


def _maybe_deep(lines: list[bytes]) -> bool:
    """Whether a line might nest within ``_MARGIN`` levels of the recursion limit left at this stack depth: it
    then has at least that many opening brackets (strings' included, which only makes the reader abstain more
    often) and twice as many bytes, so only lines that long are counted."""
    depth = 0
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back
    room = sys.getrecursionlimit() - depth - _MARGIN
    if max(map(len, lines), default=0) < 2 * room:
        return False
    return any(len(line) >= 2 * room and line.count(b"[") + line.count(b"{") >= room for line in lines)


def _looks_jsonl(data: bytes) -> bool:
    """Whether ``detect_format`` names the text jsonl, decided on its first line (all it looks at)."""
    head = data.lstrip()  # ASCII blanks, each also a str blank: str.lstrip stops at the same '{'
    if not (head.startswith(b'{"') or head.startswith(b'{ "')):
        return False
    start = len(data) - len(head)
    end = data.find(b"\n", start)
    first: Any = data[: len(data) if end < 0 else end].decode("utf-8")
    try:
        return detect_format(first) == "jsonl"
    except HistoryError:
        return False
