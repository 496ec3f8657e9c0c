"""The runner with in-process clients: timeouts, exceptions, renumbering, phases, SIGINT, results dir."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from checker.history import pair_ops, read_jsonl
from harness import generator as g
from harness.protocols import NoopNemesis
from harness.runner import RunOutcome, TestParts, run_repeated, run_test, worst_exit_code
from harness.spec import TestSpec, spec_from_dict


def make_spec(**kw: Any) -> TestSpec:
    doc = {"name": "unit", "nodes": {"controllers": 2, "broker_sets": {"count": 0}}, "concurrency": 2,
           "time_limit_s": 0.5, "phases": {"recovery_s": 0.05, "final_drain_s": 1}, "seed": 11, **kw}
    return spec_from_dict(doc)


class ScriptedClient:
    """Behaviour chosen by f: ok / fail / slow (times out) / boom (raises) / bad (wrong process)."""

    def __init__(self, log: list[str] | None = None, node: str = "") -> None:
        self.log = log if log is not None else []
        self.node = node

    async def open(self, test: dict[str, Any], node: str) -> ScriptedClient:
        self.log.append(f"open {node}")
        return ScriptedClient(self.log, node)

    async def setup(self, test: dict[str, Any]) -> None:
        self.log.append("setup")

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        f = op["f"]
        if f == "slow":
            await asyncio.sleep(10)
        if f == "nap":
            await asyncio.sleep(0.5)
        if f == "stubborn":  # swallows the watchdog's cancellation (a badly written client)
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                await asyncio.sleep(0.01)
            return {**op, "type": "ok"}
        if f == "boom":
            raise ConnectionResetError("peer reset")
        if f == "bad":
            return {**op, "type": "ok", "process": 999}
        if f == "fail":
            return {**op, "type": "fail", "error": "definitely not"}
        return {**op, "type": "ok", "node": self.node}

    async def teardown(self, test: dict[str, Any]) -> None:
        self.log.append("teardown")

    async def close(self, test: dict[str, Any]) -> None:
        self.log.append(f"close {self.node}")


class RecordingDB:
    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[str] = []
        self.fail_on = fail_on

    async def setup(self, test: dict[str, Any], node: str) -> None:
        self.calls.append(f"setup {node}")
        if node == self.fail_on:
            raise RuntimeError(f"cannot install on {node}")

    async def teardown(self, test: dict[str, Any], node: str) -> None:
        self.calls.append(f"teardown {node}")


class CountingNemesis(NoopNemesis):
    def fs(self) -> frozenset[str]:
        return frozenset({"start", "stop"})


class Verdict:
    def __init__(self, valid: Any) -> None:
        self.valid = valid

    def check(self, test: dict[str, Any], history: Any, opts: Any) -> dict[str, Any]:
        return {"valid": self.valid, "ops": len(history)}


class Crashing:
    def check(self, test: dict[str, Any], history: Any, opts: Any) -> Any:
        raise ZeroDivisionError("oops")


def run(spec: TestSpec, parts: TestParts, tmp_path: Path, **kw: Any) -> Any:
    return asyncio.run(run_test(spec, parts, results_root=str(tmp_path), op_timeout_s=0.2, grace_s=0.5, **kw))


def test_end_to_end_results_dir(tmp_path: Path) -> None:
    log: list[str] = []
    db = RecordingDB()
    parts = TestParts(
        client=ScriptedClient(log), checkers={"a": Verdict(True)}, db=db, nemesis=CountingNemesis(),
        generator=g.clients(g.limit(6, g.repeat({"f": "w", "value": 1})), [{"f": "start"}, {"f": "stop"}]),
        heal_generator={"f": "stop", "value": "all"},
        final_generator=g.each_thread(g.once({"f": "read"})),
    )
    out = run(make_spec(), parts, tmp_path)
    assert out.exit_code == 0 and out.valid is True and not out.interrupted
    ops = read_jsonl(out.run_dir.history)
    assert [o.f for o in ops if o.type == "invoke" and o.is_client].count("w") == 6
    assert [o.f for o in ops if not o.is_client and o.type == "invoke"] == ["start", "stop", "stop"]
    assert sorted(o.f for o in ops if o.type == "invoke" and o.f == "read") == ["read", "read"]
    assert all(c is not None and c.type == "ok" for _, c in pair_ops(ops))
    assert [o.index for o in ops] == list(range(len(ops)))
    assert {o.node for o in ops if o.type == "ok"} == {"c1", "c2"}  # workers spread over nodes
    assert sorted(db.calls) == ["setup c1", "setup c2", "teardown c1", "teardown c2"]
    assert "setup" in log and "teardown" in log and "open c1" in log and "close c2" in log
    again = spec_from_dict(yaml.safe_load(out.run_dir.test_yaml.read_text()))
    assert again.seed == 11 and again.name == "unit"
    doc = json.loads(out.run_dir.results_json.read_text())
    assert doc["valid"] is True and doc["seed"] == 11 and doc["counts"]["invoke"] == len(ops) // 2
    suite = ET.parse(out.run_dir.junit_xml).getroot()
    assert suite.get("failures") == "0" and [c.get("name") for c in suite.findall("testcase")] == ["a"]
    assert (tmp_path / "latest").resolve() == out.run_dir.path.resolve()
    assert (tmp_path / "unit" / "latest").resolve() == out.run_dir.path.resolve()


def test_timeouts_exceptions_and_renumbering(tmp_path: Path) -> None:
    spec = make_spec(concurrency=1, time_limit_s=60)  # the generator is finite: the limit only bounds a hang
    parts = TestParts(client=ScriptedClient(), checkers={"a": Verdict(True)},
                      generator=g.clients([{"f": "slow"}, {"f": "boom"}, {"f": "bad"}, {"f": "fail"}, {"f": "ok"},
                                           {"f": "stubborn"}, {"f": "ok"}]))
    out = run(spec, parts, tmp_path)
    ops = read_jsonl(out.run_dir.history)
    done = [c for _, c in pair_ops(ops)]
    assert [(c.process, c.f, c.type) for c in done if c] == [
        (0, "slow", "info"), (1, "boom", "info"), (2, "bad", "info"), (3, "fail", "fail"), (3, "ok", "ok"),
        (3, "stubborn", "ok"), (3, "ok", "ok")]  # the worker survives a client that swallows cancellation
    assert done[0].error == "timeout"  # type: ignore[union-attr]
    assert "indeterminate" in done[1].error and "peer reset" in done[1].error  # type: ignore[union-attr]
    assert "invalid completion" in done[2].error  # type: ignore[union-attr]
    assert out.results["client_errors"] and "process must be" in out.results["client_errors"][0]


class OneAtATime:
    """A generator that waits for each op's completion before the next (like the membership workload)."""

    def __init__(self, fs: tuple[str, ...], busy: bool = False) -> None:
        self.fs, self.busy = fs, busy

    def op(self, ctx: Any) -> Any:
        if not self.fs:
            return None
        if self.busy or ctx.free_thread() is None:
            return (g.PENDING, self)
        op = {"type": "invoke", "process": ctx.workers[ctx.free_thread()], "time": ctx.time_ns, "f": self.fs[0]}
        return (op, OneAtATime(self.fs[1:], busy=True))

    def update(self, ctx: Any, event: dict[str, Any]) -> Any:
        return OneAtATime(self.fs) if event.get("type") in ("ok", "fail", "info") else self


