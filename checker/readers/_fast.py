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
* a value nested within ``_MARGIN`` levels of the recursion limit: ``json.loads`` and msgspec both stop at
  that limit, which (CPython 3.11) counts the Python frames on the stack and the levels of nesting alike,
  so where each stops depends on where it is called.  The reader decodes ``_MARGIN`` frames further down than
  it is called; the reference's ``json.loads`` runs a handful of frames below ``read_history``.  So a value the
  fast reader decodes, the reference decodes too, and a deeper one is a RecursionError, on which it abstains;
* a DEL anywhere, raw or escaped: the first character of ``checker.history.EXTRA_WIRE_NAME``, the JSON name
  msgspec files under ``extra`` (the reference files such a key, like any unknown key, in ``extra``).

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
from collections.abc import Callable
from typing import Any

import msgspec

from checker.history import HistoryError, Op
from checker.readers._formats import detect_format

_DECODER = msgspec.json.Decoder(Op)
_DECODE: Callable[[bytes], Op] = _DECODER.decode
_DECODE_LINES: Callable[[bytes], list[Op]] = _DECODER.decode_lines
# the frames the decoding runs below read_jsonl_fast (see the module docstring): many more than the reference's
# json.loads runs below read_history
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
    n = data.count(b"\n") + (not data.endswith(b"\n"))  # lines, empty ones included
    # Each burst of new objects starts a cyclic collection that walks every op read so far: paused, reading
    # kv c5 100k takes 0.2 s instead of 1.7 s.  Decoding JSON makes no reference cycles, so nothing is deferred.
    paused = gc.isenabled()
    gc.disable()
    try:
        ops = _below(_MARGIN, _DECODE_LINES, data) if data.count(b"}\n{") == n - 1 else []  # module docstring
        if len(ops) != n:
            lines = [line for line in data.split(b"\n") if line]  # the reference skips empty lines
            ops = _below(_MARGIN, _decode_each, lines)
    except _ABSTAIN:
        return None
    finally:
        if paused:
            gc.enable()
    if _may_spell_del(data):  # EXTRA_WIRE_NAME begins with DEL; no field name holds one
        return None
    return ops


def _decode_each(lines: list[bytes]) -> list[Op]:
    return list(map(_DECODE, lines))


def _below(frames: int, decode: Callable[[Any], list[Op]], arg: Any) -> list[Op]:
    """``decode(arg)`` run ``frames`` Python frames further down the stack than this call (see ``_MARGIN``)."""
    return decode(arg) if frames <= 0 else _below(frames - 1, decode, arg)


def _may_spell_del(data: bytes) -> bool:
    """Whether a JSON string in ``data`` may hold a DEL: raw, or written ``\\u007f`` (JSON has no other way)."""
    return b"\x7f" in data or (b"\\" in data and (b"\\u007f" in data or b"\\u007F" in data))


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
