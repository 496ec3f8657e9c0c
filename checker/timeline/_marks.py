"""The anomalies of a ``results.json``, each with the ops it involves: what the run page links and the timeline
highlights.

Sources, per checker entry of ``checkers`` (the shape of :func:`checker.compose.results_to_json`): its own
``anomaly_examples`` (or the run-wide ones of its anomaly kinds), plus a linearizability checker's
``first_failure`` (kept under ``stats`` by the harness' merge, or at the top of the entry), which becomes a
``nonlinearizable`` record of the failing op and the previous ok op unless the checker already reports one.
Pure and forgiving: a malformed entry yields no record, never an exception (a broken run's page must render).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["AnomalyRecord", "anomaly_records", "first_failure", "marks_by_op"]

NONLINEARIZABLE = "nonlinearizable"


@dataclass(frozen=True, slots=True)
class AnomalyRecord:
    """One anomaly of one checker: ``ops`` are history indices (an invoke's or a completion's)."""

    checker: str
    type: str
    key: str
    ops: tuple[int, ...]
    explanation: str

    def describe(self) -> str:
        key = f" [{self.key}]" if self.key else ""
        return f"{self.checker}: {self.type}{key}: {self.explanation}"


def _ints(x: Any) -> tuple[int, ...]:
    return tuple(i for i in x if isinstance(i, int) and not isinstance(i, bool)) if isinstance(x, list) else ()


def first_failure(entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """A linearizability checker entry's ``first_failure`` (top level or under ``stats``), if it has one."""
    for src in (entry, entry.get("stats")):
        if isinstance(src, Mapping) and isinstance(src.get("first_failure"), Mapping):
            ff = src["first_failure"]
            return ff if isinstance(ff, Mapping) else None
    return None


def _explanation(entry: Mapping[str, Any], ff: Mapping[str, Any]) -> str:
    stats = entry.get("stats") if isinstance(entry.get("stats"), Mapping) else {}
    for src in (entry, stats):
        if isinstance(src, Mapping) and isinstance(src.get("explanation"), str) and src["explanation"]:
            return str(src["explanation"])
    return str(ff.get("reason") or "cannot be linearized")


def anomaly_records(doc: Mapping[str, Any], *, per_kind: int = 20) -> list[AnomalyRecord]:
    """Every anomaly example of ``doc`` by checker (failing checkers' order as in the file), at most
    ``per_kind`` per checker and kind."""
    checkers = doc.get("checkers")
    if not isinstance(checkers, Mapping):
        checkers = {}
    run_wide = doc.get("anomaly_examples") if isinstance(doc.get("anomaly_examples"), Mapping) else {}
    out: list[AnomalyRecord] = []
    for name, entry in checkers.items():
        if not isinstance(entry, Mapping):
            continue
        own = entry.get("anomaly_examples")
        counts = entry.get("anomaly_counts")
        kinds: list[str] = list(own) if isinstance(own, Mapping) else []
        if isinstance(counts, Mapping):
            kinds += [str(k) for k in counts if k not in kinds]
        for kind in kinds:
            src = own.get(kind) if isinstance(own, Mapping) else None
            if not src and isinstance(run_wide, Mapping):
                src = run_wide.get(kind)
            for e in (src if isinstance(src, list) else [])[:per_kind]:
                if isinstance(e, Mapping):
                    out.append(AnomalyRecord(str(name), str(e.get("type") or kind), str(e.get("key") or ""),
                                             _ints(e.get("ops")), str(e.get("explanation") or "")))
        ff = first_failure(entry)
        if ff is not None and NONLINEARIZABLE not in kinds:
            ops = [ff.get("index")]
            prev = ff.get("previous_ok")
            if isinstance(prev, Mapping):
                ops.append(prev.get("index"))
            out.append(AnomalyRecord(str(name), NONLINEARIZABLE, str(ff.get("partition") or ""),
                                     _ints(ops), _explanation(entry, ff)))
    return out


def marks_by_op(records: Sequence[AnomalyRecord]) -> dict[int, list[str]]:
    """History index -> the descriptions of the anomalies that involve it (for the timeline's highlights)."""
    out: dict[int, list[str]] = {}
    for r in records:
        for i in r.ops:
            text = r.describe()
            if text not in out.setdefault(i, []):
                out[i].append(text)
    return out
