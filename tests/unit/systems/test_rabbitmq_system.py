"""RabbitMQ as systems a spec selects (``rabbitmq``: quorum queues; ``rabbitmq-mirrored``: classic mirrored
queues): the adapters, their DB's protocols, the examples, and what validation refuses.  Pure or in-process only:
nothing here starts RabbitMQ (tests/integration/systems/test_rabbitmq.py does)."""

from __future__ import annotations

from pathlib import Path

import pytest

import systems
from harness.commands._parts import validate_spec
from harness.protocols import CAPABILITIES, DB, Primary
from harness.spec import SpecError, load_spec, spec_from_dict
from systems.rabbitmq.client import RabbitQueueClient
from systems.rabbitmq.db import RabbitDB
from systems.rabbitmq.system import OFFERED

ROOT = Path(__file__).resolve().parents[3]


def _spec(system: str = "rabbitmq", **extra: object) -> dict[str, object]:
    return {"name": "r", "seed": 1, "system": system, "workloads": ["generic-queue"], **extra}


@pytest.mark.parametrize(("name", "qtype"), [("rabbitmq", "quorum"), ("rabbitmq-mirrored", "mirrored")])
def test_each_adapter_offers_what_its_db_implements_and_declares_its_queue_type(name: str, qtype: str) -> None:
    system = systems.get(name)
    assert system.roles == ("members",)
    assert system.capabilities == OFFERED == {"kill", "pause", "network", "log-files", "queue-client"}
    spec = spec_from_dict(_spec(name))
    db = system.make_db(spec, system.options(spec.cluster))
    assert isinstance(db, RabbitDB) and isinstance(db, DB) and db.spec is spec
    assert db.qtype.name == qtype and db.partition_handling == "autoheal"
    for cap in system.capabilities:
        protocol = CAPABILITIES[cap].protocol
        assert protocol is None or isinstance(db, protocol), cap
    assert not isinstance(db, Primary)  # no primaries: a leader per queue, not per cluster
    client = db.queue_client(timeout_s=2.0)
    assert isinstance(client, RabbitQueueClient) and client.qtype.name == qtype
    assert client.drain_bound_s < 4 * 2.0 + 10  # below the generic-queue workload's drain op timeout


@pytest.mark.parametrize(("name", "system"), [("rabbitmq.yaml", "rabbitmq"),
                                              ("rabbitmq-unsafe.yaml", "rabbitmq-mirrored")])
def test_the_examples_validate(name: str, system: str) -> None:
    spec = load_spec(ROOT / "examples" / name)
    validate_spec(spec)
    assert (spec.system, spec.nodes.members, spec.time_limit_s) == (system, ("m1", "m2", "m3"), 90.0)
    assert list(spec.nemesis.packages) == ["partition"]
    assert [w.name for w in spec.workloads] == ["generic-queue"]


def test_the_examples_differ_only_in_the_system_and_have_the_shape_a_loss_needs() -> None:
    """A confirmed message is lost only if clients on both sides of a partition publish, the partition outlasts
    the 4-s net_ticktime, and messages are still queued when it heals (sends outpace what polls take)."""
    safe, unsafe = (load_spec(ROOT / "examples" / n) for n in ("rabbitmq.yaml", "rabbitmq-unsafe.yaml"))
    for field in ("concurrency", "rate", "time_limit_s", "nemesis", "workloads", "phases", "backend"):
        assert getattr(safe, field) == getattr(unsafe, field), field
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
