"""Benchmark: the queue checker on seeded synthetic histories of 1M and (with --full) 10M ops.

Targets: 10M history ops checked in <= 15 s wall time with <= 1 GB peak RSS (issue 19; the first target, issue
10's, was 30 s and 2 GB).

Usage::

    python3 bench/queue_checker.py                 # 1M ops, clean and with injected anomalies
    python3 bench/queue_checker.py --full          # also 10M ops
    python3 bench/queue_checker.py --json          # one JSON object on stdout ("figures", "targets", "runs")
    python3 bench/queue_checker.py --sizes 200000 --seed 7 --workers 2
    python3 bench/queue_checker.py --engine python --no-baseline   # the Python pass alone

The generator simulates a correct queue (producers, consumers with cursors, info sends that did or did not
happen, a final drain) and, for the "injected" variant, a broker that loses acknowledged writes and
duplicates records at known rates; the run reports how many of each were injected and found.

Each history is checked twice, each time in a fresh child process: "primary" is ``check_queue_file`` as
callers get it (the compiled pass of native/queuescan when it is installed, one process with a reader
thread; else the Python pass with its default workers), "baseline" the Python pass with its default workers
(one per CPU for files over 64 MB; every worker decodes the whole file and checks a share of the queues).
Each run names the engine that ran.  Peak RSS is the child's own plus its largest worker's times the number of
workers beyond the first (exact for 2 workers, the count on a 2-CPU machine); CPU seconds include the workers
and threads.  On a shared 2-vCPU machine wall time inflates with load (each run prints the 1-minute load
average before and after it), so CPU seconds are the fairer figure there.
"""

from __future__ import annotations

import argparse
import json
import os
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

TARGET_10M_S = 15.0
TARGET_RSS_MB = 1024.0
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


def _child(path: str, workers: int | None, engine: str) -> None:
    from checker.queue import check_queue_file
    from checker.queue._parallel import auto_workers

    n = auto_workers(path) if workers is None else workers
    t0, c0 = time.perf_counter(), time.process_time()
    r = check_queue_file(path, workers=n, engine=engine)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = 1 if r.stats["engine"] == "native" else n
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    rss_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss + kids.ru_maxrss * (n - 1)) / 1024
    print(json.dumps({"workers": n, "engine": r.stats["engine"], "wall_s": wall,
                      "cpu_s": cpu + kids.ru_utime + kids.ru_stime, "peak_rss_mb": rss_mb, "valid": r.valid,
                      "counts": r.counts, "stats": {k: v for k, v in r.stats.items() if isinstance(v, int | bool)}}))


