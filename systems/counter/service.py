"""A tiny single-process counter + register TCP service: the system of ``system: counter`` (the self-test).

It speaks the splitbrain wire protocol (:mod:`system_under_test.protocol.rpc`) with five
private request codes in the 9000 range, which the broker never uses (they are test-only, so
they live here and not in ``protocol/codes.py``; :mod:`systems.counter.client` sends them):

* ``COUNTER_ADD``  header ``{"delta": int}``  -> ``{"value": new total}``
* ``COUNTER_READ`` -> ``{"value": total}``
* ``REGISTER_WRITE`` header ``{"value": int}`` -> ``{}``
* ``REGISTER_READ`` -> ``{"value": int | None}``
* ``CLOCK_READ`` -> ``{"wall_ns": the process's time.time_ns()}``: what its wall clock says, so a test can measure
  a clock fault on it (under libfaketime, :mod:`harness.node_processes`)

State is in memory: killing the process loses it (that is the point of a kill nemesis later).

Run: ``python -m systems.counter.service --host 0.0.0.0 --port 7400`` (:class:`systems.counter.db.CounterDB`
starts one per node).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import enum
import signal
import sys
import time
from typing import Any

from system_under_test.protocol import Connection, Frame, Reply, ResponseCode, RpcServer

__all__ = ["CounterCode", "CounterService", "main"]


class CounterCode(enum.IntEnum):
    """Test-only request codes (never sent to a real splitbrain node)."""

    COUNTER_ADD = 9001
    COUNTER_READ = 9002
    REGISTER_WRITE = 9003
    REGISTER_READ = 9004
    CLOCK_READ = 9005


class CounterService:
    def __init__(self) -> None:
        self.total = 0
        self.register: int | None = None

    async def handle(self, frame: Frame, conn: Connection) -> Reply | None:
        h: dict[str, Any] = frame.header
        if frame.code == CounterCode.COUNTER_ADD:
            delta = h.get("delta")
            if not isinstance(delta, int) or isinstance(delta, bool):
                return Reply.error(ResponseCode.MALFORMED_REQUEST, f"COUNTER_ADD: 'delta' must be int, got {delta!r}")
            self.total += delta
            return Reply(header={"value": self.total})
        if frame.code == CounterCode.COUNTER_READ:
            return Reply(header={"value": self.total})
        if frame.code == CounterCode.REGISTER_WRITE:
            value = h.get("value")
            if not isinstance(value, int) or isinstance(value, bool):
                return Reply.error(ResponseCode.MALFORMED_REQUEST, f"REGISTER_WRITE: value must be int, got {value!r}")
            self.register = value
            return Reply()
        if frame.code == CounterCode.REGISTER_READ:
            return Reply(header={"value": self.register})
        if frame.code == CounterCode.CLOCK_READ:
            return Reply(header={"wall_ns": time.time_ns()})
        return Reply.error(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"counter service: no code {frame.code}")


async def serve(host: str, port: int) -> None:
    service = CounterService()
    server = RpcServer(service.handle, name="counter")
    bound = await server.start(host, port)
    print(f"counter service listening on {bound[0]}:{bound[1]}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="test-only counter/register service")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=7400)
    args = parser.parse_args(argv)
    asyncio.run(serve(args.host, args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
