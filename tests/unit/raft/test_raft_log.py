"""The in-memory Raft log (Raft paper §5.3 consistency check, §7 compaction) as table tests."""

from __future__ import annotations

import pytest

from system_under_test.raft.log import LogInvariantError, RaftLog
from system_under_test.raft.types import Entry, Snapshot


def ents(*terms: int, start: int = 1) -> list[Entry]:
    return [Entry(t, start + i, b"%d" % (start + i)) for i, t in enumerate(terms)]


def mklog(*terms: int, committed: int = 0) -> RaftLog:
    return RaftLog(entries=ents(*terms), committed=committed)


@pytest.mark.parametrize(
    ("prev_index", "prev_term", "new_terms", "commit", "expect_last", "expect_terms", "expect_commit"),
    [
        (3, 3, (), 3, 3, (1, 2, 3), 3),  # heartbeat-like: commit only
        (3, 3, (4,), 3, 4, (1, 2, 3, 4), 3),  # append at the end
        (2, 2, (3,), 3, 3, (1, 2, 3), 3),  # duplicate: nothing changes
        (2, 2, (4,), 3, 3, (1, 2, 4), 3),  # conflict at 3: truncate and replace
        (1, 1, (4, 4), 2, 3, (1, 4, 4), 2),  # conflict at 2
        (3, 2, (4,), 3, None, (1, 2, 3), 1),  # prev term mismatch: reject
        (4, 3, (4,), 3, None, (1, 2, 3), 1),  # prev beyond log: reject
        (3, 3, (4, 4), 9, 5, (1, 2, 3, 4, 4), 5),  # commit capped at the last new entry
    ],
    ids=["commit-only", "append", "duplicate", "conflict-3", "conflict-2", "prev-term-mismatch", "gap", "cap-commit"],
)
def test_maybe_append_5_3(prev_index: int, prev_term: int, new_terms: tuple[int, ...], commit: int,
                          expect_last: int | None, expect_terms: tuple[int, ...], expect_commit: int) -> None:
    lg = mklog(1, 2, 3, committed=1)
    new = ents(*new_terms, start=prev_index + 1)
    assert lg.maybe_append(prev_index, prev_term, commit, new) == expect_last
    assert tuple(lg.term(i) for i in range(1, lg.last_index + 1)) == expect_terms
    assert lg.committed == expect_commit


def test_conflict_with_committed_entry_raises_with_numbers() -> None:
    lg = mklog(1, 2, 3, committed=3)
    with pytest.raises(LogInvariantError, match=r"entry 2 conflicts with committed entry \(committed=3"):
        lg.maybe_append(1, 1, 3, ents(5, 5, start=2))


@pytest.mark.parametrize(
    ("index", "term", "expected"),
    [(6, 3, (5, 3)), (6, 2, (3, 2)), (6, 1, (1, 1)), (6, 0, (0, 0)), (3, 5, (3, 2)), (9, 9, (6, 4))],
)
def test_find_conflict_by_term(index: int, term: int, expected: tuple[int, int]) -> None:
    lg = mklog(1, 2, 2, 3, 3, 4)
    assert lg.find_conflict_by_term(index, term) == expected


@pytest.mark.parametrize(
    ("last_term", "last_index", "up_to_date"),
    [(3, 3, True), (3, 2, False), (3, 4, True), (2, 9, False), (4, 1, True)],
)
def test_is_up_to_date_5_4_1(last_term: int, last_index: int, up_to_date: bool) -> None:
    assert mklog(1, 2, 3).is_up_to_date(last_term, last_index) is up_to_date


def test_stable_and_unstable_entries() -> None:
    lg = RaftLog()
    lg.append(ents(1, 1))
    assert [e.index for e in lg.unstable_entries()] == [1, 2]
    lg.stable_to(2, 1)
    assert not lg.has_unstable()
    lg.append(ents(2, start=2))  # truncation makes index 2 unstable again
    assert lg.stable_index == 1 and [e.index for e in lg.unstable_entries()] == [2]
    lg.stable_to(2, 1)  # stale ack for the replaced entry: ignored
    assert lg.stable_index == 1


