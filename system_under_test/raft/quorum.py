"""Majority math for a single Raft voter set: commit index and vote tallies.

Words: a *quorum* is any majority of the voters (``len(voters) // 2 + 1`` of them).  The
*committed index* of a voter set is the largest index that a quorum has in its logs, i.e. the
quorum-th largest ``match`` value.  Pure functions only; no state, no I/O (STYLE.md rule 3:
"pure math that other code reuses gets its own small module", after etcd ``quorum/``).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping

__all__ = ["VoteResult", "committed_index", "majority", "vote_result"]


class VoteResult(enum.Enum):
    PENDING = "pending"  # neither side has a quorum yet
    WON = "won"  # a quorum granted
    LOST = "lost"  # a quorum rejected (or can no longer grant)


def majority(n_voters: int) -> int:
    """Size of the smallest quorum of ``n_voters`` voters.

    Raises:
        ValueError: if ``n_voters`` < 1 (an empty voter set has no quorum).
    """
    if n_voters < 1:
        raise ValueError(f"majority() needs at least one voter, got {n_voters}")
    return n_voters // 2 + 1


def committed_index(voters: Iterable[str], match: Mapping[str, int]) -> int:
    """The largest index replicated on a quorum of ``voters``; a voter missing from ``match`` counts as 0."""
    values = sorted((match.get(v, 0) for v in voters), reverse=True)
    return values[majority(len(values)) - 1]


def vote_result(voters: Iterable[str], votes: Mapping[str, bool]) -> VoteResult:
    """Tally ``votes`` (voter -> granted?) over ``voters``; votes from non-voters are ignored."""
    granted = rejected = missing = 0
    for v in voters:
        got = votes.get(v)
        if got is None:
            missing += 1
        elif got:
            granted += 1
        else:
            rejected += 1
    q = majority(granted + rejected + missing)
    if granted >= q:
        return VoteResult.WON
    if granted + missing >= q:
        return VoteResult.PENDING
    return VoteResult.LOST
