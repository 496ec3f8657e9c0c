"""Subcommands an adapter provides (harness.cli.Provided): the harness names no module of the system, every
provided command resolves through its adapter's table, and ``--help`` imports no adapter."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from harness import cli

ROOT = Path(__file__).resolve().parents[3]
PROVIDED = sorted(name for name, (where, _) in cli.SUBCOMMANDS.items() if isinstance(where, cli.Provided))


def test_the_command_table_names_no_module_of_the_system_under_test() -> None:
    direct = {name: where for name, (where, _) in cli.SUBCOMMANDS.items() if isinstance(where, str)}
    assert not {n: m for n, m in direct.items() if m.split(".")[0] == "system_under_test"}
    assert {"controller", "broker", "admin", "sim"} <= set(PROVIDED)


@pytest.mark.parametrize("name", PROVIDED)
def test_a_provided_command_resolves_to_a_module_with_configure_and_run(name: str) -> None:
    module = importlib.import_module(cli.command_module(name))
    assert callable(module.configure) and callable(module.run)


def test_every_command_an_adapter_table_offers_is_listed() -> None:
    """A command in an adapter's table but not in the CLI's would never be reachable."""
    tables = {where.table for where, _ in cli.SUBCOMMANDS.values() if isinstance(where, cli.Provided)}
    for table in sorted(tables):
        offered = set(importlib.import_module(table).COMMANDS)
        listed = {n for n, (where, _) in cli.SUBCOMMANDS.items() if where == cli.Provided(table)}
        assert offered == listed, table


def test_a_command_missing_from_its_adapter_table_is_a_lookup_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(cli.SUBCOMMANDS, "no-such-command", (cli.SPLITBRAIN, "x"))
    with pytest.raises(LookupError, match="no-such-command"):
        cli.command_module("no-such-command")


def test_help_imports_no_adapter_and_nothing_of_the_system() -> None:
    code = ("import contextlib, io, sys; from harness import cli\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.suppress(SystemExit):\n"
            "    cli.main(['--help'])\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('systems', 'system_under_test')))\n"
            "print('sim' in out.getvalue() and 'controller' in out.getvalue())")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.stdout.splitlines() == ["[]", "True"], proc.stderr
