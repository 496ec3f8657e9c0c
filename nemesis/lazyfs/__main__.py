"""``python -m nemesis.lazyfs mount|crash|status`` (see :mod:`nemesis.lazyfs.fs`)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nemesis.lazyfs",
                                 description="A FUSE passthrough that keeps writes in memory until fsync, so a "
                                             "crash can drop them.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("mount", help="mount BACKING on MOUNTPOINT (foreground; SIGTERM flushes and unmounts)")
    m.add_argument("backing")
    m.add_argument("mountpoint")
    m.add_argument("--control", required=True, help="unix socket path to answer crash/status on")
    m.add_argument("--debug", action="store_true", help="libfuse debug output")
    c = sub.add_parser("crash", help="drop every write not yet fsynced; prints one JSON object")
    c.add_argument("--control", required=True)
    c.add_argument("--torn", action="store_true", help="keep a seeded prefix of each file's pending writes")
    c.add_argument("--seed", type=int, default=0)
    s = sub.add_parser("status", help="what is pending; prints one JSON object")
    s.add_argument("--control", required=True)
    args = ap.parse_args(argv)
    if args.cmd == "mount":
        for what, path in (("backing directory", args.backing), ("mount point", args.mountpoint)):
            if not os.path.isdir(path):
                print(f"nemesis.lazyfs mount: {what} {path}: no such directory", file=sys.stderr)
                return 2
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
        from nemesis.lazyfs.fs import serve

        try:
            return serve(args.backing, args.mountpoint, args.control, debug=args.debug)
        except (ValueError, RuntimeError, OSError) as exc:
            print(f"nemesis.lazyfs mount: {exc}", file=sys.stderr)
            return 1
    from nemesis.lazyfs.fs import control_request

    request: dict[str, object] = {"cmd": args.cmd}
    if args.cmd == "crash" and args.torn:
        request["seed"] = args.seed
    try:
        out = control_request(args.control, request)
    except OSError as exc:
        print(f"nemesis.lazyfs {args.cmd}: no lazyfs answers on {args.control}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(out, sort_keys=True))
    return 0 if out.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
