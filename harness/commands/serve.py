"""``splitbrain serve [--results DIR] [--host 127.0.0.1] [--port 8080]``: the web UI over a results directory.

See :mod:`harness.web` for the pages.  Binds to 127.0.0.1 by default (results may hold logs and tokens; pass
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


def run(args: argparse.Namespace) -> int:
    from harness.web import make_server

    if not Path(args.results).is_dir():
        print(f"splitbrain serve: results directory {args.results!r} does not exist (run a test first, "
              "or pass --results DIR)", file=sys.stderr)
        return EXIT_UNKNOWN
    try:
        server = make_server(args.results, args.host, args.port)
    except OSError as exc:
        print(f"splitbrain serve: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return EXIT_UNKNOWN
    host, port = str(server.server_address[0]), int(server.server_address[1])
    print(f"serving {Path(args.results).resolve()} at http://{host}:{port}/ (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
