"""Start, kill and restart the brokers of one broker set as real local processes (tests, benchmarks, demos).

Companion of :class:`systems.splitbrain.local_cluster.LocalQuorum`: each broker is a ``splitbrain broker``
process with its own store directory and log file under ``base_dir``; ``kill`` sends SIGKILL (or
any signal), ``start`` may give a broker a new listen address (the id stays, the controller learns
the new address).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from system_under_test.protocol import RequestCode, connect
from systems.splitbrain.local_cluster import free_ports


@dataclass
class LocalBrokerSet:
    """Brokers ``n1..nN`` of set ``broker_name``.  ``with LocalBrokerSet(...) as s:`` kills them all on exit."""

    base_dir: Path
    controllers: list[str]
    token_file: Path
    broker_name: str = "bs"
    cluster_name: str = "splitbrain"
    size: int = 3
    extra_args: list[str] = field(default_factory=list)
    addrs: dict[str, str] = field(init=False, default_factory=dict)
    procs: dict[str, subprocess.Popen[bytes]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.base_dir = Path(self.base_dir)
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.nodes = [f"n{i + 1}" for i in range(self.size)]
        self.addrs = {n: f"127.0.0.1:{p}" for n, p in zip(self.nodes, free_ports(self.size), strict=True)}

    def store_dir(self, node: str) -> Path:
        return self.base_dir / node

    def log_path(self, node: str) -> Path:
        return self.base_dir / f"{node}.log"

    def argv(self, node: str, extra: list[str] | None = None) -> list[str]:
        return [
            sys.executable, "-m", "harness.cli", "broker", "--cluster-name", self.cluster_name,
            "--broker-name", self.broker_name, "--listen", self.addrs[node], "--store-dir", str(self.store_dir(node)),
            "--controllers", ",".join(self.controllers), "--token-file", str(self.token_file),
            *self.extra_args, *(extra or []),
        ]

    def start(self, node: str, *, addr: str | None = None, extra: list[str] | None = None,
              env: dict[str, str] | None = None) -> None:
        if node in self.procs and self.procs[node].poll() is None:
            raise RuntimeError(f"broker {node} is already running (pid {self.procs[node].pid})")
        if addr is not None:
            self.addrs[node] = addr
        with self.log_path(node).open("ab") as log:
            self.procs[node] = subprocess.Popen(self.argv(node, extra), stdout=log, stderr=subprocess.STDOUT,
                                                env={**os.environ, **(env or {})}, start_new_session=True)

    def start_all(self) -> None:
        for node in self.nodes:
            self.start(node)

    def kill(self, node: str, sig: int = signal.SIGKILL, timeout_s: float = 30) -> int | None:
        proc = self.procs.get(node)
        if proc is not None and proc.poll() is None:
            proc.send_signal(sig)
            return proc.wait(timeout=timeout_s)
        return None if proc is None else proc.poll()

    def alive(self, node: str) -> bool:
        proc = self.procs.get(node)
        return proc is not None and proc.poll() is None

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait(timeout=30)

    def __enter__(self) -> LocalBrokerSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()

    async def info(self, node: str, timeout_s: float = 1.0) -> dict[str, Any]:
        """GET_BROKER_RUNTIME_INFO of one broker (raises if unreachable)."""
        conn = await connect(self.addrs[node], timeout_s=timeout_s)
        try:
            return dict((await conn.request(RequestCode.GET_BROKER_RUNTIME_INFO, {}, timeout_s=timeout_s)).header)
        finally:
            conn.close()

    async def infos(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for node in self.nodes:
            if self.alive(node):
                try:
                    out[node] = await self.info(node)
                except Exception as exc:
                    out[node] = {"error": str(exc)}
        return out

    async def wait_for(self, predicate: Any, what: str, timeout_s: float = 30.0) -> dict[str, dict[str, Any]]:
        """Poll every live broker's runtime info until ``predicate(infos)`` is true.

        Raises:
            TimeoutError: naming ``what`` and each broker's last state.
        """
        deadline = time.monotonic() + timeout_s
        infos: dict[str, dict[str, Any]] = {}
        while time.monotonic() < deadline:
            infos = await self.infos()
            if predicate(infos):
                return infos
            await asyncio.sleep(0.1)
        brief = {n: {k: i.get(k) for k in ("role", "broker_id", "master_epoch", "fenced", "max_offset",
                                             "confirm_offset", "sync_state_set", "error", "replication")}
                 for n, i in infos.items()}
        raise TimeoutError(f"waiting for {what}: not reached within {timeout_s}s; brokers: {brief}; logs in "
                           f"{self.base_dir}")

    def master(self, infos: dict[str, dict[str, Any]]) -> str | None:
        """The node that is an unfenced master with the highest master epoch, if any."""
        masters = [(i.get("master_epoch", -1), n) for n, i in infos.items()
                   if i.get("role") == "MASTER" and not i.get("fenced")]
        return max(masters)[1] if masters else None
