"""A compact text notation for small send/poll histories (for tests and docs, like elle's).

One statement per line (or separated by ``;``); ``#`` starts a comment.  ``P`` is an int process id.

=============================  ====================================================================
``P send Q V@O``               invoke + ok: process P sent V to queue Q, acknowledged at offset O
``P send Q V!``                invoke + fail (definitely not sent)
``P send Q V?``                invoke + info (may or may not have been sent)
``P send Q V@``                invoke + ok without an offset
``P poll Q O:V O:V ...``       invoke + ok: P polled Q and read value V at offset O, in that order
``P poll Q from=F c=C ...``    the poll asked for offset F, as consumer C (default consumer: ``cP``)
``P poll Q !`` / ``P poll Q ?``  a failed / indeterminate poll
``P drain Q O:V ...``          a final-phase poll (f ``drain``)
``>P send Q V`` / ``>P poll Q``  invoke only; complete it later with
``<P ok @O`` / ``<P ok O:V ...`` / ``<P fail`` / ``<P info``
``nemesis F``                  a nemesis op pair (invoke + info) with f F, e.g. ``nemesis start-partition``
=============================  ====================================================================

Values that look like integers become ints.  ``time`` is the op index times 1 ms.
"""

from __future__ import annotations

from typing import Any

__all__ = ["parse_history"]

_TIME_STEP_NS = 1_000_000


class NotationError(ValueError):
    """A statement that does not follow the notation (names the statement and what was expected)."""


def _atom(tok: str) -> Any:
    try:
        return int(tok)
    except ValueError:
        return tok


def _records(tokens: list[str], stmt: str) -> list[list[Any]]:
    out = []
    for tok in tokens:
        off, sep, val = tok.partition(":")
        if not sep:
            raise NotationError(f"{stmt!r}: expected a record OFFSET:VALUE, got {tok!r}")
        out.append([int(off), _atom(val)])
    return out


class _Builder:
    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []
        self.open: dict[int, dict[str, Any]] = {}

    def emit(self, type_: str, process: Any, f: str, value: Any) -> dict[str, Any]:
        i = len(self.ops)
        op = {"index": i, "time": i * _TIME_STEP_NS, "type": type_, "process": process, "f": f, "value": value}
        self.ops.append(op)
        return op

    def invoke(self, p: int, f: str, value: Any, stmt: str) -> None:
        if p in self.open:
            raise NotationError(f"{stmt!r}: process {p} already has an open {self.open[p]['f']} op")
        self.open[p] = self.emit("invoke", p, f, value)

    def complete(self, p: int, type_: str, payload: list[str], stmt: str) -> None:
        inv = self.open.pop(p, None)
        if inv is None:
            raise NotationError(f"{stmt!r}: process {p} has no open op to complete")
        f = inv["f"]
        value: Any = None
        if f == "send":
            value = dict(inv["value"])
            if type_ == "ok" and payload and payload[0] != "@":
                value["offset"] = int(payload[0].lstrip("@"))
        elif type_ == "ok":
            value = {"queue": inv["value"]["queue"], "records": _records(payload, stmt)}
        self.emit(type_, p, f, value)

    def statement(self, stmt: str) -> None:
        toks = stmt.split()
        head = toks[0]
        if head == "nemesis":
            if len(toks) != 2:
                raise NotationError(f"{stmt!r}: expected 'nemesis F'")
            self.emit("invoke", "nemesis", toks[1], None)
            self.emit("info", "nemesis", toks[1], None)
            return
        if head.startswith("<"):
            if len(toks) < 2 or toks[1] not in ("ok", "fail", "info"):
                raise NotationError(f"{stmt!r}: expected '<P ok|fail|info ...'")
            self.complete(int(head[1:]), toks[1], toks[2:], stmt)
            return
        invoke_only = head.startswith(">")
        p = int(head.lstrip(">"))
        if len(toks) < 3:
            raise NotationError(f"{stmt!r}: expected 'P send|poll|drain QUEUE ...'")
        f, q, rest = toks[1], toks[2], toks[3:]
        if f == "send":
            self._send(p, q, rest, invoke_only, stmt)
        elif f in ("poll", "drain"):
            self._poll(p, f, q, rest, invoke_only, stmt)
        else:
            raise NotationError(f"{stmt!r}: unknown f {f!r}; expected send, poll or drain")

    def _send(self, p: int, q: str, rest: list[str], invoke_only: bool, stmt: str) -> None:
        if len(rest) != 1:
            raise NotationError(f"{stmt!r}: expected 'P send QUEUE VALUE[@OFFSET|!|?]'")
        tok = rest[0]
        if invoke_only or not (tok.endswith(("!", "?")) or "@" in tok):
            self.invoke(p, "send", {"queue": q, "value": _atom(tok)}, stmt)
            if not invoke_only:
                raise NotationError(f"{stmt!r}: a complete send needs @OFFSET, ! or ?; use '>P send' to only invoke")
            return
        if tok.endswith("!") or tok.endswith("?"):
            self.invoke(p, "send", {"queue": q, "value": _atom(tok[:-1])}, stmt)
            self.complete(p, "fail" if tok.endswith("!") else "info", [], stmt)
            return
        val, _, off = tok.partition("@")
        self.invoke(p, "send", {"queue": q, "value": _atom(val)}, stmt)
        self.complete(p, "ok", [off] if off else ["@"], stmt)

    def _poll(self, p: int, f: str, q: str, rest: list[str], invoke_only: bool, stmt: str) -> None:
        value: dict[str, Any] = {"queue": q, "consumer": f"c{p}"}
        payload: list[str] = []
        for tok in rest:
            if tok.startswith("from="):
                value["offset"] = int(tok[5:])
            elif tok.startswith("c="):
                value["consumer"] = tok[2:]
            else:
                payload.append(tok)
        self.invoke(p, f, value, stmt)
        if invoke_only:
            return
        if payload in (["!"], ["?"]):
            self.complete(p, "fail" if payload == ["!"] else "info", [], stmt)
        else:
            self.complete(p, "ok", payload, stmt)


def parse_history(text: str) -> list[dict[str, Any]]:
    """Parse the notation into history ops (dicts with the history.jsonl fields), in order.

    Raises:
        NotationError: a malformed statement (quoted, with the expected form).
    """
    b = _Builder()
    for line in text.splitlines():
        for stmt in line.split("#", 1)[0].split(";"):
            if stmt.strip():
                b.statement(stmt.strip())
    return b.ops
