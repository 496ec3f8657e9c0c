"""Public surfaces: every name in a harness module's __all__ exists; the local backend refuses non-root."""

from __future__ import annotations

import asyncio
import importlib

import pytest

from harness.control import NotPermitted
from harness.control import local as local_backend

MODULES = [
    "harness.protocols", "harness.spec", "harness.generator", "harness.history_writer", "harness.runner",
    "harness.store", "harness.progress", "harness.control", "harness.control.base", "harness.control.local",
    "harness.history_doc", "harness.interpreter", "harness.load", "harness.testing.run_spec",
    "systems.counter", "systems.counter.db", "systems.counter.client", "systems.counter.service", "workloads.counter",
]


@pytest.mark.parametrize("name", MODULES)
def test_all_names_exist(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", [])
    assert exported, f"{name} has no __all__"
    missing = [n for n in exported if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names missing attributes: {missing}"


def test_local_backend_needs_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_backend.os, "geteuid", lambda: 1000)
    with pytest.raises(NotPermitted, match="docker"):
        asyncio.run(local_backend.LocalRemote.create(["n1"]))
