"""The ``splitbrain`` command: one console script, subcommands loaded lazily.

Each subcommand lives in the module that owns the concept and exposes two functions:
``configure(parser)`` adds its arguments and ``run(args) -> int`` executes it and returns the
exit code.  The table below is the only place subcommands are listed.  A command that belongs to a
system's adapter (our cluster's node commands, its admin verbs, its simulator) is listed as
:class:`Provided` by that adapter's command table: the harness names no module of the system, and the
adapter's table is read only when one of its commands is used (:func:`command_module`), so ``--help``
imports no adapter.

Exit codes (harness convention): 0 valid/ok, 1 invalid, 2 unknown or bad input, 255 crashed.

Bad input never ends in a traceback: a bad flag is one line naming the flag (:class:`OneLineParser`), an
invalid spec that a command did not catch itself is one line naming the file and key (exit 2), and any other
exception is one line saying the harness crashed (exit 255; ``--log-level DEBUG`` shows the traceback).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import NoReturn


@dataclass(frozen=True)
class Provided:
    """A subcommand a system's adapter provides: ``table`` is the module of the adapter's ``COMMANDS`` map
    (command name -> the module implementing it), imported only when one of its commands is used."""

    table: str


SPLITBRAIN = Provided("systems.splitbrain.commands")
"""Our own cluster's adapter's commands (:data:`systems.splitbrain.commands.COMMANDS`)."""

SUBCOMMANDS: dict[str, tuple[str | Provided, str]] = {
    "controller": (SPLITBRAIN, "run a controller node (Raft quorum member)"),
    "broker": (SPLITBRAIN, "run a broker node"),
    "admin": (SPLITBRAIN, "administer a running cluster (mqadmin-like verbs)"),
    "demo": (SPLITBRAIN, "start a local 3-controller quorum, register brokers, print metadata"),
    "check": ("checker.cli", "check history files for linearizability"),
    "selftest": ("harness.testing.run_counter", "run the harness on a counter service in local network namespaces"),
    "spark": ("spark_analysis.cli", "ingest many results dirs into Parquet, report trends, re-check on Spark"),
    "images": ("harness.images", "build the splitbrain/node docker image offline (debootstrap base if needed)"),
    "test": ("harness.commands.test", "run a test spec against the real cluster (exit 0 valid/1 invalid/2 unknown)"),
    "analyze": ("harness.commands.analyze", "re-run the checkers of a stored run on its history"),
    "repro": ("harness.commands.repro", "rerun a stored run with its spec, seed and executed fault schedule"),
    "shrink": ("harness.commands.shrink", "cut a failing run's fault schedule down to the faults that matter"),
    "test-all": ("harness.commands.test_all", "run several specs; summary table and one JUnit file"),
    "gate": ("harness.commands.gate", "release gate: run two revisions of the cluster side by side until it can "
                                      "decide (exit 0 pass/1 regression/2 undecided)"),
    "cluster": ("harness.commands.cluster", "cluster up SPEC | down | status | logs NODE (no test)"),
    "serve": ("harness.commands.serve", "web UI over a results directory"),
    "sim": (SPLITBRAIN, "the whole cluster in a seeded simulation, judged like a real run"),
}
"""Every subcommand, in the order ``--help`` lists them: the module implementing it (or the adapter providing it)
and its help line."""


class BadFlag(Exception):
    """A command-line flag or argument argparse refused (one line, exit 2)."""


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line naming the flag and pointing at ``--help``.

    argparse prints the whole usage block and exits; inside :func:`main` the error is raised as
    :class:`BadFlag` instead, so callers (and tests) get exit code 2 and a single line.
    """

    def error(self, message: str) -> NoReturn:
        raise BadFlag(f"{self.prog}: {message} (see `{self.prog} --help`)")


def port_number(text: str) -> int:
    """argparse type of a TCP port flag: an integer 0..65535 (0 = any free port)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0..65535)") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is outside 0..65535 (0 picks a free port)")
    return value


def command_module(name: str) -> str:
    """The module implementing subcommand ``name``: the table's, or the one its adapter's ``COMMANDS`` names.

    Raises:
        LookupError: the adapter's table does not have the command (a mistake in this table or the adapter's;
            the unit tests check both agree).
    """
    where, _ = SUBCOMMANDS[name]
    if isinstance(where, str):
        return where
    table: Mapping[str, str] = importlib.import_module(where.table).COMMANDS
    if name not in table:
        raise LookupError(f"{where.table}.COMMANDS has no {name!r} command (it has {', '.join(table)})")
    return table[name]


def _load(name: str) -> ModuleType:
    return importlib.import_module(command_module(name))


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    parser = OneLineParser(prog="splitbrain", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    # Only import the module of the subcommand actually used (fast start, fewer import-time failures).
    chosen = next((a for a in argv if a in SUBCOMMANDS), None)
    for name, (_, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text)
        if name == chosen:
            _load(name).configure(p)
    return parser


def _is_spec_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a :class:`harness.spec.SpecError`, without importing the spec module (and YAML) into
    commands that never read a spec (``check`` starts in a fraction of the time): a SpecError can only have
    been raised if its module was loaded."""
    spec = sys.modules.get("harness.spec")
    return spec is not None and isinstance(exc, spec.SpecError)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except BadFlag as exc:
        print(exc, file=sys.stderr)
        return 2
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
    except BadFlag as exc:  # a command that validates its flags after parsing (``parser.error``)
        print(exc, file=sys.stderr)
        return 2
    except Exception as exc:
        if _is_spec_error(exc):  # a command that did not catch it itself: still bad input, still one line
            print(f"splitbrain {args.command}: invalid input: {' '.join(str(exc).split())}", file=sys.stderr)
            return 2
        # the harness's own failure, never bad input: one line, exit 255
        logging.getLogger("splitbrain").debug("splitbrain %s crashed", args.command, exc_info=True)
        print(f"splitbrain {args.command}: crashed: {exc.__class__.__name__}: {exc} "
              "(run with --log-level DEBUG for the traceback)", file=sys.stderr)
        return 255


if __name__ == "__main__":
    sys.exit(main())
