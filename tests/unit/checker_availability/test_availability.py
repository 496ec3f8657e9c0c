"""The availability checker on small histories with known verdicts (a table), its pieces, its reachability rules,
its expectations, and its table of writes against the workloads' own ``fs``."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import pytest

from checker.availability import (
    ANOMALY,
    CONTROLLER_BOUND_S,
    WORKLOAD_OPS,
    ExpectationError,
    FaultState,
    Topology,
    broker_set_of,
    check_availability,
    fault_pieces,
    reach,
    resolve,
    validate_options,
)

TOPO = Topology(("c1", "c2", "c3"), (("b1", "b2", "b3"),))
_EXP = resolve({}, lease_timeout_ms=2000)  # write and final bounds 8 s, settle 4 s
assert _EXP is not None
EXP = _EXP
QUEUE = "t/broker-0/0"
CONTROLLERS = ("c1", "c2", "c3")
REPLICAS = ("b1", "b2", "b3")


@dataclass
class History:
    """Timed client ops and nemesis ops, in seconds, added in any order; ``build`` orders them by time.  Every
    client op runs on a process of its own, so ops may overlap freely."""

    events: list[tuple[float, int, dict[str, Any]]] = field(default_factory=list)
    process: int = 0

    def _add(self, time_s: float, op: dict[str, Any]) -> None:
        self.events.append((time_s, len(self.events), {**op, "time": round(time_s * 1e9)}))

    def call(self, start_s: float, end_s: float | None, f: str = "send", *, type: str = "ok", value: Any = None,
             error: str | None = None) -> History:
        self.process += 1
        value = {"queue": QUEUE, "value": f"v{self.process}"} if value is None else value
        self._add(start_s, {"type": "invoke", "process": self.process, "f": f, "value": value})
        if end_s is not None:
            done: dict[str, Any] = {"type": type, "process": self.process, "f": f, "value": value}
            if error is not None:
                done["error"] = error
            self._add(end_s, done)
        return self

    def writes(self, start_s: float, end_s: float, every_s: float = 0.25, *, type: str = "ok", f: str = "send",
               latency_s: float = 0.01, error: str | None = "FLUSH_SLAVE_TIMEOUT", value: Any = None) -> History:
        t = start_s
        while t < end_s - 1e-9:
            self.call(t, t + latency_s, f, type=type, error=None if type == "ok" else error, value=value)
            t += every_s
        return self

    def nemesis(self, start_s: float, f: str, done: Any = None, *, effective: bool = True,
                took_s: float = 0.05) -> History:
        self._add(start_s, {"type": "invoke", "process": "nemesis", "f": f, "value": None})
        self._add(start_s + took_s, {"type": "info", "process": "nemesis", "f": f, "value": done,
                                     "effective": effective})
        return self

    def build(self) -> list[dict[str, Any]]:
        ordered = sorted(self.events, key=lambda e: (e[0], e[1]))
        return [{**op, "index": i} for i, (_, _, op) in enumerate(ordered)]


def isolate(node: str, others: tuple[str, ...]) -> dict[str, Any]:
    return {"kind": "isolate", "grudge": {node: list(others), **{o: [node] for o in others}}}


def _others(node: str) -> tuple[str, ...]:
    return tuple(n for n in CONTROLLERS + REPLICAS if n != node)


def kill_master_outage(outage_s: float) -> History:
    """Writes every 0.25 s; the master b1 killed at 10 s; writes fail for ``outage_s``; b1 restarted at 30 s."""
    h = History().writes(0, 10).nemesis(10, "kill", ["b1"])
    return h.writes(10.05, 10.05 + outage_s, type="fail").writes(10.05 + outage_s, 40).nemesis(30, "start", ["b1"])


def _case(name: str, h: History, valid: bool, judged: int, *, workloads: tuple[str, ...] = ("queue",),
          undecided: int | None = None, keys: tuple[str, ...] = ()) -> Any:
    return pytest.param(h, valid, judged, workloads, undecided, keys, id=name)


CASES = [
    _case("no-fault", History().writes(0, 30), True, 0),
    _case("kill-master-resumes-in-2s", kill_master_outage(2.0), True, 1),
    _case("kill-master-stalls-12s", kill_master_outage(12.0), False, 1, keys=("queue writes to broker-0",)),
    _case("kill-master-just-within-bound", kill_master_outage(7.5), True, 1),
    _case("kill-two-controllers-no-quorum",
          History().writes(0, 10).nemesis(10, "kill", ["c1", "c2"]).writes(10, 25, type="fail")
          .nemesis(25, "start", ["c1", "c2"]).writes(25.1, 40), True, 1),
    _case("kill-every-replica",
          History().writes(0, 10).nemesis(10, "kill", list(REPLICAS)).writes(10, 25, type="fail")
          .nemesis(25, "start").writes(25.1, 40), True, 0),
    _case("fault-before-the-set-settled",
          History().writes(0, 2).nemesis(2, "kill", ["b1"]).writes(2.05, 20, type="fail").writes(20, 30), True, 0,
          undecided=1),
    _case("clock-fault-is-not-modelled",
          History().writes(0, 10).nemesis(10, "bump-clock", {"delta_ms": 60000}).writes(10, 25, type="fail")
          .nemesis(25, "reset-clock").writes(25, 40), True, 0, undecided=1),
    _case("isolated-master-stalls",
          History().writes(0, 10).nemesis(10, "start-partition", isolate("b1", _others("b1")))
          .writes(10.05, 25, type="fail").nemesis(25, "stop-partition", "healed").writes(25.05, 40), False, 1),
    _case("bridge-among-controllers-is-undecided",
          History().writes(0, 10).nemesis(10, "start-partition", {"kind": "bridge", "grudge": {"c1": ["c3"],
                                                                                                 "c3": ["c1"]}})
          .writes(10.05, 25, type="fail").nemesis(25, "stop-partition", "healed").writes(25.05, 40), True, 1,
          undecided=1),  # judged once healed: the bridge never touched the broker set
    _case("heal-keeps-the-clock",  # the outage outlasts the restart of the old master: one watch, 10 s
          History().writes(0, 10).nemesis(10, "kill", ["b1"]).writes(10.05, 20, type="fail")
          .nemesis(15, "start", ["b1"]).writes(20, 40), False, 1),
    _case("ineffective-kill-is-no-excuse",  # nothing took effect: a stall with no fault is still a stall
          History().writes(0, 10).nemesis(10, "kill", ["b1"], effective=False).writes(10, 25, type="fail")
          .writes(25, 40), False, 1, keys=("queue writes to broker-0",)),
    _case("no-writes-tried-no-claim",
          History().writes(0, 10).nemesis(10, "kill", ["b1"]).nemesis(30, "start", ["b1"]), True, 1),
    _case("controller-writes-stall-with-a-quorum",
          History().writes(0, 10, f="alter", value={"broker_set": "vreg-0"})
          .nemesis(10, "kill", ["c1"]).writes(10.05, 25, type="fail", f="alter", value={"broker_set": "vreg-0"})
          .nemesis(25, "start", ["c1"]).writes(25.05, 40, f="alter", value={"broker_set": "vreg-0"}),
          False, 1, workloads=("controller-register",), keys=("controller-register writes",)),
    _case("membership-has-no-writes",
          History().writes(0, 10, f="bounce", value={}).nemesis(10, "kill", ["c1"])
          .writes(10.05, 25, type="fail", f="bounce", value={}).nemesis(25, "start", ["c1"])
          .writes(25.05, 40, f="bounce", value={}), True, 0, workloads=("membership",)),
    _case("final-heal-drain-stalls",
          History().writes(0, 10).nemesis(10, "start-partition", isolate("b2", _others("b2")))
          .writes(10.05, 20).nemesis(20, "stop-partition", "healed")
          .writes(30, 45, f="drain", type="fail").writes(45, 50, f="drain"), False, 1,
          keys=("queue after the final heal",)),
]


@pytest.mark.parametrize(("h", "valid", "judged", "workloads", "undecided", "keys"), CASES)
def test_verdicts(h: History, valid: bool, judged: int, workloads: tuple[str, ...], undecided: int | None,
                  keys: tuple[str, ...]) -> None:
    r = check_availability(h.build(), TOPO, workloads, EXP)
    assert r.valid is valid, r.stats
    assert r.stats["judged_windows"] == judged, r.stats["windows"]
    if undecided is not None:
        assert r.stats["undecided_pieces"] == undecided, r.stats["undecided"]
    found = tuple(dict.fromkeys(a.key for a in r.anomalies.get(ANOMALY, [])))
    assert found == (keys or (found if not valid else ())), found


def test_the_anomaly_says_window_wait_and_last_errors() -> None:
    h = kill_master_outage(12.0)
    ops = h.build()
    r = check_availability(ops, TOPO, ["queue"], EXP)
    (a,) = r.anomalies[ANOMALY]
    assert a.observed["waited_s"] == pytest.approx(12.0, abs=0.3)
    assert a.observed["resumed"] is True
    assert a.observed["window"]["faults"] == "killed b1"
    assert a.observed["window"]["began_with"] == ["kill b1"]
    assert a.observed["last_errors"] == ["send: FLUSH_SLAVE_TIMEOUT"]
    assert a.expected == {"resume_within_s": 8.0}
    kill = next(o["index"] for o in ops if o["process"] == "nemesis" and o["f"] == "kill" and o["type"] == "invoke")
    assert kill in a.ops
    assert "queue writes to broker-0 resumed only after 12.0 s (expected within 8 s)" in a.explanation
    assert "in-sync replica b2" in a.explanation and "FLUSH_SLAVE_TIMEOUT" in a.explanation


def test_a_wait_the_clients_gave_up_on_ends_at_their_last_failure() -> None:
    # writes fail from 10 s to 22 s, then the main phase ends: nobody looked after 22 s
    h = History().writes(0, 10).nemesis(10, "kill", ["b1"]).writes(10.05, 22, type="fail")
    h.nemesis(40, "start", ["b1"])
    (a,) = check_availability(h.build(), TOPO, ["queue"], EXP).anomalies[ANOMALY]
    assert a.observed["resumed"] is False
    assert a.observed["until_s"] == pytest.approx(21.81, abs=0.05)
    assert "were still failing after" in a.explanation


def test_a_new_fault_restarts_the_clock_and_the_set_is_then_unknown() -> None:
    # b1 killed at 10 s, b2 (the new master) killed at 14 s: after an election only the new master is in sync,
    # so the second window cannot be judged; the first is cut at 14 s, within the bound
    h = History().writes(0, 10).nemesis(10, "kill", ["b1"]).writes(10.05, 30, type="fail")
    h.nemesis(14, "kill", ["b2"]).nemesis(30, "start").writes(30.1, 40)
    r = check_availability(h.build(), TOPO, ["queue"], EXP)
    assert r.valid is True and r.stats["judged_windows"] == 1
    assert any("not known" in u["why"] for u in r.stats["undecided"])


def test_disabled_expectations_resolve_to_none_and_bounds_derive_from_the_lease() -> None:
    assert resolve({"enabled": False}, lease_timeout_ms=2000) is None
    exp = resolve({"final_resume_s": 30}, lease_timeout_ms=5000)
    assert exp is not None
    assert (exp.write_resume_s, exp.final_resume_s, exp.settle_s) == (14.0, 30.0, 7.0)
    assert exp.derived == ("write_resume_s", "settle_s")


def test_writes_to_the_controllers_keep_a_bound_that_does_not_shrink_with_the_broker_lease() -> None:
    """The controllers' failover does not follow the broker lease (CONTROLLER_BOUND_S); a spec's own bound is
    both paths' bound."""
    fast = resolve({}, lease_timeout_ms=1000)
    assert fast is not None and (fast.write_bound_s(False), fast.write_bound_s(True)) == (6.0, CONTROLLER_BOUND_S)
    slow = resolve({}, lease_timeout_ms=5000)
    assert slow is not None and slow.write_bound_s(True) == slow.write_bound_s(False) == 14.0
    told = resolve({"write_resume_s": 3}, lease_timeout_ms=1000)
    assert told is not None and told.write_bound_s(True) == told.write_bound_s(False) == 3.0
    assert fast.to_dict()["controller_write_resume_s"] == CONTROLLER_BOUND_S


