"""The public surface of spark_analysis, and the purity of its cores."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import spark_analysis

PURE = ("faults.py", "regression.py", "runfiles.py", "wilson.py")
FORBIDDEN = {"asyncio", "socket", "os", "time", "random", "pyspark"}


@pytest.mark.parametrize("name", spark_analysis.__all__)
def test_every_exported_name_exists(name: str) -> None:
    assert getattr(spark_analysis, name) is not None


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_import_no_io_time_randomness_or_spark(module: str) -> None:
    """Module-level imports only: wilson_columns builds Spark expressions and imports pyspark when called."""
    tree = ast.parse((Path(spark_analysis.__file__).parent / module).read_text())
    imported = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & FORBIDDEN, imported & FORBIDDEN


def test_unknown_attribute_names_the_module() -> None:
    with pytest.raises(AttributeError, match="spark_analysis"):
        _ = spark_analysis.no_such_name  # type: ignore[attr-defined]
