"""The pure link-liveness core: when a silent link is pinged or declared dead, the redial backoff,
and the SPLITBRAIN_LINK setting.  Time is a plain number here (no clock)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from system_under_test.protocol.liveness import (
    LinkSettingError,
    LinkTimeouts,
    LinkVerdict,
    LinkWatch,
    link_timeouts_from_setting,
    next_backoff_s,
    next_link_watch,
)

T = LinkTimeouts(ping_interval_s=0.25, dead_after_s=1.0, min_backoff_s=0.02, max_backoff_s=0.25)


def check(watch: LinkWatch, now: float, *, received_at: float = 0.0, backlog: int = 0,
          late_s: float = 0.0) -> tuple[LinkWatch, LinkVerdict, str]:
    return next_link_watch(watch, now=now, received_at=received_at, backlog_bytes=backlog, late_s=late_s, timeouts=T)


@pytest.mark.parametrize(
    "now, received_at, backlog, late_s, expected",
    [
        pytest.param(0.1, 0.0, 0, 0.0, LinkVerdict.QUIET, id="recently-opened"),
        pytest.param(0.3, 0.0, 0, 0.0, LinkVerdict.PING, id="silent-past-ping-interval"),
        pytest.param(1.0, 0.0, 0, 0.0, LinkVerdict.DEAD, id="silent-past-dead-after"),
        pytest.param(5.0, 4.9, 0, 0.0, LinkVerdict.QUIET, id="a-frame-just-arrived"),
        pytest.param(5.0, 0.0, 0, 0.5, LinkVerdict.QUIET, id="our-loop-stalled-restarts-the-count"),
        pytest.param(0.1, 0.0, 1 << 30, 0.0, LinkVerdict.DEAD, id="backlog-over-the-bound"),
    ],
)
def test_one_check(now: float, received_at: float, backlog: int, late_s: float, expected: LinkVerdict) -> None:
    _, verdict, reason = check(LinkWatch(0.0), now, received_at=received_at, backlog=backlog, late_s=late_s)
    assert verdict is expected
    assert bool(reason) == (verdict is LinkVerdict.DEAD)


def test_a_shrinking_backlog_is_a_sign_of_life() -> None:
    watch = LinkWatch(0.0, backlog_bytes=5000)
    _, verdict, _ = check(watch, 2.0, backlog=4000)
    assert verdict is LinkVerdict.QUIET
    _, verdict, _ = check(watch, 2.0, backlog=5000)
    assert verdict is LinkVerdict.DEAD


def test_pings_once_per_interval_while_silent_then_dead() -> None:
    watch = LinkWatch(0.0)
    verdicts = []
    for step in range(1, 9):  # checks every 0.125 s, as the shell does (ping_interval_s / 2)
        watch, verdict, _ = check(watch, step * 0.125)
        verdicts.append(verdict)
    q, p, d = LinkVerdict.QUIET, LinkVerdict.PING, LinkVerdict.DEAD
    assert verdicts == [q, p, q, p, q, p, q, d]


def test_an_answer_resets_the_silence_and_the_ping() -> None:
    watch, verdict, _ = check(LinkWatch(0.0), 0.3)
    assert verdict is LinkVerdict.PING and watch.pinged_at == 0.3
    watch, verdict, _ = check(watch, 0.4, received_at=0.35)
    assert verdict is LinkVerdict.QUIET and watch.pinged_at is None and watch.heard_at == 0.35


@given(st.lists(st.tuples(st.floats(0.001, 0.5), st.booleans()), min_size=1, max_size=80))
def test_dead_exactly_when_silent_for_dead_after(steps: list[tuple[float, bool]]) -> None:
    """Property: the verdict is DEAD iff the time since the last frame reaches dead_after_s (no
    stalls, no backlog), and a PING is never sent while the link is not silent."""
    now, received, watch = 0.0, 0.0, LinkWatch(0.0)
    for dt, hears in steps:
        now += dt
        if hears:
            received = now
        watch, verdict, _ = check(watch, now, received_at=received)
        silence = now - received
        assert (verdict is LinkVerdict.DEAD) == (silence >= T.dead_after_s)
        if verdict is LinkVerdict.PING:
            assert silence >= T.ping_interval_s
        if verdict is LinkVerdict.DEAD:
            return


@given(st.integers(0, 200), st.integers(0, 2**32))
def test_backoff_is_bounded_and_starts_small(attempt: int, seed: int) -> None:
    rng = random.Random(seed)
    b = next_backoff_s(attempt, T, rng)
    cap = min(T.max_backoff_s, T.min_backoff_s * 2**attempt)
    assert cap / 2 <= b <= cap <= T.max_backoff_s
    assert next_backoff_s(0, T, random.Random(seed)) <= T.min_backoff_s


def test_backoff_is_reproducible_from_the_seed() -> None:
    a = [next_backoff_s(i, T, random.Random(7)) for i in range(6)]
    b = [next_backoff_s(i, T, random.Random(7)) for i in range(6)]
    assert a == b


@pytest.mark.parametrize(
    "value, expected",
    [
        pytest.param(None, LinkTimeouts(), id="unset"),
        pytest.param("", LinkTimeouts(), id="empty"),
        pytest.param("on", LinkTimeouts(), id="on"),
        pytest.param("off", None, id="off"),
        pytest.param("dead_after_s=3,ping_interval_s=0.5", LinkTimeouts(dead_after_s=3, ping_interval_s=0.5),
                     id="overrides"),
    ],
)
def test_setting_parses(value: str | None, expected: LinkTimeouts | None) -> None:
    assert link_timeouts_from_setting(value) == expected


@pytest.mark.parametrize(
    "value, needle",
    [
        pytest.param("yes", "'yes'", id="unknown-word"),
        pytest.param("dead_after=3", "dead_after", id="unknown-key"),
        pytest.param("dead_after_s=soon", "dead_after_s must be a number", id="not-a-number"),
        pytest.param("ping_interval_s=2", "ping_interval_s=2.0 must be < dead_after_s", id="ping-after-dead"),
        pytest.param("max_backoff_s=0.001", "min_backoff_s", id="backoff-inverted"),
        pytest.param("dead_after_s=-1", "dead_after_s must be a number in", id="negative"),
    ],
)
def test_bad_setting_names_the_variable_and_key(value: str, needle: str) -> None:
    with pytest.raises(LinkSettingError) as err:
        link_timeouts_from_setting(value)
    assert "SPLITBRAIN_LINK" in str(err.value) and needle in str(err.value)
    assert isinstance(err.value, ValueError)  # node mains turn it into exit 2


def test_kernel_timeouts_follow_dead_after() -> None:
    t = LinkTimeouts(ping_interval_s=0.2, dead_after_s=1.2)
    assert t.tcp_user_timeout_ms == 12_000  # a backstop: a zero window (slow reader) counts against it
    assert LinkTimeouts().tcp_user_timeout_ms == 15_000
    assert t.keepalive_idle_s == 2
