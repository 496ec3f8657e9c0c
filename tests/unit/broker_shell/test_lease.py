"""The broker's own lease (``broker/lease.py``): renewed from the send time, checked against the clock."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from system_under_test.broker.lease import check_lease, renewed_at

TIMEOUT = 2000
ms = st.integers(min_value=0, max_value=10**9)


@given(last=ms, sent=ms, delay=st.integers(min_value=0, max_value=10**6))
def test_an_acknowledged_heartbeat_renews_from_its_send_time_never_its_arrival(last: int, sent: int,
                                                                               delay: int) -> None:
    now = sent + delay
    assert renewed_at(last, sent, now) == max(last, sent)


def test_a_late_reply_stretches_nothing() -> None:
    # sent at 1000, the reply read 1500 ms later (a slow link, a paused broker): the lease ends at 3000, as the
    # controller's does at the latest (it counts from the heartbeat's arrival, after the send)
    renewed = renewed_at(0, 1000, 2500)
    assert renewed == 1000
    assert check_lease(False, renewed, 2500, 3000, TIMEOUT).valid
    assert check_lease(False, renewed, 2500, 3001, TIMEOUT).fenced_because == "lease-expired"


@given(last=ms, sent=ms, now=ms)
def test_a_reply_to_a_heartbeat_sent_after_now_proves_nothing(last: int, sent: int, now: int) -> None:
    if sent > now:
        assert renewed_at(last, sent, now) is None


@given(last=ms, sent=ms)
def test_an_older_reply_never_moves_the_renewal_back(last: int, sent: int) -> None:
    renewed = renewed_at(last, sent, max(last, sent))
    assert renewed is not None and renewed >= last


@given(renew=ms, age=st.integers(min_value=0, max_value=10 * TIMEOUT))
def test_the_lease_holds_exactly_lease_timeout_ms_after_the_renewal(renew: int, age: int) -> None:
    now = renew + age
    check = check_lease(False, renew, now, now, TIMEOUT)
    assert check.valid == (age <= TIMEOUT)
    assert check.fenced_because == (None if age <= TIMEOUT else "lease-expired")


@given(renew=ms, back=st.integers(min_value=1, max_value=10**6), fenced=st.booleans())
def test_a_clock_that_went_back_fences_until_the_next_renewal(renew: int, back: int, fenced: bool) -> None:
    last_check = renew + back
    now = last_check - back
    check = check_lease(fenced, renew, last_check, now, TIMEOUT)
    assert check.fenced and check.last_renew_ms <= now
    assert check.fenced_because == (None if fenced else "clock-went-back")
    # a reply to a heartbeat sent before the jump (at the old, later clock) cannot renew it
    assert renewed_at(check.last_renew_ms, last_check, now) is None


@given(renew=ms, now=ms)
def test_a_fenced_broker_stays_fenced_without_a_reason(renew: int, now: int) -> None:
    check = check_lease(True, renew, min(renew, now), now, TIMEOUT)
    assert check.fenced and check.fenced_because is None
