"""The pure nemesis modules (selectors, schedules, replay, ddmin) import no asyncio/socket/os/time/random
(STYLE rule 2: they take roles, times and RNGs as arguments) and export what they name."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PURE = ("nemesis.targets", "nemesis.schedule", "nemesis.replay", "nemesis.shrink")
FORBIDDEN = {"asyncio", "socket", "os", "time", "random", "threading", "subprocess"}


@pytest.mark.parametrize("name", PURE)
def test_pure_module_has_no_io_imports(name: str) -> None:
    module = importlib.import_module(name)
    tree = ast.parse(Path(str(module.__file__)).read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module.split(".")[0])
    assert not found & FORBIDDEN, f"{name} imports {sorted(found & FORBIDDEN)}"


@pytest.mark.parametrize("name", (*PURE, "nemesis.accounting", "nemesis.packages"))
def test_exports_exist(name: str) -> None:
    module = importlib.import_module(name)
    assert all(hasattr(module, n) for n in module.__all__) and len(set(module.__all__)) == len(module.__all__)