@pytest.mark.parametrize(("raw", "key"), [
    pytest.param({"write_resume_s": 0}, "write_resume_s", id="zero-bound"),
    pytest.param({"settle_s": "5"}, "settle_s", id="string-bound"),
    pytest.param({"final_resume_s": True}, "final_resume_s", id="bool-bound"),
    pytest.param({"enabled": 1}, "enabled", id="int-enabled"),
    pytest.param({"write_resume": 5}, "write_resume", id="unknown-key"),
    pytest.param({"write_resume_s": float("nan")}, "write_resume_s", id="nan"),
    pytest.param([1], "", id="not-a-mapping"),
])
def test_bad_options_name_the_key(raw: Any, key: str) -> None:
    with pytest.raises(ExpectationError) as err:
        validate_options(raw)
    assert err.value.key == key and f"checker.availability.{key}" in str(err.value)


def _state(**kw: Any) -> FaultState:
    cuts = frozenset(frozenset(p) for p in kw.pop("cuts", ()))
    return FaultState(frozenset(kw.pop("killed", ())), frozenset(kw.pop("paused", ())), cuts,
                      frozenset(kw.pop("unmodelled", ())))


ALL = frozenset(REPLICAS)
REACH_CASES = [
    ("calm", _state(), 0, ALL, True),
    ("controllers-path-calm", _state(), None, None, True),
    ("one-controller-down", _state(killed={"c1"}), 0, ALL, True),
    ("two-controllers-down", _state(paused={"c1", "c2"}), 0, ALL, False),
    ("clean-split-minority-cut", _state(cuts=[("c1", "c2"), ("c1", "c3")]), None, None, True),
    ("partial-split", _state(cuts=[("c1", "c3")]), None, None, None),
    ("sync-set-unknown", _state(killed={"b1"}), 0, None, None),
    ("in-sync-replica-up", _state(killed={"b1"}), 0, frozenset({"b1", "b2"}), True),
    ("only-in-sync-replica-down", _state(killed={"b1"}), 0, frozenset({"b1"}), False),
    ("replica-cut-from-all-controllers", _state(cuts=[("b1", c) for c in CONTROLLERS]), 0, frozenset({"b1"}), False),
    ("replica-sees-part-of-quorum", _state(cuts=[("b1", "c1")]), 0, frozenset({"b1"}), None),
    ("unmodelled", _state(unmodelled={"clock"}), 0, ALL, None),
]


