"""The queue workload's clients and their connections: with ``share_connections`` every client opened from the
workload's client shares one counted broker pool and one controller client (the last one closed closes them);
without, each client's producer and consumer have their own, as before.  Nothing is dialed: connections open on
first use."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import Any

from workloads.queue import QueueClient, QueueOptions


@dataclass
class _Db:
    token: str = "t"

    def controller_addrs(self, test: dict[str, Any]) -> list[str]:
        return ["127.0.0.1:1"]




def test_shared_clients_use_one_pool_that_the_last_close_releases() -> None:
    async def main() -> None:
        root = QueueClient(_Db(), QueueOptions())
        a, b = await root.open({}, "n1"), await root.open({}, "n2")
        pools = {id(c.producer.brokers) for c in (a, b)} | {id(c.consumer.brokers) for c in (a, b)}
        assert len(pools) == 1
        pool = a.producer.brokers
        controllers = {id(c.producer.controller) for c in (a, b)} | {id(c.consumer.controller) for c in (a, b)}
        assert pool.users == 4 and len(controllers) == 1
        await a.close({})
        await a.close({})  # a second close releases nothing more
        assert pool.users == 2 and root._controller is b.producer.controller
        await b.close({})
        assert pool.users == 0 and root._controller is None
        c = await root.open({}, "n3")  # a client opened after all closed gets a fresh controller client
        assert c.producer.controller is root._controller is not None
        assert c.producer.controller is not b.producer.controller
        await c.close({})

    asyncio.run(main())


def test_unshared_clients_each_have_their_own_pools() -> None:
    async def main() -> None:
        root = QueueClient(_Db(), replace(QueueOptions(), share_connections=False))
        a, b = await root.open({}, "n1"), await root.open({}, "n2")
        pools = [c.producer.brokers for c in (a, b)] + [c.consumer.brokers for c in (a, b)]
        assert len({id(p) for p in pools}) == 4 and all(p.users == 1 for p in pools)
        assert len({id(c.producer.controller) for c in (a, b)} | {id(c.consumer.controller) for c in (a, b)}) == 4
        for c in (a, b):
            await c.close({})
        assert all(p.users == 0 for p in pools)

    asyncio.run(main())
