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

Clocks (``faketime=True``): each process is started under libfaketime (Debian's ``libfaketime``, the thread-safe
``libfaketimeMT.so.1``, located on the node with ``dpkg -L``) reading ``<node_dir>/faketime.rc`` on every clock
call (``FAKETIME_NO_CACHE=1``), so a line written there moves the running process's wall clock without a restart:
:meth:`NodeProcesses.set_clock` (the ``clock-faketime`` capability, :class:`harness.protocols.Clocks`).
Monotonic clocks are left alone (``FAKETIME_DONT_FAKE_MONOTONIC=1``): stepping them back stalls timer loops.  What
the file says is computed by the pure :class:`FakeClock`; docs/nemeses.md says which programs it affects.

Errors: :class:`NodeProcessError` (a ``RuntimeError``), or the class a DB passes as ``error`` so its callers keep
catching what they caught before (etcd's ``EtcdStartError``).  Its message names the node and the pid or what was
awaited; a readiness failure ends with the tail of the node's log.  :class:`FaketimeError`: a clock change that
did not take effect, and why.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

__all__ = [
    "FAKETIME_FILE", "FAKETIME_LIBRARY", "LOG_TAIL_LINES", "FakeClock", "FaketimeError", "NodeProcessError",
    "NodeProcesses", "Probe",
]

LOG_TAIL_LINES = 20
"""How many lines of a node's log a readiness error ends with."""

Probe = Callable[[], Awaitable[str | None]]
"""A readiness check: None once the node is ready, else a short description of what was seen."""


FAKETIME_PACKAGE = "libfaketime"
FAKETIME_LIBRARY = "libfaketimeMT.so.1"
"""The build of libfaketime that is safe in multithreaded processes (the Debian package ships both)."""
FAKETIME_FILE = "faketime.rc"
"""The control file's name in the node's directory."""
MAPS_CHECKS = 40
MAPS_CHECK_INTERVAL_S = 0.05
"""How often, and how far apart, a process's memory map is read for libfaketime before it is said to lack it (2 s in
all: the launcher's exec of the program is that long at most on a loaded machine)."""


class NodeProcessError(RuntimeError):
    """A node's process did not start, did not become ready, or did not go away (the message says which)."""


class FaketimeError(NodeProcessError):
    """A clock change that did not take effect: the node's process is not running or not under libfaketime, or its
    control file could not be written."""


@dataclass(frozen=True)
class FakeClock:
    """What one process's clock is set to, and the control-file line that makes libfaketime show it (pure).

    libfaketime shows ``real + offset + (rate - 1) * (real - start)`` for a line ``"<offset> x<rate>"``, where
    ``start`` is when the library started in the process: a new rate alone would also rescale all the time the
    process has run (a jump).  So the line's offset compensates, and a rate takes effect from the moment it is
    set, continuous there, as our own clock (``system_under_test/clock.py``) does.  Times are seconds of real
    (host) time; ``start`` is estimated when the process is spawned, so a rate change steps the clock by
    ``(rate - 1)`` times that estimate's error (a few milliseconds on the local and docker backends; on SSH hosts
    the harness's and the host's clocks must agree).

    Attributes:
        start: when the process's libfaketime started counting (real time).
        anchor: when the rate last changed.
        drift_s: what the rate had added to the clock by ``anchor``.
        offset_s: the step part of the skew (bumps).
        rate: how fast the process's clock runs against real time.
    """

    start: float
    anchor: float
    drift_s: float = 0.0
    offset_s: float = 0.0
    rate: float = 1.0

    def skew_s(self, now: float) -> float:
        """The process's clock minus real time at ``now``."""
        return self.offset_s + self.drift_s + (self.rate - 1.0) * (now - self.anchor)

    def set(self, now: float, *, offset_s: float | None = None, rate: float | None = None) -> FakeClock:
        """The clock after a change at ``now``: a new step offset, and/or a new rate from ``now`` on."""
        if rate is not None and not rate > 0:
            raise ValueError(f"clock rate must be > 0, got {rate}")
        out = self if offset_s is None else replace(self, offset_s=float(offset_s))
        if rate is not None:
            out = replace(out, anchor=now, drift_s=self.drift_s + (self.rate - 1.0) * (now - self.anchor),
                          rate=float(rate))
        return out

    def reset(self, now: float) -> FakeClock:
        """Real time again: no offset, no drift, rate 1."""
        return FakeClock(start=self.start, anchor=now)

    def line(self, now: float) -> str:
        """The control-file line that shows this clock from ``now`` on."""
        offset = self.skew_s(now) - (self.rate - 1.0) * (now - self.start)
        return f"{offset:+.6f} x{self.rate:.9g}"


class NodeProcesses:
    """The pid of each node's process, and the moves on it (see the module docstring).

    Args:
        label: how errors name a node's process (``"etcd member"``, ``"counter service"``).
        error: the exception class raised for a failed wait (readiness, or still alive after SIGKILL).
    """

    def __init__(self, label: str = "process", *, error: type[Exception] = NodeProcessError,
                 faketime: bool = False) -> None:
        self.label = label
        self.error = error
        self.faketime = faketime
        self.pids: dict[str, int] = {}
        """node -> pid of the process last spawned there (forgotten once :meth:`stop` saw it gone)."""
        self.paused: set[str] = set()
        """Nodes whose process this helper SIGSTOPped and has not continued, killed or restarted."""
        self.clocks: dict[str, FakeClock] = {}
        """node -> its process's clock (``faketime``: set at spawn, for processes started under libfaketime)."""
        self.without_faketime: dict[str, str] = {}
        """node -> why its current process was started without libfaketime (``faketime`` only)."""
        self._library: dict[str, str | None] = {}
        self._library_problem: dict[str, str] = {}
        self._mapped: set[tuple[str, int]] = set()  # (node, pid) seen with libfaketime in its memory map

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
        clock_env = await self._faketime_env(test, node) if self.faketime else None
        before = time.time()
        pid = int(await test["remote"].spawn(node, list(argv), log_path=log_path,
                                             env={**(env or {}), **(clock_env or {})} if clock_env else env, cwd=cwd))
        after = time.time()
        self.pids[node] = pid
        self.paused.discard(node)
        if clock_env:
            self.clocks[node] = FakeClock(start=(before + after) / 2, anchor=after)
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
            self.clocks.pop(node, None)
        if self.faketime:  # libfaketime leaves its shared memory behind when its process is killed
            await remote.exec(node, ["rm", "-f", f"/dev/shm/faketime_shm_{pid}", f"/dev/shm/sem.faketime_sem_{pid}"])

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

    # -- clocks (faketime) ---------------------------------------------------------------------------

    def faketime_file(self, test: Mapping[str, Any], node: str) -> str:
        return str(test["remote"].node_dir(node) / FAKETIME_FILE)

    async def _faketime_env(self, test: Mapping[str, Any], node: str) -> dict[str, str] | None:
        """The environment that starts a process under libfaketime at real time (its control file written first),
        or None, with the reason kept in :attr:`without_faketime`, where that cannot be done: the process then
        starts without it and every clock change on it reports that it did not take effect."""
        self.without_faketime.pop(node, None)
        library = await self._library_on(test, node)
        if library is None:
            return None
        path = self.faketime_file(test, node)
        problem = await self._write_line(test, node, path, "+0 x1")
        if problem:
            self.without_faketime[node] = problem
            return None
        return {"LD_PRELOAD": library, "FAKETIME_TIMESTAMP_FILE": path, "FAKETIME_NO_CACHE": "1",
                "FAKETIME_DONT_FAKE_MONOTONIC": "1"}

    async def _library_on(self, test: Mapping[str, Any], node: str) -> str | None:
        """libfaketime's path on ``node`` (looked up once), or None with the reason in :attr:`without_faketime`."""
        if node not in self._library:
            res = await test["remote"].exec(node, ["dpkg", "-L", FAKETIME_PACKAGE])
            found = [ln for ln in res.stdout.splitlines() if ln.endswith("/" + FAKETIME_LIBRARY)]
            self._library[node] = found[0] if res.exit_code == 0 and found else None
            self._library_problem[node] = (f"{FAKETIME_LIBRARY} not found on {node} (dpkg -L {FAKETIME_PACKAGE}: "
                                           f"{res.describe()}); scripts/setup.sh installs {FAKETIME_PACKAGE}")
        if self._library[node] is None:
            self.without_faketime[node] = self._library_problem[node]
        return self._library[node]

    @staticmethod
    async def _write_line(test: Mapping[str, Any], node: str, path: str, line: str) -> str | None:
        """Replace the control file's content with ``line`` at once (a process reading a half-written file could
        read another offset, and libfaketime ends a process whose file it cannot parse); None, or what failed."""
        script = 'printf "%s\\n" "$1" > "$2.tmp" && mv -f "$2.tmp" "$2"'
        try:
            res = await test["remote"].exec(node, ["sh", "-c", script, "sh", line, path])
        except Exception as exc:  # a backend may fail any way; the caller reports it as not taken effect
            return f"cannot write {path} on {node}: {type(exc).__name__}: {exc}"
        return None if res.exit_code == 0 else f"cannot write {path} on {node}: {res.describe()}"

    async def _faked(self, test: Mapping[str, Any], node: str) -> tuple[int, FakeClock]:
        """The node's pid and clock, once it is known to run under libfaketime.

        Raises:
            FaketimeError: faketime is off, the process is not running, was started without libfaketime, or has no
                libfaketime in its memory map (``/proc/<pid>/maps``, checked once per process).
        """
        if not self.faketime:
            raise FaketimeError(f"{self.label} {node}: not started under libfaketime (this DB does not offer "
                                "clock-faketime)")
        pid = self.pids.get(node)
        if pid is None or not await self.alive(test, node):
            raise FaketimeError(f"{self.label} {node} is not running: no clock to set")
        if node in self.without_faketime or node not in self.clocks:
            why = self.without_faketime.get(node, "it was started before faketime was on")
            raise FaketimeError(f"{self.label} {node} (pid {pid}) runs without libfaketime: {why}")
        if (node, pid) not in self._mapped:
            # The tracked pid may still be the launcher (``ip netns exec``, ``nsenter``) that has not yet exec'd the
            # program: its map has no libfaketime for a moment after spawn.  Look again for a bounded while before
            # calling the process one that runs without it (CI met that window on a loaded machine).
            for attempt in range(MAPS_CHECKS):
                res = await test["remote"].exec(node, ["grep", "-c", "libfaketime", f"/proc/{pid}/maps"])
                if res.exit_code == 0 and res.stdout.strip() not in ("", "0"):
                    break
                if attempt + 1 == MAPS_CHECKS or not await self.alive(test, node):
                    raise FaketimeError(f"{self.label} {node} (pid {pid}) has no libfaketime in /proc/{pid}/maps "
                                        f"({res.describe()}): its clock cannot be set")
                await asyncio.sleep(MAPS_CHECK_INTERVAL_S)
            self._mapped.add((node, pid))
        return pid, self.clocks[node]

    @staticmethod
    def _report(clock: FakeClock, now: float, line: str, path: str) -> dict[str, Any]:
        return {"offset_ms": clock.offset_s * 1000, "rate": clock.rate, "skew_ms": round(clock.skew_s(now) * 1000, 3),
                "line": line, "file": path}

    async def set_clock(self, test: Mapping[str, Any], node: str, *, offset_ms: float | None = None,
                        rate: float | None = None, reset: bool = False) -> dict[str, Any]:
        """Step the node's process clock to ``offset_ms`` and/or run it at ``rate`` from now on (``reset``: real
        time again), by rewriting its control file; what is now in force.

        Raises:
            FaketimeError: the change did not take effect (see :meth:`_faked`, or the file could not be written).
            ValueError: ``rate`` is not > 0.
        """
        _, clock = await self._faked(test, node)
        now = time.time()
        new = clock.reset(now) if reset else clock.set(
            now, offset_s=None if offset_ms is None else offset_ms / 1000, rate=rate)
        line, path = new.line(now), self.faketime_file(test, node)
        problem = await self._write_line(test, node, path, line)
        if problem:
            raise FaketimeError(f"{self.label} {node}: clock not changed: {problem}")
        self.clocks[node] = new
        return self._report(new, now, line, path)

    async def read_clock(self, test: Mapping[str, Any], node: str) -> dict[str, Any]:
        """What the node's process clock is set to, with the control file's line as read back from the node.

        Raises:
            FaketimeError: the process is not running or not under libfaketime, or the file cannot be read.
        """
        _, clock = await self._faked(test, node)
        path = self.faketime_file(test, node)
        res = await test["remote"].exec(node, ["cat", path])
        if res.exit_code != 0:
            raise FaketimeError(f"{self.label} {node}: cannot read {path}: {res.describe()}")
        now = time.time()
        return self._report(clock, now, res.stdout.strip(), path)
