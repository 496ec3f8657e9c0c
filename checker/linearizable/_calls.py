"""Calls: a history's client operations as intervals, the unit the linearizability search works on.

A *call* pairs an invoke with its completion: ``call_time`` is the invoke's time, ``ret_time`` the
completion's, ``output`` the completion's value.  Indeterminate ops (``info`` or never completed) get
``ret_time = INF`` and ``output = UNKNOWN``: they may take effect at any point after their invoke, or
never.  ``fail`` completions follow the model's fail policy: ``drop`` removes the op (it did not
happen); ``definite`` keeps it with output ``FAILED`` (e.g. a CAS whose compare definitely failed).

Intervals are closed: a call whose invoke time equals another's return time is concurrent with it,
because equal timestamps say nothing about order (a coarse clock may stamp both with the same value).
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterable, Sequence
from typing import Any, NamedTuple

from checker.history import Op, pair_ops
from checker.models import FAILED, UNKNOWN, Model, OpInput

INF = float("inf")


class Call(NamedTuple):
    """One client operation as an interval (see the module docstring).

    A NamedTuple, not a frozen dataclass: building one is about 4x cheaper (a frozen dataclass sets each field
    through ``object.__setattr__``), and a 2,000-op history builds 2,000 of them before any search starts.
    """

    id: int
    process: int | str
    input: OpInput
    output: Any
    call_time: float
    ret_time: float
    invoke: Op
    completion: Op | None

    @property
    def determinate(self) -> bool:
        return self.output is not UNKNOWN

    def describe(self) -> str:
        out = "?" if self.output is UNKNOWN else ("failed" if self.output is FAILED else repr(self.output))
        comp = self.completion
        at = f" @{comp.index}" if comp is not None else f" invoked @{self.invoke.index}, never completed"
        kind = comp.type if comp is not None else "info"
        return f"p{self.process} {kind} {self.input.f} {self.input.value!r} -> {out}{at}"


def build_calls(ops: Iterable[Op], model: Model, *, fail_policy: str | None = None) -> list[Call]:
    """Pair a history's client ops into calls.

    Args:
        ops: the history (nemesis ops are ignored).
        model: supplies the default fail policy.
        fail_policy: ``"drop"`` or ``"definite"``; overrides ``model.fail_policy``.

    Raises:
        HistoryError: a completion without an open invoke by the same process.
    """
    return calls_of_pairs(pair_ops(ops), fail_policy or model.fail_policy)


def calls_of_pairs(pairs: Iterable[tuple[Op, Op | None]], policy: str, ids: Sequence[int] | None = None,
                   ) -> list[Call]:
    """The calls of (invoke, completion or None) pairs in invoke order (see :func:`build_calls`); ``ids``: the
    call ids to give them in order (default 0, 1, ...), one per call kept."""
    calls: list[Call] = []
    take = (itertools.count() if ids is None else iter(ids)).__next__  # the next call id
    # tuple.__new__ builds the same NamedTuples as Call(...) / OpInput(...) without their Python-level
    # __new__, which was a third of the cost of this loop (it runs once per op before any search starts).
    new = tuple.__new__
    for inv, comp in pairs:
        value = inv.value
        if comp is None or comp.type == "info":
            output, ret = UNKNOWN, INF
        elif comp.type == "fail":
            if policy == "drop":
                continue
            output, ret = FAILED, float(comp.time)
        else:
            output, ret = comp.value, float(comp.time)
            if value is None:
                value = comp.value
        calls.append(new(Call, (take(), inv.process, new(OpInput, (inv.f, value)), output, float(inv.time), ret,
                                inv, comp)))
    return calls


def partition_calls(calls: Sequence[Call], model: Model) -> list[tuple[Hashable, list[Call]]]:
    """Split calls into independent sub-histories by ``model.partition_key`` (P-compositionality).

    Returns one (key, calls) pair per partition, or a single (None, calls) if the model does not partition
    or any call has no key.
    """
    groups: dict[Hashable, list[Call]] = {}
    for c in calls:
        k = model.partition_key(c.input)
        if k is None:
            return [(None, list(calls))]
        groups.setdefault(k, []).append(c)
    if not groups:
        return [(None, [])]
    return list(groups.items())
