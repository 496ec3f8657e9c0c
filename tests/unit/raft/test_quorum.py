"""Majority math (etcd quorum/): table tests plus a differential test against a naive version."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from system_under_test.raft.quorum import VoteResult, committed_index, majority, vote_result


@pytest.mark.parametrize(("n", "q"), [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (7, 4)])
def test_majority(n: int, q: int) -> None:
    assert majority(n) == q


def test_majority_of_nothing_raises() -> None:
    with pytest.raises(ValueError, match="at least one voter"):
        majority(0)


@pytest.mark.parametrize(
    ("match", "expected"),
    [
        ({"a": 5}, 5),
        ({"a": 5, "b": 3, "c": 1}, 3),
        ({"a": 5, "b": 5, "c": 1}, 5),
        ({"a": 5}, 0),  # b and c missing count as 0 (3 voters)
        ({"a": 9, "b": 7, "c": 7, "d": 1, "e": 0}, 7),
    ],
    ids=["single", "median", "two-high", "missing", "five"],
)
def test_committed_index(match: dict[str, int], expected: int) -> None:
    voters = list(match) if len(match) != 1 or expected else ["a", "b", "c"]
    assert committed_index(voters, match) == expected


@pytest.mark.parametrize(
    ("votes", "expected"),
    [
        ({}, VoteResult.PENDING),
        ({"a": True}, VoteResult.PENDING),
        ({"a": True, "b": True}, VoteResult.WON),
        ({"a": True, "b": False}, VoteResult.PENDING),
        ({"a": False, "b": False}, VoteResult.LOST),
        ({"a": True, "b": False, "c": False}, VoteResult.LOST),
        ({"x": True, "y": True}, VoteResult.PENDING),  # non-voters do not count
    ],
)
def test_vote_result_three_voters(votes: dict[str, bool], expected: VoteResult) -> None:
    assert vote_result(["a", "b", "c"], votes) is expected


def _naive_committed(voters: list[str], match: dict[str, int]) -> int:
    """Largest index such that at least a majority of voters have match >= index."""
    best = 0
    for idx in set(match.values()) | {0}:
        if sum(1 for v in voters if match.get(v, 0) >= idx) * 2 > len(voters):
            best = max(best, idx)
    return best


@given(st.lists(st.integers(min_value=0, max_value=50), min_size=1, max_size=7))
def test_committed_index_matches_naive(values: list[int]) -> None:
    voters = [f"n{i}" for i in range(len(values))]
    match = dict(zip(voters, values))
    assert committed_index(voters, match) == _naive_committed(voters, match)


@given(st.integers(min_value=1, max_value=6), st.data())
def test_vote_result_matches_naive(n: int, data: st.DataObject) -> None:
    voters = [f"n{i}" for i in range(n)]
    votes = {v: data.draw(st.sampled_from([True, False, None])) for v in voters}
    cast = {k: v for k, v in votes.items() if v is not None}
    outcomes = set()
    for fill in itertools.product([True, False], repeat=n - len(cast)):
        full = dict(cast)
        full.update(zip([v for v in voters if v not in cast], fill))
        outcomes.add(sum(full.values()) * 2 > n)
    expected = VoteResult.WON if outcomes == {True} else VoteResult.LOST if outcomes == {False} else VoteResult.PENDING
    assert vote_result(voters, cast) is expected
