"""Our cluster's selector pools moved from nemesis/targets.py into its adapter (systems/splitbrain/selectors.py,
issue 29): every selector resolves, validates and records roles exactly as before the move.

``tests/unit/testdata/selectors_before_issue29.json`` holds 400 cases recorded from ``nemesis/targets.py`` as it was
before the move (commit e45b98c): for seed ``i``, a topology (1-3 controllers, 1-3 broker sets of 1-3 replicas),
primaries (a leader and masters, each known or not) and a union of 1-3 terms over every pool, subset and node name;
what ``resolve`` returned with ``random.Random(i)`` (nodes, or the error and its message), what ``validate`` said,
``needs_roles``, ``pools_of`` and ``roles_of`` of every node.  A replay of an old run resolves the same selectors
with the same RNG, so the same draws are what keeps it identical.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from nemesis.targets import RoleUnavailable, SelectorError, Topology, needs_roles, pools_of, resolve, roles_of, validate
from systems.splitbrain.selectors import SELECTORS

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).resolve().parents[1] / "testdata" / "selectors_before_issue29.json").read_text(encoding="utf-8"))


def _topo(case: dict[str, Any]) -> Topology:
    return Topology(tuple(case["controllers"]), tuple(tuple(s) for s in case["broker_sets"]), selectors=SELECTORS)


def test_the_recording_covers_every_pool_and_both_outcomes() -> None:
    assert len(CASES) == 400
    pools = {p for c in CASES for p in c["pools"]}
    assert pools == {"controllers", "brokers", "broker-set-N", "controller-leader", "controller-followers", "masters",
                     "slaves", "primaries"}
    assert {c.get("error") for c in CASES} == {None, "RoleUnavailable", "SelectorError"}


@pytest.mark.parametrize("case", CASES, ids=[f"seed{c['seed']}:{c['selector']}" for c in CASES])
def test_our_pools_resolve_as_they_did_before_the_move(case: dict[str, Any]) -> None:
    topo, primaries = _topo(case), case["primaries"]
    try:
        got: dict[str, Any] = {"nodes": resolve(case["selector"], topo, primaries, random.Random(case["seed"]))}
    except (SelectorError, RoleUnavailable) as exc:
        got = {"error": type(exc).__name__, "message": str(exc)}
    assert got == {k: case[k] for k in ("nodes", "error", "message") if k in case}
    try:
        validate(case["selector"], topo)
        valid = None
    except SelectorError as exc:
        valid = str(exc)
    if case["validate"] is None or valid is None:
        assert valid == case["validate"]
    else:  # the list of pools in an unknown-word message is the table's, in its new order
        assert valid.split("; pools:")[0] == case["validate"].split("; pools:")[0]
    assert needs_roles(case["selector"], topo) == case["needs_roles"]
    assert list(pools_of(case["selector"], topo.table)) == case["pools"]
    assert list(pools_of(case["selector"])) == case["pools"]  # spelt like pools, without the table
    assert roles_of(list(topo.all), topo, primaries) == case["roles_of"]


def test_a_topology_without_our_selectors_has_none_of_our_pools() -> None:
    """The generic table knows nothing of our cluster: ``masters`` there is no pool, and no node either."""
    bare = Topology(("c1", "c2", "c3"), (("b1-1", "b1-2"),))
    assert "masters" not in bare.table and "controllers" in bare.table
    with pytest.raises(SelectorError, match="unknown node"):
        validate("masters", bare)
    assert roles_of(["c1", "b1-1"], bare, ["c1"]) == {"c1": "controller-leader", "b1-1": "unknown"}
