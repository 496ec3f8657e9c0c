"""The results store: one directory per run, plus ``latest`` symlinks.

Layout (see DESIGN.md "Results directory")::

    <root>/<test-name>/<UTC timestamp>/
        test.yaml        the exact spec (resolved seed and defaults)
        history.jsonl    every op, streamed by the history writer
        results.json     checker verdicts merged (false > unknown > true) + run facts
        junit.xml        one testcase per checker, for CI
        nodes/<node>/    logs collected from each node
    <root>/latest -> <test-name>/<ts>        <root>/<test-name>/latest -> <ts>

Exit codes: 0 valid, 1 invalid, 2 unknown, 255 crashed (:func:`exit_code`).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import importlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from harness.explain import anomaly_lines, checker_verdicts, failure_message
from harness.protocols import verdict_of

__all__ = ["RunDir", "create_run_dir", "exit_code", "merge_results", "write_junit", "write_results"]

EXIT_VALID, EXIT_INVALID, EXIT_UNKNOWN, EXIT_CRASHED = 0, 1, 2, 255


@dataclass(frozen=True)
class RunDir:
    root: Path
    name: str
    path: Path

    @property
    def history(self) -> Path:
        return self.path / "history.jsonl"

    @property
    def test_yaml(self) -> Path:
        return self.path / "test.yaml"

    @property
    def results_json(self) -> Path:
        return self.path / "results.json"

    @property
    def junit_xml(self) -> Path:
        return self.path / "junit.xml"

    def node_dir(self, node: str) -> Path:
        d = self.path / "nodes" / node
        d.mkdir(parents=True, exist_ok=True)
        return d


def _timestamp(now: _dt.datetime) -> str:
    return now.astimezone(_dt.UTC).strftime("%Y%m%dT%H%M%S.%f")[:-3] + "Z"


def _relink(link: Path, target: str) -> None:
    tmp = link.with_name(f".{link.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    tmp.symlink_to(target)
    os.replace(tmp, link)


def create_run_dir(root: str | Path, name: str, *, now: _dt.datetime | None = None) -> RunDir:
    """Create ``<root>/<name>/<UTC ts>/`` (unique even for runs in the same millisecond) and point
    ``<root>/latest`` and ``<root>/<name>/latest`` at it."""
    root = Path(root)
    ts = _timestamp(now or _dt.datetime.now(_dt.UTC))
    (root / name).mkdir(parents=True, exist_ok=True)
    for n in range(1000):
        candidate = root / name / (ts if n == 0 else f"{ts}-{n}")
        try:
            candidate.mkdir()
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(f"{root / name}: 1000 runs with timestamp {ts}")
    _relink(root / name / "latest", candidate.name)
    _relink(root / "latest", f"{name}/{candidate.name}")
    return RunDir(root, name, candidate)


def _fallback_merge(results: Mapping[str, Any]) -> dict[str, Any]:
    verdicts = [verdict_of(r) for r in results.values()]
    valid: bool | str = False if False in verdicts else ("unknown" if "unknown" in verdicts else True)
    return {"valid": valid, "checkers": {k: _jsonable(v) for k, v in results.items()}}


def _jsonable(x: Any) -> Any:
    if hasattr(x, "to_dict"):
        return x.to_dict()
    if hasattr(x, "__dataclass_fields__"):
        from dataclasses import asdict

        return asdict(x)
    return x


def _as_compose_result(compose: Any, x: Any) -> Any:
    """A ``checker.compose.Result`` for whatever a checker returned (Result, or a dict with ``valid``)."""
    if isinstance(x, compose.Result):
        return x
    if isinstance(x, Mapping):
        stats = {k: v for k, v in x.items() if k not in ("valid", "error")}
        err = x.get("error")
        return compose.Result(valid=verdict_of(x), stats=stats, error=None if err is None else str(err))
    return compose.Result(valid="unknown", error=f"checker returned {type(x).__name__}, expected a Result or dict")


def merge_results(results: Mapping[str, Any]) -> dict[str, Any]:
    """Merge named checker results into the ``results.json`` object.

    Uses ``checker.compose.results_to_json`` (the one definition of the results shape) when that
    module is present; otherwise merges here with the same rule (False over "unknown" over True).
    """
    try:
        compose = importlib.import_module("checker.compose")
    except ImportError:
        return _fallback_merge(results)
    converted = {name: _as_compose_result(compose, r) for name, r in results.items()}
    return dict(compose.results_to_json(converted))


def write_results(run: RunDir, merged: Mapping[str, Any], **facts: Any) -> dict[str, Any]:
    """Write ``results.json`` (the merged verdict plus run facts such as seed, counts, interrupted)."""
    doc = {**merged, **facts}
    tmp = run.results_json.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, run.results_json)
    return doc


_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


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


def write_junit(run: RunDir, test_name: str, merged: Mapping[str, Any], *, time_s: float, error: str = "",
                properties: Mapping[str, str] | None = None) -> None:
    """A JUnit XML file with one testcase per checker (failure if invalid, error if unknown); ``properties``
    (seed, spec, fault summary) become the suite's ``<properties>``."""
    cases, failures, errors = [], 0, 0
    for name, body in junit_cases(merged).items():
        failures += body.startswith("<failure")
        errors += body.startswith("<error")
        cases.append(f'  <testcase classname={quoteattr(test_name)} name={quoteattr(xml_text(name))}>{body}</testcase>')
    if error:
        errors += 1
        cases.append(f'  <testcase classname={quoteattr(test_name)} name="run">'
                     f"<error message={quoteattr(xml_text(error[:300]))}/></testcase>")
    props = ""
    if properties:
        props = ("  <properties>\n" + "".join(f"    <property name={quoteattr(k)} value={quoteattr(xml_text(v))}/>\n"
                                           for k, v in properties.items()) + "  </properties>\n")
    xml = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<testsuite name={quoteattr(test_name)} tests=\"{len(cases)}\" failures=\"{failures}\" "
        f"errors=\"{errors}\" time=\"{time_s:.3f}\">\n" + props + "\n".join(cases) + "\n</testsuite>\n"
    )
    run.junit_xml.write_text(xml, encoding="utf-8")


def exit_code(valid: Any, *, crashed: bool = False) -> int:
    """0 valid, 1 invalid, 2 unknown, 255 crashed."""
    if crashed:
        return EXIT_CRASHED
    if valid is True:
        return EXIT_VALID
    if valid is False:
        return EXIT_INVALID
    return EXIT_UNKNOWN
