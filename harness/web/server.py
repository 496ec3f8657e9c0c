"""The web UI's HTTP shell (standard library ``http.server``, one thread per request).

Routes::

    GET /                       index of runs (query: name, verdict, since, until, workload, fault, anomaly, page)
    GET /api/runs               the same summaries as JSON (query as above, plus limit)
    GET /run/<test>/<ts>/       one run: crash and verdicts first, the failing window of a linearizability
                                failure, each anomaly with its ops, faults, plots, results.json, files
    GET /timeline/<test>/<ts>/  the timeline, drawn now from the history, results.json and node logs
                                (``#op=12,40`` selects ops)
    GET /live/<test>/<ts>/      the live view of a running test; /api/live/<test>/<ts> is its JSON
    GET /linear.svg?run=R&checker=C  that failing window alone, as an SVG file
    GET /compare?run=A&run=B    two runs side by side
    GET /files/<path>           a file under the results root (directories are listed)
    GET /zip/<test>/<ts>.zip    the run directory as a zip
    GET /dashboard/<path>       the ``--dashboard`` directory (index.html), when one was given

Every path goes through :func:`harness.web.index.confine` (under the results root, or under the dashboard
directory for ``/dashboard/``); a path outside is a 404.
"""

from __future__ import annotations

import json
import logging
import mimetypes
import os
import shutil
import tempfile
import time
import zipfile
from collections.abc import Collection, Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

import orjson

from checker.history import read_jsonl
from checker.timeline import anomaly_records, failure_windows, render_run_timeline, window_svg
from harness.store import read_results
from harness.web.index import Filters, RunIndex, confine, filter_runs
from harness.web.live import LiveTail, live_status
from harness.web.pages import PAGE_SIZE, page, pretty_json, render_index, render_listing, render_run
from harness.web.views import render_anomalies, render_compare, render_live, render_windows

__all__ = ["ResultsServer", "make_server"]

log = logging.getLogger("splitbrain.web")
_TEXT = {".jsonl", ".log", ".yaml", ".yml", ".txt", ".edn", ".out", ".err"}
_TAIL_BYTES = 64 * 1024
_TAIL_LINES = 60
_MAX_FILES = 1000
_MAX_HISTORY_BYTES = 512 * 1024 * 1024  # the timeline and the rebuilt window read the whole history


class ResultsServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], root: str | Path, dashboard: str | Path | None = None) -> None:
        self.index = RunIndex(root)
        self.dashboard = Path(dashboard).resolve() if dashboard is not None else None
        self.live = LiveTail()
        super().__init__(address, _Handler)


def make_server(root: str | Path, host: str = "127.0.0.1", port: int = 8080, *,
                dashboard: str | Path | None = None) -> ResultsServer:
    """A server over ``root`` (not started: call ``serve_forever``; ``port=0`` picks a free port);
    ``dashboard``: a directory served under ``/dashboard/`` (its ``index.html`` is linked from the index)."""
    return ResultsServer((host, port), root, dashboard)


def _op_texts(history: Path, wanted: Collection[int]) -> dict[int, str]:
    """History index -> the op's invoke/completion pair described, for the ops in ``wanted`` (one pass, which
    stops once every wanted op and its partner were seen)."""
    from checker.timeline import describe_pair

    out: dict[int, str] = {}
    if not wanted:
        return out
    need = set(wanted)
    open_: dict[Any, dict[str, Any]] = {}
    try:
        fh = history.open("rb")
    except OSError:
        return out
    with fh:
        for line in fh:
            try:
                d = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if not isinstance(d, dict) or "index" not in d:
                continue
            p = d.get("process")
            if d.get("type") == "invoke":
                open_[p] = d
                continue
            inv = open_.pop(p, None)
            pair = (inv if inv is not None else d, d)
            for i in (pair[0].get("index"), d.get("index")):
                if i in need:
                    out[i] = describe_pair(*pair)
            if len(out) >= len(need):
                break
    for i in need - out.keys():  # invoked, never completed (or not a client op)
        out[i] = "(not found in the history, or never completed)"
    return out


