"""The controller client's shell over loopback, with a controller that has gone silent: a socket that listens
(the kernel completes every handshake, as it does for a SIGSTOPped process) but never reads or answers.

What is checked: a write sent into the silent controller is reported as unknown and never re-sent elsewhere; the
next write goes to the controllers that answer, even while a follower's ``NOT_LEADER`` still names the silent
one; the silent controller is PINGed before anything is sent to it again, and so is a believed leader whose link
went quiet.  Every wait is bounded by the calls'
own deadlines; nothing asserts how fast."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest

from system_under_test.client.controller_client import ControllerClient, NoControllerAvailable
from system_under_test.client.controller_route import ControllerRoute
from system_under_test.client.quiet_link import QUIET_PINGS
from system_under_test.protocol import (
    Connection,
    Frame,
    Reply,
    RequestCode,
    RequestTimeout,
    ResponseCode,
    RpcServer,
    link_timeouts,
)

APPLY = int(RequestCode.CONTROLLER_APPLY_BROKER_ID)


@dataclass
class Controllers:
    """A silent controller, a follower whose hint ``hint()`` picks, and a leader that accepts ApplyBrokerId."""

    silent: str
    follower: str
    leader: str
    applied: list[dict[str, object]] = field(default_factory=list)
    refused: list[str | None] = field(default_factory=list)


@asynccontextmanager
async def controllers(hint: Callable[[Controllers], str | None]) -> AsyncIterator[Controllers]:
    quiet = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    quiet.bind(("127.0.0.1", 0))
    quiet.listen(64)  # never accepted, never read: a stopped process looks the same from outside
    state: list[Controllers] = []

    async def follower(frame: Frame, conn: Connection) -> Reply | None:
        named = hint(state[0])
        state[0].refused.append(named)
        return Reply.error(ResponseCode.CONTROLLER_NOT_LEADER, "not the leader", leader_id="x", leader_addr=named)

    async def leader(frame: Frame, conn: Connection) -> Reply | None:
        if frame.code == APPLY:
            state[0].applied.append(dict(frame.header))
        return Reply()

    servers = [RpcServer(follower), RpcServer(leader)]
    try:
        bound = [await s.start("127.0.0.1", 0) for s in servers]
        (qh, qp), (fh, fp), (lh, lp) = quiet.getsockname(), *bound
        state.append(Controllers(f"{qh}:{qp}", f"{fh}:{fp}", f"{lh}:{lp}"))
        yield state[0]
    finally:
        for s in servers:
            await s.stop()
        quiet.close()


async def apply(client: ControllerClient, broker_id: int) -> None:
    await client.apply_broker_id("c", "vset", broker_id, "code", "10.0.0.9:10911")


def test_a_write_into_a_silent_leader_is_unknown_and_the_next_goes_to_the_real_leader() -> None:
    async def main() -> None:
        async with controllers(lambda c: c.leader) as c:
            client = ControllerClient([c.silent, c.follower, c.leader], token="t", timeout_s=0.5,
                                      probe_timeout_s=0.2)
            client.route = ControllerRoute((c.silent, c.follower, c.leader), leader=c.silent)
            try:
                with pytest.raises(RequestTimeout):
                    await apply(client, 1)
                assert c.applied == [], "a write whose outcome is unknown was re-sent to another controller"
                assert c.silent in client.route.silent and client.leader_addr is None
                await apply(client, 2)
                assert [h["broker_id"] for h in c.applied] == [2]
                assert client.leader_addr == c.leader
                assert c.silent in client.route.silent  # it never answered, so it stays silent
            finally:
                await client.close()

    asyncio.run(main())


def test_a_hint_that_keeps_naming_the_silent_controller_does_not_keep_the_client_from_the_others() -> None:
    async def main() -> None:
        async with controllers(lambda c: c.silent) as c:
            client = ControllerClient([c.follower, c.silent, c.leader], token="t", timeout_s=0.5,
                                      probe_timeout_s=0.1)
            client.route = ControllerRoute.of([c.follower, c.silent, c.leader]).went_silent(c.silent)
            try:
                await apply(client, 3)
                assert [h["broker_id"] for h in c.applied] == [3]
                assert c.refused == [c.silent], "the follower was asked more than once in one pass"
                assert client.leader_addr == c.leader
            finally:
                await client.close()

    asyncio.run(main())


def test_with_only_silent_and_refusing_controllers_the_call_fails_definitely_naming_each() -> None:
    async def main() -> None:
        async with controllers(lambda c: c.silent) as c:
            client = ControllerClient([c.follower, c.silent], token="t", timeout_s=0.5, probe_timeout_s=0.1)
            client.route = ControllerRoute.of([c.follower, c.silent]).went_silent(c.silent)
            try:
                with pytest.raises(NoControllerAvailable) as info:
                    await client.call(RequestCode.CONTROLLER_APPLY_BROKER_ID, {
                        "cluster_name": "c", "broker_name": "vset", "broker_id": 4, "register_code": "code",
                        "broker_addr": "10.0.0.9:10911"}, deadline_s=1.0)
                assert info.value.definite
                assert c.silent in str(info.value) and "probe" in str(info.value)
                assert c.follower in str(info.value)
                assert c.applied == []
            finally:
                await client.close()

    asyncio.run(main())


def test_a_silent_controller_that_answers_a_probe_is_ordinary_again() -> None:
    async def main() -> None:
        async with controllers(lambda c: c.leader) as c:
            client = ControllerClient([c.follower, c.leader], token="t", timeout_s=0.5, probe_timeout_s=0.2)
            client.route = ControllerRoute.of([c.follower, c.leader]).went_silent(c.leader)
            try:
                await apply(client, 5)
                assert client.leader_addr == c.leader and not client.route.silent
                assert [h["broker_id"] for h in c.applied] == [5]
            finally:
                await client.close()

    asyncio.run(main())


@pytest.mark.skipif(link_timeouts() is None, reason="liveness is off (SPLITBRAIN_LINK=off): no quiet links")
def test_a_believed_leader_whose_link_went_quiet_is_probed_and_the_write_goes_elsewhere() -> None:
    """The leader stopped between two writes: the client has not seen it fail yet, but its link has heard nothing
    for longer than the liveness pings allow.  The write is not sent into it (its outcome would be unknown)."""
    async def main() -> None:
        link = link_timeouts()
        assert link is not None
        async with controllers(lambda c: c.leader) as c:
            client = ControllerClient([c.silent, c.follower, c.leader], token="t", timeout_s=5.0,
                                      probe_timeout_s=0.2)
            client.route = ControllerRoute((c.silent, c.follower, c.leader), leader=c.silent)
            try:
                await client._conn(c.silent)  # the link the client had to its leader before the leader stopped
                await asyncio.sleep(QUIET_PINGS * link.ping_interval_s + 0.2)
                await apply(client, 6)
                assert [h["broker_id"] for h in c.applied] == [6]
                assert client.leader_addr == c.leader and c.silent in client.route.silent
            finally:
                await client.close()

    asyncio.run(main())
