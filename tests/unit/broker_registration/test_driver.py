"""The registration driver against an in-memory controller implementing the seed's semantics.

Covers the ReplicasManagerRegisterTest lines of reference 2.5, a crash at every failpoint followed
by a restart, transient-error retries, and a Hypothesis property over random crash points and
controller rejections: the final id is stable and one broker never consumes two ids.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from system_under_test import failpoints
from system_under_test.broker.registration.driver import (
    FAILPOINTS,
    RegistrationConfig,
    RegistrationOutcome,
    register_broker,
)
from system_under_test.broker.registration.errors import (
    MetaCorruptError,
    RegistrationError,
    RegistrationRefused,
    RegistrationRetriesExhausted,
)
from system_under_test.broker.registration.meta_files import META_NAME, TEMP_NAME, MetaFiles
from system_under_test.broker.registration.meta_record import MetaRecord, TempMetaRecord
from system_under_test.failpoints import FailpointError
from system_under_test.protocol.codes import ResponseCode
from system_under_test.protocol.errors import ConnectionLost, RequestTimeout, RpcError


class Crash(Exception):
    """Raised by the fake to simulate the broker process dying mid-RPC (the request may have applied)."""


class FakeController:
    """In-memory controller with the seed's id semantics (reference 1.2/1.3, without the nextId quirk).

    ``faults[key]`` is a list of exceptions raised, in order, at ``<method>.before`` (nothing applied)
    or ``<method>.after`` (applied, reply lost).  ``rival`` is called at the start of every call and may
    let another broker claim ids, which makes our claims get rejected.
    """

    def __init__(self) -> None:
        self.sets: dict[str, dict[str, Any]] = {}
        self.faults: dict[str, list[BaseException]] = {}
        self.calls: Counter[str] = Counter()
        self.claims: list[tuple[str, int, str]] = []  # (broker_name, id, addr) of every new assignment
        self.broker_epoch = 0
        self.rival_plan: list[bool] = []

    def _fault(self, key: str) -> None:
        pending = self.faults.get(key)
        if pending:
            raise pending.pop(0)

    def _rival(self, name: str) -> None:
        if self.rival_plan and self.rival_plan.pop(0):
            s = self.sets.setdefault(name, {"next": 1, "ids": {}})
            rid = s["next"]
            s["ids"][rid] = ("rival:1", f"rival:1;0;{rid:016x}")
            s["next"] = rid + 1
            self.claims.append((name, rid, "rival:1"))

    def preclaim(self, name: str, broker_id: int, addr: str) -> None:
        s = self.sets.setdefault(name, {"next": 1, "ids": {}})
        s["ids"][broker_id] = (addr, f"{addr};0;0")
        s["next"] = max(s["next"], broker_id + 1)
        self.claims.append((name, broker_id, addr))

    async def get_next_broker_id(self, cluster: str, broker_name: str) -> int:
        self.calls["get_next"] += 1
        self._rival(broker_name)
        self._fault("get_next.before")
        s = self.sets.get(broker_name)
        result = 1 if s is None else int(s["next"])
        self._fault("get_next.after")
        return result

    async def apply_broker_id(
        self, cluster: str, broker_name: str, broker_id: int, register_code: str, broker_addr: str
    ) -> None:
        self.calls["apply"] += 1
        self._rival(broker_name)
        self._fault("apply.before")
        assert register_code.split(";")[0] == broker_addr
        s = self.sets.get(broker_name)
        if s is None and broker_id != 1:
            raise RpcError(ResponseCode.CONTROLLER_BROKER_ID_INVALID, "unknown set: only id 1 may be applied")
        if s is not None and broker_id in s["ids"] and s["ids"][broker_id][1] != register_code:
            raise RpcError(ResponseCode.CONTROLLER_BROKER_ID_INVALID, f"id {broker_id} held by another code")
        s = self.sets.setdefault(broker_name, {"next": 1, "ids": {}})
        if broker_id not in s["ids"]:
            s["ids"][broker_id] = (broker_addr, register_code)
            s["next"] = max(s["next"], broker_id + 1)
            self.claims.append((broker_name, broker_id, broker_addr))
        self._fault("apply.after")

    async def register_broker(
        self,
        cluster: str,
        broker_name: str,
        broker_id: int,
        broker_addr: str,
        incarnation_id: str,
        cluster_id: str | None,
    ) -> dict[str, Any]:
        self.calls["register"] += 1
        self._fault("register.before")
        s = self.sets.get(broker_name)
        if s is None or broker_id not in s["ids"]:
            raise RpcError(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, f"id {broker_id} unknown")
        s["ids"][broker_id] = (broker_addr, s["ids"][broker_id][1])
        self.broker_epoch += 1
        self._fault("register.after")
        return {"broker_epoch": self.broker_epoch, "master_id": 1, "master_addr": "m:1", "master_epoch": 1}

    def ids_of(self, addr: str, name: str = "b1") -> list[int]:
        return [i for n, i, a in self.claims if a == addr and n == name]


CFG = RegistrationConfig(cluster="c1", broker_name="b1", broker_addr="10.0.0.1:10911", incarnation_id="inc-1")


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def run(controller: FakeController, store: Path, cfg: RegistrationConfig = CFG, seed: int = 1) -> RegistrationOutcome:
    rng = random.Random(seed)
    return asyncio.run(
        register_broker(controller, store, cfg, rng=rng, now_ms=lambda: 1_700_000_000_000, sleep=Sleeps())
    )


def names(store: Path) -> list[str]:
    return sorted(p.name for p in store.iterdir())


@pytest.fixture(autouse=True)
def _disarm_failpoints() -> Iterator[None]:
    yield
    failpoints.disarm("*")


# --- ReplicasManagerRegisterTest (reference 2.5) -------------------------------------------------


def test_success_path_registered_id_1_meta_present_temp_gone(tmp_path: Path) -> None:
    ctl = FakeController()
    out = run(ctl, tmp_path)
    assert out.broker_id == 1 and out.broker_epoch == 1 and out.master_id == 1 and out.master_addr == "m:1"
    assert MetaFiles(tmp_path).load_meta() == MetaRecord("c1", "b1", 1)
    assert names(tmp_path) == [META_NAME]
    assert ctl.sets["b1"]["ids"][1][0] == "10.0.0.1:10911"


def test_three_brokers_of_one_set_get_ids_1_2_3(tmp_path: Path) -> None:
    ctl = FakeController()
    got = []
    for i in range(3):
        d = tmp_path / f"b{i}"
        d.mkdir()
        got.append(run(ctl, d, RegistrationConfig("c1", "b1", f"10.0.0.{i}:10911"), seed=i).broker_id)
    assert got == [1, 2, 3]


def test_normal_restart_registers_directly_with_the_same_id_and_new_address(tmp_path: Path) -> None:
    ctl = FakeController()
    assert run(ctl, tmp_path).broker_id == 1
    moved = RegistrationConfig("c1", "b1", "10.9.9.9:10911")
    out = run(ctl, tmp_path, moved)
    assert out.broker_id == 1 and ctl.calls["get_next"] == 1 and ctl.calls["apply"] == 1
    assert ctl.sets["b1"]["ids"][1][0] == "10.9.9.9:10911"  # RestartWithChangedAddress


@pytest.mark.parametrize(
    "cfg",
    [RegistrationConfig("c1", "other", "10.0.0.1:1"), RegistrationConfig("other", "b1", "10.0.0.1:1")],
    ids=["broker-name-changed", "cluster-name-changed"],
)
def test_restart_with_changed_names_is_refused(tmp_path: Path, cfg: RegistrationConfig) -> None:
    ctl = FakeController()
    run(ctl, tmp_path)
    calls = dict(ctl.calls)
    with pytest.raises(RegistrationRefused) as info:
        run(ctl, tmp_path, cfg)
    msg = str(info.value)
    assert "'c1'" in msg and "'b1'" in msg and repr(cfg.cluster) in msg and repr(cfg.broker_name) in msg
    assert dict(ctl.calls) == calls  # the controller was not asked anything
    assert MetaFiles(tmp_path).load_meta() == MetaRecord("c1", "b1", 1)


@pytest.mark.parametrize("point", ["broker.get_next_broker_id.after_reply", "broker.meta_temp.before_write"])
def test_failure_at_get_next_id_or_temp_write_leaves_no_files(tmp_path: Path, point: str) -> None:
    ctl = FakeController()
    failpoints.arm(point, "1*error")
    with pytest.raises(FailpointError):
        run(ctl, tmp_path)
    assert names(tmp_path) == []
    assert run(ctl, tmp_path).broker_id == 1


def test_definite_get_next_id_error_stops_with_no_files(tmp_path: Path) -> None:
    ctl = FakeController()
    ctl.faults["get_next.before"] = [RpcError(ResponseCode.UNAUTHORIZED, "bad token")]
    with pytest.raises(RegistrationError, match=r"GetNextBrokerId.*UNAUTHORIZED"):
        run(ctl, tmp_path)
    assert names(tmp_path) == []


def test_apply_failure_leaves_no_meta_and_restart_completes(tmp_path: Path) -> None:
    ctl = FakeController()
    failpoints.arm("broker.apply_broker_id.before", "1*error")
    with pytest.raises(FailpointError):
        run(ctl, tmp_path)
    assert names(tmp_path) == [TEMP_NAME]
    assert run(ctl, tmp_path).broker_id == 1
    assert ctl.ids_of("10.0.0.1:10911") == [1] and ctl.calls["get_next"] == 1


def test_meta_write_failure_keeps_temp_and_restart_completes_with_id_1(tmp_path: Path) -> None:
    ctl = FakeController()
    failpoints.arm("broker.meta.before_rename", "1*error")
    with pytest.raises(FailpointError):
        run(ctl, tmp_path)
    assert MetaFiles(tmp_path).load_temp() is not None and MetaFiles(tmp_path).load_meta() is None
    out = run(ctl, tmp_path)
    assert out.broker_id == 1 and names(tmp_path) == [META_NAME]
    assert ctl.calls["get_next"] == 1 and ctl.calls["apply"] == 2 and ctl.ids_of("10.0.0.1:10911") == [1]


def test_register_failure_keeps_meta_and_restart_completes(tmp_path: Path) -> None:
    ctl = FakeController()
    failpoints.arm("broker.register.before", "1*error")
    with pytest.raises(FailpointError):
        run(ctl, tmp_path)
    assert names(tmp_path) == [META_NAME]
    assert run(ctl, tmp_path).broker_id == 1
    assert ctl.calls["get_next"] == 1 and ctl.calls["apply"] == 1


def test_rejected_claim_deletes_temp_and_claims_the_next_id(tmp_path: Path) -> None:
    ctl = FakeController()
    ctl.rival_plan = [False, True]  # a rival takes id 1 between our GetNextBrokerId and ApplyBrokerId
    out = run(ctl, tmp_path)
    assert out.broker_id == 2
    assert ctl.calls["get_next"] == 2 and ctl.ids_of("10.0.0.1:10911") == [2]
    assert names(tmp_path) == [META_NAME]


def test_stale_temp_beside_meta_is_deleted_and_meta_wins(tmp_path: Path) -> None:
    ctl = FakeController()
    run(ctl, tmp_path)
    MetaFiles(tmp_path).write_temp(TempMetaRecord("c1", "b1", 5, "10.0.0.1:10911;1;00"))
    (tmp_path / TEMP_NAME).write_bytes(b"torn")  # even a torn temp is just stale
    assert run(ctl, tmp_path).broker_id == 1
    assert names(tmp_path) == [META_NAME]


def test_corrupt_meta_stops_without_asking_the_controller(tmp_path: Path) -> None:
    ctl = FakeController()
    (tmp_path / META_NAME).write_bytes(b'{"broker_id":1,')
    with pytest.raises(MetaCorruptError, match=META_NAME):
        run(ctl, tmp_path)
    assert sum(ctl.calls.values()) == 0


def test_unknown_id_at_register_is_not_papered_over(tmp_path: Path) -> None:
    ctl = FakeController()
    MetaFiles(tmp_path).write_meta(MetaRecord("c1", "b1", 4))
    with pytest.raises(RegistrationError, match=r"NEED_TO_BE_REGISTERED.*will not invent"):
        run(ctl, tmp_path)
    assert ctl.calls["get_next"] == 0


def test_bug_non_atomic_meta_crash_before_rename_leaves_a_torn_meta(tmp_path: Path) -> None:
    """The ``--bug non-atomic-meta`` switch: the same crash the correct writer survives now stops the broker."""
    ctl = FakeController()
    buggy = RegistrationConfig("c1", "b1", "10.0.0.1:10911", bug_non_atomic_meta=True)
    failpoints.arm("broker.meta.before_rename", "1*error")
    with pytest.raises(FailpointError):
        run(ctl, tmp_path, buggy)
    with pytest.raises(MetaCorruptError, match=META_NAME):
        run(ctl, tmp_path, buggy)
    assert ctl.calls["get_next"] == 1  # and no new id was invented
    other = tmp_path / "fresh"
    other.mkdir()
    assert run(FakeController(), other, buggy).broker_id == 1  # without a crash the bug is invisible


# --- crashes at every failpoint -----------------------------------------------------------------


@pytest.mark.parametrize("point", FAILPOINTS)
def test_crash_at_every_failpoint_then_restart_registers_with_the_same_id(tmp_path: Path, point: str) -> None:
    ctl = FakeController()
    failpoints.arm(point, "1*error")
    with pytest.raises(FailpointError):
        run(ctl, tmp_path)
    out = run(ctl, tmp_path)
    assert out.broker_id == 1
    assert ctl.ids_of("10.0.0.1:10911") == [1]
    assert names(tmp_path) == [META_NAME]
    assert run(ctl, tmp_path).broker_id == 1  # and again


@pytest.mark.parametrize("key", ["get_next.after", "apply.after", "register.after"])
def test_reply_lost_after_the_controller_applied(tmp_path: Path, key: str) -> None:
    ctl = FakeController()
    ctl.faults[key] = [Crash(key)]
    with pytest.raises(Crash):
        run(ctl, tmp_path)
    assert run(ctl, tmp_path).broker_id == 1
    assert ctl.ids_of("10.0.0.1:10911") == [1]


def test_all_failpoints_are_declared_with_the_documented_names() -> None:
    declared = {p["name"] for p in failpoints.list_points()}
    for step in ("get_next_broker_id.before", "get_next_broker_id.after_reply", "meta_temp.before_write",
                 "meta_temp.after_write", "apply_broker_id.before", "apply_broker_id.after_reply",
                 "meta.before_rename", "meta.after_rename", "register.before", "register.after_reply"):
        assert f"broker.{step}" in declared and f"broker.{step}" in FAILPOINTS


# --- transient errors ----------------------------------------------------------------------------

TRANSIENTS = [
    ConnectionLost("reset"),
    RequestTimeout("5 s"),
    RpcError(ResponseCode.CONTROLLER_NOT_LEADER, "leader is n2"),
    RpcError(ResponseCode.SYSTEM_ERROR, "outcome unknown"),
]


@pytest.mark.parametrize("key", ["get_next.before", "apply.before", "apply.after", "register.before", "register.after"])
def test_transient_errors_are_retried_with_the_same_register_code(tmp_path: Path, key: str) -> None:
    ctl = FakeController()
    ctl.faults[key] = list(TRANSIENTS)
    sleeps = Sleeps()
    out = asyncio.run(register_broker(ctl, tmp_path, CFG, rng=random.Random(3), now_ms=lambda: 5, sleep=sleeps))
    assert out.broker_id == 1 and ctl.ids_of("10.0.0.1:10911") == [1]
    assert len(sleeps.delays) == len(TRANSIENTS)
    assert all(0 < d <= CFG.backoff_max_ms / 1000 for d in sleeps.delays)
    if key.startswith("apply"):
        assert ctl.calls["get_next"] == 1  # same claim retried, never a new id


def test_transient_apply_error_keeps_the_temp_file(tmp_path: Path) -> None:
    ctl = FakeController()
    ctl.faults["apply.before"] = [ConnectionLost("x")] * 3
    cfg = RegistrationConfig("c1", "b1", "10.0.0.1:10911", max_attempts=3)
    with pytest.raises(RegistrationRetriesExhausted, match=r"ApplyBrokerId.*3 times"):
        run(ctl, tmp_path, cfg)
    temp = MetaFiles(tmp_path).load_temp()
    assert temp is not None and temp.broker_id == 1
    assert run(ctl, tmp_path).broker_id == 1
    assert ctl.ids_of("10.0.0.1:10911") == [1]
    assert ctl.sets["b1"]["ids"][1][1] == temp.register_code  # the code from the temp file was used


def test_backoff_is_bounded_and_grows() -> None:
    from system_under_test.broker.registration.driver import backoff_ms

    rng = random.Random(0)
    values = [backoff_ms(a, CFG, rng) for a in range(1, 30)]
    assert all(25 <= v <= CFG.backoff_max_ms for v in values)
    assert values[-1] >= CFG.backoff_max_ms // 2


@pytest.mark.parametrize(
    "kwargs",
    [{"cluster": ""}, {"broker_addr": "a;b"}, {"max_attempts": 0}, {"backoff_initial_ms": 0}, {"backoff_max_ms": 1}],
)
def test_config_validation(kwargs: dict[str, Any]) -> None:
    base: dict[str, Any] = {"cluster": "c1", "broker_name": "b1", "broker_addr": "h:1"}
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        RegistrationConfig(**{**base, **kwargs})


# --- property: random crash points and rejections -----------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    crashes=st.lists(st.sampled_from(FAILPOINTS), max_size=4),
    rivals=st.lists(st.booleans(), max_size=12),
    lost=st.lists(st.sampled_from(["apply.after", "register.after", "get_next.after", "none"]), max_size=2),
    seed=st.integers(0, 2**32),
)
def test_random_crashes_and_rejections_give_one_stable_id(
    crashes: list[str], rivals: list[bool], lost: list[str], seed: int
) -> None:
    ctl = FakeController()
    ctl.rival_plan = list(rivals)
    for key in lost:
        if key != "none":
            ctl.faults.setdefault(key, []).append(Crash(key))
    with tempfile.TemporaryDirectory() as d:
        store = Path(d)
        outcomes: list[int] = []
        try:
            for point in [*crashes, None, None]:
                if point is not None:
                    failpoints.arm(point, "1*error")
                try:
                    outcomes.append(run(ctl, store, seed=seed).broker_id)
                except (FailpointError, Crash):
                    pass
                finally:
                    failpoints.disarm("*")
            # Crash faults are consumed by the runs above; two clean runs at the end must both succeed.
            for _ in range(3):
                if len(outcomes) >= 2:
                    break
                outcomes.append(run(ctl, store, seed=seed).broker_id)
        finally:
            failpoints.disarm("*")
        mine = ctl.ids_of("10.0.0.1:10911")
        assert len(mine) == 1, f"one broker consumed ids {mine}"
        assert set(outcomes) == {mine[0]}
        assert MetaFiles(store).load_meta() == MetaRecord("c1", "b1", mine[0])
        assert names(store) == [META_NAME]