def test_generators_hear_info_completions(tmp_path: Path) -> None:
    """Regression: the runner moved a thread to its next process before telling the generator, so
    thread-routed generators dropped every ``info`` as a stale process's event and waited forever."""
    parts = TestParts(client=ScriptedClient(), checkers={"a": Verdict(True)},
                      generator=g.clients(OneAtATime(("boom", "slow", "ok", "ok"))))
    out = run(make_spec(concurrency=2, time_limit_s=3), parts, tmp_path)
    ops = read_jsonl(out.run_dir.history)
    assert [(c.f, c.type) for _, c in pair_ops(ops) if c] == [("boom", "info"), ("slow", "info"), ("ok", "ok"),
                                                                ("ok", "ok")]


def test_per_f_op_timeouts_let_slow_ops_finish(tmp_path: Path) -> None:
    def nap_twice(timeouts: dict[str, float] | None) -> list[tuple[str, str]]:
        parts = TestParts(client=ScriptedClient(), checkers={"a": Verdict(True)},
                          generator=g.clients([{"f": "nap"}, {"f": "ok"}]), op_timeouts=timeouts)
        out = run(make_spec(concurrency=1, time_limit_s=3), parts, tmp_path)
        return [(c.f, c.type) for _, c in pair_ops(read_jsonl(out.run_dir.history)) if c]

    assert nap_twice(None) == [("nap", "info"), ("ok", "ok")]  # 0.5 s > the 0.2 s default
    assert nap_twice({"nap": 2.0}) == [("nap", "ok"), ("ok", "ok")]


