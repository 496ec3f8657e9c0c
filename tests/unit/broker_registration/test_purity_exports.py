"""The registration package's __all__ is real and its modules import (purity: tests/unit/test_layers.py)."""

from __future__ import annotations

import importlib
from pathlib import Path

import system_under_test.broker.registration as registration

PKG = Path(registration.__file__).parent
def test_all_names_exist() -> None:
    for name in registration.__all__:
        assert hasattr(registration, name), name
    assert len(set(registration.__all__)) == len(registration.__all__)


def test_modules_import() -> None:
    for name in ["driver", "meta_files", "meta_record", "state_machine", "errors"]:
        importlib.import_module(f"system_under_test.broker.registration.{name}")
