"""STYLE.md rule 2: the pure Raft modules never import asyncio, socket, os, time or random."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

RAFT = Path(__file__).resolve().parents[3] / "system_under_test" / "raft"
PURE = ["core.py", "log.py", "quorum.py", "progress.py"]
FORBIDDEN = {"asyncio", "socket", "os", "time", "random", "threading", "subprocess", "datetime"}


def _runtime_imports(tree: ast.Module) -> list[str]:
    """Top-level module names imported at run time (imports under ``if TYPE_CHECKING:`` are exempt)."""
    found: list[str] = []

    def visit(node: ast.AST, type_checking: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and isinstance(child.test, ast.Name) and child.test.id == "TYPE_CHECKING":
                for b in child.body:
                    visit(b, True)
                for b in child.orelse:
                    visit(b, type_checking)
                continue
            if not type_checking:
                if isinstance(child, ast.Import):
                    found.extend(a.name.split(".")[0] for a in child.names)
                elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                    found.append(child.module.split(".")[0])
            visit(child, type_checking)

    visit(tree, False)
    return found


@pytest.mark.parametrize("module", PURE)
def test_pure_module_has_no_forbidden_imports(module: str) -> None:
    tree = ast.parse((RAFT / module).read_text(), filename=module)
    bad = sorted(set(_runtime_imports(tree)) & FORBIDDEN)
    assert not bad, f"{module} imports {bad}; move clocks/randomness/I/O to the shell (STYLE.md rule 2)"


def test_scanner_catches_a_forbidden_import() -> None:
    tree = ast.parse("import os\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import random\n"
                     "def f():\n    import time\n")
    assert sorted(set(_runtime_imports(tree)) & FORBIDDEN) == ["os", "time"]
