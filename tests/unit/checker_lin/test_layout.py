"""Public surfaces and the pure-core rule: no clock, randomness, OS or network imports in the checker cores."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FORBIDDEN = {"asyncio", "socket", "os", "time", "random", "subprocess"}
CORES = sorted([*(ROOT / "checker/linearizable").glob("*.py"), *(ROOT / "checker/models").glob("*.py")])


def _runtime_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue  # annotations only
            if isinstance(child, ast.Import):
                names.update(a.name.split(".")[0] for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                names.add(child.module.split(".")[0])
            visit(child)

    visit(tree)
    return names


@pytest.mark.parametrize("path", CORES, ids=[p.relative_to(ROOT).as_posix() for p in CORES])
def test_core_has_no_hidden_io_time_or_randomness(path: Path) -> None:
    assert not (_runtime_imports(path) & FORBIDDEN), f"{path} imports {_runtime_imports(path) & FORBIDDEN}"


@pytest.mark.parametrize("package", ["checker.linearizable", "checker.models", "checker.readers"])
def test_all_names_exist(package: str) -> None:
    mod = importlib.import_module(package)
    assert mod.__all__ and all(hasattr(mod, name) for name in mod.__all__)


def test_cli_module_has_subcommand_interface() -> None:
    cli = importlib.import_module("checker.cli")
    assert callable(cli.configure) and callable(cli.run)
