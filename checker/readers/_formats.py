"""History file formats, detected from content, each read into ``checker.history.Op`` lists.

| format        | looks like                                                        | op time       |
|---------------|-------------------------------------------------------------------|---------------|
| ``jsonl``     | our history.jsonl: ``{"index": 0, "time": ..., "type": ...}``     | ``time`` (ns) |
| ``jepsen-log``| ``INFO  jepsen.util - 3<TAB>:ok<TAB>:read<TAB>4`` (tabs or spaces)| line order    |
| ``edn-lines`` | one EDN map per line (porcupine kv: ``{:process 0, :type :invoke, :f :get, ...}``) | line order |
| ``edn``       | one EDN vector or list of op maps (Jepsen / knossos)              | entry order   |

Foreign formats carry no trustworthy clock (knossos ``:time`` values are not ordered), so the order of
entries in the file is the time.  An EDN op with a ``:key`` gets ``value = {"key": k, "value": v}`` (the
kv model's input).  In ``jepsen-log``, a ``:fail`` whose value is ``:timed-out`` is recorded as ``info``:
the client does not know whether it took effect.  Non-integer processes (``:nemesis``) become nemesis ops.

``FORMAT_DEFAULTS`` is the one table of per-format semantics (initial value and fail policy per model).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from checker.history import NEMESIS, HistoryError, Op
from checker.readers._edn import EdnError, Keyword, parse_edn, parse_edn_all, plain

_MISSING = object()
_MARK = "jepsen.util - "

FORMAT_DEFAULTS: dict[str, dict[str, dict[str, Any]]] = {
    # format -> model -> {"initial": ..., "fail_policy": ...}; "*" applies to every model.
    "jepsen-log": {"*": {"fail_policy": "definite"}, "register": {"initial": None}, "cas-register": {"initial": None}},
    "edn": {"*": {"fail_policy": "drop"}, "cas-register": {"initial": 0, "nil_read_any": True},
            "register": {"initial": 0, "nil_read_any": True},
            "multi-register": {"initial": {"x": 0, "y": 0}}},
    "edn-lines": {"*": {"fail_policy": "drop"}, "kv": {"initial": ""}},
    "jsonl": {},
}


def format_defaults(fmt: str, model: str) -> dict[str, Any]:
    table = FORMAT_DEFAULTS.get(fmt, {})
    return {**table.get("*", {}), **table.get(model, {})}


def detect_format(text: str) -> str:
    """Name the format of a history file's text (see the module table).

    Raises:
        HistoryError: the text matches no known format.
    """
    head = text.lstrip()
    if not head:
        return "jsonl"
    first_line = head.split("\n", 1)[0]
    if _MARK in first_line and "INFO" in first_line:
        return "jepsen-log"
    if head.startswith("{\"") or head.startswith("{ \""):
        return "jsonl"
    if head.startswith("{:") or head.startswith("{ :"):
        return "edn-lines"
    if head[0] in "[(;":
        return "edn"
    raise HistoryError(f"unrecognised history format (first line {first_line[:80]!r}); expected history.jsonl,"
                       " a Jepsen log (INFO jepsen.util - ...), or EDN ops")


def parse_history(text: str, *, fmt: str | None = None, where: str = "") -> tuple[str, list[Op]]:
    """Parse history text into (format, ops).

    Raises:
        HistoryError: malformed content (names ``where`` and the line or offset).
    """
    fmt = fmt or detect_format(text)
    try:
        if fmt == "jsonl":
            return fmt, _parse_jsonl(text, where)
        if fmt == "jepsen-log":
            return fmt, _parse_jepsen_log(text, where)
        if fmt == "edn-lines":
            return fmt, _ops_from_edn(_edn_lines(text, where), where)
        if fmt == "edn":
            forms = parse_edn_all(text)
            entries: list[Any] = []
            for form in forms:
                entries.extend(form if isinstance(form, list) else [form])
            return fmt, _ops_from_edn(entries, where)
    except EdnError as exc:
        raise HistoryError(f"{where}{exc}") from None
    raise HistoryError(f"{where}unknown format {fmt!r}; expected one of {', '.join(FORMAT_DEFAULTS)}")


def _parse_jsonl(text: str, where: str) -> list[Op]:
    ops: list[Op] = []
    lines = text.split("\n")
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as exc:
            if lineno == len(lines):  # a torn last line from a crashed writer
                break
            raise HistoryError(f"{where}line {lineno}: not JSON: {exc}") from None
        ops.append(Op.from_dict(d, where=f"{where}line {lineno}: "))
    return ops


def _edn_lines(text: str, where: str) -> list[Any]:
    out: list[Any] = []
    for lineno, line in enumerate(text.split("\n"), 1):
        if line.strip() and not line.lstrip().startswith(";"):
            try:
                out.append(parse_edn(line))
            except EdnError as exc:
                raise HistoryError(f"{where}line {lineno}: {exc}") from None
    return out


def _log_value(raw: str) -> Any:
    """A log line's value: fast paths for nil, ints, [a b] of ints and :keywords, else the EDN reader."""
    if raw == "nil" or not raw:
        return None
    if raw.isdigit() or (raw[0] == "-" and raw[1:].isdigit()):
        return int(raw)
    if raw[0] == "[" and raw[-1] == "]":
        parts = raw[1:-1].split()
        if all(x.isdigit() for x in parts):
            return [int(x) for x in parts]
    if raw[0] == ":" and raw[1:].replace("-", "").isalnum():
        return raw[1:]
    return plain(parse_edn(raw))


