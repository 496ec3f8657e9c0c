"""Clock faults through libfaketime on real processes: the counter service (Python) in local network namespaces.

The clock nemesis sets a node's clock by rewriting its libfaketime control file (``clock-faketime``); these tests
read the clock the running process itself reports (the counter service's CLOCK_READ: its ``time.time_ns()``) and
compare it with the host's, so they see the fault in the process, not in our bookkeeping.  Needs root, iproute2 and
Debian's libfaketime (``scripts/setup.sh`` installs it), skipped otherwise.  Bounds are loose (a second where the
fault is an hour, a factor in [2, 4] where the rate is 3 more than real time): they catch a fault that did not
happen, not a slow machine.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from harness.commands._parts import build_parts, validate_spec
from harness.control.local import LocalRemote
from harness.runner import run_test
from harness.spec import spec_from_dict
from nemesis.clock import ClockNemesis
from system_under_test.protocol import connect
from systems.counter.db import CounterDB
from systems.counter.service import CounterCode


def _has_libfaketime() -> bool:
    return shutil.which("dpkg") is not None and subprocess.run(
        ["dpkg", "-L", "libfaketime"], capture_output=True).returncode == 0


pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None, reason="needs root and iproute2"),
    pytest.mark.skipif(not _has_libfaketime(), reason="needs libfaketime (Debian; scripts/setup.sh installs it)"),
]

PORT = 7400
HOUR_MS = 3_600_000


async def skew_s(test: dict[str, Any], node: str) -> float:
    """The node's process clock minus the host's, from one CLOCK_READ (read at the request's midpoint)."""
    conn = await connect(f"{test['remote'].address(node)}:{PORT}", timeout_s=2.0)
    try:
        before = time.time()
        resp = await conn.request(CounterCode.CLOCK_READ, {}, timeout_s=2.0)
        after = time.time()
    finally:
        conn.close("done")
    return int(resp.header["wall_ns"]) / 1e9 - (before + after) / 2


async def nemesis_op(nem: ClockNemesis, test: dict[str, Any], f: str, value: Any = None) -> dict[str, Any]:
    return await nem.invoke(test, {"type": "invoke", "process": "nemesis", "f": f, "value": value})


async def mechanics(tmp: Path) -> dict[str, Any]:
    nodes = ["m1", "m2"]
    spec = spec_from_dict({"name": "faketime", "system": "counter", "nodes": {"members": 2}, "seed": 1,
                           "workloads": ["counter"]}, file="<test>")
    remote = await LocalRemote.create(nodes, state_dir=tmp / "state")
    test: dict[str, Any] = {"name": "faketime", "nodes": nodes, "remote": remote}
    db = CounterDB(PORT, spec=spec)
    nem = ClockNemesis(db, random.Random(1))
    out: dict[str, Any] = {}
    try:
        await asyncio.gather(*(db.setup(test, n) for n in nodes))
        pid = db.pids["m1"]
        await asyncio.sleep(1.0)  # let the processes run, so a rate change that rescaled their past would show
        out["initial"] = {n: await skew_s(test, n) for n in nodes}
        out["bump"] = await nemesis_op(nem, test, "bump-clock", {"targets": "m1", "delta_ms": HOUR_MS})
        out["bumped"] = {n: await skew_s(test, n) for n in nodes}
        out["same_pid"] = db.pids["m1"] == pid
        out["skew_op"] = await nemesis_op(nem, test, "skew-clock", {"targets": "m2", "rate": 4.0})
        t0, s0 = time.monotonic(), await skew_s(test, "m2")
        await asyncio.sleep(1.0)
        s1, t1 = await skew_s(test, "m2"), time.monotonic()
        out["rate_start"], out["rate_gain"] = s0, (s1 - s0) / (t1 - t0)  # 3 s gained per real second at rate 4
        out["reset"] = await nemesis_op(nem, test, "reset-clock")
        out["after_reset"] = {n: await skew_s(test, n) for n in nodes}
        # a control file that cannot be written: the op says it took no effect, and the clock did not move
        (Path(remote.node_dir("m2")) / "faketime.rc.tmp").mkdir()
        out["refused"] = await nemesis_op(nem, test, "bump-clock", {"targets": "m2", "delta_ms": HOUR_MS})
        out["after_refused"] = await skew_s(test, "m2")
        # a restarted process starts at real time again
        await nemesis_op(nem, test, "bump-clock", {"targets": "m1", "delta_ms": HOUR_MS})
        out["before_restart"] = await skew_s(test, "m1")
        await db.kill(test, "m1")
        await db.start(test, "m1")
        out["after_restart"] = await skew_s(test, "m1")
        return out
    finally:
        for n in nodes:
            await db.teardown(test, n)
        await remote.close()


def test_clock_faults_move_the_running_process_clock_through_its_control_file(tmp_path: Path) -> None:
    out = asyncio.run(mechanics(tmp_path))
    assert all(abs(s) < 0.5 for s in out["initial"].values()), out["initial"]
    assert out["bump"]["value"]["nodes"] == ["m1"] and "error" not in out["bump"], out["bump"]
    assert abs(out["bumped"]["m1"] - 3600) < 1.0 and abs(out["bumped"]["m2"]) < 0.5, out["bumped"]
    assert out["same_pid"]  # the running process, no restart
    assert abs(out["rate_start"]) < 0.5, out  # the new rate runs from now on: no jump for the time already run
    assert 2.0 <= out["rate_gain"] <= 4.0, out
    assert out["reset"]["value"]["reset"] == ["m1", "m2"]
    assert all(abs(s) < 0.5 for s in out["after_reset"].values()), out["after_reset"]
    assert "bump-clock took effect on no node" in out["refused"]["error"], out["refused"]
    assert "cannot write" in out["refused"]["error"] and abs(out["after_refused"]) < 0.5, out
    assert abs(out["before_restart"] - 3600) < 1.0 and abs(out["after_restart"]) < 0.5, out


async def counter_run(tmp: Path) -> dict[str, Any]:
    spec = spec_from_dict({
        "name": "counter-clock", "system": "counter", "backend": "local", "nodes": {"members": 1},
        "workloads": ["counter"], "concurrency": 2, "rate": 40, "time_limit_s": 6, "seed": 7,
        "phases": {"recovery_s": 0.2, "final_drain_s": 5},
        "nemesis": {"packages": ["clock"], "schedule": [
            {"at_s": 1.0, "f": "bump-clock", "value": {"targets": "all", "delta_ms": HOUR_MS}},
            {"at_s": 4.0, "f": "reset-clock"},
        ]},
    }, file="<test>")
    parts, _ = build_parts(spec, validate_spec(spec))  # refuses what the counter system cannot serve: clock passes
    remote = await LocalRemote.create(spec.nodes.all, state_dir=tmp / "state")
    test = {"remote": remote}
    samples: list[tuple[float, float]] = []
    stop = asyncio.Event()

    async def sample() -> None:
        t0 = time.monotonic()
        while not stop.is_set():
            try:
                samples.append((time.monotonic() - t0, await skew_s(test, "m1")))
            except Exception:  # not started yet, or already stopped
                pass
            await asyncio.sleep(0.25)

    sampler = asyncio.get_running_loop().create_task(sample())
    try:
        outcome = await run_test(spec, parts, results_root=str(tmp / "results"), remote=remote, quiet=True)
    finally:
        stop.set()
        await sampler
        await remote.close()
    return {"outcome": outcome, "samples": samples}


def test_a_counter_run_with_clock_faults_moves_the_process_clock_and_stays_valid(tmp_path: Path) -> None:
    out = asyncio.run(counter_run(tmp_path))
    outcome, samples = out["outcome"], out["samples"]
    assert outcome.exit_code == 0, outcome.results
    history = [json.loads(line) for line in outcome.run_dir.history.read_text().splitlines()]
    bump = [op for op in history if op["process"] == "nemesis" and op["f"] == "bump-clock" and op["type"] != "invoke"]
    assert len(bump) == 1 and bump[0]["value"]["nodes"] == ["m1"] and bump[0]["effective"] is True, bump
    skews = [s for _, s in samples]
    hour = [i for i, s in enumerate(skews) if abs(s - 3600) < 1.0]
    assert hour, samples  # the process saw the hour while the fault lasted,
    assert abs(skews[0]) < 0.5, samples  # real time before it,
    after = skews[hour[-1] + 1:]
    assert after and all(abs(s) < 0.5 for s in after), samples  # and real time again once reset-clock ran


async def etcd_under_faketime(tmp: Path) -> dict[str, Any]:
    from harness.node_processes import NodeProcesses
    from systems.etcd.db import member_argv

    remote = await LocalRemote.create(["e1"], state_dir=tmp / "state")
    test: dict[str, Any] = {"remote": remote}
    procs = NodeProcesses("etcd member", faketime=True)
    d = Path(remote.node_dir("e1"))
    log = d / "etcd.log"
    try:
        await procs.spawn(test, "e1", member_argv("e1", {"e1": remote.address("e1")}, str(d / "etcd.data")),
                          log_path=str(log))
        day = await procs.set_clock(test, "e1", offset_ms=86_400_000)
        env = {k: v for k, v in (line.split("=", 1) for line in (await remote.exec(
            "e1", ["cat", f"/proc/{procs.pids['e1']}/environ"])).stdout.split("\0") if "=" in line)
            if k.startswith(("LD_PRELOAD", "FAKETIME"))}
        c_date = float((await remote.exec("e1", ["date", "+%s.%N"], env=env)).stdout)  # a C program, same file
        before = log.read_text().count("\n")
        await asyncio.sleep(1.5)  # etcd logs as it elects itself; those lines were stamped after the bump
        lines = [ln for ln in log.read_text().splitlines()[before:] if '"ts":"' in ln]
        return {"day": day, "c_skew": c_date - time.time(), "etcd_lines": lines, "now": time.time()}
    finally:
        await procs.stop(test, "e1", grace_s=3.0)
        await remote.close()


@pytest.mark.skipif(shutil.which("etcd") is None, reason="needs etcd (Debian etcd-server)")
def test_libfaketime_does_not_move_etcd_a_go_program_but_moves_a_c_one(tmp_path: Path) -> None:
    """Why etcd does not offer clock-faketime: Go reads the clock through the vDSO, not the C library, so the same
    control file that moves ``date`` by a day leaves etcd's own log timestamps at real time."""
    from datetime import datetime

    out = asyncio.run(etcd_under_faketime(tmp_path))
    assert abs(out["c_skew"] - 86_400) < 5, out["c_skew"]
    assert out["etcd_lines"], "etcd logged nothing after the bump"
    for line in out["etcd_lines"]:
        ts = line.split('"ts":"', 1)[1].split('"', 1)[0]
        assert abs(datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() - out["now"]) < 60, line
