"""Why a run failed, in words: the per-checker verdicts, anomalies and first explanations of a ``results.json``.

An engineer reading a red run (a terminal, a CI page of JUnit results) must see in seconds which checker
failed, what anomaly, on which ops and under which faults -- not a raw JSON dump.  This module turns a
``results.json`` document into those words; the CLI's final summary (:func:`summary_lines`) and both JUnit
writers (:func:`failure_message`, :func:`anomaly_lines`) use it, so they always agree.

Pure: a ``results.json`` mapping in, strings out; no files, no clock.  Anything malformed in the document
(a checker entry that is not a mapping, a count that is not a number) is described, never raised on:
the summary of a broken run must still print.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CheckerVerdict", "anomaly_lines", "availability_line", "checker_verdicts", "clip", "crash_where",
    "failure_message", "summary_lines", "verdict_label",
]

EXPLANATION_CHARS = 200  # one line of explanation in the summary and in a JUnit message


@dataclass(frozen=True, slots=True)
class CheckerVerdict:
    """One checker's verdict in words.

    ``anomalies``: (type, count) pairs, the most frequent first; ``explanation``: the first example's
    sentence (for an unknown verdict, the checker's error); ``ops``: the history indices of that example.
    """

    name: str
    valid: Any
    anomalies: tuple[tuple[str, int], ...]
    explanation: str | None
    ops: tuple[int, ...] = ()


def verdict_label(valid: Any) -> str:
    """``valid`` / ``INVALID`` / ``unknown`` (upper case marks what needs a reader's attention)."""
    if valid is True:
        return "valid"
    if valid is False:
        return "INVALID"
    return "unknown"


def clip(text: str, width: int) -> str:
    """``text`` on one line, at most ``width`` characters (an ellipsis marks the cut)."""
    one = " ".join(part.strip() for part in str(text).splitlines() if part.strip()).replace("\t", " ")
    if width <= 0:
        return ""
    return one if len(one) <= width else one[: max(0, width - 1)] + "…"


def _count(x: Any) -> int:
    return x if isinstance(x, int) and not isinstance(x, bool) else 0


def _examples(entry: Mapping[str, Any], doc: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    """Examples of ``kind`` for one checker: its own if it kept them, else the run-wide ones of that kind."""
    for source in (entry.get("anomaly_examples"), doc.get("anomaly_examples")):
        if isinstance(source, Mapping):
            found = source.get(kind)
            if isinstance(found, list) and found:
                return [e for e in found if isinstance(e, Mapping)]
    return []


def checker_verdicts(doc: Mapping[str, Any]) -> list[CheckerVerdict]:
    """Every checker of ``doc`` (``results.json``), failing ones first, then unknown, then valid; by name within."""
    checkers = doc.get("checkers")
    if not isinstance(checkers, Mapping) or not checkers:
        checkers = {"all": doc}
    out = []
    for raw_name, entry in checkers.items():
        name = str(raw_name) or "(unnamed)"
        if not isinstance(entry, Mapping):
            out.append(CheckerVerdict(name, "unknown", (), f"malformed checker entry: {clip(repr(entry), 80)}"))
            continue
        counts = entry.get("anomaly_counts")
        pairs = sorted(((str(k), _count(n)) for k, n in (counts.items() if isinstance(counts, Mapping) else ())
                        if _count(n) > 0), key=lambda kn: (-kn[1], kn[0]))
        explanation: str | None = None
        ops: tuple[int, ...] = ()
        for kind, _ in pairs:
            examples = _examples(entry, doc, kind)
            if examples:
                first = examples[0]
                explanation = str(first.get("explanation") or "") or None
                raw_ops = first.get("ops")
                ops = tuple(i for i in raw_ops if isinstance(i, int)) if isinstance(raw_ops, list) else ()
                break
        if explanation is None and entry.get("valid") is not True and str(entry.get("error") or "").strip():
            explanation = str(entry["error"]).strip().splitlines()[0]
        out.append(CheckerVerdict(name, entry.get("valid", "unknown"), tuple(pairs), explanation, ops))
    order = {False: 0, True: 2}
    return sorted(out, key=lambda v: (order.get(v.valid, 1) if isinstance(v.valid, bool) else 1, v.name))


def _kinds(v: CheckerVerdict) -> str:
    return ", ".join(f"{k} x{n}" for k, n in v.anomalies)


def failure_message(v: CheckerVerdict) -> str:
    """One line for a failing or unknown checker: its anomaly kinds with counts and the first explanation."""
    head = _kinds(v) or ("invalid" if v.valid is False else "unknown")
    return clip(f"{head}: {v.explanation}" if v.explanation else head, EXPLANATION_CHARS + 80)


def anomaly_lines(doc: Mapping[str, Any], checker: str, *, per_kind: int = 5) -> list[str]:
    """The anomalies of one checker, one line each (``type [key] ops=[..]: explanation``), at most
    ``per_kind`` examples per kind plus a line saying how many more there were."""
    checkers = doc.get("checkers")
    found = checkers.get(checker) if isinstance(checkers, Mapping) else None
    entry: Mapping[str, Any] = found if isinstance(found, Mapping) else doc
    lines: list[str] = []
    raw = entry.get("anomaly_counts")
    counts: Mapping[Any, Any] = raw if isinstance(raw, Mapping) else {}
    for kind, n in sorted(counts.items(), key=lambda kn: (-_count(kn[1]), str(kn[0]))):
        if _count(n) <= 0:
            continue
        shown = _examples(entry, doc, str(kind))[:per_kind]
        for e in shown:
            ops = e.get("ops") if isinstance(e.get("ops"), list) else []
            key = f" [{e.get('key')}]" if e.get("key") not in (None, "") else ""
            lines.append(clip(f"{kind}{key} ops={ops}: {e.get('explanation') or '(no explanation)'}", 400))
        if _count(n) > len(shown):
            lines.append(f"{kind}: {_count(n) - len(shown)} more not listed ({_count(n)} in all)")
    if not lines and entry.get("error"):
        lines.append(clip(str(entry["error"]), 400))
    return lines


def availability_line(doc: Mapping[str, Any]) -> str | None:
    """One line on what the availability verdict judged (``checkers.availability.stats``): the fault windows
    judged against the bound and the longest wait, how many stretches it could not decide, and the final heal --
    so a valid verdict is seen not to be an empty one.  None when the run has no availability checker."""
    checkers = doc.get("checkers")
    entry = checkers.get("availability") if isinstance(checkers, Mapping) else None
    stats = entry.get("stats") if isinstance(entry, Mapping) else None
    if not isinstance(stats, Mapping):
        return None
    raw_exp = stats.get("expectations")
    exp: Mapping[str, Any] = raw_exp if isinstance(raw_exp, Mapping) else {}
    windows = [w for w in stats.get("windows") or [] if isinstance(w, Mapping)]
    waits = [w["longest_wait_s"] for w in windows if isinstance(w.get("longest_wait_s"), int | float)]
    judged = _count(stats.get("judged_windows"))
    text = f"availability: {judged} fault window{'s' if judged != 1 else ''} judged"
    if waits:
        ctl = exp.get("controller_write_resume_s")
        to_ctl = f", {ctl} s to the controllers" if ctl is not None and ctl != exp.get("write_resume_s") else ""
        text += f" (longest wait {max(waits):.1f} s, bound {exp.get('write_resume_s')} s{to_ctl})"
    bad = _count(stats.get("unavailable_windows"))
    if bad:
        text += f", {bad} unavailable"
    undecided = _count(stats.get("undecided_pieces"))
    text += f", {undecided} stretch{'es' if undecided != 1 else ''} not decidable"
    raw_final = stats.get("final")
    final: Mapping[str, Any] = raw_final if isinstance(raw_final, Mapping) else {}
    per = final.get("workloads")
    if final.get("judged") and isinstance(per, Mapping):
        resumed = [f"{wl} {f.get('waited_s')} s" for wl, f in per.items()
                   if isinstance(f, Mapping) and f.get("judged")]
        text += "; after the final heal: " + (", ".join(resumed) or "no ops tried")
    elif final.get("why"):
        text += f"; final heal not judged ({final['why']})"
    return text


def crash_where(frames: Sequence[tuple[str, int, str]]) -> str:
    """Where a crash happened: the innermost frame of the project's own code (``file:line in func``),
    else the innermost frame.  ``frames`` are (file, line, function), outermost first."""
    if not frames:
        return ""
    own = [f for f in frames if "/site-packages/" not in f[0] and "/lib/python" not in f[0]]
    file, line, func = (own or list(frames))[-1]
    return f"{file}:{line} in {func}"


def summary_lines(doc: Mapping[str, Any], *, width: int = 100, faults: str = "", crash: str = "",
                  where: str = "", look_at: str = "") -> list[str]:
    """The final summary of a run, one line per item, each at most ``width`` characters:

    the crash (exception and where) first, then every checker (verdict; for a failing or unknown one its
    anomaly kinds with counts and first explanation, with the ops), what the availability verdict judged
    (:func:`availability_line`), the fault summary, and the file to open (never cut: a path must stay usable).
    """
    lines = []
    if crash:
        lines.append(clip(f"CRASHED: {crash}" + (f" (at {where})" if where else ""), width))
    def indented(indent: int, text: str) -> str:
        return " " * min(indent, width) + clip(text, width - indent)

    for v in checker_verdicts(doc):
        word = verdict_label(v.valid)
        if v.valid is True:
            lines.append(indented(2, f"{word:7} {v.name}"))
            continue
        lines.append(indented(2, f"{word:7} {v.name}: {_kinds(v) or 'no anomaly recorded'}"))
        if v.explanation:
            ops = f" (ops {', '.join(map(str, v.ops[:6]))}{', …' if len(v.ops) > 6 else ''})" if v.ops else ""
            lines.append(indented(10, f"{v.explanation}{ops}"))
    availability = availability_line(doc)
    if availability:
        lines.append(clip(availability, width))
    if faults:
        lines.append(clip(f"faults: {faults}", width))
    if look_at:
        lines.append(f"look at: {look_at}")  # a path is never cut
    return lines
