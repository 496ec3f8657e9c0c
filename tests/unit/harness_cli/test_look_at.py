"""The CLI's "look at:" line points at the most useful file a failing run has."""

from __future__ import annotations

from pathlib import Path

from harness.commands.test import look_at

RUN = Path("results/t/20261125T000000.000Z")


def test_a_failing_window_comes_first_then_the_timeline_then_results() -> None:
    assert look_at(RUN, ["latency.png", "timeline.html", "linear-ids.svg"]) == RUN / "linear-ids.svg"
    assert look_at(RUN, ["linear-b.svg", "linear-a.svg"]) == RUN / "linear-a.svg"
    assert look_at(RUN, ["latency.png", "timeline.html"]) == RUN / "timeline.html"
    assert look_at(RUN, []) == RUN / "results.json"
