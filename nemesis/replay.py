"""Replaying a run's faults: the executed schedule read back from its history, and what "reproduced" means.

The history records every nemesis op with its real invocation time, the value it was asked for
(kind and selector) and, in the completion, what the selectors resolved to (``targets``).
:func:`executed_steps` turns the main phase's nemesis invocations back into :class:`~nemesis.schedule.Step`
s at the offsets they actually ran at -- by default with the recorded *selectors*, which a replay
resolves again by role (the master may be another node this time); with ``same_nodes`` every selector is
pinned to the node names it resolved to (partitions to the recorded grudge).

:func:`anomaly_kinds` and :func:`reproduces` compare a rerun's ``results.json`` with the original's: a
rerun reproduces the run when it reports any of the given anomaly kinds (or, for a run invalid without
named anomalies, when it is invalid too).  Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nemesis.faults import row
from nemesis.schedule import Step

__all__ = ["anomaly_kinds", "executed_steps", "pin_value", "reproduces"]


def pin_value(f: str, value: Any, completion: Mapping[str, Any]) -> Any:
    """``value`` with its selectors replaced by the nodes they resolved to in ``completion``."""
    records = [r for r in completion.get("targets") or [] if isinstance(r, Mapping)]
    by_selector = {str(r.get("selector")): ",".join(map(str, r.get("nodes") or [])) for r in records}
    if f == "start-partition":
        done = completion.get("value")
        grudge = done.get("grudge") if isinstance(done, Mapping) else None
        if grudge:
            return {"kind": "grudge", "grudge": {str(k): list(v) for k, v in grudge.items()}}
        return value
    if isinstance(value, str):
        return by_selector.get(value) or value
    if isinstance(value, Mapping):
        out = dict(value)
        for key in ("targets", "from", "to"):
            sel = out.get(key)
            if isinstance(sel, str) and by_selector.get(sel):
                out[key] = by_selector[sel]
        return out
    return value


def executed_steps(history: Iterable[Mapping[str, Any]], *, main_start_ns: int | None, time_limit_s: float,
                   same_nodes: bool = False, main_end_ns: int | None = None) -> tuple[Step, ...]:
    """The nemesis steps a run's main phase executed, at their real offsets (see the module docstring).

    Args:
        history: the run's ops as dicts (``history.jsonl`` lines).
        main_start_ns: the history time the main phase's clock started at (``results.json``
            ``main_phase_start_ns``: its generator's first committed op, where the time limit and a
            schedule's offsets count from); None reads it as the first op's time.
        time_limit_s: the main phase's length: later nemesis ops belong to the heal phase.
        same_nodes: pin every selector to the nodes it resolved to.
        main_end_ns: when the main phase's generation ended (``results.json`` ``main_phase_end_ns``), if
            recorded: ops from then on belong to the heal phase even when that is before ``time_limit_s``
            (a generator that ran out, or a run that was interrupted).

    Raises:
        UnknownFault: a nemesis op whose ``f`` has no row in :mod:`nemesis.faults` (naming the op's index).
    """
    ops = list(history)
    if main_start_ns is None:
        main_start_ns = min((int(o.get("time", 0)) for o in ops), default=0)
    invokes: dict[Any, Mapping[str, Any]] = {}
    pairs: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = []
    for i, op in enumerate(ops):
        if op.get("process") != "nemesis":
            continue
        row(op.get("f"), f"history op {op.get('index', i)}")  # no row: an error, never a step silently left out
        if op.get("type") == "invoke":
            invokes["nemesis"] = op
        elif "nemesis" in invokes:
            pairs.append((invokes.pop("nemesis"), op))
    if "nemesis" in invokes:
        pairs.append((invokes["nemesis"], {}))
    steps = []
    for inv, comp in pairs:
        at_s = (int(inv.get("time", 0)) - main_start_ns) / 1e9
        if at_s >= time_limit_s or (main_end_ns is not None and int(inv.get("time", 0)) >= main_end_ns):
            continue
        f = str(inv["f"])
        value = inv.get("value")
        if same_nodes and comp:
            value = pin_value(f, value, comp)
        steps.append(Step(round(max(0.0, at_s), 3), f, value))
    return tuple(steps)


def anomaly_kinds(doc: Mapping[str, Any]) -> set[str]:
    """The anomaly kinds a ``results.json`` reports (with a count above zero)."""
    counts = doc.get("anomaly_counts") or {}
    return {str(k) for k, v in counts.items() if v}


def reproduces(candidate: Mapping[str, Any], kinds: Iterable[str]) -> bool:
    """Whether a rerun's ``results.json`` shows one of ``kinds`` (or, with no kinds, is invalid)."""
    wanted = set(kinds)
    if not wanted:
        return candidate.get("valid") is False
    return bool(anomaly_kinds(candidate) & wanted)
