"""The progress display: one line within the width, plain status lines off a terminal, logs kept off the line."""

from __future__ import annotations

import io
import logging

from hypothesis import given
from hypothesis import strategies as st

from harness.progress import Progress, ProgressState


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def busy_state() -> ProgressState:
    s = ProgressState(phase="main", phase_limit_s=60, started=0.0, phase_started=0.0,
                      counts={"ok": 12345, "fail": 67, "info": 8}, phase_invokes=2400)
    s.faults = ["start-partition {'kind': 'isolate-master-from-slaves', 'targ", "kill ['b1-1', 'c3']"]
    return s


def test_line_is_whole_when_it_fits_and_cut_from_the_faults_first() -> None:
    s = busy_state()
    full = s.line(now=30.0)
    assert full == ("phase main  30.0/60s |   80.0 ops/s | ok 12345 fail 67 info 8 | faults: start-partition "
                    "{'kind': 'isolate-master-from-slaves', 'targ, kill ['b1-1', 'c3']")
    eighty = s.line(80, now=30.0)
    assert len(eighty) == 80 and eighty.startswith("phase main  30.0/60s |   80.0 ops/s | ok 12345 fail 67 info 8 |")
    assert s.line(52, now=30.0) == "phase main  30.0/60s |   80.0 ops/s | 12345/67/8"
    assert s.line(20, now=30.0) == "phase main  30.0/60…"


@given(width=st.integers(1, 300), ok=st.integers(0, 10**9), faults=st.lists(st.text(max_size=60), max_size=5),
       phase=st.text(min_size=1, max_size=30), elapsed=st.floats(0, 1e6))
def test_line_never_exceeds_the_width(width: int, ok: int, faults: list[str], phase: str, elapsed: float) -> None:
    s = ProgressState(phase=phase, started=0.0, phase_started=0.0, counts={"ok": ok, "fail": 0, "info": 0})
    s.faults = faults
    assert len(s.line(width, now=elapsed)) <= width


def test_plain_mode_prints_a_status_line_every_interval_and_at_phase_changes() -> None:
    out, clock = io.StringIO(), Clock()
    p = Progress(quiet=False, stream=out, is_terminal=False, clock=clock, status_every_s=10.0)
    assert p.mode == "plain"
    p.start()  # no running loop: the periodic timer is not armed, status lines come with ops
    p.phase("main", 60)
    for i in range(30):  # one op a second for 30 s: a status line at 10, 20 and 30 s
        clock.t += 1.0
        p.record("invoke", 0, "send", i)
        p.record("ok", 0, "send", i)
    p.stop()
    lines = out.getvalue().splitlines()
    assert lines[0] == "[splitbrain] phase main starts"
    status = lines[1:-1]
    assert len(status) == 3 and all(line.startswith("[splitbrain] phase main ") for line in status)
    assert " 10.0/60s" in status[0] and " 20.0/60s" in status[1] and " 30.0/60s" in status[2]
    assert lines[-1].startswith("[splitbrain] phase main  30.0/60s")


def test_quiet_mode_prints_only_phase_lines() -> None:
    out, clock = io.StringIO(), Clock()
    p = Progress(quiet=True, stream=out, clock=clock)
    p.start()
    p.phase("main", 5)
    for i in range(100):
        clock.t += 1.0
        p.record("ok", 0, "send", i)
    p.phase("heal")
    p.stop()
    assert [line.split(" ", 3)[1:3] for line in out.getvalue().splitlines()] == [
        ["phase", "main"], ["phase", "main"], ["phase", "heal"], ["phase", "heal"]]


def test_terminal_mode_prints_log_records_above_the_line_not_into_it() -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("LOG %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        p = Progress(quiet=False, stream=out, is_terminal=True)
        p.start()
        p.phase("main", 5)
        logging.getLogger("splitbrain.test").warning("a controller lost its leader")
        assert handler.stream is not out  # routed through the live console while it is live
        p.stop()
        assert handler.stream is out  # and given back after
    finally:
        root.removeHandler(handler)
    lines = out.getvalue().splitlines()
    assert "LOG a controller lost its leader" in lines  # a whole line of its own, not spliced into the status
