"""Recovery per fault window (spark_analysis.recovery): the per-run checker's figures, overlapping faults
included, and a differential check against checker.perf on random histories."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from checker.perf import availability, latency_points, nemesis_windows
from spark_analysis.faults import fault_windows
from spark_analysis.recovery import window_recovery

S = 1_000_000_000


class H:
    """A history under construction (times in seconds)."""

    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []

    def __repr__(self) -> str:
        return "H(" + ", ".join(f"{o['time'] / S:g} {o['process']} {o['type']} {o['f']}" for o in self.ops) + ")"

    def add(self, t_s: float, typ: str, process: Any, f: str) -> H:
        self.ops.append({"index": len(self.ops), "time": int(t_s * S), "type": typ, "process": process, "f": f,
                         "value": None})
        return self

    def client(self, t_s: float, done_s: float, typ: str, process: int = 0) -> H:
        return self.add(t_s, "invoke", process, "send").add(done_s, typ, process, "send")

    def nemesis(self, t_s: float, f: str) -> H:
        return self.add(t_s, "invoke", "nemesis", f).add(t_s + 0.01, "info", "nemesis", f)


def recovery(h: H) -> list[tuple[str, float | None, float | None]]:
    ops = sorted(h.ops, key=lambda o: o["time"])
    for i, o in enumerate(ops):
        o["index"] = i
    ws = fault_windows((o for o in ops if o.get("process") == "nemesis"), last_time_ns=ops[-1]["time"])
    return [(w.kind, None if r.unavailable_s is None else round(r.unavailable_s, 6),
             None if r.recovery_s is None else round(r.recovery_s, 6)) for w, r in zip(ws, window_recovery(ops, ws))]


def test_recovery_after_a_heal_is_found_even_when_the_next_fault_has_started() -> None:
    """The warehouse used to count recovery only until the next window started: overlapping faults (a
    packet fault starting before the clock fault's cluster recovered) read as "never recovered"."""
    h = (H().nemesis(10, "bump-clock").client(11, 12, "fail").nemesis(20, "reset-clock")
         .nemesis(25, "start-packet").client(26, 27, "fail").nemesis(30, "stop-packet")
         .client(40, 40.8, "ok"))
    got = recovery(h)
    assert got == [("clock", 2.0, 20.79), ("packet", 2.0, 10.79)]  # heals at 20.01 and 30.01, first ok at 40.8


def test_an_unhealed_window_has_no_recovery_and_no_failures_means_no_unavailability() -> None:
    h = H().client(1, 2, "ok").nemesis(5, "start-partition").client(6, 7, "ok")
    assert recovery(h) == [("partition", None, None)]


def test_no_windows_no_rows_and_ops_without_a_process_are_skipped() -> None:
    assert window_recovery([{"index": 0, "time": 1, "type": "ok", "f": "send"}], []) == []
    h = H().nemesis(1, "kill").client(2, 3, "fail").nemesis(4, "start").client(5, 6, "ok")
    h.ops.append({"index": 99, "time": 7 * S, "type": "ok", "f": "send"})  # no process: ignored, no KeyError
    assert recovery(h) == [("kill", 2.0, 1.99)]


KINDS = ("partition", "packet", "disk")


@st.composite
def histories(draw: st.DrawFn) -> H:
    """Fault windows of distinct kinds that may overlap, and client ops anywhere around them."""
    h = H()
    t = 0.0
    for kind in draw(st.lists(st.sampled_from(KINDS), max_size=3, unique=True)):
        start = t + draw(st.integers(1, 20))
        stop = start + draw(st.integers(1, 20))
        h.nemesis(start, f"start-{kind}").nemesis(stop, f"stop-{kind}")
        t = start  # the next fault may start before this one heals
    for p in range(draw(st.integers(1, 4))):
        at = 0.0
        for typ in draw(st.lists(st.sampled_from(["ok", "fail", "info"]), max_size=12)):
            at += draw(st.integers(1, 9)) + 0.001 * p
            h.client(at, at + draw(st.integers(0, 4)) + 0.5, typ, p)
    return h


@given(histories())
def test_the_same_figures_as_the_per_run_checker(h: H) -> None:
    """Wherever the two window finders agree (start-X/stop-X pairs), every figure equals results.json's."""
    ops = sorted(h.ops, key=lambda o: (o["time"], o["index"]))
    for i, o in enumerate(ops):
        o["index"] = i
    ws = fault_windows((o for o in ops if o.get("process") == "nemesis"), last_time_ns=ops[-1]["time"] if ops else 0)
    perf_ws = nemesis_windows(ops)
    assert [(w.start_ns / S, w.end_ns / S) for w in ws] == [(w.start_s, w.end_s) for w in perf_ws]
    want = [(a.last_failure_s, a.rto_s) for a in availability(latency_points(ops), perf_ws)]
    assert [(r.unavailable_s, r.recovery_s) for r in window_recovery(ops, ws)] == want
