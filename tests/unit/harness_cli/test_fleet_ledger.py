"""The fleet ledger (harness/fleet_ledger.py): its transition table, counts, ETA and progress line, with random
event sequences in the orders the pools' threads can deliver them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import fleet_ledger as fl


def _ledger(n: int, start_s: float = 100.0) -> fl.Ledger:
    led = fl.Ledger(started_s=start_s)
    for k in range(n):
        led = fl.submitted(led, k, f"cell-{k}")
    return led


@pytest.mark.parametrize(("state", "event", "after"), [
    (fl.RunState.QUEUED, "run", fl.RunState.RUNNING),
    (fl.RunState.RUNNING, "wait", fl.RunState.QUEUED),
    (fl.RunState.QUEUED, "finish", fl.RunState.FINISHED),
    (fl.RunState.RUNNING, "finish", fl.RunState.FINISHED),
    (fl.RunState.FINISHED, "run", fl.RunState.FINISHED),
], ids=lambda x: getattr(x, "value", x))
def test_the_transition_table(state: fl.RunState, event: str, after: fl.RunState) -> None:
    assert fl.TRANSITIONS[(state, event)] is after


def test_every_state_and_event_is_decided_and_finish_is_final() -> None:
    events = {e for _, e in fl.TRANSITIONS}
    assert events == {"run", "wait", "finish"}
    missing = [(s, e) for s in fl.RunState for e in events if (s, e) not in fl.TRANSITIONS]
    assert missing == [(fl.RunState.FINISHED, "finish")]


def test_a_result_delivered_twice_is_refused_and_changes_nothing() -> None:
    led = fl.finished(_ledger(1), 0, exit_code=0)
    with pytest.raises(fl.LedgerError, match=r"run 0 \('cell-0'\) is finished; event 'finish'"):
        fl.finished(led, 0, exit_code=1)
    assert led.records[0].exit_code == 0


def test_unknown_and_repeated_keys_are_refused() -> None:
    with pytest.raises(fl.LedgerError, match="never submitted"):
        fl.observed(_ledger(1), 7, running=True)
    with pytest.raises(fl.LedgerError, match="submitted twice"):
        fl.submitted(_ledger(1), 0, "again")


def test_a_stale_poll_after_the_result_is_ignored() -> None:
    led = fl.finished(_ledger(1), 0, exit_code=1, lost_attempts=1)
    assert fl.observed(led, 0, running=True, lost_attempts=0) == led


def test_records_are_validated_when_built() -> None:
    with pytest.raises(ValueError, match="exit code exactly when finished"):
        fl.RunRecord("x", fl.RunState.RUNNING, exit_code=0)
    with pytest.raises(ValueError, match="lost_attempts must be >= 0"):
        fl.RunRecord("x", lost_attempts=-1)


def test_eta_is_the_throughput_so_far_and_unknown_before_the_first_result() -> None:
    led = _ledger(4, start_s=0.0)
    assert fl.eta_s(led, 50.0) is None
    led = fl.finished(led, 0, exit_code=0)
    assert fl.eta_s(led, 60.0) == pytest.approx(3 * 60.0)  # one run per minute so far, three to go
    for k in (1, 2, 3):
        led = fl.finished(led, k, exit_code=0)
    assert fl.eta_s(led, 61.0) == 0.0


def test_the_progress_line_and_its_cut() -> None:
    led = fl.observed(_ledger(3, start_s=0.0), 1, running=True, lost_attempts=1)
    led = fl.finished(led, 0, exit_code=1)
    assert fl.progress_line(led, 130.0) == ("fleet: 1/3 done (1 failed), 1 running, 1 queued, 1 retried | "
                                           "2m10s elapsed, ETA 4m20s")
    assert fl.progress_line(led, 130.0, width=70) == "fleet: 1/3 done (1 failed), 1 running, 1 queued, 1 retried"
    assert fl.progress_line(led, 130.0, width=10) == "fleet: 1/…"
    assert "1h01m elapsed" in fl.progress_line(led, 3660.0)


# Random histories: each run gets polls (running or not, with a lost count that may lag or jump) and, maybe, a
# result; the shells may deliver a poll after the result.
_poll = st.tuples(st.just("poll"), st.integers(0, 5), st.booleans(), st.integers(0, 3))
_result = st.tuples(st.just("result"), st.integers(0, 5), st.integers(0, 2), st.integers(0, 3))


@settings(max_examples=300, deadline=None)
@given(n=st.integers(1, 6), events=st.lists(st.one_of(_poll, _result), max_size=40))
def test_counts_add_up_whatever_the_order_of_polls_and_results(n: int, events: list[tuple[str, int, int, int]]
                                                               ) -> None:
    led = _ledger(n)
    done: dict[int, int] = {}
    seen_lost = [0] * n
    for kind, key, x, lost in events:
        if key >= n:
            continue
        if kind == "poll":
            led = fl.observed(led, key, running=bool(x), lost_attempts=lost)
            if key not in done:
                seen_lost[key] = max(seen_lost[key], lost)
        elif key in done:
            with pytest.raises(fl.LedgerError):
                fl.finished(led, key, exit_code=x)
        else:
            led = fl.finished(led, key, exit_code=x, lost_attempts=lost)
            done[key] = x
            seen_lost[key] = max(seen_lost[key], lost)
        c = fl.counts(led)
        assert c.total == n == c.queued + c.running + c.done
        assert c.done == len(done)
        assert c.failed == sum(1 for code in done.values() if code != 0)
        assert c.retried == sum(seen_lost)  # lost attempts never go down, stale polls add none
        eta = fl.eta_s(led, 200.0)
        assert (eta is None) == (c.done == 0 < n)
        assert eta is None or eta >= 0
    for key, code in done.items():
        assert led.records[key].state is fl.RunState.FINISHED and led.records[key].exit_code == code
