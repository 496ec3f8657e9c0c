"""The ``splitbrain`` command: one console script, subcommands loaded lazily.

Each subcommand lives in the module that owns the concept and exposes two functions:
``configure(parser)`` adds its arguments and ``run(args) -> int`` executes it and returns the
exit code.  The table below is the only place subcommands are listed.

Exit codes (harness convention): 0 valid/ok, 1 invalid, 2 unknown or bad input, 255 crashed.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "controller": ("system_under_test.controller.main", "run a controller node (Raft quorum member)"),
    "broker": ("system_under_test.broker.main", "run a broker node"),
    "admin": ("system_under_test.client.admin_cli", "administer a running cluster (mqadmin-like verbs)"),
    "demo": ("harness.demo", "start a local 3-controller quorum, register brokers, print metadata"),
    "check": ("checker.cli", "check history files for linearizability"),
    "selftest": ("harness.testing.run_counter", "run the harness on a counter service in local network namespaces"),
    "spark": ("spark_analysis.cli", "ingest many results dirs into Parquet, report trends, re-check on Spark"),
    "images": ("harness.images", "build the splitbrain/node docker image offline (debootstrap base if needed)"),
    "test": ("harness.commands.test", "run a test spec against the real cluster (exit 0 valid/1 invalid/2 unknown)"),
    "analyze": ("harness.commands.analyze", "re-run the checkers of a stored run on its history"),
    "repro": ("harness.commands.repro", "rerun a stored run with its exact spec and seed"),
    "test-all": ("harness.commands.test_all", "run several specs; summary table and one JUnit file"),
    "cluster": ("harness.commands.cluster", "cluster up SPEC | down | status | logs NODE (no test)"),
    "serve": ("harness.commands.serve", "web UI over a results directory"),
}


def _load(name: str):  # type: ignore[no-untyped-def]
    module_name, _ = SUBCOMMANDS[name]
    return importlib.import_module(module_name)


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="splitbrain", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    # Only import the module of the subcommand actually used (fast start, fewer import-time failures).
    chosen = next((a for a in argv if a in SUBCOMMANDS), None)
    for name, (_, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text)
        if name == chosen:
            _load(name).configure(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    logging.basicConfig(
        level=getattr(logging, args.log_level), format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return int(_load(args.command).run(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
