"""Shared fixtures: the test-only ``cli-probe`` workload and a writer of minimal spec files."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.testing.probe import probe_workload


@pytest.fixture(autouse=True)
def _probe_workload() -> Iterator[None]:
    with probe_workload():
        yield


@pytest.fixture
def write_spec(tmp_path: Path) -> Callable[..., Path]:
    def write(name: str = "probe", **fields: Any) -> Path:
        doc: dict[str, Any] = {
            "name": name, "backend": "local", "nodes": {"controllers": 3, "broker_sets": {"count": 0}},
            "workloads": ["cli-probe"], "nemesis": {"packages": ["partition", "kill"], "interval_s": 2,
                                                    "targets": ["one"]},
            "time_limit_s": 5, "seed": 42,
        }
        doc.update(fields)
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(doc), encoding="utf-8")
        return path

    return write
