"""``splitbrain check``: check history files for linearizability (the shell around checker.linearizable).

    splitbrain check --model cas-register [--initial 0] [--time-limit 10] [--json] [--html DIR] FILE...

Formats are detected from content (see checker.readers); a format implies defaults (e.g. Jepsen etcd
logs: initial nil and definite cas failures; knossos EDN: initial 0, failures dropped) that
``--initial`` / ``--fail`` override.  Exit codes: 0 every file valid; 1 some file invalid; 2 some file
unknown (time or memory budget) or bad input (unknown model, unreadable file) -- bad input wins.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from checker.history import HistoryError
from checker.linearizable import DEFAULT_MAX_CACHE_ENTRIES, Result, check
from checker.models import FAIL_POLICIES, MODELS, ModelError, make_model
from checker.readers import format_defaults, read_history


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="history files (jsonl, Jepsen log, EDN)")
    parser.add_argument("--model", required=True, metavar="MODEL", help=f"one of: {', '.join(MODELS)}")
    parser.add_argument("--initial", metavar="VALUE", help="initial state as JSON (else a plain string)")
    parser.add_argument("--fail", choices=FAIL_POLICIES, help="treat fail completions as dropped or definite")
    parser.add_argument("--time-limit", type=float, default=None, metavar="S", help="seconds per file")
    parser.add_argument("--max-cache-entries", type=int, default=DEFAULT_MAX_CACHE_ENTRIES, metavar="N")
    parser.add_argument("--no-partition", action="store_true", help="check the history as one object")
    parser.add_argument("--json", action="store_true", help="one JSON object per file on stdout")
    parser.add_argument("--html", metavar="DIR", help="write a timeline FILE.html per file into DIR")


def _parse_initial(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def run(args: argparse.Namespace) -> int:
    if args.model not in MODELS:
        print(f"splitbrain check: --model {args.model!r} is not a model; expected one of: {', '.join(MODELS)}",
              file=sys.stderr)
        return 2
    if args.time_limit is not None and args.time_limit <= 0:
        print(f"splitbrain check: --time-limit must be > 0 seconds, got {args.time_limit}", file=sys.stderr)
        return 2
    html_dir = Path(args.html) if args.html else None
    if html_dir is not None:
        html_dir.mkdir(parents=True, exist_ok=True)
    verdicts: list[bool | str] = []
    bad_input = False
    started = time.monotonic()
    for name in args.files:
        t0 = time.monotonic()
        try:
            hist = read_history(name)
            opts = format_defaults(hist.format, args.model)
            if args.initial is not None:
                opts["initial"] = _parse_initial(args.initial)
            if args.fail is not None:
                opts["fail_policy"] = args.fail
            model = make_model(args.model, **opts)
        except HistoryError as exc:  # the message names the file
            print(f"splitbrain check: {exc}", file=sys.stderr)
            bad_input = True
            continue
        except ModelError as exc:
            print(f"splitbrain check: {name}: {exc}", file=sys.stderr)
            bad_input = True
            continue
        if not hist.ops:  # vacuously linearizable, but proves nothing: most likely the wrong file
            print(f"splitbrain check: {name}: the history holds no operations; nothing to check", file=sys.stderr)
            bad_input = True
            continue
        result = check(hist.ops, model, time_limit_s=args.time_limit, clock=time.monotonic,
                       max_cache_entries=args.max_cache_entries, partition=not args.no_partition)
        seconds = time.monotonic() - t0
        if result.cause is not None and result.cause.startswith("error"):
            bad_input = True
        verdicts.append(result.valid)
        _report(name, hist.format, result, seconds, as_json=args.json)
        if html_dir is not None:
            from checker.linearizable import render_html  # the timeline's plotting libraries: only when asked

            render_html(result, html_dir / (Path(name).name + ".html"))
    total = time.monotonic() - started
    print(f"total: {len(args.files)} file(s) in {total:.3f} s", file=sys.stderr if args.json else sys.stdout)
    if bad_input:
        return 2
    if any(v is False for v in verdicts):
        return 1
    if any(v is not True for v in verdicts):
        return 2
    return 0


def _report(name: str, fmt: str, result: Result, seconds: float, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"file": name, "valid": result.valid, "seconds": round(seconds, 6),
                          "first_failure": result.first_failure(), "cause": result.cause, "format": fmt,
                          "steps": result.steps}, default=str))
        return
    verdict = "valid" if result.valid is True else "INVALID" if result.valid is False else f"unknown ({result.cause})"
    print(f"{name}: {verdict} in {seconds:.3f} s")
    if result.valid is False:
        print(f"  {result.describe()}")
