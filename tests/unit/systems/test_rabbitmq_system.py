"""RabbitMQ as a system a spec selects: ``system: rabbitmq`` with ``cluster.system_options.queue_type`` (quorum by
default, or mirrored), and ``rabbitmq-mirrored``, the same adapter whose default is mirrored.  The adapter, its DB's
protocols, its options and their errors, the examples, and what validation refuses.  Pure or in-process only:
nothing here starts RabbitMQ (tests/integration/systems/test_rabbitmq.py does)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import systems
from harness import cli
from harness.commands._parts import validate_spec
from harness.protocols import CAPABILITIES, DB, Primary
from harness.spec import SpecError, load_spec, spec_from_dict
from systems.rabbitmq.client import RabbitQueueClient
from systems.rabbitmq.db import RabbitDB
from systems.rabbitmq.system import OFFERED, RabbitSystem

ROOT = Path(__file__).resolve().parents[3]


def _spec(system: str = "rabbitmq", **extra: object) -> dict[str, object]:
    return {"name": "r", "seed": 1, "system": system, "workloads": ["generic-queue"], **extra}


def _db(raw: dict[str, object]) -> RabbitDB:
    spec = spec_from_dict(raw, file="s.yaml")
    system = systems.get(spec.system)
    db = system.make_db(spec, system.options(spec.cluster, file="s.yaml"))
    assert isinstance(db, RabbitDB)
    return db


@pytest.mark.parametrize(("name", "options", "qtype"), [
    ("rabbitmq", None, "quorum"),
    ("rabbitmq", {"queue_type": "mirrored"}, "mirrored"),
    ("rabbitmq", {"queue_type": "quorum"}, "quorum"),
    ("rabbitmq-mirrored", None, "mirrored"),  # the name of the specs written before the option
    ("rabbitmq-mirrored", {"queue_type": "quorum"}, "quorum"),
], ids=["default", "mirrored", "quorum", "mirrored-name", "mirrored-name-told-quorum"])
def test_the_adapter_offers_what_its_db_implements_and_declares_the_spec_s_queue_type(
        name: str, options: dict[str, object] | None, qtype: str) -> None:
    system = systems.get(name)
    assert isinstance(system, RabbitSystem) and system.name == name
    assert system.roles == ("members",)
    assert system.capabilities == OFFERED == {"kill", "pause", "network", "log-files", "queue-client"}
    raw = _spec(name) if options is None else _spec(name, cluster={"system_options": options})
    db = _db(raw)
    assert isinstance(db, DB) and db.spec is not None
    assert db.qtype.name == qtype and db.partition_handling == "autoheal" and db.net_ticktime_s == 4
    for cap in system.capabilities:
        protocol = CAPABILITIES[cap].protocol
        assert protocol is None or isinstance(db, protocol), cap
    assert not isinstance(db, Primary)  # no primaries: a leader per queue, not per cluster
    client = db.queue_client(timeout_s=2.0)
    assert isinstance(client, RabbitQueueClient) and client.qtype.name == qtype
    assert client.drain_bound_s < 4 * 2.0 + 10  # below the generic-queue workload's drain op timeout


def test_both_names_are_one_adapter_differing_only_in_the_default_queue_type() -> None:
    quorum, mirrored = systems.get("rabbitmq"), systems.get("rabbitmq-mirrored")
    assert type(quorum) is type(mirrored) is RabbitSystem
    assert (quorum.default_queue_type, mirrored.default_queue_type) == ("quorum", "mirrored")
    for field in ("roles", "capabilities", "node_packages", "image_name"):
        assert getattr(quorum, field) == getattr(mirrored, field), field


def test_the_cluster_wide_settings_reach_the_db() -> None:
    db = _db(_spec(cluster={"system_options": {"partition_handling": "pause_minority", "net_ticktime_s": 10}}))
    assert (db.qtype.name, db.partition_handling, db.net_ticktime_s) == ("quorum", "pause_minority", 10)


@pytest.mark.parametrize(("options", "key", "words"), [
    ({"queue_type": "raft"}, "cluster.system_options.queue_type", ["'raft'", "one of quorum, mirrored"]),
    ({"queue_type": "Quorum"}, "cluster.system_options.queue_type", ["one of quorum, mirrored"]),
    ({"queue_type": ["quorum"]}, "cluster.system_options.queue_type", ["one of quorum, mirrored"]),
    ({"queue_type": None}, "cluster.system_options.queue_type", ["one of quorum, mirrored"]),
    ({"queue_typ": "quorum"}, "cluster.system_options.queue_typ", ["a RabbitMQ option", "queue_type"]),
    ({"partition_handling": "pause_if_all_down"}, "cluster.system_options.partition_handling",
     ["autoheal, pause_minority, ignore"]),
    ({"net_ticktime_s": 0}, "cluster.system_options.net_ticktime_s", ["1..600"]),
    ({"net_ticktime_s": True}, "cluster.system_options.net_ticktime_s", ["1..600"]),
    ({"net_ticktime_s": 4.5}, "cluster.system_options.net_ticktime_s", ["1..600"]),
], ids=["unknown-type", "capitalised", "a-list", "null", "misspelt-key", "pause-if-all-down", "tick-0",
        "tick-bool", "tick-float"])
@pytest.mark.parametrize("name", ["rabbitmq", "rabbitmq-mirrored"])
def test_a_bad_option_is_refused_on_its_key_before_anything_starts(
        name: str, options: dict[str, object], key: str, words: list[str]) -> None:
    spec = spec_from_dict(_spec(name, cluster={"system_options": options}), file="s.yaml")
    with pytest.raises(SpecError) as info:
        systems.get(name).options(spec.cluster, file="s.yaml")
    assert info.value.key == key and str(info.value).startswith(f"s.yaml: {key}: got ")
    for w in words:
        assert w in str(info.value), str(info.value)
    with pytest.raises(SpecError) as again:
        validate_spec(spec)
    assert again.value.key == key


def test_the_cli_exits_2_naming_the_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_spec(cluster={"system_options": {"queue_type": "raft"}})))
    assert cli.main(["test", str(path), "--results", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err
    assert "cluster.system_options.queue_type: got 'raft'; expected one of quorum, mirrored" in err, err
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").rglob("results.json"))


@pytest.mark.parametrize(("name", "qtype"), [("rabbitmq.yaml", "quorum"), ("rabbitmq-unsafe.yaml", "mirrored")])
def test_the_examples_validate(name: str, qtype: str) -> None:
    spec = load_spec(ROOT / "examples" / name)
    validate_spec(spec)
    assert (spec.system, spec.nodes.members, spec.time_limit_s) == ("rabbitmq", ("m1", "m2", "m3"), 90.0)
    assert _db(_spec(cluster=dict(spec.cluster))).qtype.name == qtype
    assert list(spec.nemesis.packages) == ["partition"]
    assert [w.name for w in spec.workloads] == ["generic-queue"]


def test_the_examples_differ_only_in_the_queue_type_and_have_the_shape_a_loss_needs() -> None:
    """A confirmed message is lost only if clients on both sides of a partition publish, the partition outlasts
    the 4-s net_ticktime, and messages are still queued when it heals (sends outpace what polls take)."""
    safe, unsafe = (load_spec(ROOT / "examples" / n) for n in ("rabbitmq.yaml", "rabbitmq-unsafe.yaml"))
    for field in ("system", "concurrency", "rate", "time_limit_s", "nemesis", "workloads", "phases", "backend",
                  "nodes"):
        assert getattr(safe, field) == getattr(unsafe, field), field
    assert safe.cluster == {"system_options": {"queue_type": "quorum"}}
    assert unsafe.cluster == {"system_options": {"queue_type": "mirrored"}}
    assert unsafe.concurrency % 3 == 0 and unsafe.concurrency // 3 >= 2
    assert set(unsafe.nemesis.options["partition"]["kinds"]) <= {"isolate", "random-halves"}
    assert unsafe.nemesis.interval_s / 2 > 4  # the shortest partition outlasts net_ticktime
    opts = unsafe.workloads[0].options
    assert opts["send_fraction"] > (1 - opts["send_fraction"]) * opts["max_poll"]


@pytest.mark.parametrize(("raw", "key", "words"), [
    (_spec(nemesis={"packages": ["partition"], "targets": ["primaries"]}), "nemesis.targets[0]", ["primaries"]),
    (_spec("rabbitmq-mirrored", nemesis={"packages": ["packet"]}), "nemesis.packages", ["node-helpers"]),
    (_spec(nemesis={"packages": ["clock"]}), "nemesis.packages", ["clock-admin"]),
    (_spec(workloads=["register"]), "workloads[0].name", ["register-client", "'rabbitmq'"]),
])
def test_what_rabbitmq_cannot_serve_is_refused_by_key(raw: dict[str, object], key: str, words: list[str]) -> None:
    with pytest.raises(SpecError) as info:
        validate_spec(spec_from_dict(raw, file="s.yaml"))
    assert info.value.key == key
    for w in words:
        assert w in str(info.value)
