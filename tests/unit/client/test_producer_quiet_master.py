"""The producer and a master that went quiet, over loopback: the master is a socket that listens but never reads
or answers (as a SIGSTOPped process looks from outside).  A send into it is reported as unknown; the next send,
while the controller still names that master, PINGs it first instead of sending, fails over definitely, and lands
on the master the controller names next.  Nothing asserts how fast."""

from __future__ import annotations

import asyncio
import socket

import pytest

from system_under_test.client.producer import Producer, SendError
from system_under_test.client.quiet_link import QUIET_PINGS
from system_under_test.protocol import Connection, Frame, Reply, RequestCode, RpcServer, link_timeouts

pytestmark = pytest.mark.skipif(link_timeouts() is None, reason="liveness is off (SPLITBRAIN_LINK=off): no quiet links")

SEND = int(RequestCode.SEND_MESSAGE)
INFO = int(RequestCode.CONTROLLER_GET_REPLICA_INFO)


def test_a_send_to_a_quiet_master_probes_it_and_goes_to_the_next_master() -> None:
    async def main() -> None:
        quiet = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        quiet.bind(("127.0.0.1", 0))
        quiet.listen(64)  # never accepted, never read
        qh, qp = quiet.getsockname()
        stopped = f"{qh}:{qp}"
        stored: list[dict[str, object]] = []
        named: list[str] = []

        async def master(frame: Frame, conn: Connection) -> Reply | None:
            stored.append(dict(frame.header))
            return Reply(header={"queue_offset": len(stored) - 1, "phys_offset": 0, "count": 1, "master_epoch": 2,
                                 "broker_id": 2})

        live_master = RpcServer(master)
        mh, mp = await live_master.start("127.0.0.1", 0)

        async def controller(frame: Frame, conn: Connection) -> Reply | None:
            # the stopped master until the producer has asked three times (its lease has not run out yet)
            addr, epoch = (stopped, 1) if len(named) < 3 else (f"{mh}:{mp}", 2)
            named.append(addr)
            return Reply(header={"master_addr": addr, "master_epoch": epoch, "master_id": epoch})

        ctl = RpcServer(controller)
        ch, cp = await ctl.start("127.0.0.1", 0)
        link = link_timeouts()
        assert link is not None
        # the first send waits longer than it takes its link to go quiet
        producer = Producer([f"{ch}:{cp}"], "t", timeout_s=QUIET_PINGS * link.ping_interval_s + 0.5,
                            probe_timeout_s=0.2)
        try:
            with pytest.raises(SendError) as info:
                await producer.send("broker-0", "t", 0, b"first")
            assert info.value.definite is False  # it was sent: its outcome is unknown
            result = await producer.send("broker-0", "t", 0, b"second", timeout_s=10.0)
            assert result.broker_addr == f"{mh}:{mp}" and len(stored) == 1
            assert named.count(stopped) == 3, "the producer never asked the controller again after the probe"
        finally:
            await producer.close()
            await ctl.stop()
            await live_master.stop()
            quiet.close()

    asyncio.run(main())