def _parse_jepsen_log(text: str, where: str) -> list[Op]:
    ops: list[Op] = []
    for lineno, line in enumerate(text.split("\n"), 1):
        at = line.find(_MARK)
        if at < 0 or "INFO" not in line[:at]:
            continue  # other log lines (setup, nemesis chatter) are not ops
        parts = line[at + len(_MARK):].split(None, 3)
        if len(parts) < 3 or not parts[1].startswith(":") or not parts[2].startswith(":"):
            continue
        proc_s, typ, f = parts[0], parts[1][1:], parts[2][1:]
        raw = parts[3].strip() if len(parts) > 3 else ""
        try:
            value = _log_value(raw)
        except EdnError as exc:
            raise HistoryError(f"{where}line {lineno}: value {raw!r}: {exc}") from None
        process: int | str = int(proc_s) if proc_s.lstrip("-").isdigit() else NEMESIS
        if typ == "fail" and value == "timed-out":
            typ = "info"
        if typ not in ("invoke", "ok", "fail", "info"):
            raise HistoryError(f"{where}line {lineno}: type :{typ} is not one of :invoke :ok :fail :info")
        ops.append(Op(index=len(ops), time=len(ops), type=typ, process=process, f=f, value=value,
                      extra={"line": lineno}))
    return ops


def _ops_from_edn(entries: Iterable[Any], where: str) -> list[Op]:
    ops: list[Op] = []
    for n, e in enumerate(entries):
        if not isinstance(e, dict):
            raise HistoryError(f"{where}entry {n}: expected an op map {{:process .. :type ..}}, got {e!r:.80}")
        try:
            typ = str.__str__(e[Keyword("type")])
            proc = e.get(Keyword("process"))
        except KeyError:
            raise HistoryError(f"{where}entry {n}: op map has no :type ({e!r:.80})") from None
        if typ not in ("invoke", "ok", "fail", "info"):
            raise HistoryError(f"{where}entry {n}: :type {typ!r} is not one of :invoke :ok :fail :info")
        process: int | str = proc if isinstance(proc, int) and not isinstance(proc, bool) else NEMESIS
        value = plain(e.get(Keyword("value")))
        key = e.get(Keyword("key"), _MISSING)
        if key is not _MISSING:
            value = {"key": plain(key), "value": value}
        extra: dict[str, Any] = {}
        for k in ("time", "index"):
            if Keyword(k) in e:
                extra["orig_" + k] = plain(e[Keyword(k)])
        f = e.get(Keyword("f"))
        ops.append(Op(index=len(ops), time=len(ops), type=typ, process=process, f="" if f is None else str(plain(f)),
                      value=value, error=plain(e.get(Keyword("error"))), extra=extra))
    return ops
