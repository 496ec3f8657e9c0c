"""Fixtures for the docker/ssh end-to-end tests: the node image (built once if absent, reused after)."""

from __future__ import annotations

import time

import pytest

from harness.images import ImageError, docker_client, ensure_images


@pytest.fixture(scope="session")
def node_image() -> str:
    """The splitbrain/node image tag; builds it (and the base) if the engine lacks them.  Skips only
    when no docker engine is reachable -- a failing build is a test failure."""
    try:
        docker_client()
    except ImageError as exc:
        pytest.skip(f"docker engine unreachable: {exc}")
    t0 = time.monotonic()
    report = ensure_images()
    print(f"[e2e] {report.describe()} (fixture {time.monotonic() - t0:.1f} s)")
    return report.node_image
