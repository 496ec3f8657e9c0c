"""The harness's user-facing subcommands: one module per command, each with ``configure(parser)`` and
``run(args) -> int`` (registered in :data:`harness.cli.SUBCOMMANDS`).

* ``test``      -- validate a spec, bring the cluster up on its backend, run the workloads and nemeses, check.
* ``analyze``   -- re-run the checkers of a stored run on its ``history.jsonl`` and rewrite ``results.json``.
* ``repro``     -- rerun a stored run with its exact spec and seed (same generator and fault schedule).
* ``test-all``  -- a matrix of specs with one summary table and one JUnit file (``--jobs N``: N at once).
* ``cluster``   -- ``up SPEC`` / ``down [NAME] [--all-orphans]`` / ``status`` / ``logs NODE`` of a cluster left
  running without a test (owned by its record: :mod:`harness.control.owner`).
* ``serve``     -- the web UI over a results directory (:mod:`harness.web`).
* ``admin``     -- the cluster's admin verbs aimed at a recorded cluster (``--cluster NAME``).

Shared machinery lives in the ``_``-prefixed modules: :mod:`._parts` (workloads -> TestParts, the composite
client), :mod:`._runs` (the terminal table of many runs), :mod:`._backend` (creating the control backend lazily).
Stored runs (finding, summarising) are :mod:`harness.runs`, JUnit is :mod:`harness.junit`; the web UI
(:mod:`harness.web`) reads runs through those and never imports a command.  Exit codes everywhere: 0 valid,
1 invalid, 2 unknown or bad input, 255 crashed.
"""

from harness.commands._parts import CompositeClient, build_workloads, namespaced_checkers, validate_spec

__all__ = ["CompositeClient", "build_workloads", "namespaced_checkers", "validate_spec"]
