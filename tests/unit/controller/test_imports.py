"""The controller core imports no asyncio/socket/os/time/random (STYLE rule 2) and exports its API."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import system_under_test.controller as controller

PKG = Path(controller.__file__).parent
SHELLS = {"server.py", "main.py", "formation.py", "batching.py"}
FORBIDDEN = {"asyncio", "socket", "os", "time", "random", "threading", "subprocess"}
CORE = sorted(p for p in PKG.glob("*.py") if p.name not in SHELLS)


@pytest.mark.parametrize("path", CORE, ids=lambda p: p.name)
def test_core_module_has_no_io_imports(path: Path) -> None:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module.split(".")[0])
            if node.module.startswith("system_under_test.controller."):
                assert node.module.rsplit(".", 1)[1] + ".py" not in SHELLS, f"{path.name} imports a shell"
    assert not found & FORBIDDEN, f"{path.name} imports {sorted(found & FORBIDDEN)}"


@pytest.mark.parametrize("path", CORE, ids=lambda p: p.name)
def test_core_module_is_small(path: Path) -> None:
    assert len(path.read_text().splitlines()) < 550


def test_all_names_exist() -> None:
    missing = [n for n in controller.__all__ if not hasattr(controller, n)]
    assert not missing and len(set(controller.__all__)) == len(controller.__all__)
