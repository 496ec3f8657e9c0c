"""``splitbrain serve [--results DIR] [--host 127.0.0.1] [--port 8080] [--dashboard DIR]``: the web UI over a
results directory.

See :mod:`harness.web` for the pages.  ``--dashboard DIR`` also serves a directory holding an ``index.html``
(the Spark dashboard, ``splitbrain spark``) under ``/dashboard/``, linked from the run list; only files inside
DIR are served.  Binds to 127.0.0.1 by default (results may hold logs and tokens; pass
``--host 0.0.0.0`` to share on a trusted network).  ``--port 0`` picks a free port; the URL is printed.
Stops on Ctrl-C (exit 0).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.store import EXIT_UNKNOWN

__all__ = ["configure", "run"]


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results", default="results", help="results root directory (default: results)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    from harness.cli import port_number

    p.add_argument("--port", type=port_number, default=8080, help="port 0..65535 (default 8080; 0 = any free port)")
    p.add_argument("--dashboard", metavar="DIR", default=None,
                   help="also serve DIR (a directory with index.html, e.g. the Spark dashboard) under /dashboard/")


def dashboard_error(path: str) -> str | None:
    """Why ``--dashboard path`` cannot be served, or None if it can."""
    p = Path(path)
    if not p.exists():
        return f"splitbrain serve: --dashboard {path!r} does not exist (expected a directory holding index.html)"
    if not p.is_dir():
        return f"splitbrain serve: --dashboard {path!r} is not a directory (expected a directory holding index.html)"
    if not (p / "index.html").is_file():
        return (f"splitbrain serve: --dashboard {path!r} has no index.html (write the dashboard first, e.g. "
                "`splitbrain spark`, or pass the directory that holds its index.html)")
    return None


def run(args: argparse.Namespace) -> int:
    from harness.web import make_server

    if not Path(args.results).is_dir():
        print(f"splitbrain serve: results directory {args.results!r} does not exist (run a test first, "
              "or pass --results DIR)", file=sys.stderr)
        return EXIT_UNKNOWN
    dashboard = getattr(args, "dashboard", None)
    if dashboard is not None:
        why = dashboard_error(dashboard)
        if why is not None:
            print(why, file=sys.stderr)
            return EXIT_UNKNOWN
    try:
        server = make_server(args.results, args.host, args.port, dashboard=dashboard)
    except OSError as exc:
        print(f"splitbrain serve: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return EXIT_UNKNOWN
    host, port = str(server.server_address[0]), int(server.server_address[1])
    extra = f" and the dashboard {Path(dashboard).resolve()} at /dashboard/" if dashboard is not None else ""
    print(f"serving {Path(args.results).resolve()}{extra} at http://{host}:{port}/ (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
