"""Target selectors: which nodes a fault hits, resolved at the moment of injection.

A selector is a string:

* ``one`` / ``minority`` / ``minority-third`` / ``majority`` / ``all`` -- random subsets of the
  candidate nodes (``minority-third``: at most a third, at least one);
* ``controllers`` / ``brokers`` -- every node of that role;
* ``primaries`` -- the controller leader and every broker master (asked from the cluster now);
* ``controller-leader`` / ``masters`` -- one of those kinds of primary;
* ``controllers:SEL`` / ``brokers:SEL`` -- SEL applied to one role's nodes (``controllers:minority``);
* ``broker-set-N:SEL`` -- SEL applied to the replicas of broker set N;
* a node name, or a comma list of node names.

:func:`resolve` is pure: it takes the topology, the current primaries and a seeded RNG, and
raises ``ValueError`` naming the selector when it cannot be satisfied.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import random
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Topology:
    controllers: tuple[str, ...]
    broker_sets: tuple[tuple[str, ...], ...]

    @property
    def brokers(self) -> tuple[str, ...]:
        return tuple(n for s in self.broker_sets for n in s)

    @property
    def all(self) -> tuple[str, ...]:
        return self.controllers + self.brokers


SIMPLE = ("one", "minority", "minority-third", "majority", "all")
KINDS = SIMPLE + ("primaries", "controller-leader", "masters")


def _subset(kind: str, nodes: Sequence[str], rng: random.Random) -> list[str]:
    nodes = list(nodes)
    if not nodes:
        return []
    if kind == "all":
        return nodes
    n = {"one": 1, "minority": max(1, (len(nodes) - 1) // 2), "minority-third": max(1, (len(nodes) - 1) // 3),
         "majority": len(nodes) // 2 + 1}[kind]
    return sorted(rng.sample(nodes, n))


def resolve(selector: str, topo: Topology, primaries: Sequence[str], rng: random.Random) -> list[str]:
    """Nodes hit by ``selector`` now.

    Args:
        selector: see the module docstring.
        topo: node names per role.
        primaries: controller leader first (if known), then broker masters (as returned by the DB).
        rng: the nemesis's seeded RNG.
    Raises:
        ValueError: unknown selector, unknown node, or an empty result for a primary selector.
    """
    sel = selector.strip()
    if sel in ("controllers", "brokers"):  # a whole role, as the spec's short forms
        sel = f"{sel}:all"
    if ":" in sel:
        scope, inner = sel.split(":", 1)
        if scope == "controllers":
            pool: Sequence[str] = topo.controllers
        elif scope == "brokers":
            pool = topo.brokers
        elif scope.startswith("broker-set-") and scope[len("broker-set-"):].isdigit():
            i = int(scope[len("broker-set-"):])
            if i >= len(topo.broker_sets):
                raise ValueError(f"target {selector!r}: there are only {len(topo.broker_sets)} broker sets")
            pool = topo.broker_sets[i]
        else:
            raise ValueError(f"target {selector!r}: scope must be controllers, brokers or broker-set-N")
        if inner not in SIMPLE:
            raise ValueError(f"target {selector!r}: after the scope use one of {SIMPLE}")
        return _subset(inner, pool, rng)
    if sel in SIMPLE:
        return _subset(sel, topo.all, rng)
    if sel in ("primaries", "controller-leader", "masters"):
        leaders = [p for p in primaries if p in topo.controllers]
        masters = [p for p in primaries if p in topo.brokers]
        chosen = {"primaries": leaders + masters, "controller-leader": leaders[:1], "masters": masters}[sel]
        if not chosen:
            raise ValueError(f"target {selector!r}: no such primary right now (primaries: {list(primaries)})")
        return chosen
    names = [n.strip() for n in sel.split(",") if n.strip()]
    unknown = [n for n in names if n not in topo.all]
    if not names or unknown:
        raise ValueError(f"target {selector!r}: unknown node(s) {unknown or [sel]}; selectors: {KINDS}, "
                         "controllers:SEL, brokers:SEL, broker-set-N:SEL or node names")
    return names


def validate(selector: str, topo: Topology, rng: random.Random) -> None:
    """Check a selector's syntax before the test starts (primaries resolve later)."""
    resolve(selector, topo, list(topo.controllers[:1]) + [s[0] for s in topo.broker_sets if s], rng)
