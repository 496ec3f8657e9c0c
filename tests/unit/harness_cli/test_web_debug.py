"""The web UI's debugging views over real HTTP on a small results tree: the run page links each anomaly to its
ops and draws a linearizability failure's window, the timeline route, the live view, comparing two runs, the
dashboard directory (and its path confinement), and ``serve --dashboard`` refusing a bad directory."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.cli import main
from harness.web import make_server
from harness.web.live import LiveState, LiveTail


def _op(i: int, t_ms: int, ty: str, p: Any, f: str, value: Any = None) -> dict[str, Any]:
    return {"index": i, "time": t_ms * 1_000_000, "type": ty, "process": p, "f": f, "value": value}


LIN_HISTORY = [
    _op(0, 0, "invoke", 0, "next-id", {"broker_set": "s1"}), _op(1, 2, "ok", 0, "next-id", {"broker_set": "s1"}),
    _op(2, 3, "invoke", "nemesis", "start-partition", {"kind": "isolate-master"}),
    _op(3, 4, "info", "nemesis", "start-partition"),
    _op(4, 5, "invoke", 1, "apply-id", {"broker_set": "s1", "broker_id": 3}),
    _op(5, 9, "ok", 1, "apply-id", {"broker_set": "s1", "broker_id": 3, "applied": True}),
]
REASON = "ApplyBrokerId(3) was applied but a new broker set only takes its next id 1"
LIN_DOC = {"valid": False, "seed": 5, "crashed": None, "checkers": {"linearizable": {
    "valid": False, "anomaly_counts": {}, "error": None, "stats": {
        "model": "id-allocator", "explanation": f"NOT linearizable: cannot linearize apply-id ({REASON})",
        "first_failure": {"index": 5, "reason": REASON, "partition": "'s1'", "previous_ok": {"index": 1},
                          "linearized_prefix": 1}}}}}
QUEUE_DOC = {"valid": False, "seed": 6, "anomaly_counts": {"lost-write": 1}, "checkers": {"queue": {
    "valid": False, "anomaly_counts": {"lost-write": 1}, "anomaly_examples": {"lost-write": [
        {"type": "lost-write", "key": "q0", "ops": [0, 1], "explanation": "a was acknowledged but never read"}]}}},
    "faults": {"kill": {"requested": 1, "effective": 1}}}


def _write_run(root: Path, name: str, ts: str, doc: dict[str, Any] | None, history: list[dict[str, Any]]) -> Path:
    d = root / name / ts
    (d / "nodes" / "c1").mkdir(parents=True)
    (d / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in history))
    if doc is not None:
        (d / "results.json").write_text(json.dumps(doc))
    (d / "nodes" / "c1" / "node.log").write_text("2026-01-01 00:00:00,104 WARNING splitbrain.controller: lost lease\n")
    return d


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    _write_run(root, "ids", "20260101T000000.100Z", LIN_DOC, LIN_HISTORY)
    _write_run(root, "queue", "20260101T000001.000Z", QUEUE_DOC,
               [_op(0, 0, "invoke", 0, "send", "a"), _op(1, 1, "ok", 0, "send", "a")])
    _write_run(root, "queue", "20260101T000002.000Z", None, [_op(0, 0, "invoke", 0, "send", "a")])
    dash = tmp_path / "dash"
    (dash / "img").mkdir(parents=True)
    (dash / "index.html").write_text("<html>spark dashboard</html>")
    (dash / "img" / "a.png").write_bytes(b"\x89PNG")
    (tmp_path / "secret.txt").write_text("outside")
    return root


@pytest.fixture
def server(tree: Path, serve_results: Callable[..., tuple[str, int]]) -> tuple[str, int]:
    return serve_results(tree, dashboard=tree.parent / "dash")


def _get(addr: tuple[str, int], path: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection(*addr, timeout=10)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read().decode("utf-8", errors="replace")
    finally:
        conn.close()


def test_lin_run_page_explains_draws_the_window_and_links_ops(server: tuple[str, int]) -> None:
    status, page = _get(server, "/run/ids/20260101T000000.100Z/")
    assert status == 200
    assert "nonlinearizable" in page and REASON in page  # kind and explanation in the verdict table
    assert "anomalies: nonlinearizable=1" in page
    assert "<svg" in page and 'class="linear"' in page and 'class="call failing" data-index="5"' in page
    assert "href='/timeline/ids/20260101T000000.100Z/#op=5,1'" in page  # the anomaly's ops, in the timeline
    assert "#4..#5 p1 apply-id" in page  # each op described
    assert page.index("nonlinearizable") < page.index("results.json")


def test_queue_run_page_lists_the_lost_write_with_its_ops(server: tuple[str, int]) -> None:
    status, page = _get(server, "/run/queue/20260101T000001.000Z/")
    assert status == 200 and "lost-write" in page and "a was acknowledged but never read" in page
    assert "#op=0,1" in page and "#0..#1 p0 send" in page


def test_timeline_route_marks_anomaly_ops_and_lines_up_logs(server: tuple[str, int]) -> None:
    status, page = _get(server, "/timeline/ids/20260101T000000.100Z/")
    data = json.loads(page.split('<script id="data" type="application/json">')[1].split("</script>")[0])
    assert status == 200 and data["focus"] == 4 and "4" in data["marks"] and "0" in data["marks"]
    assert data["logs"] == [[4_000_000, 0, "2026-01-01 00:00:00,104 WARNING splitbrain.controller: lost lease"]]
    assert data["bands"][0][2] == "start-partition isolate-master"
    assert _get(server, "/timeline/nope/nope/")[0] == 404


def test_live_api_counts_a_running_history(server: tuple[str, int]) -> None:
    status, body = _get(server, "/api/live/queue/20260101T000002.000Z")
    d = json.loads(body)
    assert status == 200 and d["counts"]["invoke"] == 1 and d["status"] in ("running", "stalled")
    status, page = _get(server, "/live/queue/20260101T000002.000Z/")
    assert status == 200 and "/api/live/queue/20260101T000002.000Z" in page
    assert json.loads(_get(server, "/api/live/ids/20260101T000000.100Z")[1])["status"] == "finished"


def test_compare_two_runs(server: tuple[str, int]) -> None:
    status, page = _get(server, "/compare?run=ids/20260101T000000.100Z&run=queue/20260101T000001.000Z")
    assert status == 200 and "linearizable" in page and "lost-write" in page and "class='diff'" in page
    assert "1 of 1 took effect" in page and "not requested" in page
    assert _get(server, "/compare?run=ids/20260101T000000.100Z")[0] == 400
    assert _get(server, "/compare?run=../x&run=ids/20260101T000000.100Z")[0] == 404


def test_index_links_the_dashboard_and_offers_compare(server: tuple[str, int]) -> None:
    page = _get(server, "/")[1]
    assert "href='/dashboard/'" in page and "action='/compare'" in page and "/live/queue/20260101T000002.000Z/" in page


@pytest.mark.parametrize("path, status, needle", [
    ("/dashboard/", 200, "spark dashboard"), ("/dashboard/index.html", 200, "spark dashboard"),
    ("/dashboard/img/a.png", 200, ""), ("/dashboard", 301, ""), ("/dashboard/../secret.txt", 404, ""),
    ("/dashboard/%2e%2e/secret.txt", 404, ""), ("/dashboard/img/..%2f..%2fsecret.txt", 404, ""),
    ("/dashboard/missing.html", 404, ""),
], ids=["dir", "index", "asset", "no-slash", "dotdot", "encoded-dotdot", "nested-dotdot", "missing"])
def test_dashboard_is_served_and_confined(server: tuple[str, int], path: str, status: int, needle: str) -> None:
    got, body = _get(server, path)
    assert got == status and needle in body and "outside" not in body


@pytest.mark.parametrize("make, message", [
    (lambda t: str(t / "nope"), "does not exist"),
    (lambda t: str(t / "results" / "ids" / "20260101T000000.100Z" / "history.jsonl"), "is not a directory"),
    (lambda t: str(t / "results"), "has no index.html"),
], ids=["missing", "file", "no-index"])
def test_serve_refuses_a_bad_dashboard(tree: Path, capsys: pytest.CaptureFixture[str], make: Any,
                                       message: str) -> None:
    bad = make(tree.parent)
    assert main(["serve", "--results", str(tree), "--port", "0", "--dashboard", bad]) == 2
    out, err = capsys.readouterr()
    assert f"--dashboard {bad!r} {message}" in err and "Traceback" not in err and out == ""


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0, 1, "nemesis"]), st.sampled_from(["ok", "fail", "info"]),
                          st.sampled_from(["send", "kill", "start", "start-partition", "stop-partition"])),
                max_size=40))
def test_live_state_counts_every_client_completion(steps: list[tuple[Any, str, str]]) -> None:
    s = LiveState()
    ops: list[dict[str, Any]] = []
    for t, (p, ty, f) in enumerate(steps, 1):
        ops += [_op(len(ops), t, "invoke", p, f), _op(len(ops) + 1, t + 1, ty, p, f)]
    for o in ops:
        s.feed(o)
    snap = s.snapshot()
    clients = [o for o in ops if o["process"] != "nemesis"]
    assert sum(snap["counts"][k] for k in ("ok", "fail", "info")) == sum(o["type"] != "invoke" for o in clients)
    assert snap["counts"]["invoke"] == sum(o["type"] == "invoke" for o in clients)
    assert all(f["end_s"] is None or f["end_s"] >= f["start_s"] for f in snap["faults"])


def test_live_tail_reads_only_appended_lines(tmp_path: Path) -> None:
    h = tmp_path / "history.jsonl"
    h.write_text(json.dumps(_op(0, 0, "invoke", 0, "send")) + "\n" + '{"index": 1, "ti')
    tail = LiveTail()
    assert tail.poll(h)["counts"]["invoke"] == 1
    with h.open("a") as f:
        f.write('me": 1000000, "type": "ok", "process": 0, "f": "send"}\n')
    snap = tail.poll(h)
    assert snap["counts"] == {"invoke": 1, "ok": 1, "fail": 0, "info": 0} and snap["ops"] == 2


def test_a_stored_failure_window_is_drawn_with_its_states(tmp_path: Path) -> None:
    window = {"source": "checker", "model": "id-allocator", "reason": REASON, "failing": 1, "previous_ok": 0,
              "calls": [{"id": 0, "process": "0", "f": "next-id", "label": "next-id -> 1", "start_ns": 0,
                         "end_ns": 2_000_000, "type": "ok", "index": 1, "linearized": 1, "state": "(2, ())"},
                        {"id": 1, "process": "1", "f": "apply-id", "label": "apply-id 3", "start_ns": 5_000_000,
                         "end_ns": 9_000_000, "type": "ok", "index": 5, "linearized": None, "state": None}],
              "linearized_tail": [{"k": 1, "label": "next-id -> 1", "state": "(2, ())"}], "linearized_total": 1,
              "states": ["(2, ())"], "bands": []}
    doc = json.loads(json.dumps(LIN_DOC))
    doc["checkers"]["linearizable"]["stats"]["failure_window"] = window
    root = tmp_path / "results"
    _write_run(root, "ids", "20260101T000000.100Z", doc, LIN_HISTORY)
    srv = make_server(root, "127.0.0.1", 0)
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    try:
        status, page = _get(("127.0.0.1", int(srv.server_address[1])), "/run/ids/20260101T000000.100Z/")
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(5)
    assert status == 200 and "States the model could be in" in page and "#1 next-id -&gt; 1" in page
    assert "rebuilt from the history" not in page


def test_write_windows_writes_one_svg_per_linearizability_failure(tree: Path) -> None:
    from checker.timeline import write_windows

    run = tree / "ids" / "20260101T000000.100Z"
    written = write_windows(run, LIN_HISTORY)
    assert written == [run / "linear-linearizable.svg"]
    text = written[0].read_text()
    assert text.startswith("<?xml") and REASON in text and 'class="call failing" data-index="5"' in text
    assert write_windows(tree / "queue" / "20260101T000001.000Z", []) == []  # no linearizability failure


def test_the_failing_window_alone_as_svg(server: tuple[str, int]) -> None:
    status, body = _get(server, "/linear.svg?run=ids/20260101T000000.100Z&checker=linearizable")
    assert status == 200 and body.startswith("<?xml") and REASON in body
    assert _get(server, "/linear.svg?run=ids/20260101T000000.100Z&checker=nope")[0] == 404
    assert _get(server, "/linear.svg?run=../../etc&checker=linearizable")[0] == 404
    page = _get(server, "/run/ids/20260101T000000.100Z/")[1]
    assert "/linear.svg?run=ids%2F20260101T000000.100Z&amp;checker=linearizable" in page
