"""The RabbitMQ adapter's pure parts: queue types, config files, environment, op shapes, and what its client
answers without a broker.  Nothing here starts RabbitMQ (tests/integration/systems/test_rabbitmq.py does)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from harness.errors import SpecError
from systems.rabbitmq.client import RabbitQueueClient, check_op
from systems.rabbitmq.config import (
    OPTION_KEYS,
    QUEUE_TYPES,
    RabbitOptions,
    advanced_config,
    node_env,
    node_name,
    parse_options,
    policy_argv,
    queue_type,
    rabbitmq_conf,
)

PEERS = ["10.9.1.1", "10.9.1.2", "10.9.1.3"]


def _conf(text: str) -> dict[str, str]:
    return dict(line.split(" = ", 1) for line in text.splitlines())


def test_the_conf_lists_every_peer_listens_on_the_node_and_sets_partition_handling() -> None:
    conf = _conf(rabbitmq_conf("10.9.1.2", PEERS, partition_handling="pause_minority", amqp_port=5673))
    assert conf["listeners.tcp.default"] == "10.9.1.2:5673"
    assert conf["cluster_partition_handling"] == "pause_minority"
    assert conf["cluster_formation.peer_discovery_backend"] == "classic_config"
    assert [conf[f"cluster_formation.classic_config.nodes.{i}"] for i in (1, 2, 3)] == [
        "rabbit@10.9.1.1", "rabbit@10.9.1.2", "rabbit@10.9.1.3"]
    assert conf["loopback_users.guest"] == "false"  # clients connect from the host, not the node's loopback


def test_the_conf_refuses_a_node_outside_the_cluster_and_unknown_partition_handling() -> None:
    with pytest.raises(ValueError, match="not one of the peers"):
        rabbitmq_conf("10.9.1.9", PEERS)
    with pytest.raises(ValueError, match="partition_handling"):
        rabbitmq_conf("10.9.1.1", PEERS, partition_handling="pause_if_all_down")


def test_advanced_config_sets_net_ticktime_and_refuses_nonsense() -> None:
    assert advanced_config(net_ticktime_s=4) == "[{kernel, [{net_ticktime, 4}]}].\n"
    with pytest.raises(ValueError, match="net_ticktime_s"):
        advanced_config(net_ticktime_s=0)


def test_the_environment_keeps_every_file_under_the_node_and_names_the_node_by_address() -> None:
    env = node_env(Path("/x/n2/rabbitmq"), "10.9.1.2")
    assert env["RABBITMQ_NODENAME"] == node_name("10.9.1.2") == "rabbit@10.9.1.2"
    assert env["RABBITMQ_USE_LONGNAME"] == "true"
    assert env["HOME"] == "/x/n2/rabbitmq/home"  # the cookie's home, for the server and rabbitmqctl
    paths = [v for k, v in env.items() if k.endswith(("_BASE", "_FILE"))]
    assert len(paths) == 7 and all(p.startswith("/x/n2/rabbitmq/") for p in paths)
    assert env["RUNNING_UNDER_SYSTEMD"] == "true"  # the start script execs the VM: the tracked pid is the broker


def test_queue_types_quorum_has_no_policy_mirrored_mirrors_every_queue_on_all_nodes() -> None:
    assert set(QUEUE_TYPES) == {"quorum", "mirrored"}
    assert queue_type("quorum").arguments == {"x-queue-type": "quorum"}
    assert policy_argv("rabbitmqctl", "10.9.1.1", queue_type("quorum")) is None
    argv = policy_argv("rabbitmqctl", "10.9.1.1", queue_type("mirrored"))
    assert argv is not None and argv[:4] == ["rabbitmqctl", "-n", "rabbit@10.9.1.1", "--longnames"]
    assert argv[4:8] == ["set_policy", "--apply-to", "queues", "splitbrain-ha-all"]
    assert argv[8] == "^q"  # the workload's queues q0..
    assert json.loads(argv[9]) == {"ha-mode": "all", "ha-sync-mode": "automatic"}
    with pytest.raises(ValueError, match="queue type must be one of"):
        queue_type("stream")


@pytest.mark.parametrize(("op", "problem"), [
    ({"f": "send", "value": {"queue": "q0", "value": "w1-0"}}, None),
    ({"f": "poll", "value": {"queue": "q0", "max": 4}}, None),
    ({"f": "drain", "value": {"queue": "q1"}}, None),
    ({"f": "read", "value": {"queue": "q0"}}, "unknown f 'read'"),
    ({"f": "send", "value": "w1-0"}, "needs a value dict"),
    ({"f": "drain", "value": {"queue": ""}}, "needs a value dict"),
    ({"f": "send", "value": {"queue": "q0", "value": 3}}, "string 'value'"),
    ({"f": "poll", "value": {"queue": "q0", "max": 0}}, "'max' >= 1"),
    ({"f": "poll", "value": {"queue": "q0", "max": True}}, "'max' >= 1"),
])
def test_op_shapes(op: dict[str, Any], problem: str | None) -> None:
    got = check_op(op)
    assert got is None if problem is None else problem in str(got)


def test_a_malformed_op_or_an_unopened_client_fails_without_touching_a_broker() -> None:
    client = RabbitQueueClient(timeout_s=0.5)
    bad = {"process": 1, "type": "invoke", "f": "poll", "value": {"queue": "q0", "max": -1}}
    done = asyncio.run(client.invoke({}, bad))
    assert done["type"] == "fail" and "'max' >= 1" in done["error"] and done["process"] == 1
    send = {"process": 2, "type": "invoke", "f": "send", "value": {"queue": "q0", "value": "v"}}
    done = asyncio.run(client.invoke({}, send))
    assert done["type"] == "fail" and "not open" in done["error"]


def test_a_send_that_cannot_connect_is_a_definite_fail_naming_the_node() -> None:
    class Remote:
        def address(self, node: str) -> str:
            return "127.0.0.1"

    async def go() -> dict[str, Any]:
        client = await RabbitQueueClient(port=1, timeout_s=0.5).open({"remote": Remote()}, "n1")
        try:
            return await client.invoke({}, {"process": 0, "type": "invoke", "f": "send",
                                            "value": {"queue": "q0", "value": "v"}})
        finally:
            await client.close({})

    done = asyncio.run(go())
    assert done["type"] == "fail" and done["node"] == "n1" and done["error"].startswith("connect on n1")


def test_a_drain_whose_broker_is_down_tries_the_other_nodes_and_says_which_failed() -> None:
    class Remote:
        def address(self, node: str) -> str:
            return {"n1": "127.0.0.1", "n2": "127.0.0.2"}[node]

    async def go() -> tuple[dict[str, Any], dict[str, Any]]:
        test = {"remote": Remote(), "nodes": ["n1", "n2"]}
        client = await RabbitQueueClient(port=1, timeout_s=0.5).open(test, "n1")
        assert client.others == (("n2", "127.0.0.2"),)
        try:
            drain = await client.invoke({}, {"process": 0, "type": "invoke", "f": "drain", "value": {"queue": "q0"}})
            poll = await client.invoke({}, {"process": 0, "type": "invoke", "f": "poll",
                                            "value": {"queue": "q0", "max": 1}})
            return drain, poll
        finally:
            await client.close({})

    drain, poll = asyncio.run(go())
    assert drain["type"] == "fail" and drain["node"] == "n1"
    assert "connect on n1 (127.0.0.1:1)" in drain["error"] and "connect on n2 (127.0.0.2:1)" in drain["error"]
    assert poll["type"] == "fail" and "n2" not in poll["error"]  # only a drain goes elsewhere


@pytest.mark.parametrize(("raw", "default", "want"), [
    ({}, "quorum", RabbitOptions()),
    ({}, "mirrored", RabbitOptions(queue_type="mirrored")),
    ({"queue_type": "quorum"}, "mirrored", RabbitOptions(queue_type="quorum")),
    ({"queue_type": "mirrored", "partition_handling": "ignore", "net_ticktime_s": 600}, "quorum",
     RabbitOptions("mirrored", "ignore", 600)),
], ids=["nothing-set", "the-adapter-default", "the-spec-beats-the-default", "everything-set"])
def test_parse_options(raw: dict[str, Any], default: str, want: RabbitOptions) -> None:
    assert parse_options(raw, file="s.yaml", default_queue_type=default) == want


def test_every_option_key_is_a_field_and_the_defaults_are_the_db_s() -> None:
    from dataclasses import fields

    from systems.rabbitmq.db import RabbitDB

    assert list(OPTION_KEYS) == [f.name for f in fields(RabbitOptions)]
    db, o = RabbitDB(), RabbitOptions()
    assert (db.qtype.name, db.partition_handling, db.net_ticktime_s) == (o.queue_type, o.partition_handling,
                                                                          o.net_ticktime_s)


def test_a_bad_option_names_its_key_the_value_and_what_it_takes() -> None:
    with pytest.raises(SpecError) as info:
        parse_options({"queue_type": "raft"}, file="s.yaml")
    assert str(info.value) == ("s.yaml: cluster.system_options.queue_type: got 'raft'; expected one of quorum, "
                               "mirrored")
