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
from harness.node_processes import FakeClock, FaketimeError, NodeProcessError, NodeProcesses


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
    files: dict[str, str] = field(default_factory=dict)
    library: str | None = "/usr/lib/x/faketime/libfaketimeMT.so.1"  # what `dpkg -L libfaketime` lists
    read_only: bool = False
    execs: list[list[str]] = field(default_factory=list)

    def node_dir(self, node: str) -> Any:
        from pathlib import PurePosixPath

        return PurePosixPath("nodes") / node

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
        argv = list(argv)
        self.execs.append(argv)
        if argv[:2] == ["tail", "-n"]:
            lines = self.logs.get(argv[3], "").splitlines()[-int(argv[2]):]
            return ExecResult(0, "\n".join(lines), "")
        if argv[:2] == ["dpkg", "-L"]:
            if self.library is None:
                return ExecResult(1, "", "dpkg-query: package 'libfaketime' is not installed")
            return ExecResult(0, f"/usr/lib/x/faketime\n{self.library}\n/usr/lib/x/faketime/libfaketime.so.1\n", "")
        if argv[:2] == ["sh", "-c"]:  # the atomic write: sh -c SCRIPT sh LINE PATH
            if self.read_only:
                return ExecResult(1, "", "sh: 1: cannot create: Read-only file system")
            self.files[argv[5]] = argv[4] + "\n"
            return ExecResult(0, "", "")
        if argv[0] == "grep":  # grep -c libfaketime /proc/PID/maps
            pid = int(argv[3].split("/")[2])
            env = self.procs[pid].env or {}
            return ExecResult(0, "3\n", "") if "LD_PRELOAD" in env else ExecResult(1, "0\n", "")
        if argv[0] == "cat":
            return ExecResult(0, self.files[argv[1]], "") if argv[1] in self.files else ExecResult(1, "", "no file")
        if argv[:2] == ["rm", "-f"]:
            return ExecResult(0, "", "")
        raise AssertionError(f"unexpected exec {argv}")


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


# -- clocks under libfaketime ------------------------------------------------------------------------------------


def shown(clock: FakeClock, real: float) -> float:
    """What libfaketime shows at ``real`` for the clock's line written at ``written``: real + offset + (rate - 1) *
    (real - start), the formula of its README (section "Changing the 'x' modifier during run-time")."""
    offset_text, rate_text = clock.line(real).split()
    return real + float(offset_text) + (float(rate_text[1:]) - 1) * (real - clock.start)


def test_a_fake_clock_steps_with_an_offset_and_runs_at_a_new_rate_from_the_moment_it_is_set() -> None:
    c = FakeClock(start=1000.0, anchor=1000.0)
    assert c.line(1010.0) == "+0.000000 x1" and c.skew_s(1010.0) == 0
    bumped = c.set(1010.0, offset_s=60)
    assert bumped.skew_s(1020.0) == 60 and shown(bumped, 1020.0) == 1080.0
    fast = bumped.set(1100.0, rate=2.0)  # 100 s after start: the line compensates, no jump of 100 s
    assert fast.skew_s(1100.0) == pytest.approx(60)
    assert fast.line(1100.0) == "-40.000000 x2"
    assert 1100.0 + float(fast.line(1100.0).split()[0]) + 1 * (1100.0 - 1000.0) == pytest.approx(1160.0)
    assert fast.skew_s(1110.0) == pytest.approx(70)  # 10 s later the clock is 10 s further ahead
    slow = fast.set(1110.0, rate=0.5)
    assert slow.skew_s(1110.0) == pytest.approx(70) and slow.skew_s(1130.0) == pytest.approx(60)
    back = slow.set(1120.0, offset_s=0.0)  # a step keeps the drift the rates have built up (+10 s, then -5 s)
    assert back.skew_s(1120.0) == pytest.approx(5)
    assert back.reset(1140.0).skew_s(1150.0) == 0 and back.reset(1140.0).line(1150.0) == "+0.000000 x1"
    with pytest.raises(ValueError, match="rate must be > 0"):
        c.set(1010.0, rate=0)


@pytest.mark.parametrize("now", [1100.0, 1234.5])
def test_the_line_makes_libfaketime_show_the_modelled_skew(now: float) -> None:
    c = FakeClock(start=1000.0, anchor=1000.0).set(1050.0, offset_s=-3.5).set(1060.0, rate=1.25)
    for real in (now, now + 7.0):
        assert shown(c, real) - real == pytest.approx(c.skew_s(real))


