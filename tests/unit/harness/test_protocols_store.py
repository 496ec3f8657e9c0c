"""Validating wrappers, nemesis composition, and the results store."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from harness.junit import write_junit
from harness.protocols import (
    HarnessError,
    InvalidCompletion,
    NoopNemesis,
    ValidatingClient,
    ValidatingNemesis,
    compose_nemeses,
    validate_completion,
    verdict_of,
)
from harness.store import create_run_dir, exit_code, merge_results, write_results

INV = {"type": "invoke", "process": 3, "f": "send", "value": 1}


@pytest.mark.parametrize("completion,problems", [
    ({**INV, "type": "ok"}, []),
    ({**INV, "type": "info", "error": "timeout"}, []),
    ({**INV, "type": "invoke"}, ["type must be"]),
    ({**INV, "type": "ok", "process": 4}, ["process must be the invocation's 3"]),
    ({**INV, "type": "done", "f": "poll"}, ["type must be", "f must be the invocation's 'send'"]),
    (None, ["completion must be a dict"]),
], ids=["ok", "info", "invoke-is-not-a-completion", "wrong-process", "two-problems", "not-a-dict"])
def test_validate_completion(completion: Any, problems: list[str]) -> None:
    found = validate_completion(INV, completion)
    assert len(found) == len(problems)
    for f, p in zip(found, problems):
        assert p in f


class Echo:
    def __init__(self, reply: dict[str, Any]) -> None:
        self.reply = reply

    async def open(self, test: dict[str, Any], node: str) -> Echo:
        return self

    async def setup(self, test: dict[str, Any]) -> None: ...
    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        return {**op, **self.reply}

    async def teardown(self, test: dict[str, Any]) -> None: ...
    async def close(self, test: dict[str, Any]) -> None: ...


def test_validating_client_lists_problems() -> None:
    good = ValidatingClient(Echo({"type": "ok"}))
    assert asyncio.run(good.invoke({}, dict(INV)))["type"] == "ok"
    bad = ValidatingClient(Echo({"type": "maybe", "process": 9}))
    with pytest.raises(InvalidCompletion) as info:
        asyncio.run(bad.invoke({}, dict(INV)))
    assert len(info.value.problems) == 2 and "docs/history-format.md" in str(info.value)


class FNemesis(NoopNemesis):
    def __init__(self, fs: set[str]) -> None:
        self._fs = frozenset(fs)

    def fs(self) -> frozenset[str]:
        return self._fs

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        return {**op, "type": "info", "value": sorted(self._fs)}


def test_compose_nemeses_routes_by_f() -> None:
    n = compose_nemeses([FNemesis({"start-partition", "stop-partition"}), FNemesis({"kill", "start"})])
    assert n.fs() == {"start-partition", "stop-partition", "kill", "start"}

    async def go() -> list[Any]:
        m = await ValidatingNemesis(n).setup({})
        out = [await m.invoke({}, {"process": "nemesis", "f": f, "type": "invoke"}) for f in ("kill", "stop-partition")]
        with pytest.raises(InvalidCompletion, match="not handled"):
            await m.invoke({}, {"process": "nemesis", "f": "bitflip", "type": "invoke"})
        return [o["value"] for o in out]

    assert asyncio.run(go()) == [["kill", "start"], ["start-partition", "stop-partition"]]
    with pytest.raises(HarnessError, match="'kill' is handled by both"):
        compose_nemeses([FNemesis({"kill"}), FNemesis({"kill"})])


def test_verdict_of() -> None:
    assert verdict_of({"valid": True}) is True and verdict_of({"valid": False}) is False
    assert verdict_of({"valid": "unknown"}) == "unknown" and verdict_of(object()) == "unknown"
    assert verdict_of({"valid": 1}) == "unknown"  # only the booleans count


def test_run_dirs_are_unique_and_linked(tmp_path: Path) -> None:
    now = dt.datetime(2026, 11, 22, 3, 4, 5, 678000, tzinfo=dt.UTC)
    a = create_run_dir(tmp_path, "t", now=now)
    b = create_run_dir(tmp_path, "t", now=now)
    assert a.path.name == "20261122T030405.678Z" and b.path.name == "20261122T030405.678Z-1"
    assert (tmp_path / "latest").resolve() == b.path and (tmp_path / "t" / "latest").resolve() == b.path
    assert a.node_dir("c1").is_dir() and a.node_dir("c1") == a.path / "nodes" / "c1"


@pytest.mark.parametrize("valid,crashed,code", [(True, False, 0), (False, False, 1), ("unknown", False, 2),
                                                (True, True, 255)])
def test_exit_codes(valid: Any, crashed: bool, code: int) -> None:
    assert exit_code(valid, crashed=crashed) == code


def test_results_and_junit(tmp_path: Path) -> None:
    run = create_run_dir(tmp_path, "t")
    merged = merge_results({"q": {"valid": False, "lost": [3]}, "p": {"valid": True}, "u": {"valid": "unknown"}})
    assert merged["valid"] is False
    write_results(run, merged, seed=9)
    assert json.loads(run.results_json.read_text())["seed"] == 9
    write_junit(run, "t", merged, time_s=1.5, error="boom <x>")
    suite = ET.parse(run.junit_xml).getroot()
    assert (suite.get("failures"), suite.get("errors"), suite.get("tests")) == ("1", "2", "4")
    assert [c.get("name") for c in suite] == ["q", "u", "p", "run"]  # failing, unknown, valid; then the run
