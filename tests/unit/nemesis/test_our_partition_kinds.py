"""Our cluster's partition kinds moved from generic nemesis code (``nemesis/partition.py``,
``nemesis.schedule.PARTITION_AIMS``) into its adapter (the cuts of ``systems/splitbrain/selectors.py``, issue 29):
each groups the same nodes for the same RNG draws as before.

``tests/unit/testdata/partition_aims_before_issue29.json`` holds 400 cases recorded from
:meth:`nemesis.partition.PartitionNemesis.grudge_for` as it was before the move (commit 21f7361): for case ``i``, a
topology (1-3 controllers, 1-3 broker sets of 1-3 replicas), primaries (a leader and each set's master, each known or
not), one of the four role-aimed kinds, and what ``grudge_for`` returned with ``random.Random(i)`` (the grudge, or the
error and its message) and the RNG's next draw after it (so the same number of draws were made).  A replay of an old
run strikes the same kinds with the same RNG, so the same grudges are what keeps it identical.
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.spec import NodesSpec
from nemesis import grudge as gr
from nemesis.partition import PartitionNemesis
from nemesis.schedule import PARTITION_KINDS, partition_aims
from nemesis.targets import RoleUnavailable, SelectorError, Topology
from systems.splitbrain.selectors import SELECTORS

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).resolve().parents[1] / "testdata" / "partition_aims_before_issue29.json").read_text(
        encoding="utf-8"))
OURS = ("isolate-controller-leader", "isolate-master", "isolate-master-from-slaves", "isolate-master-from-controllers")


class _Fixed(PartitionNemesis):
    """The partition nemesis with the primaries of a case instead of a DB's, and no wait for a missing role."""

    def __init__(self, nodes: NodesSpec, rng: random.Random, primaries: list[str]) -> None:
        super().__init__(SimpleNamespace(spec=SimpleNamespace(nodes=nodes)), rng)
        self.role_wait_s = 0.0
        self.fixed = primaries

    async def _primaries(self, test: dict[str, Any]) -> list[str]:
        return list(self.fixed)


def test_the_recording_covers_every_kind_and_both_outcomes() -> None:
    assert len(CASES) == 400
    assert {c["kind"] for c in CASES} == set(OURS)
    assert {c.get("error") for c in CASES} == {None, "RoleUnavailable"}
    assert all(any(c["kind"] == k and "grudge" in c and c["grudge"] for c in CASES) for k in OURS)


@pytest.mark.parametrize("case", CASES, ids=[f"seed{c['seed']}:{c['kind']}" for c in CASES])
def test_our_kinds_group_nodes_as_they_did_before_the_move(case: dict[str, Any]) -> None:
    nodes = NodesSpec(tuple(case["controllers"]), tuple(map(tuple, case["broker_sets"])), selectors=SELECTORS)
    nem = _Fixed(nodes, random.Random(case["seed"]), case["primaries"])
    try:
        got: dict[str, Any] = {"grudge": gr.describe(asyncio.run(nem.grudge_for({}, {"kind": case["kind"]})))}
    except (SelectorError, RoleUnavailable) as exc:
        got = {"error": type(exc).__name__, "message": str(exc)}
    assert got == {k: case[k] for k in ("grudge", "error", "message") if k in case}
    assert nem._rng.random() == case["after"]


def test_generic_code_keeps_only_the_generic_kinds() -> None:
    """The generic table names none of our kinds; a system without our cuts has none of them, ours has all four
    with the aims they had."""
    assert PARTITION_KINDS == ("random-halves", "isolate", "majorities-ring", "bridge", "one-way", "grudge")
    assert tuple(partition_aims(Topology(members=("m1", "m2")))) == PARTITION_KINDS
    assert {k: v for k, v in partition_aims(Topology(selectors=SELECTORS)).items() if k in OURS} == {
        "isolate-controller-leader": "controller-leader", "isolate-master": "masters",
        "isolate-master-from-slaves": "masters", "isolate-master-from-controllers": "masters+controllers"}


def test_a_system_without_our_cuts_refuses_our_kinds_when_they_strike() -> None:
    nem = _Fixed(NodesSpec(("c1", "c2", "c3"), (("b1", "b2"),)), random.Random(0), ["c1", "b1"])
    with pytest.raises(ValueError, match="unknown kind 'isolate-master'"):
        asyncio.run(nem.grudge_for({}, {"kind": "isolate-master"}))
