"""Start and stop a controller quorum as real local processes on 127.0.0.1 (demo, tests, benchmarks).

This is the smallest possible "cluster life cycle": it spawns ``splitbrain controller`` processes
with their own data directories and log files, waits until a leader serves, and can kill -9,
SIGTERM, pause or restart any node.  The harness's control backends (network namespaces, docker,
SSH) build on the same idea with real network isolation.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from system_under_test.client.controller_client import ControllerClient


def free_ports(n: int) -> list[int]:
    """n distinct free TCP ports on 127.0.0.1 (bound then released; good enough for local tests)."""
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


@dataclass
class LocalQuorum:
    """N controller processes.  Use as ``with LocalQuorum(tmp) as q: ...`` (kills everything on exit)."""

    base_dir: Path
    size: int = 3
    cluster_name: str = "splitbrain"
    extra_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    node_ids: list[str] = field(init=False)
    peers: dict[str, str] = field(init=False)
    procs: dict[str, subprocess.Popen[bytes]] = field(init=False, default_factory=dict)
    token: str = field(init=False)

    def __post_init__(self) -> None:
        self.base_dir = Path(self.base_dir)
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.node_ids = [f"c{i + 1}" for i in range(self.size)]
        ports = free_ports(self.size)
        self.peers = {n: f"127.0.0.1:{p}" for n, p in zip(self.node_ids, ports, strict=True)}
        token_file = self.base_dir / "token"
        if not token_file.exists():
            token_file.write_text(secrets.token_hex(16) + "\n")
        self.token = token_file.read_text().strip()

    @property
    def addrs(self) -> list[str]:
        return list(self.peers.values())

    def data_dir(self, node: str) -> Path:
        return self.base_dir / node

    def log_path(self, node: str) -> Path:
        return self.base_dir / f"{node}.log"

    def argv(self, node: str, extra: list[str] | None = None) -> list[str]:
        return [
            sys.executable, "-m", "harness.cli", "controller", "--node-id", node,
            "--peers", ",".join(f"{n}={a}" for n, a in self.peers.items()),
            "--data-dir", str(self.data_dir(node)), "--cluster-name", self.cluster_name,
            "--token-file", str(self.base_dir / "token"), *self.extra_args, *(extra or []),
        ]

    def start(self, node: str, extra: list[str] | None = None, env: dict[str, str] | None = None) -> None:
        if node in self.procs and self.procs[node].poll() is None:
            raise RuntimeError(f"controller {node} is already running (pid {self.procs[node].pid})")
        log = self.log_path(node).open("ab")
        full_env = {**os.environ, **self.env, **(env or {})}
        self.procs[node] = subprocess.Popen(self.argv(node, extra), stdout=log, stderr=subprocess.STDOUT,
                                            env=full_env, start_new_session=True)
        log.close()

    def start_all(self) -> None:
        for node in self.node_ids:
            self.start(node)

    def kill(self, node: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs.get(node)
        if proc is not None and proc.poll() is None:
            proc.send_signal(sig)
            if sig in (signal.SIGKILL, signal.SIGTERM):
                proc.wait(timeout=30)

    def alive(self, node: str) -> bool:
        proc = self.procs.get(node)
        return proc is not None and proc.poll() is None

    def exit_code(self, node: str) -> int | None:
        proc = self.procs.get(node)
        return None if proc is None else proc.poll()

    def stop_all(self) -> None:
        for node in list(self.procs):
            proc = self.procs[node]
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait(timeout=30)

    def __enter__(self) -> LocalQuorum:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is not None:  # a failing test or demo: show what the nodes said (pytest prints stderr)
            codes = {n: self.exit_code(n) for n in self.node_ids}
            print(f"LocalQuorum {self.base_dir}: exit codes {codes}\n{self.tail_logs(40)}", file=sys.stderr)
        self.stop_all()

    def client(self, timeout_s: float = 2.0) -> ControllerClient:
        return ControllerClient(self.addrs, token=self.token, timeout_s=timeout_s)

    async def wait_leader(self, timeout_s: float = 30.0, exclude: set[str] | None = None) -> str:
        """Wait until some running controller reports itself leader; returns its node id.

        Raises:
            TimeoutError: naming every node's last answer (or its exit code).
        """
        deadline = time.monotonic() + timeout_s
        last: dict[str, Any] = {}
        client = self.client(timeout_s=1.0)
        try:
            while time.monotonic() < deadline:
                for node, addr in self.peers.items():
                    if exclude and node in exclude:
                        continue
                    if not self.alive(node):
                        last[node] = f"not running (exit code {self.exit_code(node)})"
                        continue
                    try:
                        md = await client.get_metadata(addr)
                    except Exception as exc:
                        last[node] = f"{exc.__class__.__name__}: {exc}"
                        continue
                    last[node] = f"active={md.get('active')} leader={md.get('leader_id')}"
                    if md.get("is_leader"):
                        return node
                await asyncio.sleep(0.05)
        finally:
            await client.close()
        detail = "; ".join(f"{n}: {v}" for n, v in last.items())
        raise TimeoutError(f"no controller leader within {timeout_s}s ({detail}); logs in {self.base_dir}")

    def tail_logs(self, lines: int = 20) -> str:
        out = []
        for node in self.node_ids:
            p = self.log_path(node)
            if p.exists():
                text = p.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {node} ({p}) ---\n" + "\n".join(text))
        return "\n".join(out)