@pytest.mark.parametrize("checkers,valid,code", [
    ({"a": Verdict(True), "b": Verdict("unknown")}, "unknown", 2),
    ({"a": Verdict(True), "b": Verdict(False), "c": Verdict("unknown")}, False, 1),
    ({"a": Verdict(True), "b": Crashing()}, "unknown", 2),
], ids=["unknown-beats-true", "false-beats-all", "crashing-checker-is-unknown"])
def test_verdict_merge_and_exit_code(tmp_path: Path, checkers: dict[str, Any], valid: Any, code: int) -> None:
    parts = TestParts(client=ScriptedClient(), checkers=checkers, generator=g.clients({"f": "w"}))
    out = run(make_spec(), parts, tmp_path)
    assert (out.valid, out.exit_code) == (valid, code)
    if "b" in checkers and isinstance(checkers["b"], Crashing):
        assert "ZeroDivisionError" in out.results["checkers"]["b"]["error"]
    suite = ET.parse(out.run_dir.junit_xml).getroot()
    assert int(suite.get("failures", "0")) == (1 if valid is False else 0)


def test_db_setup_failure_is_a_crash_and_still_tears_down(tmp_path: Path) -> None:
    db = RecordingDB(fail_on="c2")
    parts = TestParts(client=ScriptedClient(), checkers={"a": Verdict(True)}, db=db, generator=g.clients({"f": "w"}))
    out = run(make_spec(), parts, tmp_path)
    assert out.exit_code == 255 and "cannot install on c2" in out.results["crashed"]
    assert {"teardown c1", "teardown c2"} <= set(db.calls)
    assert out.run_dir.history.exists()


def test_leave_running_skips_db_teardown(tmp_path: Path) -> None:
    db = RecordingDB()
    parts = TestParts(client=ScriptedClient(), checkers={"a": Verdict(True)}, db=db, generator=g.clients({"f": "w"}))
    run(make_spec(leave_running=True), parts, tmp_path)
    assert not any(c.startswith("teardown") for c in db.calls)


def test_sigint_stops_generation_and_closes_history(tmp_path: Path) -> None:
    spec = make_spec(time_limit_s=30)
    class InterruptOnSlow(ScriptedClient):
        """Sends SIGINT once a slow op is in flight (not on a timer: a loaded host may start ops late)."""

        sent = False

        async def open(self, test: dict[str, Any], node: str) -> ScriptedClient:
            return InterruptOnSlow(self.log, node)

        async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
            if op["f"] == "slow" and not InterruptOnSlow.sent:
                InterruptOnSlow.sent = True
                asyncio.get_running_loop().call_later(0.05, os.kill, os.getpid(), signal.SIGINT)
            return await super().invoke(test, op)

    parts = TestParts(client=InterruptOnSlow(), checkers={"a": Verdict(True)},
                      generator=g.clients(g.mix([g.repeat({"f": "slow"}), g.stagger(0.001, g.repeat({"f": "w"}))])))

    async def go() -> Any:
        return await run_test(spec, parts, results_root=str(tmp_path), op_timeout_s=5.0, grace_s=0.2)

    out = asyncio.run(go())
    assert out.interrupted and out.valid == "unknown" and out.exit_code == 2
    ops = read_jsonl(out.run_dir.history)
    pairs = pair_ops(ops)
    assert pairs and all(c is not None for _, c in pairs)  # every invoke closed
    assert any(c.error == "interrupted" for _, c in pairs if c is not None)
    assert ops[-1].time < 20e9  # stopped long before the 30 s limit (and before a 10 s slow op ends)


def test_nemesis_ops_without_a_nemesis_are_info(tmp_path: Path) -> None:
    parts = TestParts(client=ScriptedClient(), checkers={"a": Verdict(True)}, generator=g.nemesis({"f": "kill"}))
    out = run(make_spec(), parts, tmp_path)
    [(inv, comp)] = [(i, c) for i, c in zip(*[iter(read_jsonl(out.run_dir.history))] * 2)]
    assert (inv.process, comp.type, comp.error) == ("nemesis", "info", "no nemesis configured for this test")


def test_run_repeated_uses_successive_seeds(tmp_path: Path) -> None:
    seen: list[int] = []

    def make(spec: TestSpec) -> TestParts:
        seen.append(spec.seed)
        checker = Verdict(False) if spec.seed == 12 else Verdict(True)
        return TestParts(client=ScriptedClient(), checkers={"a": checker}, generator=g.clients({"f": "w"}))

    async def one(spec: TestSpec) -> RunOutcome:
        return await run_test(spec, make(spec), results_root=str(tmp_path))

    code, outs = asyncio.run(run_repeated(make_spec(test_count=3), one))
    assert seen == [11, 12, 13] and code == 1 and [o.exit_code for o in outs] == [0, 1, 0]
    assert len({o.run_dir.path for o in outs}) == 3


@pytest.mark.parametrize("codes,worst", [([0, 0], 0), ([0, 2], 2), ([2, 1, 0], 1), ([1, 255, 2], 255), ([], 0)])
def test_worst_exit_code(codes: list[int], worst: int) -> None:
    assert worst_exit_code(codes) == worst
