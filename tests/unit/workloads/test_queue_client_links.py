"""The queue workload's clients and their broker connections: with ``share_connections`` every client opened from
the workload's client shares one counted pool (the last one closed closes it); without, each client's producer
and consumer have pools of their own, as before.  Nothing is dialed: pools connect on first use."""

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
        assert pool.users == 4
        await a.close({})
        assert pool.users == 2
        await b.close({})
        assert pool.users == 0

    asyncio.run(main())


def test_unshared_clients_each_have_their_own_pools() -> None:
    async def main() -> None:
        root = QueueClient(_Db(), replace(QueueOptions(), share_connections=False))
        a, b = await root.open({}, "n1"), await root.open({}, "n2")
        pools = [c.producer.brokers for c in (a, b)] + [c.consumer.brokers for c in (a, b)]
        assert len({id(p) for p in pools}) == 4 and all(p.users == 1 for p in pools)
        for c in (a, b):
            await c.close({})
        assert all(p.users == 0 for p in pools)

    asyncio.run(main())
