"""The ssh backend end to end, against sshd running in our own node container (generated key pair,
container IP): the Remote protocol over SSH/SFTP and the harness counter test through it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

import pytest

from harness import generator as g
from harness.control.base import CommandFailed, ControlError
from harness.control.docker import DockerRemote
from harness.control.ssh import SshRemote, SshTarget
from harness.protocols import NoopNemesis
from harness.runner import TestParts, run_test
from harness.spec import spec_from_dict
from systems.counter.client import CounterClient
from systems.counter.db import CounterDB
from workloads.counter import CounterChecker, counter_generator, final_reads

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
VENV_PYTHON = "/opt/splitbrain/bin/python3"


def _keypair(tmp_path: Path) -> tuple[str, str]:
    import paramiko

    key = paramiko.ECDSAKey.generate(bits=256)
    path = tmp_path / "id_ecdsa"
    key.write_private_key_file(str(path))
    os.chmod(path, 0o600)
    return str(path), f"{key.get_name()} {key.get_base64()} splitbrain-e2e"


def _wait_port(host: str, port: int, limit_s: float = 30.0) -> None:
    deadline = time.monotonic() + limit_s
    while True:
        try:
            with socket.create_connection((host, port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError(f"sshd on {host}:{port} not reachable within {limit_s}s") from None
            time.sleep(0.1)


async def _sshd_nodes(node_image: str, nodes: list[str], pub: str) -> DockerRemote:
    hosts = await DockerRemote.create(nodes, image=node_image, ssh_authorized_key=pub)
    for n in nodes:
        await asyncio.to_thread(_wait_port, hosts.address(n), 22)
    return hosts


def test_ssh_remote_protocol(node_image: str, tmp_path: Path) -> None:
    key_file, pub = _keypair(tmp_path)

    async def main() -> None:
        hosts = await _sshd_nodes(node_image, ["s1"], pub)
        remote = None
        try:
            remote = await SshRemote.create({"n1": SshTarget(hosts.address("s1"), key_file=key_file)},
                                            python=VENV_PYTHON)
            assert remote.address("n1") == hosts.address("s1")
            r = await remote.exec("n1", ["sh", "-c", 'echo out; echo err >&2; echo "$K"; pwd; exit 4'],
                                  env={"K": "v w"}, cwd="/tmp")
            assert (r.exit_code, r.stdout, r.stderr) == (4, "out\nv w\n/tmp\n", "err\n")
            with pytest.raises(CommandFailed):
                await remote.exec("n1", ["false"], check=True)
            with pytest.raises(ControlError, match="did not finish within 1"):
                await remote.exec("n1", ["sleep", "20"], timeout_s=1)
            r = await remote.exec("n1", [sys.executable, "-c", "import msgpack, sys; print(sys.prefix)"], check=True)
            assert r.stdout.strip() == "/opt/splitbrain"
            src = tmp_path / "f.bin"
            src.write_bytes(os.urandom(50_000))
            await remote.upload("n1", str(src), "/tmp/splitbrain-ssh/n1/in/f.bin")
            await remote.download("n1", "/tmp/splitbrain-ssh/n1/in/f.bin", str(tmp_path / "back.bin"))
            assert (tmp_path / "back.bin").read_bytes() == src.read_bytes()
            log = "/tmp/splitbrain-ssh/n1/d.log"
            pid = await remote.spawn("n1", ["sh", "-c", "echo hi; exec sleep 60"], log_path=log)
            assert await remote.is_alive("n1", pid)
            pidfile = await remote.exec("n1", ["cat", f"{log}.pid"], check=True)
            assert pidfile.stdout.strip() == str(pid)
            await remote.signal("n1", pid, signal.SIGKILL)
            for _ in range(100):
                if not await remote.is_alive("n1", pid):
                    break
                await asyncio.sleep(0.05)
            assert not await remote.is_alive("n1", pid)
            # a daemon left running is killed by close()
            pid2 = await remote.spawn("n1", ["sleep", "60"], log_path=log)
            await remote.close()
            check = await hosts.exec("s1", ["sh", "-c", f"kill -0 {pid2} 2>/dev/null && echo alive || echo gone"])
            assert check.stdout.strip() == "gone"
        finally:
            if remote is not None:
                await remote.close()
            await hosts.close()

    asyncio.run(main())


def test_ssh_unreachable_node_error_names_it(tmp_path: Path) -> None:
    with pytest.raises(ControlError, match=r"cannot connect to node n9 \(root@127.0.0.1:1"):
        asyncio.run(SshRemote.create({"n9": SshTarget("127.0.0.1", port=1)}, connect_timeout_s=2))


def test_counter_workload_over_ssh(node_image: str, tmp_path: Path) -> None:
    key_file, pub = _keypair(tmp_path)

    async def main() -> int:
        hosts = await _sshd_nodes(node_image, ["s1"], pub)
        try:
            remote = await SshRemote.create({"c1": SshTarget(hosts.address("s1"), key_file=key_file)},
                                            python=VENV_PYTHON)
            try:
                spec = spec_from_dict({
                    "name": "counter-ssh", "backend": "ssh", "system": "counter", "nodes": {"members": ["c1"]},
                    "workloads": ["counter"], "concurrency": 3, "rate": 100, "time_limit_s": 3,
                    "phases": {"recovery_s": 0.2, "final_drain_s": 5}, "seed": 11,
                }, file="<e2e>")
                parts = TestParts(client=CounterClient(), checkers={"counter": CounterChecker()}, db=CounterDB(),
                                  nemesis=NoopNemesis(), generator=g.clients(g.stagger(0.01, counter_generator())),
                                  final_generator=final_reads())
                outcome = await run_test(spec, parts, results_root=str(tmp_path), remote=remote,
                                         install_signal_handlers=False)
                results = json.loads((outcome.run_dir.path / "results.json").read_text())
                assert results["valid"] is True, results
                assert results["checkers"]["counter"]["stats"]["reads"] > 10, results
                assert "listening" in (outcome.run_dir.path / "nodes" / "c1" / "counter.log").read_text()
                return outcome.exit_code
            finally:
                await remote.close()
        finally:
            await hosts.close()

    assert asyncio.run(main()) == 0


def test_real_cluster_over_ssh_installs_the_wheel_and_passes(node_image: str, tmp_path: Path) -> None:
    """`splitbrain test --backend ssh --nodes-file F`: the CLI builds this project's wheel, pip-installs
    it on every host (sshd in our containers), starts the real controllers and brokers over SSH, injects
    partitions and kills, and the queue test is valid."""
    import subprocess

    import yaml

    key_file, pub = _keypair(tmp_path)
    names = ["c1", "c2", "c3", "b1", "b2"]

    async def hosts_up() -> DockerRemote:
        return await _sshd_nodes(node_image, [f"h-{n}" for n in names], pub)

    hosts = asyncio.run(hosts_up())
    try:
        nodes_file = tmp_path / "nodes.yaml"
        nodes_file.write_text(yaml.safe_dump({
            "python": VENV_PYTHON, "install": True, "defaults": {"user": "root", "key_file": key_file},
            "nodes": {n: {"host": hosts.address(f"h-{n}")} for n in names}}))
        spec = tmp_path / "ssh.yaml"
        spec.write_text(yaml.safe_dump({
            "name": "queue-ssh", "backend": "ssh", "nodes": {"controllers": names[:3], "broker_sets": [names[3:]]},
            "workloads": [{"name": "queue", "options": {"queues_per_set": 2}}],
            "nemesis": {"packages": ["partition", "kill"], "interval_s": 3, "targets": ["one"]},
            "concurrency": 3, "rate": 30, "time_limit_s": 12, "phases": {"recovery_s": 5, "final_drain_s": 20},
            "seed": 5}))
        res = subprocess.run([sys.executable, "-m", "harness.cli", "test", str(spec), "--nodes-file", str(nodes_file),
                              "--results", str(tmp_path / "results"), "--quiet"],
                             capture_output=True, text=True, timeout=800, cwd=str(Path(__file__).resolve().parents[2]))
        assert "installed splitbrain" in res.stderr, res.stderr[-3000:]
        run_dir = next((tmp_path / "results").glob("queue-ssh/2*"))
        results = json.loads((run_dir / "results.json").read_text())
        assert res.returncode == 0 and results["valid"] is True, (res.returncode, res.stderr[-3000:])
        assert results["checkers"]["queue/queue"]["stats"]["delivered"] > 20, results["checkers"]["queue/queue"]
        history = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
        faults = {op["f"] for op in history if op["process"] == "nemesis" and op["type"] == "info"}
        assert {"start-partition", "kill"} & faults, faults
        assert (run_dir / "nodes" / "b1" / "node.log").is_file()
    finally:
        asyncio.run(hosts.close())