@pytest.mark.parametrize(("state", "broker_set", "in_sync", "holds"), [c[1:] for c in REACH_CASES],
                         ids=[c[0] for c in REACH_CASES])
def test_reach(state: FaultState, broker_set: int | None, in_sync: frozenset[str] | None,
               holds: bool | None) -> None:
    r = reach(state, TOPO, broker_set=broker_set, in_sync=in_sync)
    assert r.holds is holds, r.why


def test_pieces_follow_the_nemesis_ops() -> None:
    h = History().writes(0, 30).nemesis(5, "kill", ["b1"]).nemesis(6, "start-partition", isolate("c1", ("c2",)))
    h.nemesis(9, "start", ["b1"]).nemesis(10, "stop-partition", "healed").nemesis(12, "pause", None, effective=False)
    pieces = fault_pieces(h.build())
    assert [p.state.describe() for p in pieces] == [
        "no fault", "killed b1", "killed b1; cut c1-c2", "cut c1-c2", "no fault", "no fault"]
    assert [p.added for p in pieces] == [False, True, True, False, False, False]
    assert all(a.end_s <= b.start_s for a, b in pairwise(pieces))


def test_an_unfinished_or_unknown_fault_op_is_unmodelled() -> None:
    h = History().writes(0, 10).nemesis(5, "mystery-fault", None)
    assert fault_pieces(h.build())[-1].instant
    h = History().writes(0, 10)
    h._add(5, {"type": "invoke", "process": "nemesis", "f": "kill", "value": "masters"})
    assert fault_pieces(h.build())[-1].state.unmodelled