def test_faketime_spawn_preloads_the_library_with_a_control_file_at_real_time() -> None:
    remote, procs = FakeRemote(), NodeProcesses("svc", faketime=True)
    test = {"remote": remote}
    pid = run(procs.spawn(test, "n1", ["d"], log_path="l", env={"PYTHONPATH": "."}))
    env = remote.procs[pid].env or {}
    assert env["LD_PRELOAD"] == remote.library and env["PYTHONPATH"] == "."
    assert env["FAKETIME_TIMESTAMP_FILE"] == "nodes/n1/faketime.rc" and env["FAKETIME_NO_CACHE"] == "1"
    assert env["FAKETIME_DONT_FAKE_MONOTONIC"] == "1"
    assert remote.files["nodes/n1/faketime.rc"] == "+0 x1\n"
    got = run(procs.set_fake_clock(test, "n1", offset_ms=60_000))
    assert got["offset_ms"] == 60_000 and got["rate"] == 1 and got["skew_ms"] == pytest.approx(60_000)
    assert remote.files["nodes/n1/faketime.rc"] == "+60.000000 x1\n" == got["line"] + "\n"
    assert run(procs.fake_clock(test, "n1"))["line"] == "+60.000000 x1"
    run(procs.set_fake_clock(test, "n1", reset=True))
    assert remote.files["nodes/n1/faketime.rc"] == "+0.000000 x1\n"
    run(procs.stop(test, "n1"))
    assert ["rm", "-f", f"/dev/shm/faketime_shm_{pid}", f"/dev/shm/sem.faketime_sem_{pid}"] in remote.execs
    with pytest.raises(FaketimeError, match="svc n1 is not running"):
        run(procs.set_fake_clock(test, "n1", offset_ms=1))


def test_a_restarted_process_starts_at_real_time_again() -> None:
    remote, procs = FakeRemote(), NodeProcesses("svc", faketime=True)
    test = {"remote": remote}
    run(procs.spawn(test, "n1", ["d"], log_path="l"))
    run(procs.set_fake_clock(test, "n1", offset_ms=5_000, rate=3))
    run(procs.stop(test, "n1"))
    run(procs.spawn(test, "n1", ["d"], log_path="l"))
    assert remote.files["nodes/n1/faketime.rc"] == "+0 x1\n"
    assert run(procs.fake_clock(test, "n1"))["skew_ms"] == 0


def test_a_clock_change_that_cannot_take_effect_says_why() -> None:
    remote = FakeRemote(library=None)
    procs = NodeProcesses("svc", faketime=True)
    test = {"remote": remote}
    pid = run(procs.spawn(test, "n1", ["d"], log_path="l"))
    assert "LD_PRELOAD" not in (remote.procs[pid].env or {})  # started anyway, without libfaketime
    with pytest.raises(FaketimeError, match=r"svc n1 \(pid \d+\) runs without libfaketime: libfaketimeMT.so.1 not "
                                            r"found on n1 .*scripts/setup.sh installs libfaketime"):
        run(procs.set_fake_clock(test, "n1", offset_ms=1))

    remote = FakeRemote()
    procs = NodeProcesses("svc", faketime=True)
    test = {"remote": remote}
    run(procs.spawn(test, "n1", ["d"], log_path="l"))
    remote.read_only = True
    with pytest.raises(FaketimeError, match=r"svc n1: clock not changed: cannot write nodes/n1/faketime\.rc on n1"):
        run(procs.set_fake_clock(test, "n1", offset_ms=1))
    assert run(procs.fake_clock(test, "n1"))["offset_ms"] == 0  # the model did not move either

    remote = FakeRemote()
    procs = NodeProcesses("svc", faketime=True)
    test = {"remote": remote}
    pid = run(procs.spawn(test, "n1", ["d"], log_path="l"))
    remote.procs[pid].env = {}  # e.g. a setuid program, for which the loader ignores LD_PRELOAD
    with pytest.raises(FaketimeError, match=rf"has no libfaketime in /proc/{pid}/maps"):
        run(procs.set_fake_clock(test, "n1", offset_ms=1))

    with pytest.raises(FaketimeError, match="does not offer clock-faketime"):
        plain = NodeProcesses("svc")
        run(plain.spawn(test, "n2", ["d"], log_path="l"))
        run(plain.set_fake_clock(test, "n2", offset_ms=1))
