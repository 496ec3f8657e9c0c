"""The workloads' public surface (the model's purity: tests/unit/test_layers.py)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("module", ["workloads.queue", "workloads.controller_register", "workloads.models"])
def test_every_exported_name_exists(module: str) -> None:
    mod = importlib.import_module(module)
    missing = [n for n in mod.__all__ if not hasattr(mod, n)]
    assert not missing, f"{module}.__all__ names missing attributes: {missing}"


def test_both_workloads_are_registered() -> None:
    from workloads import registry

    assert {"queue", "controller-register"} <= set(registry.names())
