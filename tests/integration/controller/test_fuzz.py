"""Hostile input against a live controller quorum: random field values for every request code and
random byte streams never crash or wedge a server (an error reply or a closed connection)."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from system_under_test.protocol import SCHEMAS, ConnectionLost, RequestCode, RequestTimeout, connect
from systems.splitbrain.local_cluster import LocalQuorum

pytestmark = pytest.mark.integration

values = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.text(max_size=20), st.binary(max_size=20),
    st.lists(st.integers(-5, 2**40), max_size=5),
    st.dictionaries(st.text(max_size=5), st.integers(-(2**63), 2**63 - 1), max_size=3),
)


def headers_for(code: RequestCode) -> st.SearchStrategy[dict[str, Any]]:
    schema = SCHEMAS.get(code, {})
    names = list(schema) + ["junk"]
    return st.dictionaries(st.sampled_from(names), values, max_size=len(names))


TYPED = {
    "int": st.integers(-(2**63), 2**63 - 1) | st.integers(-3, 5),
    "str": st.text(max_size=12) | st.sampled_from(["s", "splitbrain", ""]),
    "bool": st.booleans(),
    "float": st.floats(allow_nan=True, allow_infinity=True),
    "bytes": st.binary(max_size=12),
    "list[int]": st.lists(st.integers(-(2**63), 2**63 - 1) | st.integers(0, 4), max_size=4),
    "list[str]": st.lists(st.text(max_size=5), max_size=3),
    "list": st.lists(values, max_size=3),
    "map": st.dictionaries(st.text(max_size=5), values, max_size=3),
    "any": values,
}


def valid_headers_for(code: RequestCode, token: str) -> st.SearchStrategy[dict[str, Any]]:
    """Headers that pass the schema (so they reach the request handlers) with hostile values."""
    schema = SCHEMAS.get(code, {})
    fields = {name: (st.none() if spec.nullable else TYPED[spec.type]) | TYPED[spec.type]
              for name, spec in schema.items() if name != "token"}
    required = {n for n, spec in schema.items() if spec.required and n != "token"}
    return st.fixed_dictionaries({n: f for n, f in fields.items() if n in required},
                                 optional={n: f for n, f in fields.items() if n not in required}).map(
        lambda h: {**h, "token": token} if "token" in schema else h)


codes = st.sampled_from([c for c in RequestCode if c not in (RequestCode.ADMIN_SHUTDOWN,
                                                             RequestCode.ADMIN_FAILPOINT_ARM,
                                                             RequestCode.ADMIN_CLOCK_SET)])


@pytest.fixture(scope="module")
def quorum(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalQuorum]:
    with LocalQuorum(Path(tmp_path_factory.mktemp("fuzz"))) as q:
        q.start_all()
        asyncio.run(q.wait_leader())
        yield q


async def _alive(q: LocalQuorum) -> None:
    for addr in q.addrs:
        conn = await connect(addr, timeout_s=2)
        try:
            resp = await conn.request(RequestCode.CONTROLLER_GET_METADATA_INFO, timeout_s=5)
            assert resp.header["active"] is True
        finally:
            conn.close()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_headers_get_an_answer_and_never_kill_a_server(quorum: LocalQuorum, data: st.DataObject) -> None:
    async def main() -> None:
        batch = [(data.draw(codes), None) for _ in range(4)]
        batch = [(c, data.draw(headers_for(c) | valid_headers_for(c, quorum.token))) for c, _ in batch]
        conn = await connect(quorum.addrs[data.draw(st.integers(0, 2))], timeout_s=2)
        try:
            for code, header in batch:
                if code == RequestCode.RAFT_MESSAGE:
                    header = {**header, "token": quorum.token, "from_id": "c9"}
                    conn.send_oneway(code, header, data.draw(st.lists(values, max_size=3)))
                    continue
                try:
                    await conn.request(code, header, data.draw(values), timeout_s=10, check=False)
                except (ConnectionLost, RequestTimeout) as exc:
                    raise AssertionError(f"{code.name} {header!r} got no answer: {exc}") from exc
        finally:
            conn.close()
        await _alive(quorum)

    asyncio.run(main())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(garbage=st.one_of(st.binary(max_size=200), st.binary(max_size=50).map(lambda b: struct.pack(">I", len(b)) + b)))
def test_random_bytes_close_the_connection_only(quorum: LocalQuorum, garbage: bytes) -> None:
    async def main() -> None:
        host, port = quorum.addrs[0].split(":")
        _reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(garbage)
        await writer.drain()
        writer.close()
        await _alive(quorum)

    asyncio.run(main())