@pytest.mark.parametrize(("value", "index"), [({"queue": "t/broker-3/1"}, 3), ({"queue": "t/b/1"}, None),
                                              ({"queue": "broker-0"}, None), ({}, None), (None, None)])
def test_broker_set_of(value: Any, index: int | None) -> None:
    assert broker_set_of(value) == index


def test_the_write_table_matches_every_registered_workload() -> None:
    """One table of writes: every workload the registry builds has an entry with exactly its client's fs."""
    from harness.spec import spec_from_dict
    from workloads import registry

    spec = spec_from_dict({"name": "t", "nodes": {"controllers": 3, "broker_sets": {"count": 1, "replicas": 3}},
                           "seed": 1})
    class RegisterDB:  # what the generic register workload asks of a system's DB (nothing is run)
        def register_client(self, *, read_mode: str, timeout_s: float) -> object:
            return object()

        def queue_client(self, *, timeout_s: float) -> object:  # and of the generic-queue workload
            return object()

        def counter_client(self, *, timeout_s: float) -> object:  # and of the counter workload
            return object()

        async def setup(self, test: dict[str, Any], node: str) -> None: ...
        async def teardown(self, test: dict[str, Any], node: str) -> None: ...

    assert set(registry.names()) == set(WORKLOAD_OPS)
    for name in registry.names():
        db = RegisterDB() if name in ("register", "generic-queue", "counter") else None
        built = registry.build(name, registry.WorkloadContext(spec=spec, db=db, options={}, seed=1))
        assert built.fs == WORKLOAD_OPS[name].fs, name


def test_docs_example() -> None:
    """The example of docs/anomalies.md (``<!-- availability-example: KIND KEY -->`` + a JSON-lines block) gives
    that anomaly on that key, and the doc quotes the checker's explanation word for word."""
    import json
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "docs" / "anomalies.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- availability-example: (\S+) ([^>]*?) -->\n```json\n(.*?)```\n\n(.*?)\n\n", text, re.S)
    assert m is not None, "docs/anomalies.md lacks the availability example"
    kind, key, block, prose = m.group(1), m.group(2), m.group(3), " ".join(m.group(4).split())
    ops = [json.loads(line) for line in block.splitlines() if line.strip()]
    r = check_availability(ops, TOPO, ["queue"], EXP)
    (a,) = r.anomalies[kind]
    assert a.key == key and r.valid is False
    assert f"`{a.explanation}`" in prose, a.explanation


def test_public_names_exist() -> None:
    import checker.availability as pkg

    assert [n for n in pkg.__all__ if not hasattr(pkg, n)] == []
