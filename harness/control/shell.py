"""Processes on nodes reached through a shell (docker exec, ssh): start, signal and watch them by script.

Both backends have no handle on a node's processes but a shell, so a process is named by (pid, start
time): the start time read from ``/proc/<pid>/stat`` when it was spawned.  Signalling checks it first,
so a pid the kernel has reused for a stranger is never signalled.  :class:`ShellProcesses` is that
logic once; a backend supplies how to run a script on a node (``_sh``).
"""

from __future__ import annotations

import asyncio
import secrets
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence

from harness.control.base import CommandFailed, ControlError, ExecResult

__all__ = ["PID_FILE_SCRIPT", "SIGNAL_SCRIPT", "SPAWN_SCRIPT", "TIMEOUT_EXITS", "ShellProcesses", "finish_exec",
           "node_argv", "parse_proc_stat", "signal_answer"]

# $1 log, $2 cwd, $3 pid file, $4 nonce, rest argv.  Prints the pid, then its /proc stat line.  The pid file gets
# the pid (for operators), then <pid file>.nonce this spawn's nonce (so a later read can tell its files from an
# older spawn's).
SPAWN_SCRIPT = (
    'log=$1; dir=$2; pidfile=$3; nonce=$4; shift 4; mkdir -p "$(dirname "$log")" && cd "$dir" || exit 97; '
    'rm -f "$pidfile" "$pidfile.nonce"; setsid nohup "$@" >>"$log" 2>&1 </dev/null & pid=$!; '
    'echo "$pid" >"$pidfile"; echo "$nonce" >"$pidfile.nonce"; echo "$pid"; cat "/proc/$pid/stat" 2>/dev/null; '
    'exit 0'
)
# $1 pid file, $2 nonce.  What SPAWN_SCRIPT printed, read back from its files; "none" if they are not that
# spawn's (missing, or another nonce).
PID_FILE_SCRIPT = (
    'read -r n <"$1.nonce" 2>/dev/null && [ "$n" = "$2" ] || { echo none; exit 0; }; '
    'read -r pid <"$1" 2>/dev/null || { echo none; exit 0; }; echo "$pid"; cat "/proc/$pid/stat" 2>/dev/null; '
    'exit 0'
)
# $1 pid, $2 expected start time, $3 signal number ("0" = only report).  Prints alive|dead.  A zombie is dead only
# when it is the last of its thread group: a SIGKILLed multithreaded process's main thread can be a zombie while
# another thread still exits and holds its files (listening sockets) open (harness.control.local._proc_starttime).
SIGNAL_SCRIPT = (
    'pid=$1; want=$2; sig=$3; s=$(cat "/proc/$pid/stat" 2>/dev/null) || { echo dead; exit 0; }; '
    'set -- ${s##*) }; state=$1; shift 19; '
    '[ "$1" = "$want" ] || { echo dead; exit 0; }; '
    'if [ "$state" = Z ]; then set -- "/proc/$pid/task/"*; [ "$#" -gt 1 ] || { echo dead; exit 0; }; fi; '
    '[ "$sig" = 0 ] || kill -"$sig" "$pid" 2>/dev/null || true; echo alive'
)


async def signal_answer(run: Callable[[], Awaitable[ExecResult]], where: str) -> bool:
    """Run :data:`SIGNAL_SCRIPT` (``run``) until it answers ``alive`` or ``dead``: an empty or garbled answer
    (a transport hiccup -- seen from a loaded docker engine) is asked again, never read as "dead".

    Raises:
        ControlError: three answers in a row were neither (names ``where`` and the last answer).
    """
    res: ExecResult | None = None
    for attempt in range(3):
        res = await run()
        answer = res.stdout.strip()
        if answer in ("alive", "dead"):
            return answer == "alive"
        await asyncio.sleep(0.2 * (attempt + 1))
    assert res is not None
    raise ControlError(f"{where}: the process check answered {res.stdout!r} (exit {res.exit_code}, "
                       f"stderr {res.stderr.strip()[-200:]!r}) three times; expected alive or dead")


# `timeout -s KILL` signals its whole process group, itself included: docker reports 128+9, while
# sshd sends exit-signal instead of a status, which paramiko reports as -1.
TIMEOUT_EXITS = (137, -1)


def node_argv(argv: Sequence[str], python: str) -> list[str]:
    """``argv`` for a node: the harness's own interpreter path means "the node's Python"."""
    if not argv:
        raise ControlError("empty argv: expected a program and its arguments")
    out = list(argv)
    if out[0] == sys.executable:
        out[0] = python
    return out


