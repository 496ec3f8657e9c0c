"""The workloads' public surface and the purity of the model (a pure core: no I/O, clock or randomness)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FORBIDDEN = {"asyncio", "socket", "os", "time", "random", "subprocess"}


@pytest.mark.parametrize("module", ["workloads.queue", "workloads.controller_register", "workloads.models"])
def test_every_exported_name_exists(module: str) -> None:
    mod = importlib.import_module(module)
    missing = [n for n in mod.__all__ if not hasattr(mod, n)]
    assert not missing, f"{module}.__all__ names missing attributes: {missing}"


def test_the_model_imports_nothing_impure() -> None:
    tree = ast.parse((ROOT / "workloads" / "models.py").read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & FORBIDDEN, f"workloads/models.py imports {sorted(imported & FORBIDDEN)}"


def test_both_workloads_are_registered() -> None:
    from workloads import registry

    assert {"queue", "controller-register"} <= set(registry.names())
