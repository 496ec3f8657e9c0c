"""The docker backend end to end: the Remote protocol against real containers, the harness counter
test on containers, a partition with iptables inside a container, and cleanup after a crash."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness import generator as g
from harness.control.base import CommandFailed, ControlError
from harness.control.docker import LABEL_BACKEND, LABEL_RUN, DockerRemote, cleanup_all, cleanup_run
from harness.protocols import NoopNemesis
from harness.runner import TestParts, run_test
from harness.spec import spec_from_dict
from systems.counter.client import CounterClient
from systems.counter.db import CounterDB
from workloads.counter import CounterChecker, counter_generator, final_reads

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
REPO = Path(__file__).resolve().parents[2]


def _labelled(prefix: str) -> tuple[list[object], list[object]]:
    import docker

    client = docker.from_env()
    flt = {"label": [f"{LABEL_BACKEND}=docker", f"{LABEL_RUN}={prefix}"]}
    return client.containers.list(all=True, filters=flt), client.networks.list(filters=flt)


def test_remote_protocol_on_containers(node_image: str, tmp_path: Path) -> None:
    async def main() -> None:
        remote = await DockerRemote.create(["a", "b"], image=node_image)
        try:
            assert remote.address("a") != remote.address("b")
            assert str(remote.node_dir("a")) == "/srv/splitbrain/a"
            r = await remote.exec("a", ["sh", "-c", 'echo out; echo err >&2; echo "$K"; pwd; exit 3'],
                                  env={"K": "v"}, cwd="/tmp")
            assert (r.exit_code, r.stdout, r.stderr) == (3, "out\nv\n/tmp\n", "err\n")
            with pytest.raises(CommandFailed, match="exit 3"):
                await remote.exec("a", ["sh", "-c", "exit 3"], check=True)
            with pytest.raises(ControlError, match="did not finish within 1"):
                await remote.exec("a", ["sleep", "30"], timeout_s=1)
            with pytest.raises(ControlError, match="unknown node 'zz'"):
                await remote.exec("zz", ["true"])
            # the harness's interpreter becomes the image's venv python, which has the deps
            r = await remote.exec("a", [sys.executable, "-c", "import msgpack, sys; print(sys.prefix)"], check=True)
            assert r.stdout.strip() == "/opt/splitbrain"
            # the repo is mounted read-only at the same path
            r = await remote.exec("a", ["test", "-f", str(REPO / "pyproject.toml")])
            assert r.exit_code == 0
            src = tmp_path / "up.bin"
            src.write_bytes(os.urandom(100_000))
            await remote.upload("a", str(src), "/srv/splitbrain/a/sub/up.bin")
            await remote.download("a", "/srv/splitbrain/a/sub/up.bin", str(tmp_path / "down.bin"))
            assert (tmp_path / "down.bin").read_bytes() == src.read_bytes()
            with pytest.raises(ControlError, match="no such file"):
                await remote.download("a", "/nope", str(tmp_path / "x"))
            log = "/srv/splitbrain/a/logs/sleeper.log"
            pid = await remote.spawn("a", ["sh", "-c", "echo hello; exec sleep 60"], log_path=log)
            assert await remote.is_alive("a", pid)
            await remote.signal("a", pid, signal.SIGTERM)
            for _ in range(100):
                if not await remote.is_alive("a", pid):
                    break
                await asyncio.sleep(0.05)
            assert not await remote.is_alive("a", pid)
            await remote.signal("a", pid, signal.SIGKILL)  # already gone: no error
            await remote.download("a", log, str(tmp_path / "sleeper.log"))
            assert (tmp_path / "sleeper.log").read_text() == "hello\n"
        finally:
            await remote.close()
        containers, networks = _labelled(remote.prefix)
        assert containers == [] and networks == []

    asyncio.run(main())


def test_counter_workload_on_docker(node_image: str, tmp_path: Path) -> None:
    async def main() -> int:
        spec = spec_from_dict({
            "name": "counter-docker", "backend": "docker", "system": "counter",
            "nodes": {"members": 1}, "workloads": ["counter"], "concurrency": 3,
            "rate": 100, "time_limit_s": 3, "phases": {"recovery_s": 0.2, "final_drain_s": 5}, "seed": 7,
        }, file="<e2e>")
        remote = await DockerRemote.create(list(spec.nodes.all), image=node_image)
        try:
            parts = TestParts(client=CounterClient(), checkers={"counter": CounterChecker()}, db=CounterDB(),
                              nemesis=NoopNemesis(), generator=g.clients(g.stagger(0.01, counter_generator())),
                              final_generator=final_reads())
            outcome = await run_test(spec, parts, results_root=str(tmp_path), remote=remote,
                                     install_signal_handlers=False)
            run_dir = outcome.run_dir.path
            results = json.loads((run_dir / "results.json").read_text())
            assert results["valid"] is True, results
            assert results["checkers"]["counter"]["stats"]["reads"] > 10, results
            assert results["counts"]["ok"] > 20 and not results["interrupted"], results  # ran (not how fast)
            assert (run_dir / "junit.xml").is_file() and (run_dir / "test.yaml").is_file()
            history = (run_dir / "history.jsonl").read_text().splitlines()
            assert len(history) > 40
            node_log = next(run_dir.glob("nodes/*/counter.log"))
            assert "counter service listening" in node_log.read_text()
            return outcome.exit_code
        finally:
            await remote.close()

    assert asyncio.run(main()) == 0


_PROBE = "import socket,sys; socket.create_connection((sys.argv[1], 7400), timeout=1.5).close()"


def test_iptables_partition_between_containers_and_heal(node_image: str) -> None:
    async def main() -> None:
        remote = await DockerRemote.create(["a", "b"], image=node_image)
        try:
            b_ip, a_ip = remote.address("b"), remote.address("a")
            pid = await remote.spawn("b", ["python3", "-m", "systems.counter.service", "--host", "0.0.0.0"],
                                     log_path="/srv/splitbrain/b/counter.log", cwd=str(REPO),
                                     env={"PYTHONPATH": str(REPO)})
            for _ in range(100):
                if (await remote.exec("a", ["python3", "-c", _PROBE, b_ip])).exit_code == 0:
                    break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("counter service on b never became reachable from a")
            assert await remote.is_alive("b", pid)
            await remote.exec("b", ["iptables", "-w", "-A", "INPUT", "-s", a_ip, "-j", "DROP"], check=True)
            cut = await remote.exec("a", ["python3", "-c", _PROBE, b_ip], timeout_s=10)
            assert cut.exit_code != 0 and ("timed out" in cut.stderr or "TimeoutError" in cut.stderr), cut.describe()
            await remote.exec("b", ["iptables", "-w", "-D", "INPUT", "-s", a_ip, "-j", "DROP"], check=True)
            healed = await remote.exec("a", ["python3", "-c", _PROBE, b_ip], timeout_s=10)
            assert healed.exit_code == 0, healed.describe()
        finally:
            await remote.close()

    asyncio.run(main())


def test_cleanup_all_removes_a_crashed_runs_containers(node_image: str) -> None:
    prefix = f"sbcrash{os.getpid() % 10000}"
    code = textwrap.dedent(f"""
        import asyncio, os
        from harness.control.docker import DockerRemote
        async def main():
            # no supervisor: this is the crash it did not survive (see test_dying_harness_docker.py for it)
            await DockerRemote.create(["x"], image={node_image!r}, prefix={prefix!r}, supervise=False)
            print("up", flush=True)
            os._exit(0)  # "crash": never closes
        asyncio.run(main())
    """)
    try:
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
        assert res.stdout.strip() == "up", res.stderr
        containers, networks = _labelled(prefix)
        assert len(containers) == 1 and len(networks) == 1
        removed = cleanup_all(only_orphans=True)
        assert f"container {prefix}-x" in removed and f"network {prefix}-net" in removed
        assert _labelled(prefix) == ([], [])
    finally:
        cleanup_run(prefix)
