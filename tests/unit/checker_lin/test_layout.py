"""Public surfaces of the checker packages (the pure-core rule for them: tests/unit/test_layers.py)."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("package", ["checker.linearizable", "checker.models", "checker.readers"])
def test_all_names_exist(package: str) -> None:
    mod = importlib.import_module(package)
    assert mod.__all__ and all(hasattr(mod, name) for name in mod.__all__)


def test_cli_module_has_subcommand_interface() -> None:
    cli = importlib.import_module("checker.cli")
    assert callable(cli.configure) and callable(cli.run)
