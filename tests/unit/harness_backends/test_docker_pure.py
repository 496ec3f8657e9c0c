"""Parts of the docker backend that need no engine: the owner check of cleanup_all, node-name checks."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from harness.control.base import ControlError
from harness.control.docker import DockerRemote, _own_start, _owner_alive
from harness.control.shell import parse_proc_stat


def test_owner_alive_matches_pid_and_start_time() -> None:
    stat = parse_proc_stat(Path(f"/proc/{os.getpid()}/stat").read_text())
    assert stat is not None
    assert _own_start() == str(stat[1])
    assert _owner_alive(f"{os.getpid()}:{stat[1]}")
    assert not _owner_alive(f"{os.getpid()}:{stat[1] + 1}")  # same pid, other process: orphaned run
    assert not _owner_alive("999999999:1")
    assert not _owner_alive("")
    assert not _owner_alive("garbage")


@pytest.mark.parametrize("nodes", [[], ["a", "a"], ["Bad Name"], ["x;rm"], ["-lead"]])
def test_create_rejects_bad_node_lists_before_touching_the_engine(nodes: list[str]) -> None:
    with pytest.raises(ControlError, match="distinct node names"):
        asyncio.run(DockerRemote.create(nodes))
