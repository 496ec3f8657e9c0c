"""The HA cores import no I/O, clock or randomness; the package's __all__ is real."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import system_under_test.broker.ha as ha

PKG = Path(ha.__file__).parent
FORBIDDEN = {"asyncio", "socket", "os", "time", "random"}
MODULES = sorted(p.name for p in PKG.glob("*.py"))


@pytest.mark.parametrize("name", MODULES)
def test_pure(name: str) -> None:
    tree = ast.parse((PKG / name).read_text())
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    assert not roots & FORBIDDEN, f"{name} imports {sorted(roots & FORBIDDEN)}"


def test_all_names_exist() -> None:
    assert MODULES and len(set(ha.__all__)) == len(ha.__all__)
    for name in ha.__all__:
        assert hasattr(ha, name), name
