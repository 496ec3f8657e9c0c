"""Fault accounting (pure): which completions took effect, the per-kind summary, the warnings."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from nemesis.accounting import STEP, Accounted, judge, summarize, warnings
from nemesis.failpoint import trigger_for


def comp(f: str, value: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "info", "process": "nemesis", "f": f, "value": value, **extra}


@pytest.mark.parametrize("completion,effective,why", [
    (comp("start-partition", {"kind": "isolate", "grudge": {"c1": ["c2"]}}), True, None),
    (comp("start-partition", {"kind": "isolate", "grudge": {}}), False, "cut nobody off"),
    (comp("kill", ["c1"]), True, None),
    (comp("kill", []), False, "no live node"),
    (comp("kill", "primaries", error="RoleUnavailable: no primaries right now"), False, "RoleUnavailable"),
    (comp("crash-at", {"name": "raft.before_apply", "nodes": {"c1": {"armed": "ok", "crashed": 1.2}}}), True, None),
    (comp("crash-at", {"name": "raft.before_apply", "trigger": "controller-write",
                       "nodes": {"c1": {"armed": "ok", "crashed": False}}}), False, "not reached in time (triggered"),
    (comp("crash-at", {"name": "x.y", "nodes": {"c1": {"armed": "unreachable: refused", "crashed": False}}}), False,
     "could not be armed"),
    (comp("crash-at", {"name": "x.y", "nodes": {"c1": {"armed": "unknown: connection lost", "crashed": 4.1}}}),
     True, None),
    (comp("crash-at", {"name": "x.y", "nodes": {"c1": {"armed": "unknown: connection lost", "crashed": False}}}),
     False, "got no answer from c1"),
    (comp("start-disk", {"fault": "enospc", "results": {"b1": "ok"}}), True, None),
    (comp("start-disk", {"fault": "slow-fsync", "results": {"c1": "skipped: brokers only"}}), False, "armed on no"),
    (comp("registration-crash", {"crash": {"hit": True}}), True, None),
    (comp("registration-crash", {"crash": {"hit": False}}), False, "did not crash"),
    (comp("bump-clock", {"nodes": ["c1"], "delta_ms": 5}), True, None),
    (comp("stop-partition", "healed"), True, None),
], ids=lambda x: str(x)[:50])
def test_judge(completion: dict[str, Any], effective: bool, why: str | None) -> None:
    got, reason = judge(completion)
    assert got is effective
    if why is None:
        assert reason is None
    else:
        assert reason is not None and why in reason


def test_summary_counts_faults_by_kind_and_never_counts_undo_steps() -> None:
    history = [
        {"type": "invoke", "process": "nemesis", "f": "kill", "value": "one"},
        comp("kill", ["c1"], fault="kill", effective=True),
        {"type": "invoke", "process": "nemesis", "f": "start", "value": None},
        comp("start", ["c1"], fault="start", effective=True),
        {"type": "invoke", "process": "nemesis", "f": "crash-at", "value": {"name": "raft.before_apply"}},
        comp("crash-at", {"name": "raft.before_apply"}, fault="crash-at:raft.before_apply", effective=False,
             why="failpoint raft.before_apply was not reached in time"),
        {"type": "invoke", "process": "nemesis", "f": "start-partition", "value": {"kind": "bridge"}},
        {"type": "invoke", "process": 0, "f": "send", "value": 1},
    ]
    s = summarize(history)
    assert set(s) == {"kill", "crash-at:raft.before_apply", "start-partition:bridge"}
    assert s["kill"] == {"requested": 1, "effective": 1, "not_effective": 0, "reasons": {}}
    assert s["crash-at:raft.before_apply"]["reasons"] == {"failpoint raft.before_apply was not reached in time": 1}
    assert s["start-partition:bridge"]["reasons"] == {"no completion (the run ended first)": 1}
    lines = warnings(s)
    assert len(lines) == 2 and any("crash-at:raft.before_apply" in line for line in lines)


def test_completions_without_accounting_are_judged_from_their_fields() -> None:
    history = [{"type": "invoke", "process": "nemesis", "f": "kill", "value": "one"},
               comp("kill", "one", error="timeout")]
    assert summarize(history)["kill"]["reasons"] == {"timeout": 1}


class _Recorder:
    def fs(self) -> frozenset[str]:
        return frozenset({"kill"})

    async def setup(self, test: dict[str, Any]) -> _Recorder:
        return self

    async def teardown(self, test: dict[str, Any]) -> None:
        return None

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        step = STEP.get()
        assert step is not None
        step.resolutions.append({"selector": "one", "nodes": ["c1"], "roles": {"c1": "controller-leader"}})
        return {**op, "type": "info", "value": [f"c{step.rng.randrange(1000)}"]}


def test_accounted_adds_fields_and_gives_each_step_a_replayable_rng() -> None:
    async def steps(seed: int) -> list[dict[str, Any]]:
        nem = await Accounted(_Recorder(), seed=seed).setup({})
        return [await nem.invoke({}, {"type": "invoke", "process": "nemesis", "f": "kill", "value": "one"})
                for _ in range(3)]

    a, b = asyncio.run(steps(1)), asyncio.run(steps(1))
    assert a == b and a[0]["effective"] is True and a[0]["fault"] == "kill"
    assert a[0]["targets"] == [{"selector": "one", "nodes": ["c1"], "roles": {"c1": "controller-leader"}}]
    assert len({str(x["value"]) for x in a}) > 1  # each step its own RNG
    assert STEP.get() is None


@pytest.mark.parametrize("name,trigger,expected", [
    ("controller.before_propose", "auto", "controller-write"), ("raft.after_persist", "auto", "controller-write"),
    ("broker.master.after_append_before_replication", "auto", "none"), ("raft.before_apply", "none", "none"),
])
def test_trigger_for(name: str, trigger: str, expected: str) -> None:
    assert trigger_for(name, trigger) == expected
