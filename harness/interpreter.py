"""The interpreter: drives generators through worker tasks against clients and a nemesis.

Shape (Jepsen's interpreter, in asyncio):

* one worker task per client thread (``0..concurrency-1``) plus one for the nemesis; each owns a
  client (opened on ``nodes[i % n]``) and performs one op at a time;
* the loop in :meth:`Interpreter.run` asks the generator for the next op with a context built
  from the history clock, records the invocation, hands it to the op's worker, and feeds every
  completion back to the generator (``update``); an op promised for a later time is waited for
  and the generator asked again -- only an op that is due is committed;
* an invocation that does not complete within ``op_timeout_s`` (or its f's entry in
  ``op_timeouts``: workloads declare ops they know are slow, e.g. restarting a broker) completes as ``info`` with
  ``error: "timeout"`` (one watchdog task cancels overdue invokes); a client exception completes
  as ``info`` ("indeterminate: ..."); a malformed completion as ``info`` ("invalid completion");
  after these three the worker closes its client and opens a new one for its next op (an op whose
  client cannot be opened completes as ``fail``); after any client ``info`` -- these, or one the
  client returned -- the worker continues as a new process (old + concurrency);
* :meth:`Interpreter.stop` stops generation; :meth:`Interpreter.drain` gives in-flight ops a grace
  period and closes the rest as ``info`` ("interrupted");
* each :meth:`Interpreter.run` may name its phase; :meth:`Interpreter.load_figures` reports the rate the
  ``main`` phase achieved (overall and outside fault windows) and its ops per worker and per node
  (:mod:`harness.load`).

Which worker runs an op is the generator's choice (the op's process names it): the runner's client
generator is :func:`harness.generator.pace`, one stream per worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness import generator as g
from harness.history_writer import HistoryWriter
from harness.load import fault_windows_s
from harness.load import load_figures as _load_figures
from harness.progress import Progress
from harness.protocols import Client, InvalidCompletion, Nemesis, validate_completion

__all__ = ["Interpreter"]

NEMESIS = g.NEMESIS_THREAD


@dataclass
class _Worker:
    thread: g.Thread
    node: str
    client: Any  # Client or Nemesis; None = must reopen
    op: dict[str, Any] | None = None  # the next invocation handed over by the interpreter
    waiter: asyncio.Future[None] | None = None  # resolved when ``op`` is set (cheaper than a Queue)
    task: asyncio.Task[None] | None = None
    deadline: float = 0.0  # loop time by which the current invoke must finish (0 = idle)
    timed_out: bool = False  # set by the watchdog just before it cancels the invoke


class Interpreter:
    """Drives generators through workers; owns the process table and the in-flight set."""

    def __init__(
        self, test: dict[str, Any], writer: HistoryWriter, *, client_threads: int, seed: int,
        op_timeout_s: float, nemesis_timeout_s: float, progress: Progress | None = None,
        op_timeouts: Mapping[str, float] | None = None,
    ) -> None:
        self.test = test
        self.writer = writer
        self.ctx = g.make_context(client_threads, seed=seed)
        self._all_threads = frozenset(self.ctx.threads)
        self.workers: dict[g.Thread, _Worker] = {}
        self.op_timeout_s = op_timeout_s
        self.op_timeouts = dict(op_timeouts or {})  # f -> seconds for ops a workload knows are slow
        self.nemesis_timeout_s = nemesis_timeout_s
        self.progress = progress
        self.busy: dict[g.Thread, dict[str, Any]] = {}
        self._done: deque[tuple[g.Thread, dict[str, Any]]] = deque()
        self._wake = asyncio.Event()
        self.stopping = False
        self.errors: list[str] = []
        self._client_proto: Client | None = None
        self._watchdog_task: asyncio.Task[None] | None = None
        self._closing = False
        self._loop_time: Callable[[], float] = time.monotonic
        self.client_nodes: list[str] = []  # worker t is bound to client_nodes[t % len(client_nodes)]
        self.phase_spans: dict[str, tuple[int, int]] = {}  # phase -> (start, end) on the history clock
        self._generation_end_ns: int | None = None  # when the running generator was exhausted
        self._anchor_ns: int | None = None  # when the running generator committed its first op

    # -- workers --------------------------------------------------------------------------------

    async def start_workers(self, client: Client, nemesis: Nemesis | None, nodes: Sequence[str]) -> None:
        self._client_proto = client
        client_threads = [t for t in self.ctx.threads if t != NEMESIS]
        self.client_nodes = list(nodes)
        opened = await asyncio.gather(*(client.open(self.test, nodes[int(t) % len(nodes)]) for t in client_threads))
        for t, c in zip(client_threads, opened):
            self.workers[t] = _Worker(t, nodes[int(t) % len(nodes)], c)
        self.workers[NEMESIS] = _Worker(NEMESIS, "", nemesis)
        for t, w in self.workers.items():
            w.task = asyncio.get_running_loop().create_task(self._work(w), name=f"worker-{t}")
        self._loop_time = asyncio.get_running_loop().time
        self._watchdog_task = asyncio.get_running_loop().create_task(self._watchdog(), name="watchdog")

    async def stop_workers(self) -> None:
        self._closing = True
        if self._watchdog_task is not None:
            self._watchdog_task.cancel()
        for w in self.workers.values():
            if w.task is not None:
                w.task.cancel()
        for w in self.workers.values():
            if w.task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await w.task
            if w.thread != NEMESIS and w.client is not None:
                with contextlib.suppress(Exception):
                    await w.client.close(self.test)

    async def _work(self, w: _Worker) -> None:
        is_nemesis = w.thread == NEMESIS
        timeout_s = self.nemesis_timeout_s if is_nemesis else self.op_timeout_s
        while True:
            while w.op is None:
                w.waiter = asyncio.get_running_loop().create_future()
                await w.waiter
            op, w.op = w.op, None
            limit = timeout_s if is_nemesis else self.op_timeouts.get(str(op.get("f")), timeout_s)
            comp = await self._invoke(w, op, limit, is_nemesis)
            self._done.append((w.thread, comp))
            self._wake.set()

    async def _watchdog(self, period_s: float = 0.05) -> None:
        """Cancel invokes past their deadline (one timer for all workers, not one per op)."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(period_s)
            now = loop.time()
            for w in self.workers.values():
                if w.deadline and now >= w.deadline and not w.timed_out and w.task is not None and not self._closing:
                    w.timed_out = True
                    w.task.cancel()

    async def _invoke(self, w: _Worker, op: dict[str, Any], timeout_s: float, is_nemesis: bool) -> dict[str, Any]:
        if w.client is None and is_nemesis:
            return {**op, "type": "info", "error": "no nemesis configured for this test"}
        if w.client is None:
            try:
                assert self._client_proto is not None
                w.client = await self._client_proto.open(self.test, w.node)
            except Exception as exc:
                return {**op, "type": "fail", "error": f"cannot open client to {w.node}: {exc!r}"}
        w.deadline = self._loop_time() + timeout_s
        try:
            comp = await w.client.invoke(self.test, op)
            w.deadline = 0.0
            if w.timed_out:  # the client swallowed the watchdog's cancellation: take it back
                w.timed_out = False
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
            problems = validate_completion(op, comp)
            if problems:
                raise InvalidCompletion(op, comp, problems)
            return comp
        except asyncio.CancelledError:
            w.deadline = 0.0
            if not w.timed_out or self._closing:
                raise
            w.timed_out = False
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            comp = {**op, "type": "info", "error": "timeout"}
        except InvalidCompletion as exc:
            w.deadline = 0.0
            self.errors.append(str(exc))
            comp = {**op, "type": "info", "error": f"invalid completion: {'; '.join(exc.problems)}"}
        except Exception as exc:
            w.deadline = 0.0
            comp = {**op, "type": "info", "error": f"indeterminate: {exc!r}"}
        if not is_nemesis:
            with contextlib.suppress(Exception):
                await w.client.close(self.test)
            w.client = None
        return comp

    # -- the loop -------------------------------------------------------------------------------

    def _context(self) -> g.Context:
        busy = self.busy
        free = self._all_threads if not busy else self._all_threads.difference(busy)
        return g.Context(self.writer.now_ns(), self.ctx.threads, free, self.ctx.workers, self.ctx.rng,
                         self.ctx.client_threads)

    def _complete(self, gen: g.Gen | None, thread: g.Thread, comp: dict[str, Any]) -> g.Gen | None:
        comp = {k: v for k, v in comp.items() if k not in ("time", "index")}
        rec = self.writer.append(comp)
        self.busy.pop(thread, None)
        if self.progress is not None:
            self.progress.record(rec["type"], rec["process"], rec["f"], rec["value"], rec.get("error"))
        # The generator hears the completion while the thread still runs the completing process (as in
        # the simulator); only then does an ``info`` move the thread to a fresh process.  The other
        # order made thread-routing generators drop every ``info`` as an event of a stale process.
        updated = None if gen is None else gen.update(self._context(), rec)
        nxt = self.writer.process_after(rec)
        if nxt != rec["process"]:
            workers = dict(self.ctx.workers)
            workers[thread] = nxt
            self.ctx = g.Context(self.ctx.time_ns, self.ctx.threads, self.ctx.free, workers, self.ctx.rng,
                                 self.ctx.client_threads)
        return updated

    async def _wait(self, timeout_s: float | None) -> None:
        if self._done:
            return
        self.writer.flush()  # everything recorded so far reaches the kernel before we block
        self._wake.clear()
        if timeout_s is None:
            await self._wake.wait()
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._wake.wait()

    def stop(self) -> None:
        self.stopping = True
        self._wake.set()

    async def run(self, gen_like: Any, *, poll_s: float = 0.01, phase: str | None = None) -> bool:
        """Run one generator to exhaustion (or until stopped).  Returns False if stopped.

        ``phase`` names the span in :attr:`phase_spans` (the ``main`` one feeds :meth:`load_figures`): from
        the generator's first committed op -- the moment its lazily anchored clocks (``time_limit``'s
        deadline, a schedule's offsets) started, which can be a little after the call -- to the moment the
        generator was exhausted (or generation stopped), not to the end of the wait for ops still in flight,
        when no new op could start.  A generator that committed nothing spans from the call."""
        start = self.writer.now_ns()
        self._generation_end_ns = None
        self._anchor_ns = None
        try:
            return await self._run(gen_like, poll_s)
        finally:
            if phase is not None:
                end = self._generation_end_ns if self._generation_end_ns is not None else self.writer.now_ns()
                self.phase_spans[phase] = (start if self._anchor_ns is None else self._anchor_ns, end)

    def load_figures(self, history: Sequence[Any], *, rate_hz: float, phase: str = "main") -> dict[str, Any] | None:
        """:func:`harness.load.load_figures` of ``phase`` (None if no run was named ``phase``)."""
        span = self.phase_spans.get(phase)
        if span is None:
            return None
        return _load_figures(history, concurrency=self.ctx.client_threads, rate_hz=rate_hz, main_start_ns=span[0],
                             main_end_ns=span[1], windows_s=fault_windows_s(history), nodes=self.client_nodes)

    async def _run(self, gen_like: Any, poll_s: float) -> bool:
        gen = g.as_gen(gen_like)
        done = self._done
        while True:
            while done:
                thread, comp = done.popleft()
                gen = self._complete(gen, thread, comp)
            if self.stopping:
                return False
            if gen is None:
                if self._generation_end_ns is None:
                    self._generation_end_ns = self.writer.now_ns()
                if not self.busy:
                    return True
                await self._wait(None)
                continue
            ctx = self._context()
            res = gen.op(ctx)
            if res is None:
                gen = None
                continue
            value, nxt = res
            if value is g.PENDING:
                gen = nxt
                await self._wait(poll_s)
                continue
            op: dict[str, Any] = value  # type: ignore[assignment]
            if op["time"] > ctx.time_ns:
                await self._wait((op["time"] - ctx.time_ns) / 1e9)
                continue
            gen = nxt
            if self._anchor_ns is None:  # the first op the generator committed to: its clocks start at this time
                self._anchor_ns = ctx.time_ns
            if op["type"] == "sleep":
                continue
            t = ctx.thread_of(op["process"])
            if t is None or t in self.busy:
                raise RuntimeError(f"generator produced {op!r} for a process with no free thread (bug in a generator)")
            inv = {k: v for k, v in op.items() if k not in ("time", "index")}
            rec = self.writer.append(inv)
            if self.progress is not None:
                self.progress.record("invoke", rec["process"], rec["f"], rec["value"])
            self.busy[t] = inv
            if gen is not None:
                gen = gen.update(ctx, rec)
            w = self.workers[t]
            w.op = inv
            if w.waiter is not None and not w.waiter.done():
                w.waiter.set_result(None)

    async def drain(self, grace_s: float) -> None:
        """Let in-flight ops finish for up to ``grace_s``; close the rest as ``info`` (interrupted)."""
        deadline = time.monotonic() + grace_s
        while self.busy and time.monotonic() < deadline:
            while self._done:
                thread, comp = self._done.popleft()
                self._complete(None, thread, comp)
            if self.busy:
                await self._wait(max(0.0, deadline - time.monotonic()))
        while self._done:
            thread, comp = self._done.popleft()
            self._complete(None, thread, comp)
        for thread, inv in list(self.busy.items()):
            self._complete(None, thread, {**inv, "type": "info", "error": "interrupted"})
