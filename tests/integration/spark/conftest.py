"""One SparkSession (local[2], light options) shared by every Spark test of the session."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("no java on PATH (scripts/setup.sh installs openjdk-17-jre-headless)")
    from spark_analysis.session import get_session

    # Whole-stage code generation pays off on big tables only; the tests' tables are tiny.
    session = get_session("local[2]", shuffle_partitions=2, conf={"spark.sql.codegen.wholeStage": "false"})
    yield session
    session.stop()
