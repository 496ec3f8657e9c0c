"""The verdict of a linearizability check, as data (valid is True, False or "unknown")."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from checker.history import Op
from checker.linearizable._calls import Call

UNKNOWN_VERDICT = "unknown"
Linearization = tuple[tuple[Call, Hashable], ...]


class Shown:
    """The partition a Result shows: its calls and a linearization, given or built on first read.

    A valid history's witness is rarely looked at, and building it (a Call per operation, the Python model
    stepped through the witness) cost more than the compiled search that found it, so the checker passes a
    ``build`` function for it instead.  Two Shown are equal when their calls and linearizations are.
    """

    __slots__ = ("_build", "_calls", "_lin")

    def __init__(self, calls: tuple[Call, ...] = (), linearization: Linearization = (), *,
                 build: Callable[[], tuple[tuple[Call, ...], Linearization]] | None = None) -> None:
        self._calls = calls
        self._lin = linearization
        self._build = build

    def _get(self) -> None:
        if self._build is not None:
            self._calls, self._lin = self._build()
            self._build = None

    @property
    def calls(self) -> tuple[Call, ...]:
        self._get()
        return self._calls

    @property
    def linearization(self) -> Linearization:
        self._get()
        return self._lin

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Shown):
            return NotImplemented
        return (self.calls, self.linearization) == (other.calls, other.linearization)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "Shown(...)" if self._build is not None else f"Shown({len(self._calls)} calls)"


@dataclass(frozen=True, slots=True)
class Result:
    """Outcome of ``check``.

    Attributes:
        valid: True, False or ``"unknown"``.
        model: the model's describe() text.
        cause: why the verdict is unknown (``"timeout"``, ``"memory"``, ``"error: ..."``), else None.
        op: the first op that cannot be linearized (its completion), for an invalid history.
        call: the same op as a Call (invoke and completion).
        previous_ok: the last ok op of that partition to complete before ``op``.
        reason: what the model said about ``op`` in the deepest state reached (one sentence).
        partition: key of the partition that decided the verdict (None = unpartitioned).
        shown: that partition's calls and linearization (read them as ``calls`` and ``linearization``).
        partitions: number of partitions; steps: search nodes expanded; cache_entries: cache size.
        seconds: wall time, when a clock was given.
        engine: which search decided: ``"python"``, ``"native"`` (every partition linearized by the compiled
            witness search), ``"native+python"``, or a ``"python (...)"`` text saying why the compiled one
            was not used (e.g. it is not built: ``scripts/build_native.sh``).
        frontier_states: for an invalid history, the distinct states (at most 8) of the explored nodes that got
            furthest: what the model could be when ``op`` had to take effect (the failing-window picture).
    """

    valid: bool | str
    model: str
    cause: str | None = None
    op: Op | None = None
    call: Call | None = None
    previous_ok: Op | None = None
    reason: str | None = None
    partition: Hashable = None
    shown: Shown = field(default_factory=Shown)
    partitions: int = 0
    steps: int = 0
    cache_entries: int = 0
    seconds: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    engine: str = "python"
    frontier_states: tuple[Hashable, ...] = ()

    @property
    def linearization(self) -> Linearization:
        """The longest linearizable prefix of the partition shown: (call, state after) pairs (for a valid
        history, a whole linearization of its largest partition)."""
        return self.shown.linearization

    @property
    def calls(self) -> tuple[Call, ...]:
        """Every call of the partition shown (for the timeline view)."""
        return self.shown.calls

    def first_failure(self) -> dict[str, Any] | None:
        """JSON-ready summary of the failing op, or None if the history was not found invalid."""
        if self.valid is not False or self.call is None:
            return None
        c = self.call
        return {
            "op": (self.op or c.invoke).to_dict(),
            "process": c.process,
            "f": c.input.f,
            "index": (self.op or c.invoke).index,
            "previous_ok": self.previous_ok.to_dict() if self.previous_ok is not None else None,
            "partition": None if self.partition is None else repr(self.partition),
            "reason": self.reason,
            "linearized_prefix": len(self.linearization),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "valid": self.valid, "model": self.model, "cause": self.cause, "first_failure": self.first_failure(),
            "partitions": self.partitions, "steps": self.steps, "cache_entries": self.cache_entries,
            "seconds": self.seconds,
        }

    def describe(self) -> str:
        if self.valid is True:
            return f"linearizable ({self.model}; {self.partitions} partition(s), {self.steps} steps)"
        if self.valid is False and self.call is not None:
            prev = f"; previous ok: {self.previous_ok.describe()}" if self.previous_ok is not None else ""
            where = f" in partition {self.partition!r}" if self.partition is not None else ""
            return (f"NOT linearizable{where}: cannot linearize {self.call.describe()}"
                    f"{' (' + self.reason + ')' if self.reason else ''}{prev}")
        return f"unknown ({self.cause})"


def merge_valid(values: list[bool | str]) -> bool | str:
    """Combine verdicts: False beats "unknown" beats True."""
    if any(v is False for v in values):
        return False
    if any(v == UNKNOWN_VERDICT for v in values):
        return UNKNOWN_VERDICT
    return True