def parse_proc_stat(text: str) -> tuple[str, int] | None:
    """(state, start time in clock ticks) from a ``/proc/<pid>/stat`` line, or None if unreadable."""
    rest = text[text.rfind(")") + 2 :].split() if ")" in text else []
    if len(rest) < 20:
        return None
    return rest[0], int(rest[19])


def finish_exec(node: str, argv: Sequence[str], result: ExecResult, *, elapsed_s: float, timeout_s: float,
                check: bool) -> ExecResult:
    """The verdict on a command run under ``timeout -s KILL``: killed by the timeout -> ControlError (a
    command that merely exited 137 early is not a timeout); non-zero with ``check`` -> CommandFailed."""
    if result.exit_code in TIMEOUT_EXITS and elapsed_s >= timeout_s * 0.95:
        raise ControlError(f"on {node}: {' '.join(argv)!r} did not finish within {timeout_s}s (killed)")
    if check and result.exit_code != 0:
        raise CommandFailed(node, argv, result)
    return result


class ShellProcesses:
    """spawn / signal / is_alive over :data:`SPAWN_SCRIPT` and :data:`SIGNAL_SCRIPT`.

    A backend sets ``python`` (the nodes' interpreter), ``pids`` ((node, pid) -> start time) and
    ``_label`` (names it in errors), and implements ``_sh`` and ``_default_cwd``.
    """

    _label: str = "shell backend"
    python: str
    pids: dict[tuple[str, int], int]

    async def _sh(self, node: str, script: str, args: Sequence[str]) -> ExecResult:
        raise NotImplementedError

    def _default_cwd(self, node: str) -> str:
        raise NotImplementedError

    def _start_of(self, node: str, pid: int) -> int:
        try:
            return self.pids[(node, pid)]
        except KeyError:
            raise ControlError(f"{self._label}: pid {pid} was not started on {node} by this run") from None

    async def spawn(
        self, node: str, argv: Sequence[str], *, log_path: str, env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> int:
        full = node_argv(argv, self.python)
        if env:
            full = ["env", *(f"{k}={v}" for k, v in env.items()), *full]
        pid_file = f"{log_path}.pid"  # on the node beside the log: also lets an operator find the process
        nonce = secrets.token_hex(8)
        res = await self._sh(node, SPAWN_SCRIPT, [log_path, cwd or self._default_cwd(node), pid_file, nonce, *full])
        lines = res.stdout.splitlines()
        if res.exit_code == 0 and not lines:
            # the script ran (exit 0) but its answer was lost on the way back -- seen from a loaded docker engine:
            # read it back from the pid file rather than start the command twice
            lines = await self._read_pid_file(node, pid_file, nonce)
        if res.exit_code != 0 or not lines or not lines[0].strip().isdigit():
            raise ControlError(f"on {node}: could not start {' '.join(argv)!r}: {res.describe()}")
        pid = int(lines[0])
        stat = parse_proc_stat(lines[1]) if len(lines) > 1 else None
        self.pids[(node, pid)] = stat[1] if stat else -1
        return pid

    async def _read_pid_file(self, node: str, pid_file: str, nonce: str) -> list[str]:
        """The lines SPAWN_SCRIPT printed, from its pid file; [] if that spawn wrote none (three empty answers in a
        row count as none too)."""
        for attempt in range(3):
            res = await self._sh(node, PID_FILE_SCRIPT, [pid_file, nonce])
            lines = res.stdout.splitlines()
            if lines:
                return [] if lines[0].strip() == "none" else lines
            await asyncio.sleep(0.2 * (attempt + 1))
        return []

    async def _signal_checked(self, node: str, pid: int, start: int, sig: int) -> bool:
        """Send ``sig`` (0: none) to ``pid`` if it is still the process that started at ``start``; alive?"""
        args = [str(pid), str(start), str(int(sig))]
        where = f"{self._label}, node {node}, pid {pid}"
        return await signal_answer(lambda: self._sh(node, SIGNAL_SCRIPT, args), where)

    async def signal(self, node: str, pid: int, sig: int) -> None:
        await self._signal_checked(node, pid, self._start_of(node, pid), int(sig))

    async def is_alive(self, node: str, pid: int) -> bool:
        return await self._signal_checked(node, pid, self._start_of(node, pid), 0)