def _tail(path: Path) -> tuple[list[str], int]:
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            f.seek(max(0, size - _TAIL_BYTES))
            data = f.read()
    except OSError:
        return [], 0
    lines = data.decode("utf-8", errors="replace").splitlines()
    if size > _TAIL_BYTES and lines:
        lines = lines[1:]  # the first line is cut
    return lines[-_TAIL_LINES:], size


def _read(path: Path, limit: int = 1_000_000) -> str:
    try:
        with path.open("rb") as f:
            return f.read(limit).decode("utf-8", errors="replace")
    except OSError:
        return ""


class _Handler(BaseHTTPRequestHandler):
    server: ResultsServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    # -- responses -------------------------------------------------------------------------------

    def _send(self, status: int, body: bytes, ctype: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _html(self, text: str, status: int = 200) -> None:
        self._send(status, text.encode("utf-8"), "text/html; charset=utf-8")

    def _error(self, status: HTTPStatus, why: str) -> None:
        self._send(status, f"{status.value} {status.phrase}: {why}\n".encode(), "text/plain; charset=utf-8")

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        path = unquote(url.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        try:
            if path == "/":
                self._index(query)
            elif path == "/api/runs":
                self._api(query)
            elif path.startswith("/run/"):
                self._run(path[len("/run/"):].strip("/"))
            elif path.startswith("/timeline/"):
                self._timeline(path[len("/timeline/"):].strip("/"))
            elif path.startswith("/live/"):
                self._live(path[len("/live/"):].strip("/"))
            elif path.startswith("/api/live/"):
                self._live_api(path[len("/api/live/"):].strip("/"))
            elif path == "/linear.svg":
                self._linear(query.get("run", "").strip("/"), query.get("checker", ""))
            elif path == "/compare":
                self._compare(parse_qs(url.query).get("run", []))
            elif path == "/dashboard" or path.startswith("/dashboard/"):
                self._dashboard(path[len("/dashboard"):].strip("/"), path.endswith("/"))
            elif path.startswith("/files/") or path == "/files":
                self._file(path[len("/files"):].strip("/"))
            elif path.startswith("/zip/") and path.endswith(".zip"):
                self._zip(path[len("/zip/"):-len(".zip")].strip("/"))
            else:
                self._error(HTTPStatus.NOT_FOUND, "no such page")
        except (BrokenPipeError, ConnectionResetError):
            pass

    # -- pages -----------------------------------------------------------------------------------

    def _filtered(self, query: dict[str, str]) -> list[Any] | None:
        try:
            f = Filters(query.get("name", ""), query.get("verdict", ""), query.get("since", ""),
                        query.get("until", ""), query.get("workload", ""), query.get("fault", ""),
                        query.get("anomaly", ""))
        except ValueError as exc:
            self._error(HTTPStatus.BAD_REQUEST, str(exc))
            return None
        return filter_runs(self.server.index.runs(), f)

    def _index(self, query: dict[str, str]) -> None:
        runs = self._filtered(query)
        if runs is None:
            return
        pages = max(1, -(-len(runs) // PAGE_SIZE))
        try:
            page = min(max(1, int(query.get("page", "1"))), pages)
        except ValueError:
            page = 1
        shown = runs[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]
        q = {k: query.get(k, "") for k in ("name", "verdict", "since", "until", "workload", "fault", "anomaly")}
        self._html(render_index(shown, total=len(runs), counts=RunIndex.counts(runs), query=q, page=page,
                                pages=pages, dashboard=self.server.dashboard is not None))

    def _api(self, query: dict[str, str]) -> None:
        runs = self._filtered(query)
        if runs is None:
            return
        try:
            limit = int(query.get("limit", "1000"))
        except ValueError:
            limit = 1000
        body = [{"name": s.name, "ts": s.ts, "verdict": s.verdict, "anomaly_counts": dict(s.anomaly_counts),
                 "seed": s.seed, "duration_s": s.duration_s, "path": s.rel_path} for s in runs[:limit]]
        self._send(200, json.dumps({"total": len(runs), "runs": body}).encode(), "application/json")

    def _run_dir(self, rel: str) -> Path | None:
        p = confine(self.server.index.root, rel)
        if p is None or not p.is_dir() or p == self.server.index.root:
            self._error(HTTPStatus.NOT_FOUND, f"no run {rel!r}")
            return None
        return p

    def _run(self, rel: str) -> None:
        p = self._run_dir(rel)
        if p is None:
            return
        if not any((p / f).exists() for f in ("results.json", "test.yaml", "history.jsonl")):
            self._file(rel)  # a test directory (or any other): list it
            return
        summary = self.server.index.get(rel)
        assert summary is not None
        doc = read_results(p) or {}  # a run without results yet: the page shows what there is
        sections = self._debug_sections(rel, p, doc)
        tail, size = _tail(p / "history.jsonl")
        files: list[str] = []
        for dirpath, dirnames, filenames in os.walk(p):
            dirnames.sort()
            for fn in sorted(filenames):
                files.append(os.path.relpath(os.path.join(dirpath, fn), p))
            if len(files) >= _MAX_FILES:
                break
        self._html(render_run(
            summary, results_text=pretty_json(_read(p / "results.json")) or "(no results.json yet)",
            test_yaml=_read(p / "test.yaml", 100_000), history_tail=tail, history_ops=f" of {size} bytes",
            files=files[:_MAX_FILES], images=[i for i in ("latency.png", "rate.png") if (p / i).exists()],
            has_timeline=(p / "history.jsonl").exists(), sections=sections,
            running=live_status(p, now=time.time(), has_results=bool(doc)) == "running"))

    def _debug_sections(self, rel: str, p: Path, doc: Mapping[str, Any]) -> str:
        """The failing windows and the anomalies with their ops (reads the history only as far as needed)."""
        records = anomaly_records(doc)
        windows = failure_windows(doc, lambda: self._history(p) or [])
        wanted = {i for r in records for i in r.ops[:12]}
        texts = _op_texts(p / "history.jsonl", wanted)
        return render_windows(rel, windows) + render_anomalies(rel, records, texts)

    def _history(self, p: Path) -> list[Any] | None:
        h = p / "history.jsonl"
        try:
            if h.stat().st_size > _MAX_HISTORY_BYTES:
                return None
            return list(read_jsonl(h))
        except (OSError, ValueError):
            return None

    def _timeline(self, rel: str) -> None:
        p = self._run_dir(rel)
        if p is None:
            return
        history = self._history(p)
        if history is None:
            self._error(HTTPStatus.NOT_FOUND, f"run {rel!r} has no readable history.jsonl (or it is over "
                                              f"{_MAX_HISTORY_BYTES >> 20} MiB: open timeline.html instead)")
            return
        self._html(render_run_timeline(p, history, title=rel))

    def _live(self, rel: str) -> None:
        p = self._run_dir(rel)
        if p is None:
            return
        summary = self.server.index.get(rel)
        assert summary is not None
        status = live_status(p, now=time.time(), has_results=(p / "results.json").exists())
        self._html(page(f"live: {rel}", render_live(summary, status=status)))

    def _live_api(self, rel: str) -> None:
        p = self._run_dir(rel)
        if p is None:
            return
        snap = self.server.live.poll(p / "history.jsonl")
        has_results = (p / "results.json").exists()
        snap["status"] = live_status(p, now=time.time(), has_results=has_results)
        if has_results:
            summary = self.server.index.get(rel)
            snap["verdict"] = summary.verdict if summary is not None else "unknown"
        self._send(200, json.dumps(snap).encode(), "application/json", {"Cache-Control": "no-store"})

    def _linear(self, rel: str, checker: str) -> None:
        p = self._run_dir(rel)
        if p is None:
            return
        for name, window in failure_windows(read_results(p) or {}, lambda: self._history(p) or []):
            if name == checker:
                body = '<?xml version="1.0" encoding="utf-8"?>\n' + window_svg(window) + "\n"
                self._send(200, body.encode("utf-8"), "image/svg+xml; charset=utf-8")
                return
        self._error(HTTPStatus.NOT_FOUND, f"run {rel!r} has no linearizability failure of checker {checker!r}")

    def _compare(self, runs: list[str]) -> None:
        if len(runs) != 2:
            self._error(HTTPStatus.BAD_REQUEST, f"compare needs exactly two runs (?run=A&run=B), got {len(runs)}")
            return
        sides = []
        for rel in runs:
            rel = rel.strip("/")
            p = self._run_dir(rel)
            if p is None:
                return
            summary = self.server.index.get(rel)
            assert summary is not None
            sides.append((summary, read_results(p) or {}))
        self._html(page("compare", render_compare(sides[0], sides[1])))

    def _dashboard(self, rel: str, is_dir_url: bool) -> None:
        root = self.server.dashboard
        if root is None:
            self._error(HTTPStatus.NOT_FOUND, "no dashboard: start the server with --dashboard DIR")
            return
        target = confine(root, rel)
        if target is not None and target.is_dir():
            if not is_dir_url:  # relative links in index.html need the trailing slash
                self._send(301, b"", "text/plain", {"Location": "/dashboard/" + (quote(rel) + "/" if rel else "")})
                return
            target = target / "index.html"
        if target is None or not target.is_file():
            self._error(HTTPStatus.NOT_FOUND, f"no file {rel!r} in the dashboard")
            return
        self._send_file(target)

    def _file(self, rel: str) -> None:
        root = self.server.index.root
        p = confine(root, rel)
        if p is None or not p.exists():
            self._error(HTTPStatus.NOT_FOUND, f"no file {rel!r}")
            return
        if p.is_dir():
            entries = []
            for e in sorted(os.scandir(p), key=lambda e: e.name)[:_MAX_FILES]:
                try:
                    entries.append((e.name, e.is_dir(), 0 if e.is_dir() else e.stat().st_size))
                except OSError:
                    continue
            self._html(render_listing(str(p.relative_to(root)) if p != root else "", entries))
            return
        self._send_file(p)

    def _send_file(self, p: Path) -> None:
        ctype = mimetypes.guess_type(p.name)[0] or "application/octet-stream"
        if p.suffix in _TEXT or ctype == "application/json":
            ctype = "text/plain; charset=utf-8"
        elif ctype == "text/html":
            ctype = "text/html; charset=utf-8"
        try:
            size = p.stat().st_size
            f = p.open("rb")
        except OSError as exc:
            self._error(HTTPStatus.NOT_FOUND, str(exc))
            return
        with f:
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            if self.command != "HEAD":
                shutil.copyfileobj(f, self.wfile, 256 * 1024)

    def _zip(self, rel: str) -> None:
        p = self._run_dir(rel)
        if p is None:
            return
        arc_root = rel.replace("/", "-")
        with tempfile.SpooledTemporaryFile(max_size=32 * 1024 * 1024) as buf:
            with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
                for dirpath, dirnames, filenames in os.walk(p):
                    dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
                    for fn in filenames:
                        full = os.path.join(dirpath, fn)
                        if os.path.islink(full):
                            continue
                        z.write(full, f"{arc_root}/{os.path.relpath(full, p)}")
            size = buf.tell()
            buf.seek(0)
            self.send_response(200)
            self.send_header("Content-Type", "application/zip")
            self.send_header("Content-Length", str(size))
            self.send_header("Content-Disposition", f"attachment; filename=\"{arc_root}.zip\"")
            self.end_headers()
            if self.command != "HEAD":
                shutil.copyfileobj(buf, self.wfile, 256 * 1024)
