"""JUnit XML for CI: one run's ``junit.xml`` and one document for many runs (``--junit FILE``).

A run is a ``<testsuite>``; each checker is a ``<testcase>`` -- empty when valid, a ``<failure>`` when invalid,
an ``<error>`` when unknown, its message the anomaly kinds with counts and the first explanation and its body
the anomalies one per line (:mod:`harness.explain`).  A run that crashed, or never wrote results, has one more
case, ``run``, with an ``<error>`` saying why.  Every text goes through :func:`xml_text`, so no checker message
can make the file unreadable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from harness.explain import anomaly_lines, checker_verdicts, failure_message
from harness.runs import RunSummary
from harness.store import RunDir

__all__ = ["junit_cases", "junit_for_runs", "write_junit", "write_junit_file", "xml_text"]

_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n'


def xml_text(text: str) -> str:
    """``text`` with every character XML 1.0 cannot hold (control characters such as a terminal's ESC,
    lone surrogates) replaced by U+FFFD, so a checker's message can never make the JUnit file unreadable."""
    return _NOT_XML.sub("\ufffd", text)


def junit_cases(doc: Mapping[str, Any]) -> dict[str, str]:
    """One JUnit testcase body per checker of a ``results.json`` document: empty when valid; a ``<failure>``
    (invalid) or ``<error>`` (unknown) whose message is the anomaly kinds with counts and the first
    explanation, and whose body lists the anomalies one per line (:mod:`harness.explain`)."""
    out: dict[str, str] = {}
    for v in checker_verdicts(doc):
        if v.valid is True:
            out[v.name] = ""
            continue
        tag = "failure" if v.valid is False else "error"
        body = "\n".join(anomaly_lines(doc, v.name)) or (v.explanation or "")
        out[v.name] = f"<{tag} message={quoteattr(xml_text(failure_message(v)))}>{escape(xml_text(body))}</{tag}>"
    return out


def _suite(name: str, cases: Mapping[str, str], *, classname: str, time_s: float, error: str = "",
           properties: Mapping[str, str] | None = None, timestamp: str | None = None,
           indent: str = "") -> tuple[str, int, int, int]:
    """One ``<testsuite>`` (the checker ``cases`` plus a ``run`` error case when ``error``); returns it with its
    counts of tests, failures and errors."""
    rows, failures, errors = [], 0, 0
    for case, body in cases.items():
        failures += body.startswith("<failure")
        errors += body.startswith("<error")
        rows.append(f"{indent}  <testcase classname={quoteattr(classname)} name={quoteattr(xml_text(case))}>"
                    f"{body}</testcase>")
    if error:
        errors += 1
        rows.append(f'{indent}  <testcase classname={quoteattr(classname)} name="run">'
                    f"<error message={quoteattr(xml_text(error[:300]))}/></testcase>")
    props = ""
    if properties:
        props = (f"{indent}  <properties>\n"
                 + "".join(f"{indent}    <property name={quoteattr(k)} value={quoteattr(xml_text(v))}/>\n"
                           for k, v in properties.items()) + f"{indent}  </properties>\n")
    stamp = "" if timestamp is None else f" timestamp={quoteattr(timestamp)}"
    xml = (f"{indent}<testsuite name={quoteattr(name)} tests=\"{len(rows)}\" failures=\"{failures}\" "
           f"errors=\"{errors}\" time=\"{time_s:.3f}\"{stamp}>\n" + props + "\n".join(rows) + f"\n{indent}</testsuite>")
    return xml, len(rows), failures, errors


def write_junit(run: RunDir, test_name: str, merged: Mapping[str, Any], *, time_s: float, error: str = "",
                properties: Mapping[str, str] | None = None) -> None:
    """The run's ``junit.xml``: one testcase per checker of ``merged`` (plus ``run`` with ``error`` if the run
    crashed); ``properties`` (seed, spec, fault summary) become the suite's ``<properties>``."""
    xml, *_ = _suite(test_name, junit_cases(merged), classname=test_name, time_s=time_s, error=error,
                     properties=properties)
    run.junit_xml.write_text(_HEAD + xml + "\n", encoding="utf-8")


def _run_error(summary: RunSummary, doc: Mapping[str, Any] | None) -> str:
    """Why a stored run has a ``run`` error case ("" if it has none): it crashed, or has no results/checkers."""
    if summary.verdict not in ("crashed", "incomplete") and (doc or {}).get("checkers"):
        return ""
    why = str((doc or {}).get("crashed") or f"run {summary.verdict}")
    at = (doc or {}).get("crashed_at")
    return f"{why} (at {at})" if at else why


def junit_for_runs(runs: Sequence[tuple[RunSummary, Mapping[str, Any] | None]]) -> str:
    """One JUnit XML document for many runs (each a summary and its ``results.json``, None if it has none): a
    ``<testsuite>`` per run, a ``<testcase>`` per checker, and a ``run`` case with an error if the run crashed
    or never wrote results."""
    suites, tests, failures, errors = [], 0, 0, 0
    for summary, doc in runs:
        cases = junit_cases(doc) if doc and doc.get("checkers") else {}
        xml, t, f, e = _suite(f"{summary.name} seed={summary.seed}", cases, classname=summary.name,
                              time_s=summary.duration_s or 0.0, error=_run_error(summary, doc),
                              timestamp=summary.ts, indent="  ")
        suites.append(xml)
        tests, failures, errors = tests + t, failures + f, errors + e
    return (_HEAD + f"<testsuites tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\">\n"
            + "\n".join(suites) + "\n</testsuites>\n")


def write_junit_file(path: str | Path, runs: Sequence[tuple[RunSummary, Mapping[str, Any] | None]]) -> None:
    """Write :func:`junit_for_runs` to ``path`` (its directory made if missing)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(junit_for_runs(runs), encoding="utf-8")

