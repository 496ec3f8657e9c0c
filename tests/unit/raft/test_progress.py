"""Follower progress: the (state, event) transition table and the flow-control bookkeeping."""

from __future__ import annotations

import pytest

from system_under_test.raft.progress import (
    TRANSITIONS,
    IllegalTransition,
    Progress,
    ProgressEvent,
    ProgressState,
)

P, R, S = ProgressState.PROBE, ProgressState.REPLICATE, ProgressState.SNAPSHOT
E = ProgressEvent

ALL = [(s, e) for s in ProgressState for e in ProgressEvent]


def _progress_in(state: ProgressState) -> Progress:
    pr = Progress("n2", next_index=11, max_inflight=2)
    pr.match = 7
    if state is R:
        pr.fire(E.ACKED)
    elif state is S:
        pr.become_snapshot(20)
    return pr


@pytest.mark.parametrize(("state", "event"), ALL, ids=[f"{s.value}-{e.value}" for s, e in ALL])
def test_transition_table(state: ProgressState, event: ProgressEvent) -> None:
    pr = _progress_in(state)
    expected = TRANSITIONS.get((state, event))
    if expected is None:
        before = (pr.state, pr.match, pr.next, pr.probe_sent, list(pr.inflight))
        with pytest.raises(IllegalTransition, match=f"event {event.value} is not allowed in state {state.value}"):
            pr.fire(event)
        assert (pr.state, pr.match, pr.next, pr.probe_sent, list(pr.inflight)) == before
    else:
        assert pr.fire(event) is expected
        assert pr.state is expected


def test_probe_sends_one_at_a_time() -> None:
    pr = _progress_in(P)
    assert not pr.is_paused()
    pr.sent_entries(12, 1)
    assert pr.is_paused() and pr.next == 11  # probe does not advance next optimistically
    assert pr.maybe_update(9)
    assert not pr.is_paused()


def test_replicate_pipelines_up_to_max_inflight() -> None:
    pr = _progress_in(R)
    assert pr.next == 8
    pr.sent_entries(9, 2)
    pr.sent_entries(11, 2)
    assert pr.next == 12 and pr.is_paused()
    pr.free_inflight_to(9)
    assert not pr.is_paused() and list(pr.inflight) == [11]


@pytest.mark.parametrize(
    ("state", "next_index", "rejected", "hint", "ok", "new_next"),
    [
        (P, 11, 10, 4, True, 8),  # hint below match: never go below match + 1
        (P, 11, 10, 9, True, 10),
        (P, 11, 5, 4, False, 11),  # stale: not the probe we sent
        (R, 11, 7, 3, False, 11),  # stale: already matched
        (R, 11, 9, 3, True, 11),  # caller fires REJECTED
    ],
)
def test_maybe_decrease_to(state: ProgressState, next_index: int, rejected: int, hint: int, ok: bool,
                           new_next: int) -> None:
    pr = _progress_in(state)
    pr.next = next_index
    assert pr.maybe_decrease_to(rejected, hint) is ok
    assert pr.next == new_next


def test_snapshot_abort_probes_from_match() -> None:
    pr = _progress_in(S)
    assert pr.is_paused()
    pr.abort_snapshot()
    assert pr.state is P and pr.next == 8 and pr.pending_snapshot == 0


def test_snapshot_caught_up_probes_after_snapshot() -> None:
    pr = _progress_in(S)
    pr.fire(E.SNAPSHOT_CAUGHT_UP)
    assert pr.state is P and pr.next == 21


def test_diagram_is_generated_from_the_table() -> None:
    from system_under_test.raft.progress import transition_diagram

    text = transition_diagram()
    assert text.count(" --> ") == len(TRANSITIONS) + 1
    assert "snapshot --> probe: snapshot-aborted" in text
