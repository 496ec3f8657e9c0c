"""Benchmark: the linearizability checker against porcupine's published speed (see checker-data/README.md).

Figures (each the minimum of ``--repeat`` runs, wall seconds of ``check`` only; parsing is reported apart):

* ``etcd_check_s``: every etcd history in porcupine/jepsen/ (the folder holds 60 of porcupine's 102), target
  0.45 s (porcupine: 0.48-0.63 s for all 102).  ``etcd_parse_s``: reading those files.
* ``kv_c50_ok_s`` / ``kv_c50_bad_s``: generated 50-client, 2,000-op kv histories (checker.linearizable.gen,
  10 keys as in the c01/c10 files, ``--seeds`` seeds from ``--seed``; default 0-9), targets 0.150 s / 0.020 s
  for the worst seed (the per-seed figures follow).
* ``kv_c10_unpartitioned_s``: c10-ok plus c10-bad checked as one object each, target 2.0 s for the pair.

Rows of issue 19 (seed ``--seed``; the per-op rows the minimum of ``--repeat`` runs, the others one run; targets
are porcupine's times from the issue, per op):

* ``kv_c5_{10k,100k}_us_per_op``: generated kv, 5 clients, 10 keys; targets 1.9 / 3.8 us per op (porcupine
  0.019 s / 0.38 s).  ``register_c5_{10k,100k}_us_per_op``: generated cas-register (values 0-4), 5 clients;
  target 19.2 us per op (porcupine 1.92 s at 100k).  ``kv_c50_100_per_key_100k_us_per_op``: 50 clients,
  1,000 keys of about 100 ops each; target 2.5 us per op (porcupine 0.25 s).
* ``register_c20_10k_s`` / ``register_c50_1k_s``: 20 and 50 clients, values 0-4, 60 s limit; porcupine runs
  out of memory on the first and the second hit our 1M cache-entry cap in the issue, so the target is a
  verdict (not unknown); the verdict is printed beside.
* ``family_{kv,register}_{worst,p99}_s``: ``small_alphabet_history`` (one key, tiny alphabet, a quarter of the
  writes info), 2-5 clients, 60-300 ops, ``--family-seeds`` seeds each (default 1,000 per model), 1 s limit per
  history; targets: worst <= 1 s (the issue's limit) with no unknown verdict, p99 <= 1 ms (porcupine answers
  such histories in about 1 ms).  ``family_*_native_share``: the share the compiled search decided.

Rows of issue 30 (``--only-cli`` runs only these): the real ``splitbrain check`` command as a subprocess, end to
end (interpreter start, imports, reading, search; the minimum of ``--repeat`` runs), as a multiple of orjson's
parse-only time of the same file measured in the same run (read the bytes, ``orjson.loads`` every line, keep
nothing; the minimum of ``--repeat`` runs):

* ``cli_kv_c5_100k_x_orjson``: generated kv, 5 clients, 100k ops (200k lines) as history.jsonl; target 4x.
  ``cli_register_c5_100k_x_orjson``: generated cas-register, 5 clients, 100k ops; target 10x.  The ``_json``
  rows are the same with ``--json``.
* ``cli_etcd_s``: one ``check`` of every etcd log in porcupine/jepsen/; target: no slower than
  ``cli_etcd_baseline_s``, the same command run from ``--baseline-tree DIR`` (another checkout, e.g. the main
  branch's) in the same run, interleaved; without that flag the row has no target.  With it the kv and register
  rows are also run there (``*_baseline_x_orjson``).

Beside each ``_x_orjson`` row, ``(cpu ...)`` is the same ratio of CPU seconds (the command's user + system time
over orjson's), which moves less with the load of a shared machine than the wall ratio the targets are set on.

``native_core`` says whether the compiled witness search (``scripts/build_native.sh``) is installed, and
``*_engine`` which search decided each per-op row.  CPU seconds of the same runs are printed alongside: on a
shared 2-vCPU machine, wall time inflates with load.

Usage::

    python3 bench/checker.py [--json] [--repeat 3] [--seed 0] [--seeds 10] [--family-seeds 1000] [--only-issue19]
                             [--only-cli] [--baseline-tree DIR]
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from checker.history import Op, write_jsonl
from checker.linearizable import NATIVE_AVAILABLE, check
from checker.linearizable.gen import kv_history, register_history, small_alphabet_history
from checker.models import make_model
from checker.readers import format_defaults, read_history

# The shared data folder sits beside the checkout (``../shared/checker-data``); SPLITBRAIN_CHECKER_DATA points
# elsewhere (the same rule as tests/unit/checker_lin/test_recorded.py).
DATA = Path(os.environ.get("SPLITBRAIN_CHECKER_DATA",
                           Path(__file__).resolve().parents[1].parent / "shared" / "checker-data"))
TARGETS: dict[str, Any] = {
    "etcd_check_s": 0.45, "kv_c50_ok_s": 0.150, "kv_c50_bad_s": 0.020, "kv_c10_unpartitioned_s": 2.0,
    "kv_c5_10k_us_per_op": 1.9, "kv_c5_100k_us_per_op": 3.8,
    "register_c5_10k_us_per_op": 19.2, "register_c5_100k_us_per_op": 19.2,
    "kv_c50_100_per_key_100k_us_per_op": 2.5,
    "register_c20_10k_s": "decided", "register_c50_1k_s": "decided",
    "family_kv_worst_s": 1.0, "family_kv_p99_s": 0.001, "family_register_worst_s": 1.0,
    "family_register_p99_s": 0.001, "family_unknown": 0,
    "cli_kv_c5_100k_x_orjson": 4.0, "cli_register_c5_100k_x_orjson": 10.0,
    "cli_kv_c5_100k_json_x_orjson": 4.0, "cli_register_c5_100k_json_x_orjson": 10.0,
}
ROOT = Path(__file__).resolve().parents[1]
_LIMIT_S = {"register_c20_10k_s": 60.0, "register_c50_1k_s": 60.0}


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


def _timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """(wall s, cpu s, result) of one run."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - t0, time.process_time() - c0, out


