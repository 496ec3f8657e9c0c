"""The results store: one directory per run, plus ``latest`` symlinks.

Layout (see DESIGN.md "Results directory")::

    <root>/<test-name>/<UTC timestamp>/
        test.yaml        the exact spec (resolved seed and defaults)
        history.jsonl    every op, streamed by the history writer
        results.json     checker verdicts merged (false > unknown > true) + run facts
        junit.xml        one testcase per checker, for CI (:mod:`harness.junit`)
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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.protocols import verdict_of

__all__ = ["RunDir", "add_to_results", "create_run_dir", "exit_code", "merge_results", "read_results", "write_results"]

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
    _write_json(run.results_json, doc)
    return doc


def read_results(run_dir: Path) -> dict[str, Any] | None:
    """``results.json`` of ``run_dir``; None when there is none yet (a run still going, or killed before checking)
    or it cannot be used (unreadable, not JSON, not an object).  The one reader of the file in the harness:
    every caller decides what a run without usable results means for it."""
    try:
        doc = json.loads((Path(run_dir) / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def add_to_results(run_dir: Path, key: str, value: Any) -> bool:
    """Set ``key`` in an existing ``results.json`` (e.g. ``perf`` after the plots); False if it has none."""
    doc = read_results(run_dir)
    if doc is None:
        return False
    doc[key] = value
    _write_json(Path(run_dir) / "results.json", doc)
    return True


def _write_json(path: Path, doc: Mapping[str, Any]) -> None:
    """Whole or not at all: a reader never sees half a file."""
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def exit_code(valid: Any, *, crashed: bool = False) -> int:
    """0 valid, 1 invalid, 2 unknown, 255 crashed."""
    if crashed:
        return EXIT_CRASHED
    if valid is True:
        return EXIT_VALID
    if valid is False:
        return EXIT_INVALID
    return EXIT_UNKNOWN
