"""NodeProcesses over a fake Remote: a table of processes that follow the signal rules the helper relies on (a
stopped process acts on TERM only once continued, KILL ends it whatever its state, a process may ignore TERM)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from harness.control.base import ExecResult
from harness.node_processes import NodeProcessError, NodeProcesses


@dataclass
class Proc:
    argv: list[str]
    env: Mapping[str, str] | None
    alive: bool = True
    stopped: bool = False
    term_pending: bool = False
    ignores_term: bool = False


@dataclass
class FakeRemote:
    procs: dict[int, Proc] = field(default_factory=dict)
    sent: list[tuple[int, str]] = field(default_factory=list)
    logs: dict[str, str] = field(default_factory=dict)
    ignores_term: bool = False
    unkillable: bool = False
    next_pid: int = 100

    async def spawn(self, node: str, argv: Sequence[str], *, log_path: str, env: Mapping[str, str] | None = None,
                    cwd: str | None = None) -> int:
        self.next_pid += 1
        self.procs[self.next_pid] = Proc(list(argv), env, ignores_term=self.ignores_term)
        return self.next_pid

    async def signal(self, node: str, pid: int, sig: int) -> None:
        self.sent.append((pid, signal.Signals(sig).name))
        p = self.procs.get(pid)
        if p is None or not p.alive:
            return
        if sig == signal.SIGKILL and not self.unkillable:
            p.alive = False
        elif sig == signal.SIGSTOP:
            p.stopped = True
        elif sig == signal.SIGCONT:
            p.stopped = False
            if p.term_pending:
                p.alive = False
        elif sig == signal.SIGTERM and not p.ignores_term:
            if p.stopped:
                p.term_pending = True
            else:
                p.alive = False

    async def is_alive(self, node: str, pid: int) -> bool:
        p = self.procs.get(pid)
        return p is not None and p.alive

    async def exec(self, node: str, argv: Sequence[str], **_: Any) -> ExecResult:
        assert argv[:2] == ["tail", "-n"]
        lines = self.logs.get(argv[3], "").splitlines()[-int(argv[2]):]
        return ExecResult(0, "\n".join(lines), "")


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_spawn_keeps_a_running_process_unless_told_to_spawn_anyway() -> None:
    remote, procs = FakeRemote(), NodeProcesses()
    test = {"remote": remote}
    first = run(procs.spawn(test, "n1", ["d"], log_path="l", env={"A": "1"}))
    assert run(procs.spawn(test, "n1", ["d"], log_path="l")) == first and len(remote.procs) == 1
    assert remote.procs[first].env == {"A": "1"}
    second = run(procs.spawn(test, "n1", ["d"], log_path="l", if_alive="spawn"))
    assert second != first and procs.pid("n1") == second
    remote.procs[second].alive = False
    third = run(procs.spawn(test, "n1", ["d"], log_path="l"))
    assert third not in (first, second) and run(procs.alive(test, "n1"))


def test_pause_is_tracked_until_resume_kill_or_a_new_spawn() -> None:
    remote, procs = FakeRemote(), NodeProcesses()
    test = {"remote": remote}
    run(procs.pause(test, "nobody"))  # nothing tracked: nothing sent, nothing remembered
    assert remote.sent == [] and not procs.is_paused("nobody")
    pid = run(procs.spawn(test, "n1", ["d"], log_path="l"))
    run(procs.pause(test, "n1"))
    assert procs.is_paused("n1") and remote.procs[pid].stopped and run(procs.alive(test, "n1"))
    run(procs.resume(test, "n1"))
    assert not procs.is_paused("n1") and not remote.procs[pid].stopped
    run(procs.pause(test, "n1"))
    run(procs.stop(test, "n1"))
    assert not procs.is_paused("n1") and procs.pid("n1") is None and not remote.procs[pid].alive
    run(procs.spawn(test, "n1", ["d"], log_path="l"))
    run(procs.pause(test, "n1"))
    run(procs.spawn(test, "n1", ["d"], log_path="l", if_alive="spawn"))
    assert not procs.is_paused("n1")


def test_terminate_continues_a_paused_process_so_it_can_act_on_term() -> None:
    remote, procs = FakeRemote(), NodeProcesses()
    test = {"remote": remote}
    pid = run(procs.spawn(test, "n1", ["d"], log_path="l"))
    run(procs.pause(test, "n1"))
    run(procs.terminate(test, "n1"))
    assert remote.sent[-2:] == [(pid, "SIGTERM"), (pid, "SIGCONT")]
    assert not remote.procs[pid].alive and not procs.is_paused("n1")


def test_stop_with_grace_ends_by_term_and_kills_only_a_process_that_ignores_it() -> None:
    remote, procs = FakeRemote(), NodeProcesses()
    test = {"remote": remote}
    pid = run(procs.spawn(test, "n1", ["d"], log_path="l"))
    run(procs.stop(test, "n1", grace_s=1.0))
    assert not remote.procs[pid].alive and procs.pid("n1") is None
    remote.ignores_term = True
    pid = run(procs.spawn(test, "n1", ["d"], log_path="l"))
    run(procs.stop(test, "n1", grace_s=0.2))
    assert (pid, "SIGKILL") in remote.sent and not remote.procs[pid].alive
    run(procs.stop(test, "n1"))  # nothing tracked any more: a no-op


def test_stop_raises_the_callers_error_naming_node_and_pid_when_kill_does_not_take() -> None:
    class MyError(Exception):
        pass

    remote, procs = FakeRemote(unkillable=True), NodeProcesses("etcd member", error=MyError)
    test = {"remote": remote}
    pid = run(procs.spawn(test, "n1", ["d"], log_path="l"))
    with pytest.raises(MyError, match=rf"etcd member n1 \(pid {pid}\) still alive 0.1 s after SIGKILL"):
        run(procs.stop(test, "n1", gone_within_s=0.1))


def test_wait_until_returns_once_the_probe_is_satisfied() -> None:
    remote, procs = FakeRemote(), NodeProcesses()
    test = {"remote": remote}
    run(procs.spawn(test, "n1", ["d"], log_path="l"))
    seen = iter(["refused", "refused", None])

    async def probe() -> str | None:
        return next(seen)
    run(procs.wait_until(test, "n1", probe, "ready", timeout_s=5, log_path="l", interval_s=0.01))


def test_wait_until_names_the_node_what_was_seen_and_ends_with_the_log_tail() -> None:
    remote, procs = FakeRemote(), NodeProcesses("counter service")
    test = {"remote": remote}
    remote.logs["/n1/svc.log"] = "\n".join(f"line {i}" for i in range(30))
    run(procs.spawn(test, "n1", ["d"], log_path="/n1/svc.log"))

    async def never() -> str | None:
        return "connect: refused"
    with pytest.raises(NodeProcessError) as err:
        run(procs.wait_until(test, "n1", never, "accepting", timeout_s=0.05, log_path="/n1/svc.log",
                             where="10.0.0.1:7400", interval_s=0.01))
    msg = str(err.value)
    assert msg.startswith("counter service n1 (10.0.0.1:7400) not accepting after 0.05 s (last seen: connect: refused)")
    assert msg.endswith("line 29") and "line 10\n" in msg and "line 9\n" not in msg  # the last 20 lines


def test_wait_until_gives_up_at_once_when_the_process_exited() -> None:
    remote, procs = FakeRemote(), NodeProcesses("svc")
    test = {"remote": remote}
    pid = run(procs.spawn(test, "n1", ["d"], log_path="l"))
    remote.procs[pid].alive = False

    async def never() -> str | None:
        return "nothing"
    with pytest.raises(NodeProcessError, match=r"svc n1 exited \(last seen: nothing\); l ends with:\n\(empty\)"):
        run(procs.wait_until(test, "n1", never, "ready", timeout_s=60, log_path="l"))


def test_spawn_refuses_an_unknown_if_alive() -> None:
    with pytest.raises(ValueError, match="if_alive"):
        run(NodeProcesses().spawn({"remote": FakeRemote()}, "n1", ["d"], log_path="l", if_alive="replace"))
