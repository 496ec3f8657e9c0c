"""The controller client's pure route (``system_under_test.client.controller_route``): which controller a request
goes to first, who is *silent*, when a hint is believed, and when a link has gone quiet.  Scenario tables, then
properties over random event sequences."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from system_under_test.client.controller_route import Attempt, ControllerRoute
from system_under_test.client.quiet_link import QUIET_PINGS, link_gone_quiet

C1, C2, C3 = "10.0.0.1:9101", "10.0.0.2:9101", "10.0.0.3:9101"
ADDRS = (C1, C2, C3)


def addrs_of(attempts: tuple[Attempt, ...]) -> list[str]:
    return [a.addr for a in attempts]


def probed(attempts: tuple[Attempt, ...]) -> list[str]:
    return [a.addr for a in attempts if a.probe]


def test_a_fresh_route_tries_the_configured_order_without_probes() -> None:
    route = ControllerRoute.of([C1, C2, C3, C1])
    assert route.addrs == ADDRS and route.leader is None and not route.silent
    assert route.plan() == (Attempt(C1, False), Attempt(C2, False), Attempt(C3, False))


def test_the_believed_leader_comes_first() -> None:
    route = ControllerRoute.of(ADDRS).accepted(C3)
    assert addrs_of(route.plan()) == [C3, C1, C2] and not probed(route.plan())


def test_a_leader_that_went_silent_is_no_longer_believed_and_comes_last_with_a_probe() -> None:
    """The reported case: the leader was paused; the next pass must not start at it."""
    route = ControllerRoute.of(ADDRS).accepted(C1).went_silent(C1)
    assert route.leader is None and route.silent == {C1}
    assert route.plan() == (Attempt(C2, False), Attempt(C3, False), Attempt(C1, True))


def test_a_hint_naming_the_silent_controller_is_probed_not_believed() -> None:
    """A survivor that has not yet noticed still names the paused leader: probe it, do not believe it, and go
    on with the controllers the pass had not reached."""
    route = ControllerRoute.of(ADDRS).accepted(C1).went_silent(C1)
    pass_ = route.plan()  # C2, C3, C1?
    route, follow = route.not_leader(C2, C1)
    assert follow and route.leader is None and route.silent == {C1}
    assert route.after_hint(pass_, 1, C1) == (Attempt(C1, True), Attempt(C3, False))


def test_a_hint_naming_a_live_controller_is_believed_and_starts_a_pass_at_it() -> None:
    route = ControllerRoute.of(ADDRS).accepted(C1).went_silent(C1)
    pass_ = route.plan()
    route, follow = route.not_leader(C2, C3)
    assert follow and route.leader == C3
    assert route.after_hint(pass_, 1, C3) == (Attempt(C3, False), Attempt(C2, False), Attempt(C1, True))


@pytest.mark.parametrize("hint", [None, "", C2], ids=["no-hint", "empty-hint", "names-itself"])
def test_a_refusal_without_a_usable_hint_is_not_followed_and_unseats_the_refuser(hint: str | None) -> None:
    route, follow = ControllerRoute.of(ADDRS).accepted(C2).not_leader(C2, hint)
    assert not follow and route.leader is None


def test_a_hint_to_an_unknown_address_is_learnt() -> None:
    route, follow = ControllerRoute.of([C1, C2]).not_leader(C1, C3)
    assert follow and route.addrs == ADDRS and route.leader == C3


def test_any_answer_makes_a_silent_controller_ordinary_again() -> None:
    route = ControllerRoute.of(ADDRS).went_silent(C2).went_silent(C3)
    assert route.answered(C2).silent == {C3}
    assert route.not_leader(C3, None)[0].silent == {C2}
    after = route.accepted(C3)
    assert after.silent == {C2} and after.leader == C3


def test_unknown_addresses_asked_directly_change_nothing() -> None:
    route = ControllerRoute.of(ADDRS).accepted(C1)
    assert route.went_silent("10.9.9.9:10911") == route
    assert route.answered("10.9.9.9:10911") == route


@pytest.mark.parametrize(
    "kwargs, message",
    [
        pytest.param({"addrs": ()}, "at least one controller", id="no-addrs"),
        pytest.param({"addrs": (C1, C1)}, "duplicate", id="duplicates"),
        pytest.param({"addrs": (C1,), "leader": C2}, "not among addrs", id="unknown-leader"),
        pytest.param({"addrs": (C1,), "silent": frozenset({C2})}, "not among addrs", id="unknown-silent"),
        pytest.param({"addrs": (C1,), "leader": C1, "silent": frozenset({C1})}, "cannot be silent",
                     id="silent-leader"),
    ],
)
def test_inconsistent_routes_are_refused_when_built(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ControllerRoute(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "silence_s, ping_s, quiet",
    [
        pytest.param(0.1, 0.25, False, id="heard-recently"),
        pytest.param(QUIET_PINGS * 0.25, 0.25, False, id="at-the-threshold"),
        pytest.param(QUIET_PINGS * 0.25 + 0.01, 0.25, True, id="past-the-threshold"),
        pytest.param(60.0, None, False, id="liveness-off-silence-proves-nothing"),
    ],
)
def test_link_gone_quiet(silence_s: float, ping_s: float | None, quiet: bool) -> None:
    assert link_gone_quiet(silence_s, ping_s) is quiet


# ---- properties -------------------------------------------------------------------------------------------------

Event = tuple[Any, ...]
NAMES = st.sampled_from([C1, C2, C3, "10.0.0.4:9101"])
EVENTS = st.lists(st.one_of(
    st.tuples(st.just("accepted"), NAMES),
    st.tuples(st.just("answered"), NAMES),
    st.tuples(st.just("went_silent"), NAMES),
    st.tuples(st.just("not_leader"), NAMES, st.one_of(st.none(), NAMES)),
), max_size=40)


def replay(events: list[Event]) -> list[ControllerRoute]:
    route = ControllerRoute.of(ADDRS)
    out = [route]
    for event in events:
        kind, addr, *rest = event
        if kind == "not_leader":
            route = route.not_leader(addr, rest[0])[0]
        elif kind == "accepted":
            route = route.accepted(addr)
        elif kind == "answered":
            route = route.answered(addr)
        else:
            route = route.went_silent(addr)
        out.append(route)
    return out


@given(EVENTS)
def test_every_pass_tries_every_controller_once_answering_ones_before_silent_ones(events: list[Event]) -> None:
    for route in replay(events):  # each state was validated when built (the leader is never silent, ...)
        plan = route.plan()
        assert sorted(addrs_of(plan)) == sorted(route.addrs)
        assert set(probed(plan)) == route.silent
        flags = [a.probe for a in plan]
        assert flags == sorted(flags), "a silent controller came before an answering one"
        if route.leader is not None:
            assert plan[0] == Attempt(route.leader, False)


@given(EVENTS, NAMES)
def test_a_controller_that_went_silent_is_probed_before_anything_is_sent_to_it(events: list[Event],
                                                                             addr: str) -> None:
    route = replay(events)[-1]
    if addr not in route.addrs:
        return
    after = route.went_silent(addr)
    assert after.leader != addr and Attempt(addr, True) in after.plan()
    # a hint naming it is not believed either, and after_hint probes it
    for other in after.addrs:
        if other == addr:
            continue
        hinted, follow = after.not_leader(other, addr)
        assert follow and hinted.leader != addr
        assert hinted.after_hint(after.plan(), 0, addr)[0] == Attempt(addr, True)


@given(EVENTS, st.integers(0, 4), NAMES)
def test_after_a_hint_the_rest_of_the_pass_still_reaches_every_controller_not_yet_tried(
        events: list[Event], index: int, hint: str) -> None:
    route = replay(events)[-1]
    pass_ = route.plan()
    index = min(index, len(pass_))
    refuser = pass_[index - 1].addr if index else route.addrs[0]
    if hint == refuser:
        return
    route, follow = route.not_leader(refuser, hint)
    assert follow
    rest = route.after_hint(pass_, index, hint)
    assert rest[0].addr == hint and rest[0].probe == (hint in route.silent)
    assert len(addrs_of(rest)) == len(set(addrs_of(rest)))
    if hint in route.silent:
        assert set(addrs_of(pass_[index:])) <= set(addrs_of(rest))
    else:
        assert sorted(addrs_of(rest)) == sorted(route.addrs)
