"""Benchmark: the queue checker on seeded synthetic histories of 1M and (with --full) 10M ops.

Targets: 10M history ops checked in <= 30 s wall time with <= 2 GB peak RSS (checker/queue docstring).

Usage::

    python3 bench/queue_checker.py                 # 1M ops, clean and with injected anomalies
    python3 bench/queue_checker.py --full          # also 10M ops
    python3 bench/queue_checker.py --json          # one JSON object on stdout
    python3 bench/queue_checker.py --sizes 200000 --seed 7

The generator simulates a correct queue (producers, consumers with cursors, info sends that did or did not
happen, a final drain) and, for the "injected" variant, a broker that loses acknowledged writes and
duplicates records at known rates; the run reports how many of each were injected and found.  Each check
runs in a fresh child process so peak RSS is the checker's own (the checker is one process: no children to
add).  The CPU seconds of the check are printed next to the wall time: on a shared 2-vCPU machine wall time
inflates with load.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TARGET_10M_S = 30.0
TARGET_RSS_MB = 2048.0
TARGET_OPS_PER_S = 10_000_000 / TARGET_10M_S

try:
    import orjson

    def _dumps(d: dict[str, Any]) -> bytes:
        return orjson.dumps(d)
except ImportError:  # pragma: no cover
    def _dumps(d: dict[str, Any]) -> bytes:
        return json.dumps(d, separators=(",", ":")).encode()


def generate(n_ops: int, *, seed: int, lose_rate: float = 0.0, dup_rate: float = 0.0, queues: int = 8,
             producers: int = 8, consumers: int = 4, batch: int = 10,
             injected: dict[str, int] | None = None) -> Iterator[dict[str, Any]]:
    """Yield about ``n_ops`` history ops of a simulated queue (see the module docstring)."""
    rng = random.Random(seed)
    logs: list[list[Any]] = [[] for _ in range(queues)]  # value or None (a lost record, skipped by reads)
    names = [f"t/bs{i % 3}/{i}" for i in range(queues)]
    cursors = {(c, q): 0 for c in range(consumers) for q in range(queues)}
    procs = list(range(producers + consumers))
    ident = {p: p for p in procs}  # worker -> current process id (a new id after an info op)
    next_pid = len(procs)
    open_: dict[int, tuple[str, int, Any]] = {}
    inj = injected if injected is not None else {}
    inj.setdefault("lost", 0)
    inj.setdefault("duplicated", 0)
    idx = 0
    value = 0
    drain_budget = n_ops // 20
    while idx < n_ops - drain_budget:
        w = procs[rng.randrange(len(procs))]
        p = ident[w]
        if w not in open_:
            q = rng.randrange(queues)
            if w < producers:
                value += 1
                open_[w] = ("send", q, value)
                yield {"index": idx, "time": idx * 1000, "type": "invoke", "process": p, "f": "send",
                       "value": {"queue": names[q], "value": value}}
            else:
                c = w - producers
                open_[w] = ("poll", q, c)
                yield {"index": idx, "time": idx * 1000, "type": "invoke", "process": p, "f": "poll",
                       "value": {"queue": names[q], "offset": cursors[(c, q)], "consumer": f"c{c}"}}
            idx += 1
            continue
        kind, q, arg = open_.pop(w)
        r = rng.random()
        if kind == "send":
            log = logs[q]
            if r < 0.9:
                off = len(log)
                if rng.random() < lose_rate:
                    log.append(None)
                    inj["lost"] += 1
                else:
                    log.append(arg)
                    if rng.random() < dup_rate:
                        log.append(arg)
                        inj["duplicated"] += 1
                out = {"type": "ok", "value": {"queue": names[q], "value": arg, "offset": off}}
            elif r < 0.95:
                out = {"type": "fail", "value": {"queue": names[q], "value": arg}}
            else:
                if rng.random() < 0.5:
                    log.append(arg)
                out = {"type": "info", "value": {"queue": names[q], "value": arg}}
                ident[w] = next_pid
                next_pid += 1
            yield {"index": idx, "time": idx * 1000, "process": p, "f": "send", **out}
        else:
            c = arg
            start = cursors[(c, q)]
            end = min(len(logs[q]), start + batch)
            recs = [[o, logs[q][o]] for o in range(start, end) if logs[q][o] is not None]
            cursors[(c, q)] = end
            yield {"index": idx, "time": idx * 1000, "type": "ok", "process": p, "f": "poll",
                   "value": {"queue": names[q], "records": recs}}
        idx += 1
    for w, (kind, q, arg) in list(open_.items()):  # complete everything still open as info
        yield {"index": idx, "time": idx * 1000, "type": "info", "process": ident[w], "f": kind,
               "value": {"queue": names[q], "value": arg} if kind == "send" else None}
        idx += 1
    p = next_pid
    for q in range(queues):  # final drain by a fresh process
        for start in range(0, len(logs[q]), 100):
            recs = [[o, logs[q][o]] for o in range(start, min(len(logs[q]), start + 100)) if logs[q][o] is not None]
            yield {"index": idx, "time": idx * 1000, "type": "invoke", "process": p, "f": "drain",
                   "value": {"queue": names[q], "offset": start, "consumer": "drain"}}
            yield {"index": idx + 1, "time": idx * 1000 + 500, "type": "ok", "process": p, "f": "drain",
                   "value": {"queue": names[q], "records": recs}}
            idx += 2


def write_history(path: Path, n_ops: int, **kw: Any) -> dict[str, int]:
    injected: dict[str, int] = {}
    n = 0
    with path.open("wb") as fh:
        for d in generate(n_ops, injected=injected, **kw):
            fh.write(_dumps(d) + b"\n")
            n += 1
    injected["ops"] = n
    return injected


def _child(path: str) -> None:
    from checker.queue import check_queue_file

    t0, c0 = time.perf_counter(), time.process_time()
    r = check_queue_file(path)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"wall_s": wall, "cpu_s": cpu, "peak_rss_mb": rss_mb, "valid": r.valid, "counts": r.counts,
                      "stats": {k: v for k, v in r.stats.items() if isinstance(v, int | bool)}}))


def run_one(n_ops: int, *, seed: int, injected: bool, tmp: Path) -> dict[str, Any]:
    path = tmp / f"h-{n_ops}-{int(injected)}.jsonl"
    rates = {"lose_rate": 0.001, "dup_rate": 0.001} if injected else {}
    t0 = time.perf_counter()
    inj = write_history(path, n_ops, seed=seed, **rates)
    gen_s = time.perf_counter() - t0
    out = subprocess.run([sys.executable, __file__, "--child", str(path)], check=True, capture_output=True,
                         text=True)
    res = json.loads(out.stdout)
    path.unlink()
    ops = inj.pop("ops")
    return {"ops": ops, "injected": inj if injected else {}, "generate_s": round(gen_s, 2),
            "wall_s": round(res["wall_s"], 2), "cpu_s": round(res.get("cpu_s", float("nan")), 2),
            "ops_per_s": round(ops / res["wall_s"]),
            "peak_rss_mb": round(res["peak_rss_mb"]), "valid": res["valid"], "found": res["counts"],
            "summary": res["stats"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="also run 10M ops")
    ap.add_argument("--sizes", type=int, nargs="*", help="explicit op counts (overrides the defaults)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args.child)
        return 0
    sizes = args.sizes or ([1_000_000, 10_000_000] if args.full else [1_000_000])
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-queue-") as d:
        for n in sizes:
            for injected in (False, True):
                runs.append({"variant": "injected" if injected else "clean",
                             **run_one(n, seed=args.seed, injected=injected, tmp=Path(d))})
    report = {"seed": args.seed, "targets": {"ops_per_s": round(TARGET_OPS_PER_S), "wall_s_at_10M": TARGET_10M_S,
                                              "peak_rss_mb": TARGET_RSS_MB}, "runs": runs}
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"queue checker benchmark (seed {args.seed}); targets: >= {TARGET_OPS_PER_S:,.0f} ops/s "
          f"(10M ops in <= {TARGET_10M_S:.0f} s), peak RSS <= {TARGET_RSS_MB:.0f} MB")
    for r in runs:
        ok = r["ops_per_s"] >= TARGET_OPS_PER_S and r["peak_rss_mb"] <= TARGET_RSS_MB
        print(f"  {r['variant']:8} {r['ops']:>11,} ops  {r['wall_s']:7.2f} s  {r['ops_per_s']:>10,} ops/s  "
              f"(cpu {r['cpu_s']:.2f} s)  peak {r['peak_rss_mb']:>5} MB  valid={r['valid']}  "
              f"{'MEETS' if ok else 'MISSES'} target")
        if r["injected"]:
            print(f"           injected {r['injected']}  found {r['found']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
