"""Producers and consumers sharing one BrokerConnections pool, over loopback: their requests go over one
connection per broker; the pool stays open until its last user closes; a lost connection fails the sends in
flight on it as unknown (never as definite), and the next send redials.  Nothing asserts how fast."""

from __future__ import annotations

import asyncio

from system_under_test.client.consumer import Consumer
from system_under_test.client.producer import BrokerConnections, Producer, SendError
from system_under_test.protocol import Connection, Frame, Reply, RequestCode, RpcServer

SEND = int(RequestCode.SEND_MESSAGE)


async def _cluster(master_handler: object) -> tuple[RpcServer, RpcServer, str, list[Connection]]:
    """A master served by ``master_handler`` and a controller that names it; returns the controller's address and
    the master's accepted connections (appended as they first send)."""
    seen: list[Connection] = []

    async def master(frame: Frame, conn: Connection) -> Reply | None:
        if conn not in seen:
            seen.append(conn)
        return await master_handler(frame, conn)  # type: ignore[operator]

    m = RpcServer(master)
    mh, mp = await m.start("127.0.0.1", 0)

    async def controller(frame: Frame, conn: Connection) -> Reply | None:
        return Reply(header={"master_addr": f"{mh}:{mp}", "master_epoch": 1, "master_id": 1,
                             "body": {"brokers": [[1, f"{mh}:{mp}"]]}})

    c = RpcServer(controller)
    ch, cp = await c.start("127.0.0.1", 0)
    return m, c, f"{ch}:{cp}", seen


def _ack(n: int) -> Reply:
    return Reply(header={"queue_offset": n, "phys_offset": 0, "count": 1, "master_epoch": 1, "broker_id": 1})


def test_clients_sharing_a_pool_use_one_connection_until_the_last_closes() -> None:
    async def main() -> None:
        stored: list[bytes] = []

        async def master(frame: Frame, conn: Connection) -> Reply | None:
            if frame.code == SEND:
                stored.append(frame.body[0][0])
                return _ack(len(stored) - 1)
            return Reply(header={"offset": 0})

        m, c, ctl, seen = await _cluster(master)
        pool = BrokerConnections()
        a = Producer([ctl], "t", timeout_s=5.0, brokers=pool)
        b = Producer([ctl], "t", timeout_s=5.0, brokers=pool)
        consumer = Consumer([ctl], "t", brokers=pool)
        try:
            assert pool.users == 3
            await asyncio.gather(*(p.send("broker-0", "t", 0, f"{i}".encode()) for i in range(20) for p in (a, b)))
            await consumer.committed("broker-0", "t", 0)
            assert len(stored) == 40 and len(seen) == 1, "the clients did not share one connection"
            await a.close()
            await a.close()  # a second close releases nothing more
            assert pool.users == 2 and not seen[0].closed
            await b.send("broker-0", "t", 0, b"after a closed")
            await b.close()
            await consumer.close()
            assert pool.users == 0
            await asyncio.sleep(0.05)
            assert all(conn.closed for conn in m.connections) or not m.connections
        finally:
            for x in (a, b, consumer):
                await x.close()
            await m.stop()
            await c.stop()

    asyncio.run(main())


def test_a_lost_shared_connection_fails_its_sends_in_flight_as_unknown_and_the_next_send_redials() -> None:
    async def main() -> None:
        hold = asyncio.Event()
        stored: list[bytes] = []

        async def master(frame: Frame, conn: Connection) -> Reply | None:
            body = frame.body[0][0]
            stored.append(body)
            if body.startswith(b"held"):
                await hold.wait()  # never set: the connection is cut under these
            return _ack(len(stored) - 1)

        m, c, ctl, seen = await _cluster(master)
        pool = BrokerConnections()
        a = Producer([ctl], "t", timeout_s=5.0, brokers=pool)
        b = Producer([ctl], "t", timeout_s=5.0, brokers=pool)
        try:
            await a.send("broker-0", "t", 0, b"warm")
            held = [asyncio.ensure_future(p.send("broker-0", "t", 0, b"held")) for p in (a, b)]
            for _ in range(200):
                if stored.count(b"held") == 2:
                    break
                await asyncio.sleep(0.01)
            seen[0].close("cut by the test")
            outcomes = await asyncio.gather(*held, return_exceptions=True)
            assert all(isinstance(e, SendError) and e.definite is False for e in outcomes), outcomes
            res = await b.send("broker-0", "t", 0, b"after the cut")
            assert res.queue_offset == len(stored) - 1 and len(seen) == 2  # a new connection
        finally:
            await a.close()
            await b.close()
            await m.stop()
            await c.stop()

    asyncio.run(main())
