"""Controlled shutdown: the pure core (``broker/shutdown.py``) as properties, and the real broker shell obeying it.

The simulated broker runs the same core; its side is judged through the ``leave`` op in
``tests/unit/simulation/test_sim_workloads.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from system_under_test.broker.config import BrokerConfig
from system_under_test.broker.lifecycle import Broker
from system_under_test.broker.shutdown import (
    Shutdown,
    ShutdownPhase,
    begin_shutdown,
    shutdown_reply,
    shutdown_timed_out,
)
from system_under_test.clock import CLOCK

CFG = BrokerConfig(cluster_name="c", broker_name="b", listen="127.0.0.1:9000", store_dir="/nonexistent",
                   controllers=("127.0.0.1:1",), token="t")

EVENTS = st.lists(st.one_of(
    st.tuples(st.just("begin"), st.booleans()),
    st.tuples(st.just("reply"), st.sampled_from([None, False, True])),
    st.tuples(st.just("timeout"), st.none()),
), max_size=12)


def play(events: list[tuple[str, Any]]) -> list[Shutdown]:
    s, seen = Shutdown(), []
    for kind, arg in events:
        if kind == "begin":
            s = begin_shutdown(s, registered=arg)
        elif kind == "reply":
            s = shutdown_reply(s, {} if arg is None else {"should_shutdown": arg})
        else:
            s = shutdown_timed_out(s)
        seen.append(s)
    return seen


@given(EVENTS)
def test_only_a_begun_shutdown_closes_and_only_for_a_reason(events: list[tuple[str, Any]]) -> None:
    """Closing needs a begun shutdown plus one of: unregistered at the begin, a confirming reply after it, or the
    wait running out after it.  Nothing before the first begin changes anything; closing is for good."""
    states = play(events)
    begun_at = next((i for i, (k, _) in enumerate(events) if k == "begin"), len(events))
    for i, s in enumerate(states):
        if i < begun_at:
            assert s == Shutdown(), "replies and timers before a shutdown mean nothing"
            continue
        assert s.shutting_down
        after = events[begun_at + 1:i + 1]
        reason = (not events[begun_at][1] or ("reply", True) in after or any(k == "timeout" for k, _ in after))
        assert s.may_close == reason, (events[:i + 1], s)
        if i and states[i - 1].may_close:
            assert s == states[i - 1], "a closing broker stays closing, for its first reason"


@given(st.booleans(), st.booleans())
def test_a_second_request_changes_nothing(registered: bool, again: bool) -> None:
    s = begin_shutdown(Shutdown(), registered=registered)
    assert begin_shutdown(s, registered=again) == s
    assert s.phase is (ShutdownPhase.WAITING if registered else ShutdownPhase.CLOSING)


def test_the_real_broker_closes_on_the_controllers_confirmation_not_before() -> None:
    async def go() -> None:
        b = Broker(CFG, seed=1)
        b.broker_id, b.broker_epoch = 3, 7
        stopped: list[bool] = []

        async def stop(*, clean: bool) -> None:
            stopped.append(clean)

        b.stop = stop  # type: ignore[method-assign]
        task = asyncio.get_running_loop().create_task(b.shutdown())
        await asyncio.sleep(0.01)
        assert b.shutting_down and not stopped
        b._on_heartbeat_reply({"fenced": False, "should_shutdown": False, "master_id": 3}, CLOCK.monotonic_ms())
        await asyncio.sleep(0.01)
        assert not stopped, "still the master: the controller has not moved mastership away"
        b._on_heartbeat_reply({"fenced": False, "should_shutdown": True, "master_id": 4}, CLOCK.monotonic_ms())
        await asyncio.wait_for(task, 2)
        assert stopped == [True]

        unregistered = Broker(CFG, seed=1)
        unregistered.stop = stop  # type: ignore[method-assign]
        await asyncio.wait_for(unregistered.shutdown(), 2)
        assert stopped == [True, True], "no broker id: nothing to hand over, closes at once"

    asyncio.run(go())
