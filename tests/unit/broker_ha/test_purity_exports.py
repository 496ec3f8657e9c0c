"""The HA package's __all__ is real (purity of its cores: tests/unit/test_layers.py)."""

from __future__ import annotations

import system_under_test.broker.ha as ha


def test_all_names_exist() -> None:
    assert ha.__all__ and len(set(ha.__all__)) == len(ha.__all__)
    for name in ha.__all__:
        assert hasattr(ha, name), name