def test_commit_beyond_last_raises() -> None:
    with pytest.raises(LogInvariantError, match=r"tocommit\(5\) is out of range \[last index 3\]"):
        mklog(1, 1, 1).commit_to(5)


def test_maybe_commit_needs_current_term_5_4_2() -> None:
    lg = mklog(1, 1, 2)
    assert not lg.maybe_commit(2, 2)  # entry 2 is from term 1
    assert lg.maybe_commit(3, 2) and lg.committed == 3


def test_compact_keeps_term_of_boundary_7() -> None:
    lg = mklog(1, 1, 2, 3, committed=4)
    lg.applied_to(3)
    assert lg.compact(3) == 2
    assert (lg.snapshot_index, lg.first_index, lg.last_index) == (3, 4, 4)
    assert lg.term(3) == 2 and lg.term(2) is None and lg.match_term(3, 2)
    assert lg.find_conflict_by_term(4, 1) == (2, 0)
    with pytest.raises(LogInvariantError, match="out of bounds"):
        lg.slice(2, 4)
    with pytest.raises(LogInvariantError, match="not after the current snapshot"):
        lg.compact(3)


def test_compact_beyond_applied_raises() -> None:
    lg = mklog(1, 1, committed=2)
    with pytest.raises(LogInvariantError, match=r"beyond applied 0"):
        lg.compact(2)


def test_restore_replaces_log_7() -> None:
    lg = mklog(1, 1, 1, committed=1)
    snap = Snapshot(5, 3, b"s", ("n1",))
    lg.restore(snap)
    assert (lg.last_index, lg.last_term, lg.committed, lg.pending_snapshot) == (5, 3, 5, snap)
    assert lg.next_committed_entries() == [] and not lg.has_next_committed()


@pytest.mark.parametrize(
    ("snap", "entries", "commit", "match"),
    [
        (None, [Entry(1, 1), Entry(1, 3)], 0, "not contiguous"),
        (None, [Entry(2, 1), Entry(1, 2)], 0, "not contiguous"),
        (Snapshot(5, 2, b"", ("n1",)), [Entry(2, 7)], 5, "not contiguous"),
        (None, [Entry(1, 1)], 2, "committed index 2 is out of range"),
    ],
    ids=["gap", "term-decreases", "gap-after-snapshot", "commit-beyond-log"],
)
def test_restart_rejects_inconsistent_storage(snap: Snapshot | None, entries: list[Entry], commit: int,
                                              match: str) -> None:
    with pytest.raises(LogInvariantError, match=match):
        RaftLog(snapshot=snap, entries=entries, committed=commit)


def test_restart_commit_at_least_snapshot() -> None:
    lg = RaftLog(snapshot=Snapshot(5, 2, b"", ("n1",)), entries=ents(1, 1, 1, 1, 2, 2, start=1), committed=0)
    assert (lg.first_index, lg.last_index, lg.committed, lg.applied) == (6, 6, 5, 5)
    assert [e.index for e in lg.next_committed_entries()] == []


@pytest.mark.parametrize("wire", [None, 7, "x", [1, 2], {"t": 1}, {"t": 1, "s": "a", "d": "b", "term": "?"},
                                  {"t": 1, "s": "a", "d": "b", "term": 1, "snap": [1]}])
def test_a_malformed_raft_message_is_a_value_error_naming_it(wire: object) -> None:
    """What a peer (or a fuzzer) sends in a RAFT_MESSAGE body is untrusted: anything that is not a message is a
    ValueError the server logs and drops, never another exception escaping the handler."""
    from system_under_test.raft.types import message_from_wire

    with pytest.raises(ValueError, match="malformed raft message"):
        message_from_wire(wire)  # type: ignore[arg-type]