def _check(path: Path, workers: int | None, engine: str) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", str(path), "--engine", engine]
    cmd += [] if workers is None else ["--workers", str(workers)]
    load0 = os.getloadavg()[0]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    res: dict[str, Any] = json.loads(out.stdout)
    res["load_1m"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
    return res


def run_one(n_ops: int, *, seed: int, injected: bool, tmp: Path, workers: int | None, engine: str,
            baseline: bool) -> list[dict[str, Any]]:
    """Generate one history; check it with ``engine`` and, as the baseline, with the Python pass."""
    path = tmp / f"h-{n_ops}-{int(injected)}.jsonl"
    rates = {"lose_rate": 0.001, "dup_rate": 0.001} if injected else {}
    t0 = time.perf_counter()
    inj = write_history(path, n_ops, seed=seed, **rates)
    gen_s = time.perf_counter() - t0
    ops = inj.pop("ops")
    runs = []
    for mode, eng in (("primary", engine), ("baseline", "python")):
        if mode == "baseline" and (engine == "python" or not baseline):
            continue  # the primary run already was the Python pass, or no baseline was asked for
        res = _check(path, workers, eng)
        runs.append({"variant": "injected" if injected else "clean", "mode": mode, "engine": res["engine"],
                     "workers": res["workers"], "size": n_ops, "ops": ops, "injected": inj if injected else {},
                     "generate_s": round(gen_s, 2), "wall_s": round(res["wall_s"], 2), "cpu_s": round(res["cpu_s"], 2),
                     "ops_per_s": round(ops / res["wall_s"]), "peak_rss_mb": round(res["peak_rss_mb"]),
                     "load_1m": res["load_1m"], "valid": res["valid"], "found": res["counts"],
                     "summary": res["stats"]})
    path.unlink()
    return runs


def figures_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Headline figures: the worst run of each mode (primary, one-process baseline) at the largest size."""
    top = max(r["size"] for r in runs)  # the requested size: the variants' op counts differ a little
    figs: dict[str, Any] = {}
    for mode, suffix in (("primary", ""), ("baseline", "_python")):
        mine = [r for r in runs if r["mode"] == mode]
        at_top = [r for r in mine if r["size"] == top]
        if not at_top:
            continue
        figs[f"ops_per_s{suffix}"] = min(r["ops_per_s"] for r in at_top)
        figs[f"peak_rss_mb{suffix}"] = max(r["peak_rss_mb"] for r in mine)
        figs[f"workers{suffix}"] = max(r["workers"] for r in at_top)
        figs[f"engine{suffix}"] = sorted({r["engine"] for r in at_top})
        if top >= 10_000_000:
            figs[f"wall_s_at_10M{suffix}"] = max(r["wall_s"] for r in at_top)
            figs[f"cpu_s_at_10M{suffix}"] = max(r["cpu_s"] for r in at_top)
    return figs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="also run 10M ops")
    ap.add_argument("--sizes", type=int, nargs="*", help="explicit op counts (overrides the defaults)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--workers", type=int, help="processes per Python check (default: check_queue_file's choice)")
    ap.add_argument("--engine", choices=("auto", "python"), default="auto",
                    help="the primary run's engine (default: auto, the compiled pass when installed)")
    ap.add_argument("--no-baseline", action="store_true", help="skip the Python baseline run of each history")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.workers is not None and args.workers < 1:
        ap.error(f"--workers must be >= 1, got {args.workers}")
    if args.child:
        _child(args.child, args.workers, args.engine)
        return 0
    sizes = args.sizes or ([1_000_000, 10_000_000] if args.full else [1_000_000])
    if any(n <= 0 for n in sizes):
        ap.error(f"--sizes must be positive op counts, got {sizes}")
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-queue-") as d:
        for n in sizes:
            for injected in (False, True):
                runs.extend(run_one(n, seed=args.seed, injected=injected, tmp=Path(d), workers=args.workers,
                                    engine=args.engine, baseline=not args.no_baseline))
    targets = {"ops_per_s": round(TARGET_OPS_PER_S), "wall_s_at_10M": TARGET_10M_S, "peak_rss_mb": TARGET_RSS_MB}
    report = {"seed": args.seed, "figures": figures_of(runs), "targets": targets, "runs": runs}
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"queue checker benchmark (seed {args.seed}); targets: >= {TARGET_OPS_PER_S:,.0f} ops/s "
          f"(10M ops in <= {TARGET_10M_S:.0f} s), peak RSS <= {TARGET_RSS_MB:.0f} MB")
    for r in runs:
        ok = r["ops_per_s"] >= TARGET_OPS_PER_S and r["peak_rss_mb"] <= TARGET_RSS_MB
        engine = "native" if r["engine"] == "native" else "python"
        print(f"  {r['variant']:8} {r['ops']:>11,} ops  {engine:6} {r['workers']} proc  {r['wall_s']:7.2f} s  "
              f"{r['ops_per_s']:>10,} ops/s  (cpu {r['cpu_s']:.2f} s)  peak {r['peak_rss_mb']:>5} MB  "
              f"load {r['load_1m'][0]:.1f}->{r['load_1m'][1]:.1f}  valid={r['valid']}  "
              f"{'MEETS' if ok else 'MISSES'} target  {r['mode']}")
        if r["engine"] not in ("native", "python"):
            print(f"           engine: {r['engine']}")
        if r["injected"] and r["mode"] == "primary":
            print(f"           injected {r['injected']}  found {r['found']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
