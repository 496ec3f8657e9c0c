"""The progress display: one line within the width, plain status lines off a terminal, logs kept off the line."""

from __future__ import annotations

import io
import logging
import re
import sys

from hypothesis import given
from hypothesis import strategies as st

from harness.progress import Progress, ProgressState, fit
from nemesis import grudge as gr
from nemesis.words import Fault, Phrase, step

NODES = ["b1-1", "b1-2", "b1-3", "c1", "c2", "c3"]


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def busy_state() -> ProgressState:
    s = ProgressState(phase="main", phase_limit_s=60, started=0.0, phase_started=0.0,
                      counts={"ok": 12345, "fail": 67, "info": 8}, phase_invokes=2400)
    cut = {"kind": "isolate-master-from-slaves", "grudge": gr.describe(gr.isolate_from("b1-1", ["b1-2", "b1-3"]))}
    for record in [("invoke", "start-partition", {"kind": "isolate-master-from-slaves"}),
                   ("info", "start-partition", cut), ("info", "kill", ["b1-2"]), ("info", "kill", ["c3"])]:
        s.effect = step(s.effect, *record)
    return s


def test_line_is_whole_when_it_fits_and_cut_from_the_faults_first() -> None:
    s = busy_state()
    full = s.line(now=30.0)
    assert full == ("phase main  30.0/60s |   80.0 ops/s | ok 12345 fail 67 info 8 | faults: cut b1-1 from b1-2, "
                    "b1-3 | kill b1-2, c3")
    assert s.line(100, now=30.0) == ("phase main  30.0/60s |   80.0 ops/s | ok 12345 fail 67 info 8 | faults: cut "
                                     "b1-1 from b1-2, b1-3 …")  # the dangling "|" goes with the cut group
    assert s.line(82, now=30.0) == ("phase main  30.0/60s |   80.0 ops/s | ok 12345 fail 67 info 8 | faults: cut "
                                    "b1-1 …")
    assert s.line(81, now=30.0).endswith("| faults: cut …")
    assert s.line(52, now=30.0) == "phase main  30.0/60s |   80.0 ops/s | 12345/67/8"
    assert s.line(20, now=30.0) == "phase main …"  # never "30.0/6…": a word is whole or not there
    assert ProgressState(started=0.0, phase_started=0.0).line(now=1.0).endswith("| faults: none")


nodes = st.sampled_from([*NODES, "controllers:one"])
faults = st.lists(st.builds(lambda f, verb, ns, rest: Fault(f, Phrase(verb, tuple(ns), rest)),
                            st.sampled_from(["kill", "start-partition", "crash-at"]),
                            st.sampled_from(["kill", "isolate", "cut", "clock +60s", "crash", "net delay+loss"]),
                            st.lists(nodes, max_size=6), st.sampled_from(["", " at raft.before_apply", " from c1"])),
                  max_size=8)


@given(width=st.integers(1, 300), ok=st.integers(0, 10**9), effect=faults,
       phase=st.text(alphabet=st.characters(blacklist_characters="{}[]'", blacklist_categories=("Cs",)), min_size=1,
                     max_size=30),
       elapsed=st.floats(0, 1e6))
def test_any_faults_render_within_the_width_in_words(width: int, ok: int, effect: list[Fault], phase: str,
                                                     elapsed: float) -> None:
    s = ProgressState(phase=phase, started=0.0, phase_started=0.0, counts={"ok": ok, "fail": 0, "info": 0},
                      effect=tuple(effect))
    line = s.line(width, now=elapsed)
    assert len(line) <= width
    assert not set("{}[]'") & set(line)


@given(text=st.text(alphabet=st.sampled_from("ab |,-…\n"), max_size=80), width=st.integers(0, 90))
def test_fit_cuts_only_between_words(text: str, width: int) -> None:
    one = " ".join(text.splitlines())
    out = fit(text, width)
    assert len(out) <= width
    if len(one) <= width:
        assert out == one
    elif out not in ("", "…"):
        kept = out.removesuffix(" …")
        assert out.endswith(" …") and one.startswith(kept) and one[len(kept)] == " "  # the cut is at a space
        assert kept.split()[-1] != "|"


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


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_terminal_mode_prints_stderr_writes_above_the_line_not_into_it() -> None:
    out = _Tty()
    p = Progress(quiet=False, stream=out)
    assert p.mode == "terminal"
    p.start()
    p.phase("main", 5)
    p.record("info", "nemesis", "kill", ["b1-2"])
    print("c1: exit codes {'c1': -9} -- a node's log tail", file=sys.stderr)  # e.g. LocalQuorum's
    p.stop()
    shown = [re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", line.split("\r")[-1]) for line in out.getvalue().splitlines()]
    lines = [line for line in shown if line]  # what the terminal shows: each line's last redraw
    assert "c1: exit codes {'c1': -9} -- a node's log tail" in lines  # a line of its own, above the status
    assert lines[-1].startswith("phase main") and "{" not in lines[-1]
