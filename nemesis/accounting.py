"""Fault accounting: did each requested fault take effect, and what does a run's fault summary say.

A fault that did not happen must never look like one that did.  Every nemesis completion therefore
carries

* ``fault`` -- the kind it counts under (:func:`nemesis.schedule.fault_label`: ``kill``,
  ``start-partition:isolate-master``, ``crash-at:controller.before_propose``);
* ``effective`` -- whether it took effect (a partition cut someone off, a kill killed a process, a
  crash-at's failpoint was reached), and ``why`` when it did not;
* ``targets`` -- one record per selector resolved while performing it: the selector, the nodes it
  resolved to and the role each node had then.

:class:`Accounted` wraps the composed nemesis and adds these fields; :func:`judge` decides
``effective`` from a completion alone; :func:`summarize` folds a history's nemesis completions into the
per-kind summary that ``results.json`` carries (``faults``), and :func:`warnings` says which requested
kinds never took effect; :func:`account` does both for a run, and says so when a nemesis op's ``f`` has no row
in the fault table (:mod:`nemesis.faults`) instead of leaving it out.  :data:`STEP` carries the step's RNG
and resolution records to the nemesis members (a context variable: members need not know they are wrapped).

Pure apart from :class:`Accounted` (which awaits the wrapped nemesis).
"""

from __future__ import annotations

import contextvars
import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nemesis.faults import FAULTS, UnknownFault, row
from nemesis.schedule import fault_label

__all__ = ["RULES", "STEP", "Accounted", "StepContext", "account", "judge", "summarize", "warnings"]


@dataclass
class StepContext:
    """Per step: the RNG random selectors draw from, and the selector resolutions made."""

    rng: random.Random
    resolutions: list[dict[str, Any]] = field(default_factory=list)


STEP: contextvars.ContextVar[StepContext | None] = contextvars.ContextVar("splitbrain_nemesis_step", default=None)


def _nodes(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(n) for n in value]
    if isinstance(value, Mapping) and isinstance(value.get("nodes"), list | dict):
        return [str(n) for n in value["nodes"]]
    return []


Judged = tuple[bool, str | None]


def _grudge(value: Any) -> Judged:
    grudge = value.get("grudge") if isinstance(value, Mapping) else None
    return (True, None) if grudge else (False, "the partition cut nobody off (empty grudge)")


def _live_nodes(value: Any) -> Judged:
    return (True, None) if _nodes(value) else (False, "the selector resolved to no live node")


def _some_nodes(value: Any) -> Judged:
    return (True, None) if _nodes(value) else (False, "the selector resolved to no node")


def _crash_report(value: Any) -> Judged:
    report = value.get("nodes") if isinstance(value, Mapping) else None
    if not isinstance(report, Mapping) or not report:
        return False, "no live target to arm the failpoint on"
    if any(r.get("crashed") for r in report.values() if isinstance(r, Mapping)):
        return True, None
    armed = {n: r.get("armed") for n, r in report.items() if isinstance(r, Mapping)}
    if not any(a == "ok" for a in armed.values()):
        unanswered = [n for n, a in armed.items() if isinstance(a, str) and a.startswith("unknown")]
        if unanswered:
            return False, (f"arming the failpoint got no answer from {', '.join(unanswered)} and the process did "
                           f"not die at it while watched ({'; '.join(f'{n}: {a}' for n, a in armed.items())})")
        return False, f"the failpoint could not be armed ({'; '.join(f'{n}: {a}' for n, a in armed.items())})"
    name = value.get("name") if isinstance(value, Mapping) else "?"
    triggered = value.get("trigger") if isinstance(value, Mapping) else None
    how = f" (triggered by {triggered})" if triggered and triggered != "none" else ""
    return False, f"failpoint {name} was not reached in time{how}"


def _arm_results(value: Any) -> Judged:
    results = value.get("results") if isinstance(value, Mapping) else None
    if not isinstance(results, Mapping) or not results:
        return False, "the selector resolved to no node"
    if not any(r == "ok" for r in results.values()):
        return False, "armed on no node (" + "; ".join(f"{n}: {r}" for n, r in results.items()) + ")"
    return True, None


def _node_report(value: Any) -> Judged:
    report = value.get("nodes") if isinstance(value, Mapping) else None
    return (True, None) if report else (False, "no broker to act on")


def _registration_crash(value: Any) -> Judged:
    crash = value.get("crash") if isinstance(value, Mapping) else None
    if isinstance(crash, Mapping) and crash.get("hit"):
        return True, None
    return False, "the broker did not crash at the failpoint"


RULES: Mapping[str, Callable[[Any], Judged]] = {
    "grudge": _grudge, "live-nodes": _live_nodes, "nodes": _some_nodes, "crash-report": _crash_report,
    "arm-results": _arm_results, "node-report": _node_report, "registration-crash": _registration_crash,
}
"""Evidence kind (:data:`nemesis.faults.EVIDENCE`, named by each fault's row) -> how a completion's value shows
the fault took effect."""


