"""The interpreter under ``pace``: every worker (and so every node) gets its share, and the run reports it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from checker.history import read_jsonl
from harness import generator as g
from harness.runner import TestParts, run_test
from harness.spec import spec_from_dict


class InstantClient:
    """Completes every op at once: the old stagger gave nearly all of them to worker 0."""

    async def open(self, test: dict[str, Any], node: str) -> InstantClient:
        return self

    async def setup(self, test: dict[str, Any]) -> None:
        return None

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        if op["f"] == "nap":
            await asyncio.sleep(0.3)
        return {**op, "type": "ok"}

    async def teardown(self, test: dict[str, Any]) -> None:
        return None

    async def close(self, test: dict[str, Any]) -> None:
        return None


class Valid:
    def check(self, test: dict[str, Any], history: Any, opts: Any) -> dict[str, Any]:
        return {"valid": True}


def test_results_report_load_per_worker_and_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = spec_from_dict({"name": "load", "nodes": {"controllers": 3, "broker_sets": {"count": 0}},
                           "concurrency": 3, "rate": 150, "time_limit_s": 1.0,
                           "phases": {"recovery_s": 0, "final_drain_s": 1}, "seed": 3})
    parts = TestParts(client=InstantClient(), checkers={"ok": Valid()},
                      generator=g.clients(g.pace(spec.rate, g.repeat({"f": "w"}), seed=spec.seed)))
    out = asyncio.run(run_test(spec, parts, results_root=str(tmp_path), op_timeout_s=1.0, grace_s=0.5))
    load = out.results["load"]
    per_worker = load["ops_per_worker"]
    assert set(per_worker) == {"0", "1", "2"} and sum(per_worker.values()) == load["client_ops"] > 0
    assert load["max_worker_share"] <= 1.5  # each worker has its own lane: none takes the others' ops
    assert load["ops_per_node"] == {n: per_worker[str(i)] for i, n in enumerate(spec.nodes.all)}
    assert load["configured_ops_per_s"] == 150 and load["fault_windows"] == 0
    assert "ops/s of 150 configured" in capsys.readouterr().out


def test_main_phase_ends_when_its_generator_does_not_when_ops_in_flight_do(tmp_path: Path) -> None:
    """After the last op starts no new op can: the wait for it to complete is not main-phase time (it would
    lower the achieved rate for nothing the load generator could do)."""
    spec = spec_from_dict({"name": "tail", "nodes": {"controllers": 1, "broker_sets": {"count": 0}},
                           "concurrency": 1, "rate": 10, "time_limit_s": 5.0,
                           "phases": {"recovery_s": 0, "final_drain_s": 1}, "seed": 1})
    parts = TestParts(client=InstantClient(), checkers={"ok": Valid()}, generator=g.clients({"f": "nap"}))
    out = asyncio.run(run_test(spec, parts, results_root=str(tmp_path), op_timeout_s=2.0, grace_s=0.5))
    nap = [o.time for o in read_jsonl(out.run_dir.history) if o.f == "nap"]
    assert len(nap) == 2 and out.results["load"]["client_ops"] == 1
    assert out.results["load"]["main_phase_s"] * 1e9 < nap[1] - nap[0]


@dataclass(frozen=True)
class _OneOpAt:
    """One client op at a fixed history time: until then the interpreter waits and asks again, so lazily
    anchored clocks around it (the main phase's time limit) start only when it is committed."""

    time_ns: int

    def op(self, ctx: g.Context) -> Any:
        thread = ctx.free_thread()
        if thread is None:
            return (g.PENDING, self)
        return ({"type": "invoke", "process": ctx.workers[thread], "time": self.time_ns, "f": "w", "value": None},
                None)

    def update(self, ctx: g.Context, event: Any) -> Any:
        return self


def test_the_main_phase_starts_when_its_generator_commits_its_first_op(tmp_path: Path) -> None:
    """``main_phase_start_ns`` is where the phase's clocks start (the time limit, a schedule's offsets): the first
    op the generator committed to, not the call that began asking it -- a replay measured its steps from the
    call and so recorded them late (and dropped the ones in the last moments of the phase)."""
    at_ns = 2_000_000_000
    spec = spec_from_dict({"name": "anchor", "nodes": {"controllers": 1, "broker_sets": {"count": 0}},
                           "concurrency": 1, "rate": 10, "time_limit_s": 5.0,
                           "phases": {"recovery_s": 0, "final_drain_s": 1}, "seed": 1})
    parts = TestParts(client=InstantClient(), checkers={"ok": Valid()}, generator=g.clients(_OneOpAt(at_ns)))
    out = asyncio.run(run_test(spec, parts, results_root=str(tmp_path), op_timeout_s=1.0, grace_s=0.5))
    start = out.results["main_phase_start_ns"]
    w = [o.time for o in read_jsonl(out.run_dir.history) if o.f == "w" and o.type == "invoke"]
    assert len(w) == 1 and at_ns <= start <= w[0], (start, w)
    assert out.results["main_phase_end_ns"] >= start
