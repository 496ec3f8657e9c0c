"""The public surface of spark_analysis (the purity of its cores: tests/unit/test_layers.py)."""

from __future__ import annotations

import pytest

import spark_analysis


@pytest.mark.parametrize("name", spark_analysis.__all__)
def test_every_exported_name_exists(name: str) -> None:
    assert getattr(spark_analysis, name) is not None


def test_unknown_attribute_names_the_module() -> None:
    with pytest.raises(AttributeError, match="spark_analysis"):
        _ = spark_analysis.no_such_name  # type: ignore[attr-defined]
