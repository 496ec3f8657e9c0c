"""The registration core modules import no I/O, clock or randomness; the package's __all__ is real."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import system_under_test.broker.registration as registration

PKG = Path(registration.__file__).parent
PURE = ["state_machine.py", "meta_record.py", "errors.py"]
FORBIDDEN = {"asyncio", "socket", "os", "time", "random"}


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("name", PURE)
def test_pure_modules_import_nothing_forbidden(name: str) -> None:
    bad = imported_roots(PKG / name) & FORBIDDEN
    assert not bad, f"{PKG / name} imports {sorted(bad)}; move that code to a shell module"


def test_pure_modules_do_not_import_shells() -> None:
    for name in PURE:
        tree = ast.parse((PKG / name).read_text())
        modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        shells = {m for m in modules if m.endswith((".meta_files", ".driver"))}
        assert not shells, f"pure module {name} imports shell modules {sorted(shells)}"


def test_all_names_exist() -> None:
    for name in registration.__all__:
        assert hasattr(registration, name), name
    assert len(set(registration.__all__)) == len(registration.__all__)


def test_modules_import() -> None:
    for name in ["driver", "meta_files", "meta_record", "state_machine", "errors"]:
        importlib.import_module(f"system_under_test.broker.registration.{name}")