def bench_issue19(seed: int, family_seeds: int, repeat: int = 1) -> dict[str, Any]:
    """The rows of issue 19 (see the module docstring); raises SystemExit on a wrong verdict.  The per-op rows
    are the minimum of ``repeat`` runs (wall and CPU each), the others one run."""
    figures: dict[str, Any] = {"native_core": NATIVE_AVAILABLE}
    kv, reg = make_model("kv"), make_model("cas-register")
    per_op = [
        ("kv_c5_10k_us_per_op", kv, lambda: kv_history(random.Random(seed), clients=5, ops=10_000)),
        ("kv_c5_100k_us_per_op", kv, lambda: kv_history(random.Random(seed), clients=5, ops=100_000)),
        ("register_c5_10k_us_per_op", reg, lambda: register_history(random.Random(seed), clients=5, ops=10_000)),
        ("register_c5_100k_us_per_op", reg, lambda: register_history(random.Random(seed), clients=5, ops=100_000)),
        ("kv_c50_100_per_key_100k_us_per_op", kv,
         lambda: kv_history(random.Random(seed), clients=50, ops=100_000, keys=1_000)),
    ]
    for name, model, make in per_op:
        ops = make()
        n = sum(1 for o in ops if o.type == "invoke")
        runs = [_timed(lambda m=model, h=ops: check(h, m)) for _ in range(repeat)]  # type: ignore[misc]
        wall, cpu, res = min(r[0] for r in runs), min(r[1] for r in runs), runs[-1][2]
        if res.valid is not True:
            raise SystemExit(f"{name}: wrong verdict {res.describe()}")
        figures[name] = round(wall / n * 1e6, 2)
        figures[name[:-10] + "_engine"] = res.engine
        _CPU[name] = round(cpu / n * 1e6, 2)
    for name, clients, n in (("register_c20_10k_s", 20, 10_000), ("register_c50_1k_s", 50, 1_000)):
        ops = register_history(random.Random(seed), clients=clients, ops=n)
        wall, cpu, res = _timed(lambda h=ops, limit=_LIMIT_S[name]: check(  # type: ignore[misc]
            h, reg, time_limit_s=limit, clock=time.perf_counter))
        if res.valid is False:
            raise SystemExit(f"{name}: wrong verdict {res.describe()}")
        figures[name] = round(wall, 3)
        figures[name[:-2] + "_verdict"] = res.describe()
        _CPU[name] = round(cpu, 3)
    unknown = 0
    for kind, model in (("kv", kv), ("register", reg)):
        times, cpus, engines = [], [], 0
        for s in range(seed, seed + family_seeds):
            rng = random.Random(s)
            n = rng.randint(60, 300)
            ops = small_alphabet_history(rng, model=kind, clients=rng.randint(2, 5), ops=n)
            wall, cpu, res = _timed(lambda h=ops, m=model: check(  # type: ignore[misc]
                h, m, time_limit_s=1.0, clock=time.perf_counter))
            if res.valid is False:
                raise SystemExit(f"family {kind} seed {s}: wrong verdict {res.describe()}")
            unknown += res.valid is not True
            engines += res.engine == "native"
            times.append(wall)
            cpus.append(cpu)
        times.sort()
        cpus.sort()
        p99 = min(len(times) - 1, int(len(times) * 0.99))
        figures[f"family_{kind}_worst_s"] = round(times[-1], 4)
        figures[f"family_{kind}_p99_s"] = round(times[p99], 4)
        figures[f"family_{kind}_median_s"] = round(times[len(times) // 2], 4)
        figures[f"family_{kind}_native_share"] = round(engines / len(times), 3)
        _CPU[f"family_{kind}_worst_s"] = round(cpus[-1], 4)
        _CPU[f"family_{kind}_p99_s"] = round(cpus[p99], 4)
    figures["family_unknown"] = unknown
    return figures


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
    return figures


def _orjson_parse_s(path: Path, repeat: int) -> tuple[float, float]:
    """orjson's parse-only time of a jsonl file, wall and CPU seconds: read its bytes, ``orjson.loads`` every
    line, keep nothing."""
    import orjson

    def parse() -> None:
        for line in path.read_bytes().splitlines():
            if line:
                orjson.loads(line)

    wall = _best(repeat, parse, "orjson")[0]
    return wall, _CPU["orjson"]


def _cli_s(tree: Path, args: list[str], exits: tuple[int, ...] = (0,)) -> tuple[float, list[str]]:
    """Wall seconds and verdict lines of one ``python -m harness.cli check ARGS`` run with ``tree`` first on the
    import path; raises SystemExit unless its exit code is one of ``exits``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "check", *args], cwd=tree, env=env,
                          capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    _CPU["last_cli_run"] = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if proc.returncode not in exits:
        raise SystemExit(f"splitbrain check in {tree}: exit {proc.returncode}: {proc.stderr[-400:]}")
    # "FILE: valid in 0.012 s" -> "FILE: valid" (the two trees must agree on every verdict)
    return seconds, [line.split(" in ")[0] for line in proc.stdout.splitlines() if line.startswith("/")]


def _best_cli(repeat: int, trees: list[tuple[str, Path]], args: list[str],
              exits: tuple[int, ...] = (0,)) -> dict[str, float]:
    """The minimum wall time per tree of ``repeat`` rounds, the trees interleaved in each round so that they see
    the same load; raises SystemExit if the trees' verdicts differ."""
    best = {tag: float("inf") for tag, _ in trees}
    verdicts: dict[str, list[str]] = {}
    for _ in range(repeat):
        for tag, tree in trees:
            seconds, verdicts[tag] = _cli_s(tree, args, exits)
            best[tag] = min(best[tag], seconds)
            _CPU[f"cli_min{tag}"] = min(_CPU.get(f"cli_min{tag}", float("inf")), _CPU["last_cli_run"])
    if len({tuple(v) for v in verdicts.values()}) > 1:
        raise SystemExit(f"splitbrain check {args[:3]}...: the trees' verdicts differ")
    return best


def bench_cli(repeat: int, seed: int, baseline: Path | None) -> dict[str, Any]:
    """The rows of issue 30 (see the module docstring): ``splitbrain check`` end to end against orjson."""
    figures: dict[str, Any] = {}
    trees = [("", ROOT)] + ([("_baseline", baseline)] if baseline is not None else [])
    with tempfile.TemporaryDirectory(prefix="bench-checker-") as tmp:
        cases = [("kv_c5_100k", "kv", kv_history(random.Random(seed), clients=5, ops=100_000)),
                 ("register_c5_100k", "cas-register", register_history(random.Random(seed), clients=5, ops=100_000))]
        for name, model, ops in cases:
            path = Path(tmp) / f"{name}.jsonl"
            write_jsonl(path, ops)
            del ops
            parse, parse_cpu = _orjson_parse_s(path, repeat)
            figures[f"cli_{name}_orjson_parse_s"] = round(parse, 4)
            for flags, suffix in (([], ""), (["--json"], "_json")):
                for tag, _ in trees:
                    _CPU.pop(f"cli_min{tag}", None)
                best = _best_cli(repeat, trees, ["--model", model, *flags, str(path)])
                for tag, _ in trees:
                    figures[f"cli_{name}{suffix}{tag}_s"] = round(best[tag], 4)
                    figures[f"cli_{name}{suffix}{tag}_x_orjson"] = round(best[tag] / parse, 2)
                    _CPU[f"cli_{name}{suffix}{tag}_x_orjson"] = round(_CPU[f"cli_min{tag}"] / parse_cpu, 2)
    files = [str(f) for f in sorted((DATA / "porcupine/jepsen").glob("*.log"))]
    figures["cli_etcd_files"] = len(files)
    if files:
        best = _best_cli(repeat, trees, ["--model", "cas-register", *files], exits=(0, 1))  # some are invalid
        for tag, _ in trees:
            figures[f"cli_etcd{tag}_s"] = round(best[tag], 4)
        if baseline is not None:
            TARGETS["cli_etcd_s"] = figures["cli_etcd_baseline_s"]
    return figures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", type=int, default=10, help="number of generated kv c50 pairs (worst one reported)")
    ap.add_argument("--family-seeds", type=int, default=1000,
                    help="seeds per model of the small-alphabet info-heavy family (issue 19 rows)")
    ap.add_argument("--only-issue19", action="store_true", help="run only the rows of issue 19")
    ap.add_argument("--only-cli", action="store_true", help="run only the rows of issue 30 (splitbrain check)")
    ap.add_argument("--baseline-tree", type=Path, metavar="DIR",
                    help="another checkout whose `splitbrain check` the issue 30 rows also time (e.g. main's)")
    args = ap.parse_args(argv)
    if args.repeat < 1 or args.seeds < 1 or args.family_seeds < 1:
        print("bench/checker.py: --repeat, --seeds and --family-seeds must be at least 1", file=sys.stderr)
        return 2
    if args.baseline_tree is not None and not (args.baseline_tree / "harness" / "cli.py").is_file():
        print(f"bench/checker.py: --baseline-tree {args.baseline_tree} is not a splitbrain checkout", file=sys.stderr)
        return 2
    load_at_start = os.getloadavg()
    figures: dict[str, Any] = {}
    if not (args.only_issue19 or args.only_cli):
        figures.update(bench(args.repeat, args.seed, args.seeds))
    if not args.only_cli:
        figures.update(bench_issue19(args.seed, args.family_seeds, args.repeat))
    if not args.only_issue19:
        figures.update(bench_cli(args.repeat, args.seed, args.baseline_tree))
    figures["cpu_s"] = {k: v for k, v in _CPU.items() if k in TARGETS or k.endswith("_x_orjson")}
    if args.json:
        print(json.dumps({"figures": figures, "targets": TARGETS, "load_average": list(os.getloadavg()),
                          "load_average_at_start": list(load_at_start)}))
        return 0
    for name, value in figures.items():
        target = TARGETS.get(name)
        cpu = figures["cpu_s"].get(name)
        unit = "us/op" if name.endswith("_us_per_op") else "x" if name.endswith("_x_orjson") else "s"
        if target is None:
            print(f"{name:36s} {value}" + ("" if cpu is None else f"   (cpu {cpu} {unit})"))
        elif target == "decided":
            verdict = "ok" if figures[name[:-2] + "_verdict"].split(" ")[0] != "unknown" else "MISSED"
            print(f"{name:36s} {value:10.4f} s      target: a verdict, not unknown   {verdict}   (cpu {cpu} s)")
        elif name == "family_unknown":
            print(f"{name:36s} {value:10d}        target <= {target}   {'ok' if value <= target else 'MISSED'}")
        else:
            verdict = "ok" if value <= target else "MISSED"
            spent = "" if cpu is None else f"   (cpu {cpu} {unit})"
            print(f"{name:36s} {value:10.4f} {unit:6s} target <= {target} {unit}   {verdict}{spent}")
    print(f"load average at start: {load_at_start}, at the end: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
