"""A process is not gone while any of its threads is: the liveness checks of the local backend
(``harness.control.local._proc_starttime``) and of the shell backends (``SIGNAL_SCRIPT``, docker and ssh).

A SIGKILLed Erlang VM's main thread can exit first and show ``Z`` in ``/proc/<pid>/stat`` while another thread still
tears the process down and holds its listening sockets, which still take connections; both checks used to call such
a zombie dead, so a killed RabbitMQ broker's port answered after the kill "returned" (docs/systems.md).  Here a real
process is put in that state on purpose -- its main thread exits with the ``exit`` syscall (not ``exit_group``)
while a second thread, blocked reading stdin, keeps a listening socket -- and both checks must say alive until the
second thread ends.
"""

from __future__ import annotations

import platform
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.control.local import _proc_starttime
from harness.control.shell import SIGNAL_SCRIPT

SYS_EXIT = {"x86_64": 60, "aarch64": 93}.get(platform.machine())
"""The number of the ``exit`` syscall (one thread) on this machine; ``exit_group`` would end every thread."""

CHILD = """
import ctypes, socket, sys, threading
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
threading.Thread(target=sys.stdin.read).start()
print(s.getsockname()[1], flush=True)
ctypes.CDLL(None).syscall({sys_exit}, 0)
"""

pytestmark = pytest.mark.skipif(SYS_EXIT is None or not Path("/proc/self/task").is_dir(),
                                reason="needs Linux /proc and a known exit syscall number")


def _state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rfind(")") + 2:].split()[0]


def _threads(pid: int) -> int:
    try:
        return len(list(Path(f"/proc/{pid}/task").iterdir()))
    except OSError:
        return 0


def _until(cond: Callable[[], bool], what: str, bound_s: float = 20.0) -> None:
    """Poll ``cond()`` until true (a bound against a hang, not a speed)."""
    deadline = time.monotonic() + bound_s
    while not cond():
        assert time.monotonic() < deadline, f"not {what} within {bound_s:g} s"
        time.sleep(0.01)


def _signal_script(pid: int, start: int) -> str:
    return subprocess.run(["sh", "-c", SIGNAL_SCRIPT, "sh", str(pid), str(start), "0"], capture_output=True,
                          text=True, timeout=10).stdout.strip()


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2.0).close()
    except OSError:
        return False
    return True


def test_a_zombie_main_thread_with_a_live_thread_is_alive_until_that_thread_ends() -> None:
    p = subprocess.Popen([sys.executable, "-c", CHILD.format(sys_exit=SYS_EXIT)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdin is not None
        port = int(p.stdout.readline())
        start = _proc_starttime(p.pid)
        assert start is not None
        _until(lambda: _state(p.pid) == "Z", "a zombie main thread")
        assert _threads(p.pid) == 2
        # The state a SIGKILLed VM passes through: the main thread a zombie, the socket still taking connections.
        assert _accepts(port)
        assert p.poll() is None  # waitpid does not reap a leader whose group still runs
        assert _proc_starttime(p.pid) == start
        assert _signal_script(p.pid, start) == "alive"
        p.stdin.close()  # the second thread's read returns, and it ends: the last of the group
        _until(lambda: _threads(p.pid) <= 1, "the second thread gone")
        assert _proc_starttime(p.pid) is None
        assert _signal_script(p.pid, start) == "dead"
        assert not _accepts(port)
        assert p.wait(timeout=10) == 0
    finally:
        p.kill()
        p.wait(timeout=10)
