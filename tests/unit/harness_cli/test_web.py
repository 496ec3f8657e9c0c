"""The web UI on a fake results tree: summary cache keyed by mtime, filters, path confinement, real HTTP."""

from __future__ import annotations

import http.client
import io
import json
import os
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.web import Filters, RunIndex, confine, filter_runs


def _make_run(root: Path, name: str, ts: str, doc: dict[str, Any] | None, history_lines: int = 3) -> Path:
    d = root / name / ts
    (d / "nodes" / "c1").mkdir(parents=True)
    if doc is not None:
        (d / "results.json").write_text(json.dumps(doc))
    (d / "history.jsonl").write_text("".join(json.dumps({"index": i, "f": "read"}) + "\n"
                                             for i in range(history_lines)))
    (d / "test.yaml").write_text(f"name: {name}\n")
    (d / "nodes" / "c1" / "node.log").write_text("hello from c1\n")
    return d


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    _make_run(root, "queue", "20260101T000000.000Z", {"valid": True, "seed": 1, "duration_s": 2.0})
    _make_run(root, "queue", "20260102T000000.000Z", {"valid": False, "seed": 2, "anomaly_counts": {"lost": 3}})
    _make_run(root, "ids", "20260103T000000.000Z", {"valid": "unknown", "seed": 3})
    _make_run(root, "ids", "20260104T000000.000Z", None, history_lines=5000)
    os.symlink("ids/20260104T000000.000Z", root / "latest")
    (root / ".clusters").mkdir()
    (root / "secret.txt").parent.parent.joinpath("secret.txt").write_text("outside")
    return root


def test_index_lists_runs_newest_first_and_skips_links_and_dotdirs(tree: Path) -> None:
    runs = RunIndex(tree).runs()
    assert [(s.rel_path, s.verdict) for s in runs] == [
        ("ids/20260104T000000.000Z", "incomplete"), ("ids/20260103T000000.000Z", "unknown"),
        ("queue/20260102T000000.000Z", "invalid"), ("queue/20260101T000000.000Z", "valid")]


def test_cache_rereads_only_changed_results(tree: Path) -> None:
    idx = RunIndex(tree)
    idx.runs()
    assert idx.reads == 3
    idx.runs()
    assert idx.reads == 3  # nothing changed: no results.json parsed
    target = tree / "queue" / "20260101T000000.000Z" / "results.json"
    target.write_text(json.dumps({"valid": False, "seed": 1, "anomaly_counts": {"duplicate": 1}}))
    os.utime(target, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))
    runs = {s.rel_path: s for s in idx.runs()}
    assert idx.reads == 4
    assert runs["queue/20260101T000000.000Z"].verdict == "invalid"
    (tree / "ids" / "20260104T000000.000Z" / "results.json").write_text(json.dumps({"valid": True}))
    assert {s.rel_path: s.verdict for s in idx.runs()}["ids/20260104T000000.000Z"] == "valid"


@pytest.mark.parametrize("filters, expected", [
    (Filters(), 4), (Filters(name="QUE"), 2), (Filters(verdict="invalid"), 1), (Filters(since="2026-01-03"), 2),
    (Filters(until="2026-01-01"), 1), (Filters(name="ids", verdict="valid"), 0),
], ids=["none", "name-substring", "verdict", "since", "until", "combined"])
def test_filters(tree: Path, filters: Filters, expected: int) -> None:
    assert len(filter_runs(RunIndex(tree).runs(), filters)) == expected


