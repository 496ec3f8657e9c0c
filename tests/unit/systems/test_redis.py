"""Redis with Sentinel as a system a spec selects: its options, the two config files, reply parsing, which errors
are definite, the client's op mapping without a server, and the adapter.  Pure or in-process only: nothing here
starts Redis (tests/integration/systems/test_redis.py does)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import redis.exceptions as rx
import yaml

import systems
from harness import cli
from harness.commands._parts import validate_spec
from harness.protocols import CAPABILITIES, DB, LogQueues, QueueClients
from harness.spec import SpecError, load_spec, spec_from_dict
from systems.redis.client import NoMaster, RedisQueueClient, records_of, xread_records
from systems.redis.config import (
    RedisOptions,
    is_definite,
    master_addr,
    parse_options,
    quorum,
    redis_conf,
    replication_role,
    sentinel_conf,
    wait_count,
)
from systems.redis.db import RedisDB
from workloads import registry

ROOT = Path(__file__).resolve().parents[3]


def _redis(system_options: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    cluster = {"system_options": system_options} if system_options is not None else {}
    return {"name": "r", "seed": 1, "system": "redis", "cluster": cluster, "workloads": ["generic-queue"], **extra}


# -- options ---------------------------------------------------------------------------------------------------------


def test_options_default_to_plain_asynchronous_replication() -> None:
    o = parse_options({})
    assert (o.wait_replicas, o.min_replicas_to_write) == (0, 0) and wait_count(o, 3) == 0
    assert wait_count(parse_options({"wait_replicas": "all"}, nodes=5), 5) == 4
    assert wait_count(parse_options({"wait_replicas": 1}), 3) == 1


@pytest.mark.parametrize(("raw", "key"), [
    ({"wait": 1}, "cluster.system_options.wait"),
    ({"wait_replicas": 3}, "cluster.system_options.wait_replicas"),  # 3 nodes: only 2 replicas
    ({"wait_replicas": "most"}, "cluster.system_options.wait_replicas"),
    ({"min_replicas_to_write": True}, "cluster.system_options.min_replicas_to_write"),
    ({"down_after_ms": 50}, "cluster.system_options.down_after_ms"),
])
def test_bad_options_are_refused_by_key(raw: dict[str, Any], key: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_options(raw, file="r.yaml", nodes=3)
    assert info.value.key == key and info.value.file == "r.yaml"


def test_a_spec_with_a_bad_redis_option_exits_2_naming_the_key(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "r.yaml"
    spec.write_text(yaml.safe_dump(_redis({"wait_replicas": 7})), encoding="utf-8")
    assert cli.main(["test", str(spec), "--results", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err
    assert "cluster.system_options.wait_replicas" in err and "Traceback" not in err


# -- config files ------------------------------------------------------------------------------------------------------


def test_the_first_node_is_a_master_and_the_others_replicate_it() -> None:
    o = RedisOptions(min_replicas_to_write=1, min_replicas_max_lag_s=5)
    master = redis_conf("10.0.0.1", "/d/redis.data", master_ip=None, o=o).splitlines()
    replica = redis_conf("10.0.0.2", "/d/redis.data", master_ip="10.0.0.1", o=o).splitlines()
    for conf in (master, replica):
        assert "appendonly yes" in conf and "dir /d/redis.data" in conf and "protected-mode no" in conf
        assert "min-replicas-to-write 1" in conf and "min-replicas-max-lag 5" in conf
    assert "bind 10.0.0.1" in master and not any(line.startswith("replicaof") for line in master)
    assert "bind 10.0.0.2" in replica and "replicaof 10.0.0.1 6379" in replica


@pytest.mark.parametrize(("nodes", "q"), [(3, 2), (5, 3)])
def test_sentinels_monitor_the_first_master_with_a_majority_quorum_and_low_timeouts(nodes: int, q: int) -> None:
    assert quorum(nodes) == q
    conf = sentinel_conf("10.0.0.2", "/d/sentinel", master_ip="10.0.0.1", nodes=nodes,
                         o=RedisOptions(down_after_ms=2000, failover_timeout_ms=5000)).splitlines()
    assert f"sentinel monitor sb 10.0.0.1 6379 {q}" in conf
    assert "sentinel down-after-milliseconds sb 2000" in conf and "sentinel failover-timeout sb 5000" in conf
    assert "bind 10.0.0.2" in conf and "port 26379" in conf


# -- replies and errors ------------------------------------------------------------------------------------------------


def test_replies_are_read_as_redis_gives_them() -> None:
    assert replication_role({"role": "master", "connected_slaves": 2}) == "master"
    assert replication_role("# Replication\r\nrole:slave\r\nmaster_host:10.0.0.1\r\n") == "slave"
    assert replication_role({}) is None
    assert master_addr(["10.0.0.3", "6379"]) == ("10.0.0.3", 6379)
    assert master_addr(None) is None and master_addr("10.0.0.3") is None
    entries = [("1-0", {"v": "w0-0"}), ("1-1", {"v": "w1-0"}), ("2-0", {"other": "x"})]
    assert records_of(entries) == [["1-0", "w0-0"], ["1-1", "w1-0"], ["2-0", None]]
    assert xread_records([["q0", entries[:1]], ["q1", entries[1:2]]], "q1") == [["1-1", "w1-0"]]
    assert xread_records({"q0": [entries[:1]]}, "q0") == [["1-0", "w0-0"]]
    assert xread_records(None, "q0") == [] and xread_records([], "q0") == []


@pytest.mark.parametrize(("exc", "definite"), [
    (rx.ReadOnlyError("You can't write against a read only replica."), True),
    (rx.ResponseError("NOREPLICAS Not enough good replicas to write."), True),
    (rx.BusyLoadingError("Redis is loading the dataset in memory"), True),
    (rx.ConnectionError("Error 111 connecting to 10.0.0.1:6379. Connection refused."), True),
    (rx.TimeoutError("Timeout connecting to server"), True),
    (rx.TimeoutError("Timeout reading from 10.0.0.1:6379"), False),
    (rx.ConnectionError("Connection closed by server."), False),
    (OSError("broken pipe"), False),
])
def test_only_refusals_and_connections_never_made_are_definite(exc: BaseException, definite: bool) -> None:
    assert is_definite(exc) is definite


# -- the client without a server ---------------------------------------------------------------------------------------


class _FakeRedis:
    """Answers the commands the client sends, from a script (no network)."""

    def __init__(self, *, wait: int = 2, xadd: Any = "5-0", fail: BaseException | None = None) -> None:
        self.sent: list[tuple[Any, ...]] = []
        self._wait, self._xadd, self._fail = wait, xadd, fail

    async def execute_command(self, *args: Any) -> Any:
        self.sent.append(args)
        if args[0] == "SENTINEL":
            return ["10.0.0.1", "6379"]
        return self._wait

    async def xadd(self, queue: str, fields: dict[str, str]) -> Any:
        self.sent.append(("XADD", queue, fields))
        if self._fail is not None:
            raise self._fail
        return self._xadd

    async def xread(self, streams: dict[str, str], count: int) -> Any:
        self.sent.append(("XREAD", streams, count))
        (queue, _), = streams.items()
        return [[queue, [("7-0", {"v": "a"}), ("8-0", {"v": "b"})]]]

    async def xrange(self, queue: str, min: str, max: str, count: int) -> Any:
        self.sent.append(("XRANGE", queue, min, max, count))
        return [("1-0", {"v": "a"})]

    async def aclose(self) -> None:
        return None


def _client(fake: _FakeRedis, wait: int = 0) -> RedisQueueClient:
    c = RedisQueueClient(timeout_s=1.0, wait=wait, wait_timeout_ms=500)
    c.node, c.nodes_by_ip, c.sentinel = "m2", {"10.0.0.1": "m1"}, fake  # type: ignore[assignment]
    c._conn = lambda host, port: fake  # type: ignore[method-assign]
    return c


def _run(c: RedisQueueClient, f: str, value: dict[str, Any]) -> dict[str, Any]:
    return asyncio.run(c.invoke({}, {"type": "invoke", "process": 3, "f": f, "value": value}))


def test_a_send_is_an_xadd_on_the_master_the_local_sentinel_names() -> None:
    fake = _FakeRedis()
    done = _run(_client(fake), "send", {"queue": "q0", "value": "w3-1"})
    assert done["type"] == "ok" and done["value"] == {"queue": "q0", "value": "w3-1", "position": "5-0"}
    assert (done["node"], done["client_node"]) == ("m1", "m2")
    assert fake.sent == [("SENTINEL", "get-master-addr-by-name", "sb"), ("XADD", "q0", {"v": "w3-1"})]


def test_with_wait_a_send_is_ok_only_once_every_replica_confirmed_it() -> None:
    fake = _FakeRedis(wait=2)
    assert _run(_client(fake, wait=2), "send", {"queue": "q0", "value": "a"})["type"] == "ok"
    assert ("WAIT", 2, 500) in fake.sent
    short = _run(_client(_FakeRedis(wait=1), wait=2), "send", {"queue": "q0", "value": "a"})
    assert short["type"] == "info" and "1 of 2 replicas" in short["error"]


@pytest.mark.parametrize(("exc", "kind"), [
    (rx.ReadOnlyError("You can't write against a read only replica."), "fail"),
    (rx.TimeoutError("Timeout reading from socket"), "info"),
])
def test_a_send_fails_only_when_redis_refused_it(exc: BaseException, kind: str) -> None:
    done = _run(_client(_FakeRedis(fail=exc)), "send", {"queue": "q0", "value": "a"})
    assert done["type"] == kind and type(exc).__name__ in done["error"]


def test_a_poll_reads_from_the_clients_cursor_and_moves_it() -> None:
    fake = _FakeRedis()
    c = _client(fake)
    first = _run(c, "poll", {"queue": "q0", "max": 4})
    assert first["value"]["records"] == [["7-0", "a"], ["8-0", "b"]]
    _run(c, "poll", {"queue": "q0", "max": 4})
    reads = [s for s in fake.sent if s[0] == "XREAD"]
    assert reads == [("XREAD", {"q0": "0-0"}, 4), ("XREAD", {"q0": "8-0"}, 4)]


def test_a_drain_reads_the_whole_stream() -> None:
    fake = _FakeRedis()
    done = _run(_client(fake), "drain", {"queue": "q1"})
    assert done["type"] == "ok" and done["value"]["records"] == [["1-0", "a"]]
    assert ("XRANGE", "q1", "-", "+", 1000) in fake.sent


def test_without_a_master_every_op_fails() -> None:
    c = RedisQueueClient()
    for f in ("send", "poll", "drain"):
        done = _run(c, f, {"queue": "q0", "value": "a"})
        assert done["type"] == "fail" and NoMaster.__name__ in done["error"]


# -- the adapter -------------------------------------------------------------------------------------------------------


def test_the_redis_adapter_offers_what_its_db_implements() -> None:
    system = systems.get("redis")
    assert system.roles == ("members",)
    assert system.capabilities == {"kill", "pause", "network", "primaries", "log-files", "queue-client"}
    spec = spec_from_dict(_redis({"wait_replicas": "all"}, nodes={"members": 5}))
    db = system.make_db(spec, system.options(spec.cluster))
    assert isinstance(db, RedisDB) and isinstance(db, DB) and db.spec is spec
    assert isinstance(db, QueueClients) and isinstance(db, LogQueues) and db.log is True and db.exactly_once is False
    assert db.queue_client(timeout_s=1.5).wait == 4
    for cap in system.capabilities:
        protocol = CAPABILITIES[cap].protocol
        assert protocol is None or isinstance(db, protocol), cap
    wl = registry.build("generic-queue", registry.WorkloadContext(spec, db, {}, 1, 0))
    assert isinstance(wl.client, RedisQueueClient) and wl.checkers["total-queue"].log is True


@pytest.mark.parametrize("name", ["redis.yaml", "redis-wait.yaml"])
def test_the_redis_examples_validate_and_differ_only_in_replication(name: str) -> None:
    spec = load_spec(ROOT / "examples" / name)
    options = validate_spec(spec)
    assert (spec.system, spec.nodes.members) == ("redis", ("m1", "m2", "m3"))
    assert spec.nemesis.options["partition"] == {"kinds": ["isolate"], "targets": ["primaries"]}
    o = parse_options(options.system_options)
    assert (wait_count(o, 3), o.min_replicas_to_write) == ((2, 1) if "wait" in name else (0, 0))
    other = load_spec(ROOT / "examples" / ("redis.yaml" if "wait" in name else "redis-wait.yaml"))
    for field in ("concurrency", "rate", "time_limit_s", "nemesis", "workloads", "phases"):
        assert getattr(spec, field) == getattr(other, field), field