def judge(comp: Mapping[str, Any]) -> Judged:
    """Whether a nemesis completion took effect, and why not (pure).

    The rules: an ``error`` means not effective (the error is the reason); otherwise a fault must have
    touched something, as its row's ``evidence`` says (:data:`RULES`) -- a non-empty grudge, at least one
    killed/paused/shifted/shaped node, a reached failpoint, an armed failpoint, a crash that hit.  Undo steps
    (and reads) are effective when they undid something or had nothing to undo (they are not faults and are not
    counted as such)."""
    if comp.get("error"):
        return False, str(comp["error"])
    r = FAULTS.get(str(comp.get("f")))
    if r is None or r.evidence is None:
        return True, None  # undo steps and reads (summarize refuses an f with no row before it asks)
    return RULES[r.evidence](comp.get("value"))


class Accounted:
    """Wraps a nemesis: gives each step its own RNG (seed + step number, so a replay of the same steps
    draws the same random subsets) and adds ``fault``, ``effective``/``why`` and ``targets`` to every
    completion (see the module docstring)."""

    def __init__(self, inner: Any, *, seed: int) -> None:
        self.inner = inner
        self.seed = seed
        self.count = 0

    def fs(self) -> frozenset[str]:
        fs: frozenset[str] = self.inner.fs()
        return fs

    async def setup(self, test: dict[str, Any]) -> Accounted:
        self.inner = await self.inner.setup(test)
        return self

    async def teardown(self, test: dict[str, Any]) -> None:
        await self.inner.teardown(test)

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        step = StepContext(random.Random(f"{self.seed}:step:{self.count}"))
        self.count += 1
        token = STEP.set(step)
        try:
            comp = dict(await self.inner.invoke(test, op))
        finally:
            STEP.reset(token)
        if step.resolutions:
            comp["targets"] = step.resolutions
        comp["fault"] = fault_label(str(op.get("f")), op.get("value"))
        effective, why = judge(comp)
        comp["effective"] = effective
        if why is not None:
            comp["why"] = why
        return comp


def summarize(history: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Per fault kind: ``requested``, ``effective``, ``not_effective`` and the reasons (with counts),
    from a history's nemesis completions (pure).  Undo steps are not faults and are not counted; a
    fault whose completion never came (the run ended) counts as not effective, "no completion".

    Raises:
        UnknownFault: a nemesis op whose ``f`` has no row in :mod:`nemesis.faults` (naming the op's index): it
            would otherwise be neither counted nor said to be missing.
    """
    kinds: dict[str, dict[str, Any]] = {}
    open_invokes: dict[Any, Mapping[str, Any]] = {}
    for i, op in enumerate(history):
        if op.get("process") != "nemesis" or not row(op.get("f"), f"history op {op.get('index', i)}").fault:
            continue
        if op.get("type") == "invoke":
            open_invokes[op.get("process")] = op
            continue
        inv = open_invokes.pop(op.get("process"), op)
        label = str(op.get("fault") or fault_label(str(op.get("f")), inv.get("value")))
        k = kinds.setdefault(label, {"requested": 0, "effective": 0, "not_effective": 0, "reasons": Counter()})
        k["requested"] += 1
        effective = op.get("effective")
        if effective is None:
            effective, why = judge(op)
            why = why or None
        else:
            why = op.get("why")
        if effective:
            k["effective"] += 1
        else:
            k["not_effective"] += 1
            k["reasons"][_short(str(why or "unknown"))] += 1
    for inv in open_invokes.values():
        label = fault_label(str(inv.get("f")), inv.get("value"))
        k = kinds.setdefault(label, {"requested": 0, "effective": 0, "not_effective": 0, "reasons": Counter()})
        k["requested"] += 1
        k["not_effective"] += 1
        k["reasons"]["no completion (the run ended first)"] += 1
    return {label: {**k, "reasons": dict(k["reasons"].most_common())} for label, k in sorted(kinds.items())}


def _short(reason: str, limit: int = 160) -> str:
    line = reason.strip().splitlines()[0] if reason.strip() else reason
    return line if len(line) <= limit else line[: limit - 1] + "…"


def warnings(summary: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per fault kind that was requested but never took effect (pure)."""
    out = []
    for label, k in summary.items():
        if k.get("requested") and not k.get("effective"):
            reasons = k.get("reasons") or {}
            first = next(iter(reasons), "unknown")
            out.append(f"fault {label} was requested {k['requested']}x and never took effect (e.g. {first})")
    return out


def account(history: Iterable[Mapping[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """A run's fault summary and its warnings (``results.json`` ``faults`` and ``fault_warnings``; pure).

    A nemesis op whose ``f`` has no row in the fault table (:mod:`nemesis.faults`) cannot be accounted.  Rather
    than a summary that silently leaves it out, the summary is then empty and the one warning names the ``f``
    and the op: the run's verdict is never lost to its bookkeeping (the runner also drives nemeses that are not
    this package's, such as a test's or a plug-in's; this package's own are held to the table by
    tests/unit/nemesis/test_faults.py)."""
    try:
        summary = summarize(history)
    except UnknownFault as exc:
        return {}, [f"no fault accounting: {exc}"]
    return summary, warnings(summary)
