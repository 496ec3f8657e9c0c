"""Harness-test workload for the counter service: DB, client, generators and a counter checker.

The checker is Jepsen's counter rule: an ``ok`` read must lie between the sum of ``ok`` adds
that completed before the read was invoked and the sum of all adds (``ok`` or ``info``) invoked
before the read completed.  ``fail`` adds never count; ``info`` adds may or may not.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from checker.history import Op
from harness import generator as g
from harness.node_processes import NodeProcessError, NodeProcesses
from harness.testing.counter_service import CounterCode
from system_under_test.protocol import ConnectionLost, RequestTimeout, RpcError, connect

__all__ = ["CounterChecker", "CounterClient", "CounterDB", "counter_generator", "final_reads"]

REPO_ROOT = Path(__file__).resolve().parents[2]


class CounterDB:
    """Starts one counter service per node through the test's Remote (``test["remote"]``); Kill, Pause (SIGSTOP and
    SIGCONT), LogFiles and FaketimeClocks (what the ``counter`` system adapter offers).  Its processes are tracked by
    :class:`~harness.node_processes.NodeProcesses`, which starts them under libfaketime unless ``faketime`` is
    False (the service is Python, whose ``time.time()`` goes through the C library, so libfaketime moves it).

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
        argv = [sys.executable, "-m", "harness.testing.counter_service", "--host", "0.0.0.0", "--port", str(self.port)]
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

    async def set_fake_clock(self, test: dict[str, Any], node: str, *, offset_ms: float | None = None,
                             rate: float | None = None, reset: bool = False) -> Mapping[str, Any]:
        return await self.procs.set_fake_clock(test, node, offset_ms=offset_ms, rate=rate, reset=reset)

    async def fake_clock(self, test: dict[str, Any], node: str) -> Mapping[str, Any]:
        return await self.procs.fake_clock(test, node)


class CounterClient:
    """One connection to one node's counter service."""

    def __init__(self, port: int = 7400, *, conn: Any = None, timeout_s: float = 2.0) -> None:
        self.port = port
        self.conn = conn
        self.timeout_s = timeout_s

    async def open(self, test: dict[str, Any], node: str) -> CounterClient:
        conn = await connect(f"{test['remote'].address(node)}:{self.port}", timeout_s=self.timeout_s)
        return CounterClient(self.port, conn=conn, timeout_s=self.timeout_s)

    async def setup(self, test: dict[str, Any]) -> None:
        return None

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        f = op["f"]
        try:
            if f == "add":
                await self.conn.request(CounterCode.COUNTER_ADD, {"delta": op["value"]}, timeout_s=self.timeout_s)
                return {**op, "type": "ok"}
            if f == "read":
                resp = await self.conn.request(CounterCode.COUNTER_READ, {}, timeout_s=self.timeout_s)
                return {**op, "type": "ok", "value": resp.header["value"]}
        except RpcError as exc:
            return {**op, "type": "fail" if exc.definite else "info", "error": str(exc)}
        except (ConnectionLost, RequestTimeout) as exc:
            return {**op, "type": "info", "error": f"{exc.__class__.__name__}: {exc}"}
        return {**op, "type": "fail", "error": f"unknown f {f!r}"}

    async def teardown(self, test: dict[str, Any]) -> None:
        return None

    async def close(self, test: dict[str, Any]) -> None:
        if self.conn is not None:
            self.conn.close("client closed")


def _add(ctx: g.Context) -> dict[str, Any]:
    return {"f": "add", "value": ctx.rng.randint(1, 5)}


def _read(ctx: g.Context) -> dict[str, Any]:
    return {"f": "read"}


def counter_generator(rate: float) -> g.Gen:
    """Adds (delta 1..5) and reads, half each, at ``rate`` ops/s in total, on client threads."""
    return g.clients(g.stagger(1.0 / rate, g.mix([_add, _read])))


def final_reads() -> g.Gen:
    """One read per client thread."""
    return g.each_thread(g.once({"f": "read"}))


class CounterChecker:
    def check(self, test: dict[str, Any], history: Sequence[Op], opts: Mapping[str, Any]) -> dict[str, Any]:
        lower = 0  # sum of ok adds completed so far
        upper = 0  # sum of adds invoked so far (ok, info or still open)
        invoked_at: dict[Any, Op] = {}
        read_bounds: dict[Any, int] = {}  # process -> lower bound at the read's invocation
        failed_adds: dict[int, int] = {}  # index of invoke -> delta to take back on fail
        errors, reads = [], 0
        for op in history:
            if not op.is_client:
                continue
            if op.type == "invoke":
                invoked_at[op.process] = op
                if op.f == "add":
                    upper += int(op.value)
                    failed_adds[op.index] = int(op.value)
                elif op.f == "read":
                    read_bounds[op.process] = lower
                continue
            inv = invoked_at.pop(op.process, None)
            if inv is None:
                continue
            if op.f == "add":
                if op.type == "ok":
                    lower += int(inv.value)
                elif op.type == "fail":
                    upper -= failed_adds.get(inv.index, 0)
            elif op.f == "read" and op.type == "ok":
                reads += 1
                lo = read_bounds.pop(op.process, 0)
                if not lo <= int(op.value) <= upper:
                    errors.append({"read": op.index, "value": op.value, "expected": [lo, upper],
                                   "why": "read outside [ok adds before invoke, all adds before completion]"})
        return {"valid": not errors, "reads": reads, "errors": errors[:20], "final_lower": lower, "final_upper": upper}
