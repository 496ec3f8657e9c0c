"""The ``splitbrain`` subcommands our cluster's adapter provides: command name -> the module implementing it.

The command line (:mod:`harness.cli`) lists every subcommand with its help text, so ``splitbrain --help`` imports
nothing; a command that belongs to this adapter is listed there as provided by this table
(:data:`harness.cli.SPLITBRAIN`), and the harness finds its module here only when the command is used.  The
modules may be the cluster's own (the node commands) or the adapter's; each has ``configure(parser)`` and
``run(args) -> int``, as :mod:`harness.cli` requires.  This module imports nothing itself, so looking a command
up imports only the module that implements it.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["COMMANDS"]

COMMANDS: Mapping[str, str] = {
    "controller": "system_under_test.controller.main",
    "broker": "system_under_test.broker.main",
    "admin": "systems.splitbrain.admin_command",
    "sim": "systems.splitbrain.sim.command",
    "demo": "systems.splitbrain.demo",
}
"""Each command this adapter provides -> the module that implements it."""
