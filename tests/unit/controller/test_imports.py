"""The controller core stays small and exports its API (its purity: tests/unit/test_layers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

import system_under_test.controller as controller

PKG = Path(controller.__file__).parent
SHELLS = {"server.py", "main.py", "formation.py", "batching.py"}
CORE = sorted(p for p in PKG.glob("*.py") if p.name not in SHELLS)


@pytest.mark.parametrize("path", CORE, ids=lambda p: p.name)
def test_core_module_is_small(path: Path) -> None:
    assert len(path.read_text().splitlines()) < 550


def test_all_names_exist() -> None:
    missing = [n for n in controller.__all__ if not hasattr(controller, n)]
    assert not missing and len(set(controller.__all__)) == len(controller.__all__)
