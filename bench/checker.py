"""Benchmark: the linearizability checker against porcupine's published speed (see checker-data/README.md).

Figures (each the minimum of ``--repeat`` runs, wall seconds of ``check`` only; parsing is reported apart):

* ``etcd_check_s``: every etcd history in porcupine/jepsen/ (the folder holds 60 of porcupine's 102), target
  0.45 s (porcupine: 0.48-0.63 s for all 102).  ``etcd_parse_s``: reading those files.
* ``kv_c50_ok_s`` / ``kv_c50_bad_s``: generated 50-client, 2,000-op kv histories (checker.linearizable.gen,
  10 keys as in the c01/c10 files, ``--seeds`` seeds from ``--seed``; default 0-9), targets 0.150 s / 0.020 s
  for the worst seed (the per-seed figures follow).
* ``kv_c10_unpartitioned_s``: c10-ok plus c10-bad checked as one object each, target 2.0 s for the pair.

CPU seconds of the same runs are printed alongside: on a shared 2-vCPU machine, wall time inflates with load.

Usage::

    python3 bench/checker.py [--json] [--repeat 3] [--seed 0] [--seeds 10]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from checker.history import Op
from checker.linearizable import check
from checker.linearizable.gen import kv_history
from checker.models import make_model
from checker.readers import format_defaults, read_history

DATA = Path("/work/shared/checker-data")
TARGETS = {
    "etcd_check_s": 0.45, "kv_c50_ok_s": 0.150, "kv_c50_bad_s": 0.020, "kv_c10_unpartitioned_s": 2.0,
}


_CPU: dict[str, float] = {}


def _best(repeat: int, fn: Callable[[], Any], name: str = "") -> tuple[float, Any]:
    """Minimum wall time over ``repeat`` runs (the CPU time of the same runs is kept in _CPU[name])."""
    best, cpu, out = float("inf"), float("inf"), None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        best = min(best, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    if name:
        _CPU[name] = round(cpu, 4)
    return best, out


def bench(repeat: int, seed: int, seeds: int) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    files = sorted((DATA / "porcupine/jepsen").glob("*.log"))
    figures["etcd_files"] = len(files)
    figures["etcd_parse_s"], hists = _best(repeat, lambda: [read_history(f) for f in files])
    model = make_model("cas-register", **format_defaults("jepsen-log", "cas-register"))
    figures["etcd_check_s"], results = _best(repeat, lambda: [check(h.ops, model) for h in hists], "etcd_check_s")
    figures["etcd_verdicts"] = {"valid": sum(r.valid is True for r in results),
                                "invalid": sum(r.valid is False for r in results)}
    kv = make_model("kv")
    ok_times, bad_times, ok_cpu, bad_cpu = [], [], [], []
    for s in range(seed, seed + seeds):
        ok_h: list[Op] = kv_history(random.Random(s), clients=50, ops=2000)
        bad_h: list[Op] = kv_history(random.Random(s), clients=50, ops=2000, linearizable=False)
        t_ok, r_ok = _best(repeat, lambda h=ok_h: check(h, kv), "ok")  # type: ignore[misc]
        ok_cpu.append(_CPU["ok"])
        t_bad, r_bad = _best(repeat, lambda h=bad_h: check(h, kv), "bad")  # type: ignore[misc]
        bad_cpu.append(_CPU["bad"])
        if r_ok.valid is not True or r_bad.valid is not False:
            raise SystemExit(f"seed {s}: wrong verdicts ok={r_ok.valid} bad={r_bad.valid}")
        ok_times.append(t_ok)
        bad_times.append(t_bad)
    figures["kv_c50_ok_s"] = max(ok_times)
    figures["kv_c50_bad_s"] = max(bad_times)
    figures["kv_c50_ok_per_seed_s"] = [round(t, 4) for t in ok_times]
    figures["kv_c50_bad_per_seed_s"] = [round(t, 4) for t in bad_times]
    _CPU["kv_c50_ok_s"], _CPU["kv_c50_bad_s"] = max(ok_cpu), max(bad_cpu)
    pair = [read_history(DATA / f"porcupine/kv/c10-{k}.txt") for k in ("ok", "bad")]
    figures["kv_c10_unpartitioned_s"], res = _best(
        repeat, lambda: [check(h.ops, kv, partition=False) for h in pair], "kv_c10_unpartitioned_s")
    if [r.valid for r in res] != [True, False]:
        raise SystemExit(f"c10 unpartitioned: wrong verdicts {[r.valid for r in res]}")
    figures["cpu_s"] = {k: v for k, v in _CPU.items() if k in TARGETS}
    return figures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", type=int, default=10, help="number of generated kv c50 pairs (worst one reported)")
    args = ap.parse_args(argv)
    figures = bench(args.repeat, args.seed, args.seeds)
    if args.json:
        print(json.dumps({"figures": figures, "targets": TARGETS, "load_average": list(os.getloadavg())}))
        return 0
    for name, value in figures.items():
        target = TARGETS.get(name)
        if target is None:
            print(f"{name:28s} {value}")
        else:
            verdict = "ok" if value <= target else "MISSED"
            cpu = figures["cpu_s"].get(name)
            print(f"{name:28s} {value:8.4f} s   target <= {target} s   {verdict}   (cpu {cpu} s)")
    print(f"load average during run: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
