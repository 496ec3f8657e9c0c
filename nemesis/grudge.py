"""Grudges: who drops packets from whom.  Pure functions of node lists and a seeded RNG.

A *grudge* maps each node to the set of nodes whose packets it drops (Jepsen's term).  A
symmetric partition {A | B} is ``{a: B for a in A} | {b: A for b in B}``; a one-way drop ``x -> y``
is ``{y: {x}}`` (y drops what x sends; y's replies still reach x).  The partition nemesis turns a
grudge into iptables rules on the nodes; these builders only compute it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import random
from collections.abc import Iterable, Mapping, Sequence

Grudge = dict[str, frozenset[str]]


def complete_grudge(components: Sequence[Iterable[str]]) -> Grudge:
    """Every node drops packets from every node outside its own component."""
    comps = [frozenset(c) for c in components]
    everyone = frozenset().union(*comps) if comps else frozenset()
    grudge: Grudge = {}
    for comp in comps:
        for node in comp:
            grudge[node] = everyone - comp
    return {k: v for k, v in grudge.items() if v}


def random_halves(nodes: Sequence[str], rng: random.Random) -> Grudge:
    """Split into a random minority and majority."""
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    cut = len(shuffled) // 2
    return complete_grudge([shuffled[:cut], shuffled[cut:]])


def isolate(targets: Iterable[str], nodes: Sequence[str]) -> Grudge:
    """``targets`` on one side, everybody else on the other."""
    t = frozenset(targets)
    return complete_grudge([t, [n for n in nodes if n not in t]])


def isolate_from(target: str, others: Iterable[str]) -> Grudge:
    """Cut ``target`` off from ``others`` only (e.g. a master from its slaves); the rest is untouched."""
    o = frozenset(others) - {target}
    grudge: Grudge = {target: o} if o else {}
    for n in o:
        grudge[n] = frozenset({target})
    return grudge


def one_way(src: Iterable[str], dst: Iterable[str]) -> Grudge:
    """Packets from ``src`` to ``dst`` are dropped; the other direction still flows."""
    s = frozenset(src)
    return {d: s - {d} for d in dst if s - {d}}


def bridge(nodes: Sequence[str], rng: random.Random) -> Grudge:
    """Two halves that cannot talk, plus one bridge node that talks to both (Jepsen's bridge)."""
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    if len(shuffled) < 3:
        return random_halves(shuffled, rng)
    middle = len(shuffled) // 2  # shuffled[middle] is the bridge: it keeps its links to both sides
    return complete_grudge([shuffled[:middle], shuffled[middle + 1:]])


def majorities_ring(nodes: Sequence[str], rng: random.Random) -> Grudge:
    """Every node sees a majority, but no two nodes see the same majority (a ring of overlaps)."""
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    n = len(shuffled)
    if n < 5:  # with symmetric links a ring of distinct majorities needs at least 5 nodes
        return random_halves(shuffled, rng)
    majority = n // 2 + 1
    grudge: Grudge = {}
    for i, node in enumerate(shuffled):
        # node i sees itself and the next (majority - 1) nodes around the ring, plus symmetric neighbours
        visible = {shuffled[(i + k) % n] for k in range(-(majority // 2), majority - majority // 2)}
        dropped = frozenset(shuffled) - visible
        if dropped:
            grudge[node] = dropped
    # make it symmetric: if a drops b, b drops a
    for a in list(grudge):
        for b in grudge[a]:
            grudge[b] = grudge.get(b, frozenset()) | {a}
    return grudge


def describe(grudge: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    """JSON-friendly form recorded in the history (node -> sorted nodes it drops)."""
    return {k: sorted(v) for k, v in sorted(grudge.items())}
