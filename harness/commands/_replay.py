"""Shared by ``repro`` and ``shrink``: read a stored run back, and rerun it with a given schedule.

:func:`load_run` reads a run directory (``test.yaml``, ``results.json``, ``history.jsonl``) and its
executed schedule; :func:`write_schedule_spec` writes the run's spec with an explicit
``nemesis.schedule`` (a runnable spec: ``splitbrain test FILE``); :func:`rerun` runs such a spec once
and returns its ``results.json``.  Bad input raises :class:`ReplayError` with one line to print.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

import eventloop
from checker.history import HistoryError, read_jsonl
from harness.commands._parts import prepare
from harness.runs import RunNotFound, resolve_run_dir
from harness.spec import SpecError, TestSpec, load_spec, spec_to_dict
from harness.store import read_results
from nemesis.faults import UnknownFault
from nemesis.replay import anomaly_kinds, executed_steps
from nemesis.schedule import Step, to_data

__all__ = ["ReplayError", "StoredRun", "load_run", "rerun", "write_schedule_spec"]


class ReplayError(Exception):
    """A run that cannot be replayed (missing files, a malformed spec or history); the message is one
    line naming the file and what to do."""


@dataclass(frozen=True)
class StoredRun:
    path: Path
    spec: TestSpec
    doc: dict[str, Any]
    steps: tuple[Step, ...]

    @property
    def kinds(self) -> set[str]:
        return anomaly_kinds(self.doc)


def load_run(run: str, results_root: str, *, same_nodes: bool = False) -> StoredRun:
    """Read RUN (a run dir, a test dir or a path under ``results_root``) and its executed schedule."""
    try:
        path = Path(resolve_run_dir(run, results_root))
    except RunNotFound as exc:
        raise ReplayError(str(exc)) from None
    try:
        spec = load_spec(path / "test.yaml")
    except SpecError as exc:
        raise ReplayError(f"the stored spec is not usable: {exc}") from None
    except OSError as exc:
        raise ReplayError(f"{path / 'test.yaml'}: cannot read the run's spec ({exc.strerror})") from None
    doc = read_results(path)
    if doc is None:
        raise ReplayError(f"{path / 'results.json'}: missing, unreadable or not a JSON object; run "
                          f"`splitbrain analyze {path}` first")
    try:
        history = [op.to_dict() for op in read_jsonl(path / "history.jsonl")]
    except (OSError, HistoryError, ValueError) as exc:
        raise ReplayError(f"{path / 'history.jsonl'}: cannot read the run's history ({exc})") from None
    start, end = doc.get("main_phase_start_ns"), doc.get("main_phase_end_ns")
    try:
        steps = executed_steps(history, main_start_ns=int(start) if isinstance(start, int) else None,
                               time_limit_s=spec.time_limit_s, same_nodes=same_nodes,
                               main_end_ns=int(end) if isinstance(end, int) else None)
    except UnknownFault as exc:  # a step left out would make the replay a different run
        raise ReplayError(f"{path / 'history.jsonl'}: {exc}") from None
    return StoredRun(path, spec, doc, steps)


def write_schedule_spec(spec: TestSpec, steps: Sequence[Step], path: Path, *, comment: str) -> Path:
    """Write ``spec`` with ``nemesis.schedule = steps`` (and one run) as a YAML file at ``path``."""
    d = spec_to_dict(spec)
    d["test_count"] = 1
    d["nemesis"]["schedule"] = to_data(steps)
    header = "".join(f"# {line}\n" for line in comment.splitlines())
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(header + yaml.safe_dump(d, sort_keys=False, width=120), encoding="utf-8")
    tmp.replace(path)
    return path


def rerun(spec_path: Path, *, seed: int, results_root: str, quiet: bool, nodes_file: str | None) -> dict[str, Any]:
    """Run the spec at ``spec_path`` once with ``seed``; its ``results.json`` (plus ``exit_code`` and
    ``run_dir``).  Raises SpecError / BackendUnavailable as ``splitbrain test`` does."""
    from harness.commands.test import execute

    # the stored run already ran this topology: a weak quorum it was allowed is allowed again
    prepared = prepare(str(spec_path), {"seed": seed, "test_count": 1}, allow_weak_quorum=True)
    code, outcomes = eventloop.run(execute(prepared, results_root=results_root, quiet=quiet, nodes_file=nodes_file))
    doc: dict[str, Any] = dict(outcomes[-1].results) if outcomes else {"valid": "unknown"}
    doc["exit_code"] = code
    doc["run_dir"] = str(outcomes[-1].run_dir.path) if outcomes else ""
    return doc