@pytest.mark.parametrize("bad", [{"verdict": "great"}, {"since": "yesterday"}, {"until": "2026-1-1"}])
def test_bad_filters_are_rejected(bad: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        Filters(**bad)


@pytest.mark.parametrize("rel, inside", [
    ("queue/20260101T000000.000Z/results.json", True), ("", True), ("/queue", True),
    ("../secret.txt", False), ("queue/../../secret.txt", False), ("/etc/passwd", True), ("a\x00b", False),
], ids=["file", "root", "leading-slash", "dotdot", "nested-dotdot", "absolute-is-relative", "nul"])
def test_confine(tree: Path, rel: str, inside: bool) -> None:
    root = tree.resolve()
    p = confine(root, rel)
    assert (p is not None) == inside
    if p is not None:
        assert p == root or p.is_relative_to(root)


def test_confine_refuses_symlinks_pointing_out(tree: Path) -> None:
    os.symlink(tree.parent / "secret.txt", tree / "queue" / "escape")
    assert confine(tree.resolve(), "queue/escape") is None


# -- over real HTTP ---------------------------------------------------------------------------------


@pytest.fixture
def server(tree: Path, serve_results: Callable[..., tuple[str, int]]) -> tuple[str, int]:
    return serve_results(tree)


def _get(addr: tuple[str, int], path: str) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection(*addr, timeout=10)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def test_http_index_run_page_files_and_zip(server: tuple[str, int]) -> None:
    status, headers, body = _get(server, "/")
    assert status == 200 and "text/html" in headers["content-type"]
    page = body.decode()
    assert page.count("<tr style=") == 4 and "lost=3" in page and "#f6c3c3" in page
    status, _, body = _get(server, "/?verdict=invalid")
    assert body.decode().count("<tr style=") == 1
    assert _get(server, "/?since=bad")[0] == 400
    status, _, body = _get(server, "/api/runs?name=queue")
    assert status == 200 and json.loads(body)["total"] == 2
    status, _, body = _get(server, "/run/ids/20260104T000000.000Z/")
    page = body.decode()
    assert status == 200 and "incomplete" in page and '&quot;index&quot;: 4999' in page and "nodes/c1/node.log" in page
    status, _, body = _get(server, "/run/queue/")  # a test directory is listed, not shown as a run
    assert status == 200 and "20260102T000000.000Z/" in body.decode()
    status, headers, body = _get(server, "/files/queue/20260101T000000.000Z/nodes/c1/node.log")
    assert status == 200 and body == b"hello from c1\n" and headers["content-type"].startswith("text/plain")
    status, headers, body = _get(server, "/zip/queue/20260102T000000.000Z.zip")
    assert status == 200 and headers["content-type"] == "application/zip"
    names = zipfile.ZipFile(io.BytesIO(body)).namelist()
    assert "queue-20260102T000000.000Z/results.json" in names
    assert "queue-20260102T000000.000Z/nodes/c1/node.log" in names


@pytest.mark.parametrize("path", [
    "/files/../secret.txt", "/files/%2e%2e/secret.txt", "/files/queue/..%2f..%2fsecret.txt", "/run/../",
    "/zip/../results.zip", "/run/nope/nope/", "/nothing",
])
def test_http_refuses_paths_outside_results(server: tuple[str, int], path: str) -> None:
    status, _, body = _get(server, path)
    assert status == 404 and b"outside" not in body


def test_index_reads_each_run_once_with_thousands_of_runs(tmp_path: Path) -> None:
    root = tmp_path / "many"
    for i in range(2000):
        d = root / f"t{i % 7}" / f"2026{1 + i % 12:02d}01T{i:06d}.000Z"
        d.mkdir(parents=True)
        (d / "results.json").write_text(json.dumps({"valid": i % 3 != 0, "seed": i}))
    idx = RunIndex(root)
    assert len(idx.runs()) == 2000
    assert idx.reads == 2000
    assert len(idx.runs()) == 2000
    assert idx.reads == 2000  # the second listing reads no results.json again (how it stays fast; no timing here)


def test_serve_command_prints_its_url_and_stops_on_ctrl_c(tree: Path) -> None:
    import signal
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[3]
    # SIGINT as a terminal delivers it: a suite started as a background job ignores SIGINT, and the child would
    # inherit that (a test must not depend on the dispositions it inherited)
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "serve", "--results", str(tree), "--port", "0"],
                            cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "http://127.0.0.1:" in line, line
        port = int(line.split("http://127.0.0.1:")[1].split("/")[0])
        status, _, body = _get(("127.0.0.1", port), "/")
        assert status == 200 and b"20260102T000000.000Z" in body
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_summary_lists_failing_checkers_effective_faults_and_workloads_and_filters_use_them() -> None:
    from harness.runs import summarize_results

    doc = {"valid": False, "anomaly_counts": {"lost-write": 2},
           "checkers": {"queue/queue": {"valid": False, "anomaly_counts": {"lost-write": 2}},
                        "queue/perf": {"valid": True}, "broker-ids/restarts": {"valid": "unknown"}},
           "faults": {"kill": {"requested": 2, "effective": 2},
                      "crash-at:raft.before_apply": {"requested": 1, "effective": 0, "not_effective": 1}}}
    s = summarize_results(doc, name="t", ts="20260105T000000.000Z")
    assert s.failing == ("queue/queue", "broker-ids/restarts") and s.faults == ("kill",)
    assert s.workloads == ("broker-ids", "queue")
    keep = [Filters(workload="queue"), Filters(fault="kill"), Filters(anomaly="lost-write")]
    drop = [Filters(workload="membership"), Filters(fault="raft.before_apply"), Filters(anomaly="duplicate")]
    assert all(f.keep(s) for f in keep) and not any(f.keep(s) for f in drop)
