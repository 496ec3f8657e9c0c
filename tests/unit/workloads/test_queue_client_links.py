"""The queue workload's clients and their connections: with ``share_connections`` every client opened from the
workload's client shares one counted broker pool and one controller client (the last one closed closes them);
without, each client's producer and consumer have their own, as before.  Nothing is dialed: connections open on
first use."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from workloads.queue import QueueClient, QueueOptions


@dataclass
class _Db:
    """What the queue client calls of a DB (:class:`workloads.common.WireDB`); only ``controller_addrs`` and
    ``token`` are reached by ``open``."""

    token: str = "t"
    controllers: tuple[str, ...] = ("c1",)
    spec: Any = None

    def controller_addrs(self, test: Mapping[str, Any]) -> list[str]:
        return ["127.0.0.1:1"]

    def client(self, test: Mapping[str, Any], timeout_s: float = 1.0) -> Any:
        raise AssertionError("open dials nothing")

    def argv(self, test: Mapping[str, Any], node: str) -> list[str]:
        return []




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


def test_a_db_without_the_wire_protocol_is_refused_naming_what_it_lacks() -> None:
    """A DB that got past validation without our wire protocol stops the client's first call with an error naming
    the DB's class and the capability, not an AttributeError."""
    from harness.protocols import MissingCapability

    @dataclass
    class _Other:
        token: str = "t"

        def controller_addrs(self, test: Mapping[str, Any]) -> list[str]:
            return ["127.0.0.1:1"]

    try:
        asyncio.run(QueueClient(_Other(), QueueOptions()).open({}, "n1"))
    except MissingCapability as exc:
        assert exc.user == "queue" and exc.missing == ["splitbrain-protocol", "a spec (Specified)"]
        assert exc.db_type.endswith("_Other") and "splitbrain-protocol" in str(exc)
    else:
        raise AssertionError("a DB without WireClients was accepted")
