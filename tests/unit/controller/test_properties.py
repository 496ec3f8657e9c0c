"""Hypothesis stateful test: random requests, pipelined proposals applied in random order, random
time advance and leader scans keep the controller invariants.

Invariants (checked after every step):
* broker ids are unique per broker set and never reused (an id is only ever held by one register
  code; the next id is above every id ever assigned; GetNextBrokerId never hands out an old id);
* broker epochs strictly increase per broker (a new incarnation always gets a higher epoch);
* master epochs and set epochs never go backwards (even across a whole-set CleanBrokerData);
* the master is a member of its SyncStateSet; at most one master per (set, master epoch);
* replaying the same event log on two fresh states gives identical snapshots, and
  snapshot/restore round-trips.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from system_under_test.controller import ApplyBrokerId, ControllerState, Decision, complete
from system_under_test.protocol.codes import RequestCode, ResponseCode


def _load_sim() -> Any:
    spec = importlib.util.spec_from_file_location("controller_conftest", Path(__file__).with_name("conftest.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("controller_conftest", module)
    spec.loader.exec_module(module)
    return module.Sim


Sim = _load_sim()
SETS = ("a", "b")
IDS = st.integers(min_value=1, max_value=6)
INCARNATIONS = st.sampled_from(["i1", "i2", "i3"])
CODES = st.sampled_from(["rc1", "rc2", "rc3", "rc4"])


class ControllerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.sim = Sim()
        self.pending: list[Decision] = []
        self.id_codes: dict[tuple[str, int], str] = {}
        self.max_assigned: dict[str, int] = {}
        self.epochs: dict[tuple[str, int], tuple[int, str]] = {}
        self.master_epochs: dict[str, tuple[int, int]] = {}
        self.masters: dict[tuple[str, int], int | None] = {}

    @initialize(n=st.integers(min_value=0, max_value=3))
    def start(self, n: int) -> None:
        for _ in range(n):
            self.sim.join("a")
        if n:
            self.sim.elect("a", 1)

    # -- requests (decided now; committed now or later by `commit`) ----------------------------
    def _decide(self, code: RequestCode, **header: Any) -> None:
        d = self.sim.decide_only(code, **header)
        if code == RequestCode.CONTROLLER_GET_NEXT_BROKER_ID:
            name = header["broker_name"]
            assert d.header["next_broker_id"] > self.max_assigned.get(name, 0)
        if d.events:
            self.pending.append(d)
            if len(self.pending) > 3:  # keep the pipeline short so flows make progress
                self.commit(0)

    def _pick(self, name: str, pick: int) -> int:
        bs = self.sim.state.broker_set(name)
        ids = bs.broker_ids() if bs is not None else ()
        return ids[pick % len(ids)] if ids and pick < 8 else 1 + pick % 6

    @rule(name=st.sampled_from(SETS))
    def get_next_id(self, name: str) -> None:
        self._decide(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, cluster_name="c1", broker_name=name)

    @rule(name=st.sampled_from(SETS), delta=st.integers(min_value=-2, max_value=1), code=CODES)
    def apply_id(self, name: str, delta: int, code: str) -> None:
        broker_id = max(1, self.sim.state.next_broker_id(name) + delta)
        self._decide(RequestCode.CONTROLLER_APPLY_BROKER_ID, cluster_name="c1", broker_name=name,
                     broker_id=broker_id, register_code=code, broker_addr=f"{name}{broker_id}:{code}")

    @rule(name=st.sampled_from(SETS), pick=st.integers(0, 9), inc=INCARNATIONS, port=st.integers(1, 2))
    def register(self, name: str, pick: int, inc: str, port: int) -> None:
        broker_id = self._pick(name, pick)
        self._decide(RequestCode.CONTROLLER_REGISTER_BROKER, cluster_name="c1", broker_name=name,
                     broker_id=broker_id, broker_addr=f"{name}{broker_id}:{port}", incarnation_id=inc)

    @rule(name=st.sampled_from(SETS), pick=st.integers(0, 9), stale=st.integers(0, 5), offset=st.integers(0, 100),
          flag=st.sampled_from([None, None, None, "want_shutdown", "want_fence"]))
    def heartbeat(self, name: str, pick: int, stale: int, offset: int, flag: str | None) -> None:
        broker_id, stale = self._pick(name, pick), stale == 0
        epoch = self.sim.state.broker_epoch(name, broker_id) or 0
        extra = {flag: True} if flag else {}
        bs = self.sim.state.broker_set(name)
        self._decide(RequestCode.BROKER_HEARTBEAT, cluster_name="c1", broker_name=name, broker_id=broker_id,
                     broker_addr="x:1", broker_epoch=max(0, epoch - 1) if stale else epoch,
                     master_epoch=bs.master_epoch if bs else 0, max_offset=offset, confirm_offset=offset, **extra)

    @rule(name=st.sampled_from(SETS), pick=st.integers(0, 12), designate=st.booleans())
    def elect(self, name: str, pick: int, designate: bool) -> None:
        broker_id = None if pick >= 10 else self._pick(name, pick)
        header: dict[str, Any] = {"cluster_name": "c1", "broker_name": name, "designate": designate}
        if broker_id is not None:
            header["broker_id"] = broker_id
        self._decide(RequestCode.CONTROLLER_ELECT_MASTER, **header)

    @rule(name=st.sampled_from(SETS), mask=st.integers(0, 63), stale=st.integers(0, 4))
    def alter(self, name: str, mask: int, stale: int) -> None:
        bs = self.sim.state.broker_set(name)
        if bs is None or bs.master_id is None:
            return
        members = {i for n, i in enumerate(bs.broker_ids()) if mask >> n & 1}
        if mask & 32 == 0:
            members.add(bs.master_id)
        self._decide(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, cluster_name="c1", broker_name=name,
                     master_id=bs.master_id, master_epoch=bs.master_epoch, sync_state_set=sorted(members),
                     sync_state_set_epoch=max(0, bs.sync_state_set_epoch - (1 if stale == 0 else 0)))

    @rule(name=st.sampled_from(SETS), ids=st.lists(IDS, max_size=2), force=st.booleans())
    def clean(self, name: str, ids: list[int], force: bool) -> None:
        self._decide(RequestCode.CLEAN_BROKER_DATA, broker_name=name, broker_ids=ids, clean_living_broker=force)

    @rule(ms=st.sampled_from([0, 100, 300, 700, 1500, 2500]))
    def advance(self, ms: int) -> None:
        self.sim.advance(ms)

    @rule()
    def run_scan(self) -> None:
        self.sim.scan()

    @precondition(lambda self: bool(self.pending))
    @rule(pick=st.integers(min_value=0, max_value=10))
    def commit(self, pick: int) -> None:
        decision = self.pending.pop(pick % len(self.pending))
        results = self.sim.apply_entry(decision.events)
        for ev, res in zip(decision.events, results):
            if isinstance(ev, ApplyBrokerId) and res.ok:
                key = (ev.broker_name, ev.broker_id)
                assert self.id_codes.setdefault(key, ev.register_code) == ev.register_code, f"id {key} reused"
        code, header, _ = complete(decision, results, self.sim.state)
        assert isinstance(code, ResponseCode) and isinstance(header, dict)

    # -- invariants ------------------------------------------------------------------------------
    @invariant()
    def ids_unique_and_never_reused(self) -> None:
        for bs in self.sim.state.broker_sets():
            ids = bs.broker_ids()
            assert len(ids) == len(set(ids))
            for b in bs.brokers:
                key = (bs.broker_name, b.broker_id)
                assert self.id_codes.get(key, b.register_code) == b.register_code
                self.id_codes[key] = b.register_code
                self.max_assigned[bs.broker_name] = max(self.max_assigned.get(bs.broker_name, 0), b.broker_id)
            assert bs.next_broker_id > max(ids, default=0)
        for name, top in self.max_assigned.items():
            assert self.sim.state.next_broker_id(name) > top

    @invariant()
    def broker_epochs_increase(self) -> None:
        for bs in self.sim.state.broker_sets():
            for b in bs.brokers:
                reg = b.registration
                if reg is None:
                    continue
                key = (bs.broker_name, b.broker_id)
                old = self.epochs.get(key)
                if old is not None:
                    assert reg.broker_epoch >= old[0]
                    if reg.incarnation_id != old[1]:
                        assert reg.broker_epoch > old[0]
                self.epochs[key] = (reg.broker_epoch, reg.incarnation_id)

    @invariant()
    def master_and_set_epochs(self) -> None:
        for bs in self.sim.state.broker_sets():
            old = self.master_epochs.get(bs.broker_name, (0, 0))
            assert bs.master_epoch >= old[0] and bs.sync_state_set_epoch >= old[1]
            self.master_epochs[bs.broker_name] = (bs.master_epoch, bs.sync_state_set_epoch)
            if bs.master_id is not None:
                assert bs.master_id in bs.sync_state_set
                assert bs.broker(bs.master_id) is not None
            key = (bs.broker_name, bs.master_epoch)
            assert self.masters.setdefault(key, bs.master_id) == bs.master_id, f"two masters in epoch {key}"

    def teardown(self) -> None:
        bugs = self.sim.state.bugs
        replicas = [ControllerState(bugs=bugs), ControllerState(bugs=bugs)]
        for replica in replicas:
            for index, entry in enumerate(self.sim.log, start=1):
                for ev in entry:
                    replica.apply(ev, index)
        assert replicas[0].snapshot() == replicas[1].snapshot() == self.sim.state.snapshot()
        restored = ControllerState(bugs=bugs)
        restored.restore(self.sim.state.snapshot())
        assert restored == self.sim.state


TestControllerInvariants = ControllerMachine.TestCase
TestControllerInvariants.settings = settings(
    max_examples=60, stateful_step_count=50, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
