"""The web UI's HTTP shell (standard library ``http.server``, one thread per request).

Routes::

    GET /                    index of runs (query: name, verdict, since, until, page), coloured by verdict
    GET /api/runs            the same summaries as JSON (query as above, plus limit)
    GET /run/<test>/<ts>/    one run: plots, results.json, test.yaml, history tail, files
    GET /files/<path>        a file under the results root (directories are listed)
    GET /zip/<test>/<ts>.zip the run directory as a zip

Every path goes through :func:`harness.web.index.confine`; a path outside the results root is a 404.
"""

from __future__ import annotations

import json
import logging
import mimetypes
import os
import shutil
import tempfile
import zipfile
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from harness.web.index import Filters, RunIndex, confine, filter_runs
from harness.web.pages import PAGE_SIZE, pretty_json, render_index, render_listing, render_run

__all__ = ["ResultsServer", "make_server"]

log = logging.getLogger("splitbrain.web")
_TEXT = {".jsonl", ".log", ".yaml", ".yml", ".txt", ".edn", ".out", ".err"}
_TAIL_BYTES = 64 * 1024
_TAIL_LINES = 60
_MAX_FILES = 1000


class ResultsServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], root: str | Path) -> None:
        self.index = RunIndex(root)
        super().__init__(address, _Handler)


def make_server(root: str | Path, host: str = "127.0.0.1", port: int = 8080) -> ResultsServer:
    """A server over ``root`` (not started: call ``serve_forever``; ``port=0`` picks a free port)."""
    return ResultsServer((host, port), root)


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
        q = {k: query.get(k, "") for k in ("name", "verdict", "since", "until")}
        self._html(render_index(shown, total=len(runs), counts=RunIndex.counts(runs), query=q, page=page,
                                pages=pages))

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
            has_timeline=(p / "timeline.html").exists()))

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
