"""The history op schema: the one definition of what a recorded operation looks like.

A history is a sequence of operations, one JSON object per line in ``history.jsonl``::

    {"index": 17, "time": 1234567890, "type": "invoke", "process": 3, "f": "send", "value": {...}}

* ``index``   -- position in the history, 0-based, dense.
* ``time``    -- nanoseconds since the test started (monotonic).
* ``type``    -- ``invoke`` | ``ok`` | ``fail`` | ``info``.
* ``process`` -- an int for client processes, ``"nemesis"`` for fault injection.
* ``f``       -- the operation's function (``send``, ``poll``, ``read``, ``cas`` ...).
* ``value``   -- any JSON value.
* optional: ``node`` (which node the op went to), ``error`` (why it failed / is unknown).

Semantics: every client ``invoke`` is followed by exactly one completion by the same process
with the same ``f``.  ``fail`` means the op definitely did not happen; ``info`` means it may or
may not have happened at any time after its invoke, and the process never invokes again (the
worker continues under a new process id).  An invoke with no completion is treated as ``info``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec

OP_TYPES = ("invoke", "ok", "fail", "info")
NEMESIS = "nemesis"


class HistoryError(ValueError):
    """A history line that violates the schema (names the file, line and field)."""


# The JSON name of ``Op.extra`` when an op is decoded by msgspec (``checker.readers._fast``): not "extra", so that
# a line with an "extra" key is refused there (an unknown key) and read by ``Op.from_dict``, which files every
# unknown key, "extra" included, under ``extra``.  The fast reader also refuses a file that may spell this name:
# its first character, DEL, is written raw or as one escape, so that two byte searches rule it out.
EXTRA_WIRE_NAME = "\x7fsplitbrain-op-extra"


class Op(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One recorded operation (the fields of the module docstring; ``extra`` holds any other keys of its line).

    A frozen msgspec Struct rather than a dataclass: msgspec builds one straight from a JSON line, in C, about
    a third of what building a dataclass costs, which is most of reading a long history (``splitbrain check``,
    kv c5 100k: ~0.13 s instead of ~0.35 s).  Its fields sit in ``__slots__`` as before (the compiled checker
    reads them there).  ``forbid_unknown_fields`` concerns only that decoding: a line with a key outside the
    fields is refused by the fast reader and read by :meth:`from_dict`, which keeps such keys in ``extra``.
    """

    index: int
    time: int
    type: str
    process: int | str
    f: str
    value: Any = None
    node: str | None = None
    error: Any = None
    extra: dict[str, Any] = msgspec.field(default_factory=dict, name=EXTRA_WIRE_NAME)

    def __post_init__(self) -> None:
        if self.type not in OP_TYPES:
            raise HistoryError(f"op {self.index}: field 'type' must be one of {OP_TYPES}, got {self.type!r}")
        if not (isinstance(self.process, int) or self.process == NEMESIS):
            raise HistoryError(f"op {self.index}: field 'process' must be an int or 'nemesis', got {self.process!r}")

    @property
    def is_client(self) -> bool:
        return self.process != NEMESIS

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "index": self.index, "time": self.time, "type": self.type, "process": self.process, "f": self.f,
            "value": self.value,
        }
        if self.node is not None:
            d["node"] = self.node
        if self.error is not None:
            d["error"] = self.error
        d.update(self.extra)
        return d

    @staticmethod
    def from_dict(d: dict[str, Any], *, where: str = "") -> Op:
        try:
            known = {"index", "time", "type", "process", "f", "value", "node", "error"}
            return Op(
                index=int(d["index"]), time=int(d["time"]), type=d["type"], process=d["process"], f=str(d["f"]),
                value=d.get("value"), node=d.get("node"), error=d.get("error"),
                extra={k: v for k, v in d.items() if k not in known},
            )
        except KeyError as exc:
            raise HistoryError(f"{where}missing field {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            raise HistoryError(f"{where}{exc}") from None

    def describe(self) -> str:
        err = f" error={self.error!r}" if self.error is not None else ""
        return f"#{self.index} p{self.process} {self.type} {self.f} {self.value!r}{err}"


def dump_op(op: Op) -> str:
    return json.dumps(op.to_dict(), separators=(",", ":"), default=str)


def read_jsonl(path: str | Path, *, tolerate_torn_tail: bool = True) -> list[Op]:
    """Read ``history.jsonl``.  A torn last line (a crashed writer) is dropped if tolerated.

    Raises:
        HistoryError: a malformed line (naming file and line number).
    """
    return list(iter_jsonl(path, tolerate_torn_tail=tolerate_torn_tail))


def iter_jsonl(path: str | Path, *, tolerate_torn_tail: bool = True) -> Iterator[Op]:
    path = Path(path)
    with path.open("r", encoding="utf-8") as fh:
        lines = fh.readlines()
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as exc:
            if tolerate_torn_tail and lineno == len(lines) and not line.endswith("\n"):
                return
            raise HistoryError(f"{path}:{lineno}: not JSON: {exc}") from None
        yield Op.from_dict(d, where=f"{path}:{lineno}: ")


def write_jsonl(path: str | Path, ops: Iterable[Op]) -> None:
    with Path(path).open("w", encoding="utf-8") as fh:
        for op in ops:
            fh.write(dump_op(op) + "\n")


def pair_ops(ops: Iterable[Op]) -> list[tuple[Op, Op | None]]:
    """Pair each client invoke with its completion (None if it never completed)."""
    open_by_process: dict[int | str, int] = {}
    pairs: list[tuple[Op, Op | None]] = []
    for op in ops:
        if op.process == NEMESIS:  # not op.is_client, inlined: this loop runs once per op of every check
            continue
        if op.type == "invoke":
            open_by_process[op.process] = len(pairs)
            pairs.append((op, None))
        else:
            i = open_by_process.pop(op.process, None)
            if i is None:
                raise HistoryError(f"op {op.index}: completion {op.type} by process {op.process} with no open invoke")
            inv = pairs[i][0]
            pairs[i] = (inv, op)
    return pairs
