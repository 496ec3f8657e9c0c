"""The counter system's DB: one counter service (:mod:`systems.counter.service`) per node, through the test's Remote.

It implements what the ``counter`` adapter offers (:mod:`systems.counter`): Kill, Pause (SIGSTOP and SIGCONT),
LogFiles, Clocks (libfaketime) and CounterClients (the ``counter`` workload's client, :mod:`systems.counter.client`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.node_processes import NodeProcessError, NodeProcesses
from system_under_test.protocol import ConnectionLost, connect
from systems.counter.client import CounterClient

__all__ = ["CounterDB"]

REPO_ROOT = Path(__file__).resolve().parents[2]


class CounterDB:
    """Starts one counter service per node through the test's Remote (``test["remote"]``); Kill, Pause (SIGSTOP and
    SIGCONT), LogFiles, Clocks and CounterClients (what the ``counter`` system adapter offers).  Its processes are
    tracked by :class:`~harness.node_processes.NodeProcesses`, which starts them under libfaketime unless
    ``faketime`` is False (the service is Python, whose ``time.time()`` goes through the C library, so libfaketime
    moves it).

    Args:
        spec: the run's spec when built by the adapter; the nemeses read the topology from ``db.spec``.
    """

    def __init__(self, port: int = 7400, *, start_timeout_s: float = 15.0, faketime: bool = True,
                 spec: Any = None) -> None:
        self.port = port
        self.start_timeout_s = start_timeout_s
        self.spec = spec
        self.procs = NodeProcesses("counter service", faketime=faketime)

    @property
    def pids(self) -> dict[str, int]:
        """node -> pid of its counter service."""
        return self.procs.pids

    def _log(self, test: dict[str, Any], node: str) -> Path:
        return Path(test["remote"].node_dir(node)) / "counter.log"

    async def setup(self, test: dict[str, Any], node: str) -> None:
        await self.start(test, node)

    async def start(self, test: dict[str, Any], node: str) -> None:
        """Start the node's service (a no-op if it runs) and wait until it accepts connections.

        Raises:
            NodeProcessError: it exited, or did not accept within ``start_timeout_s`` (with its log's tail).
        """
        argv = [sys.executable, "-m", "systems.counter.service", "--host", "0.0.0.0", "--port", str(self.port)]
        await self.procs.spawn(test, node, argv, log_path=str(self._log(test, node)), cwd=str(REPO_ROOT),
                               env={"PYTHONPATH": str(REPO_ROOT)})
        await self._accepting(test, node, self.start_timeout_s)

    async def _accepting(self, test: dict[str, Any], node: str, timeout_s: float) -> None:
        addr = f"{test['remote'].address(node)}:{self.port}"

        async def accepting() -> str | None:
            try:
                conn = await connect(addr, timeout_s=1.0)
            except ConnectionLost as exc:
                return f"connect: {exc}"
            conn.close("probe")
            return None

        await self.procs.wait_until(test, node, accepting, "accepting connections", timeout_s=timeout_s,
                                    log_path=str(self._log(test, node)), where=addr, interval_s=0.05)

    async def alive(self, test: dict[str, Any], node: str) -> bool:
        return await self.procs.alive(test, node)

    async def terminate(self, test: dict[str, Any], node: str) -> None:
        """SIGTERM (and SIGCONT, should it be paused); ``alive`` says when it has exited."""
        await self.procs.terminate(test, node)

    async def wait_ready(self, test: dict[str, Any], node: str, timeout_s: float | None = None) -> None:
        """Until the service accepts connections.

        Raises:
            TimeoutError: not within ``timeout_s`` (default ``start_timeout_s``), naming the node.
        """
        try:
            await self._accepting(test, node, timeout_s or self.start_timeout_s)
        except NodeProcessError as exc:
            raise TimeoutError(f"counter service {node} not ready: {exc}") from None

    async def kill(self, test: dict[str, Any], node: str) -> None:
        await self.procs.stop(test, node, grace_s=0.0)

    async def pause(self, test: dict[str, Any], node: str) -> None:
        await self.procs.pause(test, node)

    async def resume(self, test: dict[str, Any], node: str) -> None:
        await self.procs.resume(test, node)

    async def teardown(self, test: dict[str, Any], node: str) -> None:
        """SIGTERM, SIGKILL after 3 s, and wait until it is gone."""
        await self.procs.stop(test, node, grace_s=3.0)

    def log_files(self, test: dict[str, Any], node: str) -> Mapping[str, str]:
        return {str(self._log(test, node)): "counter.log"}

    async def set_clock(self, test: dict[str, Any], node: str, *, offset_ms: float | None = None,
                        rate: float | None = None, reset: bool = False) -> Mapping[str, Any]:
        return await self.procs.set_clock(test, node, offset_ms=offset_ms, rate=rate, reset=reset)

    async def read_clock(self, test: dict[str, Any], node: str) -> Mapping[str, Any]:
        return await self.procs.read_clock(test, node)

    def counter_client(self, *, timeout_s: float) -> CounterClient:
        """A client of this DB's services (``counter-client``): one connection per worker, to the worker's node."""
        return CounterClient(self.port, timeout_s=timeout_s)
