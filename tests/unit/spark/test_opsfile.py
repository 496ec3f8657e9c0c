"""Executor-side Parquet writing of a run's ops (pyarrow only, no Spark)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from spark_analysis.opsfile import escape_partition_value, write_op_files


@pytest.mark.parametrize(("value", "expected"), [
    ("2026-11-01", "2026-11-01"), ("queue+broker-ids", "queue+broker-ids"), ("a/b", "a%2Fb"), ("k=v", "k%3Dv"),
    ("50%", "50%25"), ("", "__HIVE_DEFAULT_PARTITION__"),
], ids=["date", "plus", "slash", "equals", "percent", "empty"])
def test_escape_partition_value(value: str, expected: str) -> None:
    assert escape_partition_value(value) == expected


def columns(*idxs: int) -> list[list[object]]:
    rows = [("t/1", i, i * 10, "ok", "0", "send", None, None, '{"v":1}', False, None, None, -1, None) for i in idxs]
    return [list(c) for c in zip(*rows)]


def test_rows_land_in_partition_dirs_and_a_retry_replaces_its_file(tmp_path: Path) -> None:
    groups = {("d1", "queue"): columns(0, 1), ("d1", "a/b"): columns(2)}
    for _ in range(2):  # a retried task writes the same file names again
        assert write_op_files(tmp_path, "t/1", "b1", groups) == 3
    files = sorted(p.relative_to(tmp_path).parent.as_posix() for p in tmp_path.rglob("*.parquet"))
    assert files == ["date=d1/workload=a%2Fb", "date=d1/workload=queue"]
    assert not list(tmp_path.rglob(".*tmp"))
    t = pq.read_table(next((tmp_path / "date=d1" / "workload=queue").glob("*.parquet")))
    assert t.column("idx").to_pylist() == [0, 1] and t.column("op_json").to_pylist() == ['{"v":1}'] * 2
