"""Who answers a controller request (``controller/routing.py``): one table, shared by the server and the
simulator."""

from __future__ import annotations

import pytest

from system_under_test.controller.routing import READ_CODES, VOUCHED_CODES, Route, route, scan_due
from system_under_test.protocol.codes import RequestCode as R

READ = R.CONTROLLER_GET_REPLICA_INFO
WRITE = R.CONTROLLER_ELECT_MASTER
HB = R.BROKER_HEARTBEAT


@pytest.mark.parametrize(("code", "leader", "bugs", "want"), [
    (READ, True, frozenset(), Route.READ_AFTER_BARRIER),
    (WRITE, True, frozenset(), Route.DECIDE),
    (HB, True, frozenset(), Route.DECIDE_AFTER_BARRIER),
    (R.CONTROLLER_CONTROLLED_SHUTDOWN, True, frozenset(), Route.DECIDE_AFTER_BARRIER),
    (HB, False, frozenset(), Route.RECORD_THEN_REFUSE),
    (WRITE, False, frozenset(), Route.REFUSE_NOT_LEADER),
    (READ, False, frozenset(), Route.REFUSE_NOT_LEADER),
    (READ, False, frozenset({"stale-read"}), Route.ANSWER_FROM_MEMORY),
    (WRITE, False, frozenset({"stale-read"}), Route.REFUSE_NOT_LEADER),
    (READ, True, frozenset({"stale-read"}), Route.READ_AFTER_BARRIER),
    (HB, False, frozenset({"stale-read"}), Route.RECORD_THEN_REFUSE),
], ids=lambda v: getattr(v, "name", str(v)))
def test_route(code: R, leader: bool, bugs: frozenset[str], want: Route) -> None:
    assert route(code, is_leader=leader, bugs=bugs) is want


def test_every_read_code_is_read_after_a_barrier_on_the_leader() -> None:
    assert READ_CODES and all(route(c, is_leader=True) is Route.READ_AFTER_BARRIER for c in READ_CODES)


def test_every_vouched_code_is_decided_after_a_barrier_on_the_leader_and_recorded_on_a_follower() -> None:
    assert R.BROKER_HEARTBEAT in VOUCHED_CODES and not VOUCHED_CODES & READ_CODES
    assert all(route(c, is_leader=True) is Route.DECIDE_AFTER_BARRIER for c in VOUCHED_CODES)


@pytest.mark.parametrize(("now", "since", "lease", "due"), [
    (1000, None, 2000, False), (1999, 0, 2000, False), (2000, 0, 2000, True), (5000, 100, 2000, True)])
def test_scan_waits_a_lease_after_the_leadership_change(now: int, since: int | None, lease: int, due: bool) -> None:
    assert scan_due(now, since, lease) is due
