"""Failpoints and the skewable clock."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pytest

from system_under_test import failpoints as fp
from system_under_test.clock import Clock

P = fp.declare("test.point", "a point for tests")


@pytest.mark.parametrize(
    "spec, kind, remaining",
    [("crash", "crash", None), ("2*error", "error", 2), ("delay(50)", "delay", None), ("pause", "pause", None)],
)
def test_parse_action(spec: str, kind: str, remaining: int | None) -> None:
    a = fp.parse_action(spec)
    assert a is not None and a.kind == kind and a.remaining == remaining


@pytest.mark.parametrize("spec", ["boom", "delay", "crash(3)", "x*crash", ""])
def test_bad_action_names_grammar(spec: str) -> None:
    with pytest.raises(fp.FailpointSpecError, match="bad failpoint action"):
        fp.parse_action(spec) if spec else fp.parse_action("??")


def test_error_count_then_disarm_and_hit_counts() -> None:
    fp.arm(P, "2*error")
    for _ in range(2):
        with pytest.raises(fp.FailpointError):
            fp.hit(P)
    fp.hit(P)  # disarmed after two
    row = next(r for r in fp.list_points() if r["name"] == P)
    assert row["fired"] >= 2 and row["hits"] >= 3 and row["action"] == "off"
    with pytest.raises(fp.FailpointSpecError, match="unknown failpoint"):
        fp.arm("test.nope", "crash")


def test_pause_blocks_until_disarmed() -> None:
    async def main() -> None:
        fp.arm(P, "pause")
        task = asyncio.create_task(fp.ahit(P))
        await asyncio.sleep(0.1)
        assert not task.done()
        fp.disarm(P)
        await asyncio.wait_for(task, 1)

    asyncio.run(main())


def test_crash_from_env_exits_process_with_code() -> None:
    code = (
        "from system_under_test import failpoints as fp\n"
        "fp.load_env()\n"
        "p = fp.declare('x.y', 'd')\n"
        "fp.hit(p)\n"
        "print('not reached')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env={"SPLITBRAIN_FAILPOINTS": "x.y=crash", "PATH": ""},
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == fp.CRASH_EXIT_CODE
    assert "FAILPOINT x.y: crash" in proc.stderr and "not reached" not in proc.stdout


def test_clock_offset_and_rate() -> None:
    c = Clock()
    base = c.wall_ns()
    c.set(offset_ms=60_000)
    assert c.wall_ns() - base >= 59_000_000_000
    host_drift = abs(time.time_ns() - base)
    assert host_drift < 5_000_000_000  # the host clock did not move
    c.reset()
    c.set(rate=10.0)
    m0 = c.monotonic_ns()
    time.sleep(0.05)
    assert c.monotonic_ns() - m0 >= 0.3e9  # ran ~10x faster
    with pytest.raises(ValueError, match="rate must be > 0"):
        c.set(rate=0)
