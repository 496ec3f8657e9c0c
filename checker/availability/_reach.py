"""Whether a fault state leaves a write path available: three-valued, and honest about what it cannot tell.

Vocabulary:

* **topology** -- the controllers and the broker sets (replica node names) of the run.
* **controller quorum** -- a majority of *all* controllers, up, every two of them linked.  It is decided only
  when the live controllers fall into groups that are each fully linked and cut from each other (a clean
  partition); a partial partition among them (a bridge, a ring, one node seeing both sides) is undecided:
  which controller leads, and whether leadership settles, depends on timing the history does not record.
* **in-sync replicas** -- the replicas certainly in the broker set's SyncStateSet (the caller's knowledge; None
  when it has none).
* **reachable** (a write path is available) -- a controller quorum exists and, for a broker-set write, some
  in-sync replica is up and linked to every member of that quorum.  Then a correct cluster resumes writes: if
  the master keeps its lease it stays master and shrinks the replicas it cannot reach out of the set; if it
  loses it, the controller fences it and elects that replica.  Clients reach every node (the partition
  nemesis cuts links between nodes only).

Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from checker.availability._faults import FaultState

__all__ = ["Reach", "Topology", "controller_groups", "reach"]


@dataclass(frozen=True, slots=True)
class Topology:
    """Node names by role: ``broker_sets[i]`` are the replicas of broker set ``broker-i``."""

    controllers: tuple[str, ...]
    broker_sets: tuple[tuple[str, ...], ...] = ()

    def __post_init__(self) -> None:
        names = list(self.controllers) + [n for s in self.broker_sets for n in s]
        if not self.controllers:
            raise ValueError("Topology: at least one controller is needed to judge availability")
        if len(set(names)) != len(names) or not all(isinstance(n, str) and n for n in names):
            raise ValueError(f"Topology: node names must be distinct non-empty strings, got {names}")

    @property
    def majority(self) -> int:
        return len(self.controllers) // 2 + 1


@dataclass(frozen=True, slots=True)
class Reach:
    """``holds``: True (available: writes must resume), False (not: a correct cluster may stall), None (the
    checker cannot tell).  ``why`` says which, ``quorum`` the controllers, ``witness`` the in-sync replica."""

    holds: bool | None
    why: str
    quorum: tuple[str, ...] = ()
    witness: str | None = None


def controller_groups(state: FaultState, topo: Topology) -> list[tuple[str, ...]] | None:
    """The live controllers split into linked groups (largest first), or None when the split is not clean (a
    group in which two members are not linked)."""
    live = [c for c in topo.controllers if c not in state.down]
    groups: list[list[str]] = []
    for c in live:
        joined = [g for g in groups if any(state.linked(c, m) for m in g)]
        merged = [c] + [m for g in joined for m in g]
        groups = [g for g in groups if g not in joined] + [merged]
    for g in groups:
        if any(not state.linked(a, b) for i, a in enumerate(g) for b in g[i + 1:]):
            return None
    return sorted((tuple(sorted(g)) for g in groups), key=lambda g: (-len(g), g))


def reach(state: FaultState, topo: Topology, *, broker_set: int | None,
          in_sync: frozenset[str] | None) -> Reach:
    """Is a write path available in ``state``?  ``broker_set`` None means the controllers' path; otherwise the
    index of the broker set, whose certainly in-sync replicas are ``in_sync`` (None: unknown)."""
    if state.unmodelled:
        return Reach(None, f"{', '.join(sorted(state.unmodelled))} in effect: not modelled")
    groups = controller_groups(state, topo)
    if groups is None:
        return Reach(None, "the controllers are partially partitioned (no clean split): leadership is not decided "
                           "by the faults alone")
    if not groups or len(groups[0]) < topo.majority:
        seen = " | ".join(",".join(g) for g in groups) or "none up"
        return Reach(False, f"no controller quorum (need {topo.majority} of {len(topo.controllers)} linked; "
                            f"groups: {seen})")
    quorum = groups[0]
    if broker_set is None:
        return Reach(True, f"controllers {','.join(quorum)} form a quorum", quorum)
    if not 0 <= broker_set < len(topo.broker_sets):
        return Reach(None, f"broker set {broker_set} is not in the topology")
    if in_sync is None:
        return Reach(None, f"the SyncStateSet of broker-{broker_set} is not known (faults touched the set within the "
                           f"settle time)", quorum)
    up = sorted(r for r in in_sync if r not in state.down)
    full = [r for r in up if all(state.linked(r, c) for c in quorum)]
    if full:
        return Reach(True, f"controllers {','.join(quorum)} form a quorum and in-sync replica {full[0]} reaches all "
                           f"of them", quorum, full[0])
    if any(state.linked(r, c) for r in up for c in quorum):
        return Reach(None, f"the in-sync replicas of broker-{broker_set} reach only part of the quorum "
                           f"{','.join(quorum)}", quorum)
    why = "are all down" if not up else f"({','.join(up)}) are cut off from the quorum {','.join(quorum)}"
    return Reach(False, f"the in-sync replicas of broker-{broker_set} {why}", quorum)
