"""checker.timeline and the plot colours: real-time ops, fault bands, marks from results.json, node logs lined up
by time, the failing window, distinct colours.  Tables of exact cases plus hypothesis properties."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from checker.perf import fault_colour, op_colours
from checker.timeline import (
    TYPE_CODES,
    align_logs,
    anomaly_records,
    marks_by_op,
    origin_from_run_name,
    parse_log_time,
    render_timeline,
    timeline_data,
    window_from_history,
    window_svg,
)


def op(i: int, t_ms: int, ty: str, p: Any, f: str, value: Any = None) -> dict[str, Any]:
    return {"index": i, "time": t_ms * 1_000_000, "type": ty, "process": p, "f": f, "value": value}


HISTORY = [
    op(0, 0, "invoke", 0, "send", "a"), op(1, 5, "ok", 0, "send", "a"),
    op(2, 10, "invoke", "nemesis", "start-partition", {"kind": "isolate-master"}),
    op(3, 11, "info", "nemesis", "start-partition", "done"),
    op(4, 20, "invoke", 1, "send", "b"), op(5, 40, "info", 1, "send", "b"),
    op(6, 50, "invoke", "nemesis", "stop-partition"), op(7, 51, "info", "nemesis", "stop-partition"),
    op(8, 60, "invoke", 0, "poll", None), op(9, 70, "ok", 0, "poll", ["a"]),
    op(10, 75, "invoke", 2, "send", "c"),
]


def test_timeline_data_has_real_times_bands_and_marks() -> None:
    d = timeline_data(HISTORY, marks={5: ["queue: lost-write [q]: b was acknowledged"]})
    rows = {r[5]: r for r in d["ops"]}
    assert (rows[0][1], rows[0][2], rows[0][3]) == (0, 5_000_000, TYPE_CODES["ok"])
    assert rows[4][3] == TYPE_CODES["info"] and rows[4][6] == 5
    assert rows[10][2] == d["end_ns"] == 75_000_000 and rows[10][3] == TYPE_CODES[None]
    assert d["bands"] == [[10_000_000, 51_000_000, "start-partition isolate-master", fault_colour("start-partition"),
                           True]]
    assert d["marks"] == {"4": ["queue: lost-write [q]: b was acknowledged"]} and d["focus"] == 4
    assert d["processes"] == ["0", "1", "2", "nemesis"]


def test_page_embeds_data_safely() -> None:
    page = render_timeline([op(0, 0, "invoke", 0, "w", "</script><b>"), op(1, 1, "ok", 0, "w", 1)])
    assert "</script><b>" not in page and page.startswith("<!DOCTYPE html>")


@st.composite
def histories(draw: Any) -> list[dict[str, Any]]:
    n = draw(st.integers(0, 30))
    t = 0
    out: list[dict[str, Any]] = []
    open_: set[Any] = set()
    for _ in range(n):
        t += draw(st.integers(0, 5))
        p = draw(st.sampled_from([0, 1, 2, "nemesis"]))
        if p in open_:
            ty = draw(st.sampled_from(["ok", "fail", "info"]))
            open_.discard(p)
        else:
            ty = "invoke"
            open_.add(p)
        out.append(op(len(out), t, ty, p, draw(st.sampled_from(["send", "poll", "kill", "start"]))))
    return out


@settings(max_examples=80, deadline=None)
@given(histories(), st.sets(st.integers(0, 40)))
def test_every_op_appears_once_within_the_history_span(h: list[dict[str, Any]], marked: set[int]) -> None:
    d = timeline_data(h, marks={i: ["x"] for i in marked})
    invokes = [o["index"] for o in h if o["type"] == "invoke"]
    assert sorted(r[5] for r in d["ops"] if r[5] in invokes) == sorted(invokes)
    for r in d["ops"]:
        assert 0 <= r[1] <= r[2] <= d["end_ns"]
    for key in d["marks"]:
        row = next(r for r in d["ops"] if r[5] == int(key))
        assert row[5] in marked or row[6] in marked


def test_anomaly_records_from_examples_and_first_failure() -> None:
    doc = {"checkers": {
        "q": {"valid": False, "anomaly_counts": {"lost-write": 2},
              "anomaly_examples": {"lost-write": [{"type": "lost-write", "key": "t/0", "ops": [4, 5],
                                                   "explanation": "b was acknowledged but never read"}]}},
        "lin": {"valid": False, "anomaly_counts": {}, "stats": {
            "explanation": "NOT linearizable: ...",
            "first_failure": {"index": 9, "reason": "why", "partition": "'k'", "previous_ok": {"index": 1}}}},
        "broken": "not a mapping"}}
    recs = anomaly_records(doc)
    assert [(r.checker, r.type, r.ops) for r in recs] == [("q", "lost-write", (4, 5)),
                                                         ("lin", "nonlinearizable", (9, 1))]
    assert recs[1].explanation == "NOT linearizable: ..." and recs[1].key == "'k'"
    assert list(marks_by_op(recs)) == [4, 5, 9, 1]
    assert anomaly_records({"checkers": []}) == [] and anomaly_records({}) == []


def _ns(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, micro: int = 0) -> int:
    t = dt.datetime(year, month, day, hour, minute, second, micro, tzinfo=dt.UTC)
    return int(t.replace(microsecond=0).timestamp()) * 10**9 + t.microsecond * 1000


@pytest.mark.parametrize("line, expected", [
    ("2026-11-25 18:22:56,174 INFO x: y", _ns(2026, 11, 25, 18, 22, 56, 174000)),
    ("2026-11-25T18:22:56.5 x", _ns(2026, 11, 25, 18, 22, 56, 500000)),
    ("no stamp here", None), ("2026-13-40 99:00:00,000 bad", None),
], ids=["stamp", "iso-fraction", "none", "invalid-date"])
def test_parse_log_time(line: str, expected: int | None) -> None:
    assert parse_log_time(line, dt.UTC) == expected


def test_logs_line_up_with_the_history_clock() -> None:
    origin = origin_from_run_name("20261125T182255.607Z")
    assert origin == _ns(2026, 11, 25, 18, 22, 55, 607000)
    assert origin_from_run_name("20261125T182255.607Z-2") == origin and origin_from_run_name("latest") is None
    logs = align_logs({"c2": ["2026-11-25 18:22:56,000 INFO b", "  continuation"],
                       "c1": ["before any stamp", "2026-11-25 18:22:55,707 WARNING a"]}, origin_ns=origin, tz=dt.UTC)
    assert [(ln.time_ns, ln.node, ln.text) for ln in logs] == [
        (100_000_000, "c1", "2026-11-25 18:22:55,707 WARNING a"), (393_000_000, "c2", "2026-11-25 18:22:56,000 INFO b"),
        (393_000_000, "c2", "  continuation")]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(["a", "b"])), max_size=40), st.integers(1, 50))
def test_align_logs_is_sorted_and_bounded(stamps: list[tuple[int, str]], limit: int) -> None:
    base = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    texts: dict[str, list[str]] = {"a": [], "b": []}
    for ms, node in stamps:
        t = base + dt.timedelta(milliseconds=ms)
        texts[node].append(t.strftime("%Y-%m-%d %H:%M:%S,") + f"{t.microsecond // 1000:03d} INFO x")
    logs = align_logs(texts, origin_ns=_ns(2026, 1, 1), tz=dt.UTC, limit=limit)
    assert len(logs) == min(limit, len(stamps))
    assert [ln.time_ns for ln in logs] == sorted(ln.time_ns for ln in logs)


def test_window_from_history_keeps_the_partition_and_marks_the_failing_op() -> None:
    s1, s2 = {"broker_set": "s1"}, {"broker_set": "s2"}
    h = [op(0, 0, "invoke", 0, "next-id", s1), op(1, 2, "ok", 0, "next-id", s1), op(2, 3, "invoke", 1, "apply-id", s1),
         op(3, 4, "invoke", 2, "next-id", s2), op(4, 9, "ok", 1, "apply-id", s1), op(5, 10, "ok", 2, "next-id", s2)]
    ff = {"index": 4, "reason": "id 3 was applied but the next id is 1", "partition": "'s1'",
          "previous_ok": {"index": 1}, "linearized_prefix": 1}
    w = window_from_history(h, ff, explanation="NOT linearizable", model="id-allocator")
    assert w is not None and [c["index"] for c in w["calls"]] == [1, 4]
    assert w["calls"][w["failing"]]["index"] == 4 and w["calls"][w["previous_ok"]]["index"] == 1
    svg = window_svg(w)
    assert svg.startswith("<svg") and "id 3 was applied but the next id is 1" in svg and 'class="call failing"' in svg
    assert window_from_history(h, {"index": 99}) is None


@settings(max_examples=40, deadline=None)
@given(st.lists(st.fixed_dictionaries({"id": st.integers(0, 9), "process": st.sampled_from(["0", "1"]),
                                       "label": st.text(max_size=20), "start_ns": st.integers(0, 10**9),
                                       "end_ns": st.none() | st.integers(0, 10**9), "type": st.sampled_from(
                                           ["ok", "info", "fail", "never"])}), max_size=8),
       st.text(max_size=30))
def test_window_svg_never_raises_and_escapes(calls: list[dict[str, Any]], reason: str) -> None:
    svg = window_svg({"calls": calls, "reason": reason + "<&>", "states": ["<s>"], "failing": 0})
    assert svg.startswith("<svg") and svg.endswith("</svg>") and "<&>" not in svg and "<s>" not in svg


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=12), max_size=30))
def test_op_colours_are_distinct_while_spare_colours_last(fs: list[str]) -> None:
    colours = op_colours(fs)
    assert set(colours) == set(fs)
    if len(set(fs)) <= 12:
        assert len(set(colours.values())) == len(colours)


def test_results_json_round_trip_of_a_window() -> None:
    w = window_from_history(HISTORY, {"index": 5, "reason": "r"})
    assert w is not None and json.loads(json.dumps(w)) == w



@pytest.mark.parametrize("faults", [True, False], ids=["with-faults", "no-faults"])
def test_plots_keep_legends_outside_the_data_and_label_fault_bands(tmp_path: Any, faults: bool) -> None:
    from matplotlib.legend import Legend

    from checker.perf import latency_points, nemesis_windows, plot_latency, plot_rate

    h = HISTORY if faults else [o for o in HISTORY if o["process"] != "nemesis"]
    points, windows = latency_points(h), nemesis_windows(h)
    for plot in (plot_latency, plot_rate):
        fig = plot(points, windows, tmp_path / f"{plot.__name__}.png")
        ax = fig.axes[0]
        fig.canvas.draw()
        legends = [a for a in [ax.get_legend(), *ax.artists] if isinstance(a, Legend)]
        assert len(legends) == (2 if faults else 1)
        box = ax.get_window_extent()
        assert all(lg.get_window_extent().x0 >= box.x1 for lg in legends)  # to the right of the axes
        labels = {t.get_text().strip() for t in ax.texts}
        assert ("start-partition isolate-master" in labels) == faults
        assert (tmp_path / f"{plot.__name__}.png").read_bytes()[:4] == b"\x89PNG"


JSON = st.recursive(st.none() | st.booleans() | st.integers(-5, 50) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                        st.sampled_from(["checkers", "valid", "anomaly_counts", "anomaly_examples", "stats", "ops",
                                         "first_failure", "index", "previous_ok", "explanation", "failure_window",
                                         "lin", "q", "type", "calls"]), inner, max_size=5), max_leaves=25)


@settings(max_examples=150, deadline=None)
@given(JSON)
@example({"checkers": {"lin": {"valid": False, "stats": {"first_failure": {"index": "5", "previous_ok": [1]}}}}})
@example({"checkers": {"lin": {"valid": False, "stats": {"first_failure": {"index": 5, "partition": 3}}}}})
@example({"checkers": {"lin": {"valid": False, "first_failure": {"index": 1}, "failure_window": {"calls": [1, {}]}}}})
@example({"checkers": {"q": {"valid": False, "anomaly_counts": {"x": "many"}, "anomaly_examples": {"x": [1]}}}})
def test_malformed_results_never_break_the_pages(doc: Any) -> None:
    from checker.timeline import failure_windows
    from harness.web.pages import verdict_table

    if not isinstance(doc, dict):
        doc = {"checkers": doc}
    marks_by_op(anomaly_records(doc))
    for _, w in failure_windows(doc, lambda: HISTORY):
        window_svg(w)
    window_svg(doc)  # a stored window read from a file may be anything
    verdict_table(json.dumps(doc))
