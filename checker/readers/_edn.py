"""A small EDN reader for the subset Jepsen and knossos histories use.

Supported: vectors ``[...]`` and lists ``(...)`` (both -> list), maps ``{...}`` (-> dict), sets ``#{...}``
(-> frozenset), keywords ``:foo`` (-> ``Keyword``, a str subclass holding the name without the colon),
strings with escapes, integers, floats, ``nil`` / ``true`` / ``false``, other symbols (-> str), ``;``
comments, ``#_`` discard, and commas as whitespace.  Tagged literals (``#inst "..."``) keep the value.
"""

from __future__ import annotations

import re
from typing import Any


class EdnError(ValueError):
    """Malformed EDN (names the position and what was expected)."""


class Keyword(str):
    """An EDN keyword; compares equal to its name as a plain str (``Keyword("f") == "f"``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return ":" + str.__str__(self)


_TOKEN = re.compile(
    r"""[\s,]+|;[^\n]*|(?P<open>\#\{|[\[\(\{])|(?P<close>[\]\)\}])|(?P<str>"(?:[^"\\]|\\.)*")"""
    r"""|(?P<disc>\#_)|(?P<tag>\#[A-Za-z][^\s,\[\](){}"]*)|(?P<atom>[^\s,\[\](){}";]+)""",
    re.S,
)
_INT = re.compile(r"[+-]?\d+N?$")
_FLOAT = re.compile(r"[+-]?\d+(\.\d*)?([eE][+-]?\d+)?M?$")
_ESC = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}
_CLOSERS = {"[": "]", "(": ")", "{": "}", "#{": "}"}
_DISCARD = object()


def _atom(tok: str) -> Any:
    if tok.startswith(":"):
        return Keyword(tok[1:])
    if tok == "nil":
        return None
    if tok == "true":
        return True
    if tok == "false":
        return False
    if _INT.match(tok):
        return int(tok.rstrip("N"))
    if _FLOAT.match(tok):
        return float(tok.rstrip("M"))
    return tok


def _string(tok: str) -> str:
    body = tok[1:-1]
    if "\\" not in body:
        return body
    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", lambda m: _ESC.get(m.group(1), chr(int(m.group(1)[1:], 16))
                                                              if m.group(1).startswith("u") else m.group(1)), body)


def parse_edn_all(text: str) -> list[Any]:
    """Parse every top-level EDN form in ``text``.

    Raises:
        EdnError: unbalanced brackets, an odd number of map entries, or an unreadable character.
    """
    stack: list[tuple[str, list[Any], int]] = [("", [], 0)]
    pos = 0
    n = len(text)
    match = _TOKEN.match
    while pos < n:
        m = match(text, pos)
        if m is None:
            raise EdnError(f"EDN: unexpected character {text[pos]!r} at offset {pos}")
        pos = m.end()
        kind = m.lastgroup
        if kind is None:
            continue
        tok = m.group(kind)
        if kind == "open":
            stack.append((tok, [], m.start()))
            continue
        if kind == "tag":
            continue  # a tagged literal reads as its value
        if kind == "disc":
            stack[-1][1].append(_DISCARD)
            continue
        if kind == "close":
            opener, items, start = stack.pop() if len(stack) > 1 else ("", [], 0)
            if _CLOSERS.get(opener) != tok:
                raise EdnError(f"EDN: {tok!r} at offset {m.start()} does not close {opener or 'anything'!r}"
                               f" opened at offset {start}")
            value: Any = _build(opener, _drop_discarded(items), start)
        elif kind == "str":
            value = _string(tok)
        else:
            value = _atom(tok)
        stack[-1][1].append(value)
    if len(stack) != 1:
        opener, _, start = stack[-1]
        raise EdnError(f"EDN: {opener!r} opened at offset {start} is never closed (truncated file?)")
    return _drop_discarded(stack[0][1])


def _drop_discarded(items: list[Any]) -> list[Any]:
    if _DISCARD not in items:
        return items
    out: list[Any] = []
    skip = 0
    for x in items:
        if x is _DISCARD:
            skip += 1
        elif skip:
            skip -= 1
        else:
            out.append(x)
    return out


def _build(opener: str, items: list[Any], start: int) -> Any:
    if opener in ("[", "("):
        return items
    if opener == "#{":
        return frozenset(_hashable(x) for x in items)
    if len(items) % 2:
        raise EdnError(f"EDN: map opened at offset {start} has an odd number of forms ({len(items)})")
    return {_hashable(items[i]): items[i + 1] for i in range(0, len(items), 2)}


def _hashable(x: Any) -> Any:
    if isinstance(x, list):
        return tuple(_hashable(v) for v in x)
    if isinstance(x, dict):
        return tuple(sorted(((k, _hashable(v)) for k, v in x.items()), key=repr))
    return x


def parse_edn(text: str) -> Any:
    """Parse exactly one EDN form (raises EdnError otherwise)."""
    forms = parse_edn_all(text)
    if len(forms) != 1:
        raise EdnError(f"EDN: expected one form, found {len(forms)}")
    return forms[0]


def plain(x: Any) -> Any:
    """Convert parsed EDN to JSON-like Python: keywords become plain str, sets sorted lists."""
    if isinstance(x, Keyword):
        return str.__str__(x)
    if isinstance(x, list | tuple):
        return [plain(v) for v in x]
    if isinstance(x, dict):
        return {plain(k) if isinstance(k, Keyword) else k: plain(v) for k, v in x.items()}
    if isinstance(x, frozenset):
        return sorted((plain(v) for v in x), key=repr)
    return x
