"""Benchmark: the web UI's run list with 5,000 runs (issue 15: "stays fast with 5,000 runs").

Builds 5,000 synthetic run directories (``results/<test>/<ts>/`` with a ``results.json`` of realistic shape:
per-checker verdicts, anomaly counts and examples, fault accounting; a small history) in a temp dir, starts
the real server on port 0 and times ``GET /`` over HTTP: the first request (cold: every ``results.json``
parsed once), then warm requests (the index rescans with one ``stat`` per run and parses nothing), a filtered
request and ``/api/runs``.

Targets: warm list page p50 <= 0.5 s and cold first page <= 5 s at 5,000 runs (on the shared 2-vCPU machine).

Usage::

    python3 bench/web.py                # 5,000 runs, 10 warm requests
    python3 bench/web.py --runs 20000 --requests 5
    python3 bench/web.py --json         # one JSON object of figures and targets
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.web import make_server

TARGET_WARM_P50_S = 0.5
TARGET_COLD_S = 5.0
TESTS = ("queue", "broker-ids", "controller-register", "membership")
FAULTS = ("kill", "pause", "start-partition:isolate-master", "start-partition:random-halves", "bump-clock")


def results_doc(rng: random.Random, i: int) -> dict[str, Any]:
    """A results.json of the shape the runner writes (checkers, anomalies with examples, faults)."""
    bad = rng.random() < 0.2
    kinds = {"lost-write": rng.randint(1, 40), "duplicate": rng.randint(0, 3)} if bad else {}
    example = [{"type": "lost-write", "key": f"q{k}", "ops": [rng.randint(0, 9999), rng.randint(0, 9999)],
                "expected": "present", "observed": "absent", "explanation": f"value {k} was acknowledged but lost"}
               for k in range(3)] if bad else []
    checkers = {
        "queue/queue": {"valid": not bad, "anomaly_counts": kinds, "stats": {"acknowledged": rng.randint(100, 9000)},
                        "error": None, "anomaly_examples": {"lost-write": example} if bad else {}},
        "queue/perf": {"valid": True, "anomaly_counts": {}, "stats": {}, "error": None, "anomaly_examples": {}},
    }
    faults = {f: {"requested": 2, "effective": rng.randint(0, 2), "not_effective": 0, "reasons": {}}
              for f in rng.sample(FAULTS, 2)}
    return {"valid": not bad, "checkers": checkers, "anomaly_counts": kinds,
            "anomaly_examples": {"lost-write": example} if bad else {}, "seed": i, "duration_s": rng.uniform(10, 300),
            "crashed": None, "faults": faults, "counts": {"invoke": 5000, "ok": 4800, "fail": 150, "info": 50}}


def build(root: Path, runs: int, *, seed: int) -> None:
    rng = random.Random(seed)
    for i in range(runs):
        test = TESTS[i % len(TESTS)]
        day, sec = 1 + (i // 2000) % 28, i % 86400
        ts = f"202601{day:02d}T{sec // 3600:02d}{sec // 60 % 60:02d}{sec % 60:02d}.{i % 1000:03d}Z"
        d = root / test / ts
        d.mkdir(parents=True, exist_ok=True)
        (d / "results.json").write_text(json.dumps(results_doc(rng, i)))
        (d / "history.jsonl").write_text('{"index":0,"time":0,"type":"invoke","process":0,"f":"send"}\n')


def _get(port: int, path: str) -> tuple[float, int, int]:
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        body = r.read()
    finally:
        conn.close()
    return time.perf_counter() - start, r.status, len(body)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5000, help="run directories to build (default 5000)")
    ap.add_argument("--requests", type=int, default=10, help="warm requests to time (default 10)")
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--json", action="store_true", help="print one JSON object of figures and targets")
    args = ap.parse_args(argv)
    if args.runs < 1 or args.requests < 1:
        print("bench/web.py: --runs and --requests must be at least 1", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="splitbrain-bench-web-") as tmp:
        root = Path(tmp) / "results"
        t0 = time.perf_counter()
        build(root, args.runs, seed=args.seed)
        build_s = time.perf_counter() - t0
        srv = make_server(root, "127.0.0.1", 0)
        thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        try:
            port = int(srv.server_address[1])
            cold, status, size = _get(port, "/")
            if status != 200:
                print(f"bench/web.py: GET / answered {status}", file=sys.stderr)
                return 1
            warm = [_get(port, "/")[0] for _ in range(args.requests)]
            filtered = [_get(port, "/?verdict=invalid&anomaly=lost-write")[0] for _ in range(args.requests)]
            api = [_get(port, "/api/runs?limit=5000")[0] for _ in range(max(1, args.requests // 2))]
        finally:
            srv.shutdown()
            srv.server_close()
            thread.join(5)
    figures = {
        "runs": args.runs, "build_s": round(build_s, 2), "page_bytes": size,
        "cold_list_s": round(cold, 3),
        "warm_list_p50_s": round(statistics.median(warm), 3), "warm_list_max_s": round(max(warm), 3),
        "filtered_list_p50_s": round(statistics.median(filtered), 3),
        "api_runs_p50_s": round(statistics.median(api), 3),
    }
    targets = {"cold_list_s": TARGET_COLD_S, "warm_list_p50_s": TARGET_WARM_P50_S,
               "filtered_list_p50_s": TARGET_WARM_P50_S}
    if args.json:
        print(json.dumps({"figures": figures, "targets": targets}))
        return 0
    print(f"web run list with {args.runs} runs (built in {build_s:.1f} s; page {size} bytes)")
    for name, value in figures.items():
        if name in ("runs", "build_s", "page_bytes"):
            continue
        target = targets.get(name)
        verdict = "" if target is None else (f"target <= {target}  " + ("ok" if value <= target else "MISSED"))
        print(f"  {name:22} {value:8.3f} s  {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
