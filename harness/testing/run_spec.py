"""Run a spec built in code through the path ``splitbrain test`` takes: the one helper of the smoke-test scripts.

``splitbrain selftest`` (:mod:`harness.testing.run_counter`) and ``python -m systems.etcd.run`` each build a small
spec from their flags; :func:`run_spec` validates it as ``splitbrain test`` validates a file
(:func:`harness.commands._parts.validate_spec`: the system's capabilities, workloads, nemesis packages) and runs it
with :func:`harness.commands.test.execute`: a fresh backend per run, the parts from the workload registry and the
nemesis packages, :func:`harness.runner.run_test`, plots and timeline, and the repro hint for a run that did not
pass.  So a smoke test exercises what a user's spec does, not a setup of its own.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping
from typing import Any

from harness.commands._backend import BackendUnavailable
from harness.commands._parts import Prepared, check_results_root, validate_spec
from harness.commands.test import execute
from harness.spec import SpecError, spec_from_dict

__all__ = ["run_spec"]


def run_spec(raw: Mapping[str, Any], *, source: str, results: str, quiet: bool, prog: str) -> int:
    """Validate the spec ``raw`` (as read from a file called ``source``) and run it; the exit code of
    ``splitbrain test`` (0 valid, 1 invalid, 2 unknown or refused, 255 crashed).

    A spec the system cannot serve, an unusable results directory or a backend that cannot be created here is one
    line on stderr starting with ``prog`` and exit 2, before anything starts."""
    try:
        spec = spec_from_dict(dict(raw), file=source)
        options = validate_spec(spec)
    except SpecError as exc:
        print(f"{prog}: invalid spec: {exc}", file=sys.stderr)
        return 2
    problem = check_results_root("--results", results)
    if problem:
        print(f"{prog}: {problem}", file=sys.stderr)
        return 2
    try:
        code, _ = asyncio.run(execute(Prepared(spec, options), results_root=results, quiet=quiet))
    except BackendUnavailable as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    return code
