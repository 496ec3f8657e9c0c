"""Shared fixtures: the test-only ``cli-probe`` workload, a writer of minimal spec files, and the web UI served
on a free loopback port."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.testing.probe import probe_workload
from harness.web import make_server


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


@pytest.fixture
def serve_results() -> Iterator[Callable[..., tuple[str, int]]]:
    """``serve_results(root, **make_server_kwargs)`` starts the web UI over ``root`` on 127.0.0.1 (a free port)
    and returns its address; every server started is shut down when the test ends."""
    running: list[tuple[Any, threading.Thread]] = []

    def serve(root: Path, **kwargs: Any) -> tuple[str, int]:
        srv = make_server(root, "127.0.0.1", 0, **kwargs)
        t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        t.start()
        running.append((srv, t))
        return "127.0.0.1", int(srv.server_address[1])

    yield serve
    for srv, t in running:
        srv.shutdown()
        srv.server_close()
        t.join(5)
