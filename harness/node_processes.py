"""``NodeProcesses``: one daemon per node, tracked by pid, driven through the test's Remote.

Every DB that runs a process per node needs the same few moves: start it (unless it already runs), say whether it
still runs, pause and resume it with SIGSTOP/SIGCONT (remembering which nodes are paused, so a nemesis does not
send a request a stopped process would read only when resumed: :class:`nemesis.failpoint.KnowsPaused`), ask it to
shut down (SIGTERM; SIGCONT too, since a stopped process cannot act on TERM), stop it for good (TERM, a grace
period, KILL, and wait until it is really gone, so a restart does not find its files or ports still held), and
wait for it to become ready with an error that says which node, what was awaited, what was last seen and how its
log ends.  Those moves used to be written three times (our cluster's, the counter self-test's and etcd's DB); they
are written here once, and a DB keeps only what is its own (command line, ports, readiness probe).

It acts only through ``test["remote"]`` (:class:`harness.control.base.Remote`: ``spawn``, ``signal``,
``is_alive``, ``exec``), so it works the same on network namespaces, containers and SSH hosts.

Errors: :class:`NodeProcessError` (a ``RuntimeError``), or the class a DB passes as ``error`` so its callers keep
catching what they caught before (etcd's ``EtcdStartError``).  Its message names the node and the pid or what was
awaited; a readiness failure ends with the tail of the node's log.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

__all__ = ["LOG_TAIL_LINES", "NodeProcessError", "NodeProcesses", "Probe"]

LOG_TAIL_LINES = 20
"""How many lines of a node's log a readiness error ends with."""

Probe = Callable[[], Awaitable[str | None]]
"""A readiness check: None once the node is ready, else a short description of what was seen."""


class NodeProcessError(RuntimeError):
    """A node's process did not start, did not become ready, or did not go away (the message says which)."""


