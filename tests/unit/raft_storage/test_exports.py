"""The raft package's public surface: every exported name exists, errors form the documented tree,
and the node's failpoints are declared."""

from __future__ import annotations

import system_under_test.raft as raft
from system_under_test import failpoints


def test_every_exported_name_exists() -> None:
    missing = [name for name in raft.__all__ if not hasattr(raft, name)]
    assert not missing
    assert len(set(raft.__all__)) == len(raft.__all__)


def test_error_tree() -> None:
    for err in (raft.ProposalDropped, raft.RaftTimeout, raft.StorageCorruption):
        assert issubclass(err, raft.RaftError)
    assert not issubclass(raft.RaftTimeout, raft.ProposalDropped)  # unknown outcome is not a definite failure


def test_node_failpoints_are_declared() -> None:
    names = {p["name"] for p in failpoints.list_points()}
    assert {"raft.before_persist", "raft.after_persist", "raft.before_apply"} <= names
