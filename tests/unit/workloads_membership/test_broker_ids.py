"""The broker-ids workload's pure parts: the IdAllocator model (table + property tests against a reference
allocator and a reuse-broker-id allocator), the lane plan and generator, the invariant/restart checkers, and the
registration nemesis's pure helpers."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checker.linearizable import check as check_linearizable
from checker.models import UNKNOWN, Inconsistent, OpInput
from harness import generator as g
from harness.spec import SpecError, spec_from_dict
from system_under_test.broker.registration import FAILPOINTS, FIRST_REGISTRATION_POINTS
from system_under_test.broker.registration.meta_record import MetaRecord, encode_meta
from systems.splitbrain.extra_brokers import decode_identity_files, replace_flag
from workloads import registry
from workloads.broker_ids import (
    BrokerIdsGen,
    BrokerIdsOptions,
    IdAllocator,
    IdsInvariantChecker,
    RestartChecker,
    invariant_ops,
    lane_plan,
)

M = IdAllocator()
S0: Any = M.init()


def apply(bid: int, code: str, applied: Any) -> tuple[OpInput, Any]:
    out = applied if applied is UNKNOWN else {"applied": applied}
    return OpInput("apply-id", {"broker_set": "v", "broker_id": bid, "register_code": code}), out


@pytest.mark.parametrize(("state", "op", "expected"), [
    (S0, (OpInput("next-id", {"broker_set": "v"}), {"next_broker_id": 1}), S0),
    (S0, (OpInput("next-id", {"broker_set": "v"}), {"next_broker_id": 2}), Inconsistent),
    (S0, apply(1, "a", True), (2, ((1, "a"),))),
    (S0, apply(2, "a", True), Inconsistent),  # a new set only takes its next id
    (S0, apply(2, "a", False), S0),
    ((2, ((1, "a"),)), apply(1, "a", True), (2, ((1, "a"),))),  # idempotent retry
    ((2, ((1, "a"),)), apply(1, "b", True), Inconsistent),  # held under another code
    ((2, ((1, "a"),)), apply(4, "b", True), (5, ((1, "a"), (4, "b")))),  # gaps are fine
    ((5, ((1, "a"), (4, "b"))), apply(3, "c", True), Inconsistent),  # ids are never reused
    ((5, ((1, "a"), (4, "b"))), apply(3, "c", UNKNOWN), (5, ((1, "a"), (4, "b")))),
    ((2, ((1, "a"),)), apply(2, "c", UNKNOWN), (3, ((1, "a"), (2, "c")))),
    ((2, ((1, "a"),)), (OpInput("read-ids", {"broker_set": "v"}), {"ids": [1]}), (2, ((1, "a"),))),
    ((2, ((1, "a"),)), (OpInput("read-ids", {"broker_set": "v"}), {"ids": []}), Inconsistent),
], ids=["next", "next-wrong", "apply-first", "apply-new-set-gap", "refuse-new-set-gap", "idempotent",
        "other-code", "gap", "reuse", "unknown-refused", "unknown-applied", "read", "read-wrong"])
def test_model_steps(state: Any, op: tuple[OpInput, Any], expected: Any) -> None:
    got = M.step(state, op[0], op[1])
    if expected is Inconsistent:
        assert isinstance(got, Inconsistent), got
        assert got.reason
    else:
        assert got == expected


class Reference:
    """A sequential allocator with the correct rule, or the reuse-broker-id quirk."""

    def __init__(self, reuse: bool) -> None:
        self.next, self.reuse = 1, reuse
        self.held: dict[int, str] = {}

    def run(self, f: str, bid: int, code: str) -> dict[str, Any]:
        if f == "next-id":
            return {"next_broker_id": self.next}
        if f == "read-ids":
            return {"ids": sorted(self.held)}
        if bid in self.held:
            return {"applied": self.held[bid] == code}
        ok = bid >= self.next and (bool(self.held) or bid == self.next)
        if self.reuse:
            ok = bool(self.held) or bid == self.next
        if ok:
            self.held[bid] = code
            self.next = self.next + 1 if self.reuse else max(self.next, bid + 1)
        return {"applied": ok}


def history(ops: list[tuple[str, int, int]], reuse: bool) -> list[dict[str, Any]]:
    ref, out = Reference(reuse), []
    for i, (f, bid, code) in enumerate(ops):
        value = {"broker_set": "v", "broker_id": bid, "register_code": f"c{code}"}
        res = ref.run(f, bid, f"c{code}")
        out.append({"index": 2 * i, "time": 2 * i, "type": "invoke", "process": 0, "f": f, "value": value})
        out.append({"index": 2 * i + 1, "time": 2 * i + 1, "type": "ok", "process": 0, "f": f,
                    "value": {**value, **res}})
    return out


OPS = st.lists(st.tuples(st.sampled_from(["next-id", "apply-id", "apply-id", "read-ids"]), st.integers(1, 6),
                         st.integers(0, 3)), max_size=30)


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_every_sequential_history_of_the_correct_allocator_is_linearizable(ops: list[tuple[str, int, int]]) -> None:
    from checker.history import Op

    res = check_linearizable([Op.from_dict(d) for d in history(ops, reuse=False)], M)
    assert res.valid is True, res.describe()


def test_the_reuse_quirk_is_not_linearizable() -> None:
    from checker.history import Op

    ops = [("apply-id", 1, 0), ("apply-id", 3, 1), ("next-id", 0, 0)]  # the quirk answers 3, the model says 4
    res = check_linearizable([Op.from_dict(d) for d in history(ops, reuse=True)], M)
    assert res.valid is False and "GetNextBrokerId returned 3" in res.describe()


def test_lane_plan_covers_every_failpoint_with_a_changed_address() -> None:
    lanes = lane_plan(("n1", "n2"), FAILPOINTS, 2, 10920)
    assert len(lanes) == len(FAILPOINTS)
    for i, lane in enumerate(lanes):
        crash = [s for s in lane if s["f"] == "crash-broker"]
        starts = [s for s in lane if s["f"] == "start-broker"]
        assert [c["failpoint"] for c in crash] == [FAILPOINTS[i]]
        after = lane[lane.index(crash[0]) + 1]
        assert after["f"] == "start-broker" and after["port"] != crash[0]["port"]  # restarted on a changed address
        assert lane[-1]["f"] == "stop-broker" and len({s["slot"] for s in lane}) == 1
        registers_first = FAILPOINTS[i] not in FIRST_REGISTRATION_POINTS
        assert (lane[0]["f"] == "start-broker") == registers_first
        assert len(starts) == 3 if registers_first else 2


def test_generator_runs_each_lane_in_order_and_fills_free_threads_with_allocator_ops() -> None:
    o = BrokerIdsOptions(failpoints=3, lanes=2)
    gen = BrokerIdsGen(lane_plan(("n1",), FAILPOINTS[:3], 1, 10920), ("vids-0",), ("bids-0",), o)
    ops = g.simulate(g.limit(200, gen), seed=3, client_threads=3, nemesis=False, latency_ns=1000)
    invokes = [op for op in ops if op["type"] == "invoke"]
    lanes: dict[int, list[str]] = {}
    for op in invokes:
        if op["f"] in ("crash-broker", "start-broker", "stop-broker"):
            lanes.setdefault(op["value"]["lane"], []).append(op["f"])
    plan = lane_plan(("n1",), FAILPOINTS[:3], 1, 10920)
    assert {i: [s["f"] for s in lane] for i, lane in enumerate(plan)} == lanes
    assert {op["f"] for op in invokes} >= {"next-id", "apply-id"}
    in_flight: set[int] = set()
    most = 0
    for op in ops:
        if op["f"] in ("crash-broker", "start-broker", "stop-broker"):
            key = op["value"]["lane"]
            (in_flight.add if op["type"] == "invoke" else in_flight.discard)(key)
            most = max(most, len(in_flight))
    assert most <= 2


def _op(i: int, f: str, value: dict[str, Any], typ: str = "ok", process: Any = 0) -> dict[str, Any]:
    return {"index": i, "time": i, "type": typ, "process": process, "f": f, "value": value}


def test_invariants_flag_an_id_held_by_two_brokers_and_a_changed_id() -> None:
    a = {"node": "n1", "slot": "s0", "broker_name": "bids-0", "lane": 0}
    b = {"node": "n1", "slot": "s1", "broker_name": "bids-0", "lane": 1}
    st_ = "start-broker"
    hist = [_op(0, st_, {**a, "broker_id": 1, "broker_epoch": 3}), _op(1, st_, {**b, "broker_id": 1}),
            _op(2, st_, {**a, "broker_id": 2}), _op(3, st_, {**a, "broker_id": 1, "broker_epoch": 2})]
    res = IdsInvariantChecker().check({}, hist, {})
    assert res.valid is False
    assert set(res.anomalies) >= {"broker-id-not-unique", "broker-id-changed", "nonmonotonic-broker-epoch"}
    good = [_op(0, st_, {**a, "broker_id": 1, "broker_epoch": 3}), _op(1, st_, {**b, "broker_id": 2}),
            _op(2, st_, {**a, "broker_id": 1, "broker_epoch": 5})]
    assert IdsInvariantChecker().check({}, good, {}).valid is True


def test_invariant_ops_take_nemesis_crash_walks_and_applied_claims() -> None:
    walk = {"failpoint": FAILPOINTS[0], "broker_name": "rcrash-0", "identity": "n1/rc0",
            "crash": {"hit": True, "files": {}}, "restart": {"broker_id": 4, "broker_epoch": 1}}
    hist = [_op(0, "registration-crash", walk, "info", "nemesis"),
            _op(1, "apply-id", {"broker_set": "v", "broker_id": 2, "register_code": "x", "applied": True}),
            _op(2, "apply-id", {"broker_set": "v", "broker_id": 3, "register_code": "y", "applied": False})]
    fs = [op["f"] for op in invariant_ops(hist) if op["type"] == "ok"]
    assert fs == ["broker-id", "replica-info", "apply-broker-id"]


def test_restart_checker_flags_a_refused_restart_after_a_crash_only() -> None:
    slot = {"node": "n1", "slot": "s6", "broker_name": "bids-0", "lane": 6}
    fp = "broker.meta.before_rename"
    files = {".broker.meta": {"corrupt": "torn"}}
    crash = _op(0, "crash-broker", {**slot, "failpoint": fp, "hit": True, "files": files})
    refused = _op(1, "start-broker", {**slot, "refused": True, "log": "MetaCorruptError"})
    res = RestartChecker().check({}, [crash, refused], {})
    assert res.valid is False and list(res.anomalies) == ["restart-refused"]
    assert res.stats["crashes"] == {fp: {"hit": 1, "not_hit": 0}}
    assert RestartChecker().check({}, [refused], {}).valid is True  # no crash before: not this checker's call
    back = _op(1, "start-broker", {**slot, "broker_id": 3})
    assert RestartChecker().check({}, [crash, back], {}).valid is True


def test_decode_identity_files_tells_whole_from_torn() -> None:
    whole = encode_meta(MetaRecord("c", "b", 7))
    listing = (f".broker.meta {base64.b64encode(whole).decode()}\n"
               f".broker.meta.tmp {base64.b64encode(whole[:9]).decode()}\nnoise\n")
    files = decode_identity_files(listing)
    assert files[".broker.meta"]["broker_id"] == 7
    assert "corrupt" in files[".broker.meta.tmp"] and set(files) == {".broker.meta", ".broker.meta.tmp"}


def test_replace_flag() -> None:
    assert replace_flag(["x", "--listen", "a:1", "--y"], "--listen", "b:2") == ["x", "--listen", "b:2", "--y"]
    with pytest.raises(ValueError, match="--store-dir"):
        replace_flag(["x"], "--store-dir", "d")


SPEC = spec_from_dict({"name": "r", "nodes": {"controllers": 3, "broker_sets": []}, "seed": 1}, file="<test>")


def test_builder_validates_options() -> None:
    ctx = registry.WorkloadContext(spec=SPEC, db=None, options={"failpoints": 0}, seed=1)
    wl = registry.build("broker-ids", ctx)
    assert set(wl.checkers) == {"linearizable", "invariants", "restarts", "stats"} and wl.extra["lanes"] == 0
    for bad in ({}, {"lanes": 0}, {"nope": 1}):  # lanes need broker nodes; lanes >= 1; unknown key
        with pytest.raises(SpecError):
            registry.build("broker-ids", registry.WorkloadContext(spec=SPEC, db=None, options=bad, seed=1))


@pytest.mark.parametrize("files", [
    {".broker.meta.tmp": {"broker_id": 5}},                                 # the mutant's order: temp gone
    {".broker.meta.tmp": {"broker_id": 5}, ".broker.meta.temp": {"broker_id": 5}},  # the design's order
])
def test_a_crash_after_the_applied_claim_must_come_back_with_that_id(files: dict[str, Any]) -> None:
    walk = {"failpoint": "broker.meta.before_rename", "broker_name": "rcrash-0", "identity": "n1/rc3",
            "crash": {"hit": True, "files": files}}
    leaked = IdsInvariantChecker().check({}, [_op(0, "registration-crash", {**walk, "restart": {"broker_id": 6}},
                                                  "info", "nemesis")], {})
    assert leaked.valid is False and list(leaked.anomalies) == ["broker-id-leaked"]
    kept = IdsInvariantChecker().check({}, [_op(0, "registration-crash", {**walk, "restart": {"broker_id": 5}},
                                                "info", "nemesis")], {})
    assert kept.valid is True


def test_a_crash_before_the_claim_was_applied_may_come_back_with_another_id() -> None:
    """Before ApplyBrokerId succeeded the controller may give the claimed id to another broker (the claim is then
    rejected and the broker starts over): a new id is what the design wants, not a leak."""
    for fp in ("broker.meta_temp.after_write", "broker.apply_broker_id.before", "broker.apply_broker_id.after_reply"):
        walk = {"failpoint": fp, "broker_name": "rcrash-0", "identity": "n1/rc3",
                "crash": {"hit": True, "files": {".broker.meta.temp": {"broker_id": 5}}}, "restart": {"broker_id": 6}}
        assert IdsInvariantChecker().check({}, [_op(0, "registration-crash", walk, "info", "nemesis")], {}).valid


def test_a_lane_crash_after_the_applied_claim_is_related_to_its_restart() -> None:
    slot = {"node": "n1", "slot": "s6", "broker_name": "bids-0", "lane": 6}
    crash = _op(0, "crash-broker", {**slot, "failpoint": "broker.register.before", "hit": True,
                                    "files": {".broker.meta": {"broker_id": 2}}})
    res = IdsInvariantChecker().check({}, [crash, _op(1, "start-broker", {**slot, "broker_id": 7})], {})
    assert res.valid is False and "broker-id-leaked" in res.anomalies