class NodeProcesses:
    """The pid of each node's process, and the moves on it (see the module docstring).

    Args:
        label: how errors name a node's process (``"etcd member"``, ``"counter service"``).
        error: the exception class raised for a failed wait (readiness, or still alive after SIGKILL).
    """

    def __init__(self, label: str = "process", *, error: type[Exception] = NodeProcessError) -> None:
        self.label = label
        self.error = error
        self.pids: dict[str, int] = {}
        """node -> pid of the process last spawned there (forgotten once :meth:`stop` saw it gone)."""
        self.paused: set[str] = set()
        """Nodes whose process this helper SIGSTOPped and has not continued, killed or restarted."""

    # -- state ------------------------------------------------------------------------------------

    def pid(self, node: str) -> int | None:
        return self.pids.get(node)

    def is_paused(self, node: str) -> bool:
        return node in self.paused

    async def alive(self, test: Mapping[str, Any], node: str) -> bool:
        """Whether the node's tracked process runs (a paused one counts as running)."""
        pid = self.pids.get(node)
        return pid is not None and bool(await test["remote"].is_alive(node, pid))

    # -- start -------------------------------------------------------------------------------------

    async def spawn(self, test: Mapping[str, Any], node: str, argv: Sequence[str], *, log_path: str,
                    env: Mapping[str, str] | None = None, cwd: str | None = None,
                    if_alive: str = "keep") -> int:
        """Start ``argv`` on ``node`` with its output appended to ``log_path``; the pid.

        ``if_alive`` says what to do when the tracked process still runs: ``keep`` it (return its pid, start
        nothing) or ``spawn`` another anyway (our cluster's DB always did; its callers start only dead nodes).
        """
        if if_alive not in ("keep", "spawn"):
            raise ValueError(f"if_alive must be 'keep' or 'spawn', got {if_alive!r}")
        if if_alive == "keep" and await self.alive(test, node):
            return self.pids[node]
        pid = int(await test["remote"].spawn(node, list(argv), log_path=log_path, env=env, cwd=cwd))
        self.pids[node] = pid
        self.paused.discard(node)
        return pid

    # -- signals -------------------------------------------------------------------------------------

    async def signal(self, test: Mapping[str, Any], node: str, sig: int) -> bool:
        """Send ``sig`` to the node's tracked process; False if none is tracked (nothing sent)."""
        pid = self.pids.get(node)
        if pid is None:
            return False
        await test["remote"].signal(node, pid, sig)
        return True

    async def pause(self, test: Mapping[str, Any], node: str) -> None:
        """SIGSTOP; the node counts as paused until :meth:`resume` (or a kill, stop or new spawn)."""
        if await self.signal(test, node, signal.SIGSTOP):
            self.paused.add(node)

    async def resume(self, test: Mapping[str, Any], node: str) -> None:
        await self.signal(test, node, signal.SIGCONT)
        self.paused.discard(node)

    async def terminate(self, test: Mapping[str, Any], node: str) -> None:
        """SIGTERM, then SIGCONT (a paused process cannot act on TERM): the process's own shutdown; :meth:`alive`
        says when it is over."""
        if await self.signal(test, node, signal.SIGTERM):
            await self.signal(test, node, signal.SIGCONT)
            self.paused.discard(node)

    async def stop(self, test: Mapping[str, Any], node: str, *, grace_s: float = 0.0,
                   gone_within_s: float = 5.0) -> None:
        """Stop the node's process for good: with ``grace_s`` > 0 first :meth:`terminate` and wait up to
        ``grace_s`` for it to exit, then SIGKILL (with SIGCONT before, so a paused one dies at once) and wait
        until it is gone.  The pid is forgotten.  A no-op if no process is tracked.

        Raises:
            error: still alive ``gone_within_s`` after SIGKILL (naming the node and the pid).
        """
        pid = self.pids.get(node)
        if pid is None:
            return
        remote = test["remote"]
        if grace_s > 0:
            await self.terminate(test, node)
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline and await remote.is_alive(node, pid):
                await asyncio.sleep(0.05)
        await remote.signal(node, pid, signal.SIGCONT)
        await remote.signal(node, pid, signal.SIGKILL)
        self.paused.discard(node)
        deadline = time.monotonic() + gone_within_s
        while await remote.is_alive(node, pid):
            if time.monotonic() > deadline:
                raise self.error(f"{self.label} {node} (pid {pid}) still alive {gone_within_s:g} s after SIGKILL")
            await asyncio.sleep(0.02)
        if self.pids.get(node) == pid:
            del self.pids[node]

    # -- readiness -----------------------------------------------------------------------------------

    async def wait_until(self, test: Mapping[str, Any], node: str, probe: Probe, what: str, *, timeout_s: float,
                         log_path: str, where: str = "", interval_s: float = 0.1) -> None:
        """Poll ``probe`` until it returns None.

        Raises:
            error: the process exited (or none is tracked), or ``probe`` still saw something else after
                ``timeout_s``; the message names the label, the node, ``where`` (an address), why, what the probe
                saw last, and ends with the tail of ``log_path``.
        """
        remote, pid = test["remote"], self.pids.get(node)
        deadline = time.monotonic() + timeout_s
        while True:
            seen = await probe()
            if seen is None:
                return
            dead = pid is None or not await remote.is_alive(node, pid)
            if dead or time.monotonic() > deadline:
                why = "exited" if dead else f"not {what} after {timeout_s:g} s"
                at = f" ({where})" if where else ""
                raise self.error(f"{self.label} {node}{at} {why} (last seen: {seen}); {log_path} ends with:\n"
                                 f"{await self.log_tail(test, node, log_path)}")
            await asyncio.sleep(interval_s)

    async def log_tail(self, test: Mapping[str, Any], node: str, log_path: str, lines: int = LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of ``log_path`` on ``node`` (or why they cannot be read)."""
        try:
            res = await test["remote"].exec(node, ["tail", "-n", str(lines), log_path])
        except Exception as exc:  # a backend may fail any way; the caller is already reporting an error
            return f"(cannot read the log: {exc!r})"
        return res.stdout.rstrip() or res.stderr.rstrip() or "(empty)"
