"""Events (construction, one shared encode/decode table) and ControllerConfig validation."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from system_under_test.controller import (
    EVENT_TYPES,
    AlterSyncStateSet,
    ApplyBrokerId,
    CleanBrokerData,
    ConfigError,
    ControlledShutdown,
    ControllerConfig,
    ElectMaster,
    EventError,
    FenceBroker,
    RegisterBroker,
    UnfenceBroker,
    UpdateBrokerAddress,
    decode_events,
    describe_event,
    encode_events,
)
from system_under_test.controller import events as events_mod

EVENTS = [
    ApplyBrokerId("c1", "bs", 1, "10.0.0.1:1", "rc"),
    UpdateBrokerAddress("c1", "bs", 1, "10.0.0.2:1"),
    RegisterBroker("c1", "bs", 1, "inc", 7),
    ElectMaster("c1", "bs", True, 2, 3, 4),
    ElectMaster("c1", "bs", False, None, 3, 4),
    AlterSyncStateSet("c1", "bs", 1, 2, (1, 2, 3), 5),
    CleanBrokerData("c1", "bs", ()),
    CleanBrokerData("c1", "bs", (2, 3)),
    FenceBroker("c1", "bs", 1, 9),
    UnfenceBroker("c1", "bs", 1, 9),
    ControlledShutdown("c1", "bs", 1, 9),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e.describe())
def test_round_trip_each_event(event: Any) -> None:
    assert decode_events(encode_events([event])) == [event]
    assert describe_event(event) == event.describe() and type(event).__name__ in event.describe()


def test_every_event_type_is_in_the_table() -> None:
    assert {type(e) for e in EVENTS} == {cls for _, cls in EVENT_TYPES}


def test_duplicate_type_ids_fail_to_load() -> None:
    with pytest.raises(EventError, match="type id 1"):
        events_mod._build_tables(((1, ApplyBrokerId), (1, ElectMaster)))
    with pytest.raises(EventError, match="listed twice"):
        events_mod._build_tables(((1, ApplyBrokerId), (2, ApplyBrokerId)))


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: ApplyBrokerId("c1", "bs", 0, "a", "rc"), "broker_id"),
        (lambda: ApplyBrokerId("c1", "", 1, "a", "rc"), "broker_name"),
        (lambda: ApplyBrokerId("c1", "bs", 1, "a", ""), "register_code"),
        (lambda: ElectMaster("c1", "bs", True, None, 0, 0), "broker_id"),
        (lambda: ElectMaster("c1", "bs", False, 3, 0, 0), "None"),
        (lambda: ElectMaster("c1", "bs", True, 1, -1, 0), "expected_master_epoch"),
        (lambda: AlterSyncStateSet("c1", "bs", 1, 1, (2, 1), 0), "sorted"),
        (lambda: AlterSyncStateSet("c1", "bs", 1, 1, [1, 2], 0), "tuple"),  # type: ignore[arg-type]
        (lambda: CleanBrokerData("c1", "bs", (1, 1)), "duplicates"),
        (lambda: FenceBroker("c1", "bs", 1, -2), "broker_epoch"),
        (lambda: RegisterBroker("c1", "bs", 1, "inc", -1), "prev_broker_epoch"),
    ],
)
def test_invalid_events_are_refused(build: Any, match: str) -> None:
    with pytest.raises(EventError, match=match):
        build()


@pytest.mark.parametrize(
    ("blob", "match"),
    [
        (b"\xc1", "not valid msgpack"),
        (msgpack.packb({"a": 1}), "must be a list"),
        (msgpack.packb([[99, {}]]), "unknown event type id 99"),
        (msgpack.packb([[9, {"cluster_name": "c"}]]), "fields"),
        (msgpack.packb([[9, {"cluster_name": "c", "broker_name": "b", "broker_id": 0, "broker_epoch": 1}]]),
         "broker_id"),
        (msgpack.packb([5]), "type_id"),
    ],
)
def test_decode_errors(blob: bytes, match: str) -> None:
    with pytest.raises(EventError, match=match):
        decode_events(blob)


names = st.text(alphabet="abcxyz-_0", min_size=1, max_size=6)
ids = st.integers(min_value=1, max_value=2**40)
nonneg = st.integers(min_value=0, max_value=2**62)
id_sets = st.sets(st.integers(min_value=1, max_value=50), max_size=5).map(lambda s: tuple(sorted(s)))
any_event = st.one_of(
    st.builds(ApplyBrokerId, names, names, ids, st.text(max_size=10), names),
    st.builds(UpdateBrokerAddress, names, names, ids, st.text(max_size=10)),
    st.builds(RegisterBroker, names, names, ids, st.text(max_size=10), nonneg),
    st.builds(lambda c, b, i, m, s: ElectMaster(c, b, True, i, m, s), names, names, ids, nonneg, nonneg),
    st.builds(lambda c, b, m, s: ElectMaster(c, b, False, None, m, s), names, names, nonneg, nonneg),
    st.builds(AlterSyncStateSet, names, names, ids, nonneg, id_sets, nonneg),
    st.builds(CleanBrokerData, names, names, id_sets),
    st.builds(FenceBroker, names, names, ids, nonneg),
    st.builds(UnfenceBroker, names, names, ids, nonneg),
    st.builds(ControlledShutdown, names, names, ids, nonneg),
)


@given(st.lists(any_event, max_size=8))
def test_encode_decode_round_trip(events: list[Any]) -> None:
    assert decode_events(encode_events(events)) == events


# ---- config ------------------------------------------------------------------------------------
def test_config_defaults() -> None:
    cfg = ControllerConfig(cluster_name="c1")
    assert (cfg.enable_elect_unclean_master, cfg.lease_timeout_ms, cfg.scan_interval_ms,
            cfg.notify_broker_role_changed) == (False, 1000, 125, True)
    assert cfg.critical_options() == {"cluster_name": "c1", "enable_elect_unclean_master": False,
                                      "lease_timeout_ms": 1000}
    assert "lease=1000ms" in cfg.describe()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(cluster_name=""), r"cluster_name .*got ''"),
        (dict(cluster_name="a b"), "cluster_name"),
        (dict(cluster_name="c", lease_timeout_ms=50), r"lease_timeout_ms must be an int in \[100, 600000\], got 50"),
        (dict(cluster_name="c", lease_timeout_ms=2000.0), "lease_timeout_ms"),
        (dict(cluster_name="c", scan_interval_ms=5), r"scan_interval_ms must be an int in \[10, 60000\], got 5"),
        (dict(cluster_name="c", scan_interval_ms=3000), "scan_interval_ms=3000 must be < lease_timeout_ms=1000"),
        (dict(cluster_name="c", enable_elect_unclean_master="yes"), "enable_elect_unclean_master must be a bool"),
        (dict(cluster_name="c", notify_broker_role_changed=1), "notify_broker_role_changed"),
    ],
)
def test_config_validation(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ControllerConfig(**kwargs)
    assert issubclass(ConfigError, ValueError)


@given(st.integers(100, 600_000))
def test_the_derived_scan_interval_is_a_valid_config_and_runs_several_times_a_lease(lease: int) -> None:
    from system_under_test.controller.config import ControllerConfig, scan_interval_for

    scan = scan_interval_for(lease)
    assert 10 <= scan <= 500 and scan * 4 <= max(lease, 80)
    ControllerConfig(cluster_name="c", lease_timeout_ms=lease, scan_interval_ms=scan)  # does not raise
