"""Chaos at real load: the client rate a real run sustains, asked vs completed, and where the CPU goes.

For each workload (default: ``queue`` and the linearizable ``controller-register``) and each asked rate
(``--rates 1000,2000,5000``), runs ``splitbrain test`` on a spec (default: the smoke spec, local backend,
network namespaces: needs root) with ``--rate R --concurrency C --time-limit T`` (and ``--nemesis none``
unless ``--nemesis`` says otherwise), and prints per run:

* ``completed_ops_per_s`` -- client ops that completed (``ok``/``fail``/``info``) in the main phase per
  second of it, from ``history.jsonl``; beside it the asked rate and the ratio (the spec's ``rate`` honoured
  up to the ratio 1.0); ``invoked_ops_per_s`` is ``results.json``'s ``load`` figure;
* ``cpu_s`` -- CPU seconds (user + system, from ``/proc/<pid>/stat``) spent during the main phase by the
  harness process (generator, interpreter, clients, history writer, observer) and by each node process
  (``c1``.., ``b1-1``..), and by everything else on the machine (``other``: the machine is shared; the
  kernel's softirq work is charged to whoever was running);
* ``cpu_ms_per_op`` -- harness and cluster (all nodes) CPU milliseconds per completed op, and
  ``ops_per_s_if_alone`` -- the rate this CPU cost per op would allow with every core to the run (an
  extrapolation that ignores contention and latency; the machine is shared, so ``other`` is rarely 0);
* ``lag`` -- ``results.json``'s ``replication_lag`` summary (records behind the master, per slave);
* ``valid`` -- the run's verdict (a fast run that is not valid is not a result).

Beside them, once per invocation (``--cluster-limit``, on by default): the cluster's own produce limit from
:mod:`bench.broker` (``produce_for`` over loopback, 3 controllers + 3 replicas, all-ack, flush sync), with
``--batch 1`` (one record per request, what the queue workload sends) and batched.

The benchmark measures and prints; it never asserts.  ``--json`` prints one object.  Each run is bounded by
``--time-limit`` (<= 60 s) plus its recovery and drain phases.

Usage::

    python bench/chaos_load.py [--rates 1000,2000,5000] [--concurrency 32] [--time-limit 20]
        [--workloads queue,controller-register] [--spec examples/smoke.yaml] [--nemesis none]
        [--no-cluster-limit] [--keep DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_QUEUE_OPS_PER_S = 5000
CLK_TCK = os.sysconf("SC_CLK_TCK")
SAMPLE_S = 0.25
MAX_TIME_LIMIT_S = 60.0


# -- pure: /proc parsing and the CPU split ---------------------------------------------------------------------

def parse_stat(text: str) -> tuple[int, int]:
    """(ppid, utime + stime in clock ticks) of one ``/proc/<pid>/stat`` line (the command may hold spaces
    and parentheses: fields are counted after its last ``)``)."""
    rest = text[text.rindex(")") + 2:].split()
    return int(rest[1]), int(rest[11]) + int(rest[12])


_NODE_DIR = re.compile(r"/([a-z][a-z0-9]*(?:-\d+)?)/(?:data|store)(?:\s|$)")


def label_of(pid: int, root: int, cmdline: str) -> str:
    """The group a process's CPU is charged to: ``harness`` (the test process itself and any helper that is
    not a node), or the node name a node process's data/store directory carries (``c1``, ``b1-2``)."""
    if pid != root and (" controller " in cmdline or " broker " in cmdline):
        m = _NODE_DIR.search(cmdline)
        if m:
            return m.group(1)
    return "harness"


def cpu_split(start: Mapping[int, tuple[str, int]], end: Mapping[int, tuple[str, int]]) -> dict[str, float]:
    """CPU seconds per label between two snapshots ``pid -> (label, ticks)``; a pid born after ``start``
    counts from 0 (a process that died before ``end`` keeps its last sampled ticks in ``end``)."""
    out: dict[str, float] = {}
    for pid, (label, ticks) in end.items():
        before = start.get(pid, (label, 0))[1]
        out[label] = out.get(label, 0.0) + max(0, ticks - before) / CLK_TCK
    return {k: round(v, 2) for k, v in sorted(out.items())}


def completed_rate(lines: Iterable[bytes], start_ns: int, end_ns: int) -> tuple[int, float]:
    """(client completions in ``[start_ns, end_ns)``, per second) from history JSON lines."""
    import orjson

    n = 0
    for line in lines:
        try:
            op = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue  # a torn last line
        if op.get("type") in ("ok", "fail", "info") and isinstance(op.get("process"), int) \
                and start_ns <= op.get("time", -1) < end_ns:
            n += 1
    span_s = (end_ns - start_ns) / 1e9
    return n, (round(n / span_s, 1) if span_s > 0 else 0.0)


# -- shell: sampling a process tree ------------------------------------------------------------------------------

def _machine_busy_ticks() -> int:
    with open("/proc/stat") as fh:
        f = [int(x) for x in fh.readline().split()[1:]]
    return sum(f) - f[3] - f[4]  # all but idle and iowait


def _tree(root: int) -> dict[int, tuple[str, int]]:
    """``pid -> (label, ticks)`` of ``root`` and its descendants now."""
    procs: dict[int, tuple[int, int, str]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as fh:
                ppid, ticks = parse_stat(fh.read())
            with open(f"/proc/{d}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue
        procs[int(d)] = (ppid, ticks, cmd)
    keep = {root}
    changed = True
    while changed:
        changed = False
        for pid, (ppid, _, _) in procs.items():
            if ppid in keep and pid not in keep:
                keep.add(pid)
                changed = True
    return {pid: (label_of(pid, root, procs[pid][2]), procs[pid][1]) for pid in keep if pid in procs}


@dataclass
class Sampler:
    """Samples a process tree every ``SAMPLE_S`` so a node that exits keeps its last ticks."""

    root: int
    seen: dict[int, tuple[str, int]] = field(default_factory=dict)
    marks: dict[str, tuple[dict[int, tuple[str, int]], int, float]] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def sample(self) -> None:
        now = _tree(self.root)
        with self.lock:
            self.seen.update(now)

    def loop(self) -> None:
        while not self.stop.wait(SAMPLE_S):
            self.sample()

    def mark(self, name: str) -> None:
        self.sample()
        with self.lock:
            self.marks[name] = (dict(self.seen), _machine_busy_ticks(), time.monotonic())


def run_one(spec: Path, results: Path, *, workload: str | None, rate: float, concurrency: int,
            time_limit_s: float, nemesis: str | None, seed: int | None) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "harness.cli", "test", str(spec), "--results", str(results), "--quiet",
           "--time-limit", f"{time_limit_s:g}", "--rate", f"{rate:g}", "--concurrency", str(concurrency)]
    if workload:
        cmd += ["--workload", workload]
    if nemesis:
        cmd += ["--nemesis", nemesis]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    load_before = os.getloadavg()[0]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sampler = Sampler(proc.pid)
    t = threading.Thread(target=sampler.loop, daemon=True)
    t.start()
    tail: list[str] = []
    deadline = time.monotonic() + time_limit_s + 900
    assert proc.stdout is not None
    for line in proc.stdout:
        tail = (tail + [line.rstrip()])[-15:]
        if "phase main starts" in line:
            sampler.mark("main_start")
        elif ("phase recovery starts" in line or "phase teardown starts" in line) \
                and "main_start" in sampler.marks and "main_end" not in sampler.marks:
            sampler.mark("main_end")
        if time.monotonic() > deadline:
            proc.kill()
            break
    code = proc.wait()
    sampler.stop.set()
    t.join()
    runs = sorted(p.parent.resolve() for p in results.glob("*/*/results.json") if p.parent.name != "latest")
    out: dict[str, Any] = {"workload": workload or "spec", "asked_ops_per_s": rate, "concurrency": concurrency,
                           "exit_code": code, "loadavg_1m_before": round(load_before, 2)}
    if not runs or "main_start" not in sampler.marks or "main_end" not in sampler.marks:
        out["error"] = "the run wrote no results or no main phase:\n" + "\n".join(tail)
        return out
    doc = json.loads((runs[-1] / "results.json").read_text())
    start_ns, end_ns = doc["main_phase_start_ns"], doc["main_phase_end_ns"]
    with (runs[-1] / "history.jsonl").open("rb") as fh:
        completed, completed_per_s = completed_rate(fh, start_ns, end_ns)
    (s_pids, s_busy, s_t), (e_pids, e_busy, e_t) = sampler.marks["main_start"], sampler.marks["main_end"]
    split = cpu_split(s_pids, e_pids)
    machine = (e_busy - s_busy) / CLK_TCK
    split["other"] = round(max(0.0, machine - sum(split.values())), 2)
    load = doc.get("load") or {}
    ours = {k: v for k, v in split.items() if k != "other"}
    harness_s = ours.get("harness", 0.0)
    cluster_s = sum(ours.values()) - harness_s
    out.update({
        "cpu_ms_per_op": {"harness": round(1000 * harness_s / completed, 3) if completed else None,
                          "cluster": round(1000 * cluster_s / completed, 3) if completed else None},
        "ops_per_s_if_alone": (round(completed * (os.cpu_count() or 1) / (harness_s + cluster_s), 1)
                               if harness_s + cluster_s > 0 else None),
        "completed_ops": completed, "completed_ops_per_s": completed_per_s,
        "honoured": round(completed_per_s / rate, 3) if rate else None,
        "invoked_ops_per_s": load.get("achieved_ops_per_s"), "main_phase_s": load.get("main_phase_s"),
        "cpu_s": split, "cpu_window_s": round(e_t - s_t, 2), "machine_cores": os.cpu_count(),
        "replication_lag": doc.get("replication_lag"), "valid": doc.get("valid"),
        "loadavg_1m_after": round(os.getloadavg()[0], 2), "run_dir": str(runs[-1]),
    })
    return out


def cluster_limit(seconds: float) -> dict[str, Any]:
    """bench/broker.py's produce rate (1 KiB records, all-ack, flush sync, 32 sends in flight) with one record
    per request (what the queue workload sends) and with 64, each in its own process."""
    out: dict[str, Any] = {"loadavg_1m_before": round(os.getloadavg()[0], 2)}
    for batch in (1, 64):
        cmd = [sys.executable, str(ROOT / "bench" / "broker.py"), "--trials", "0", "--batch", str(batch),
               "--seconds", f"{seconds:g}", "--json"]
        proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                              text=True, timeout=seconds + 300, check=False)
        try:
            out[f"produce_msgs_per_s_batch{batch}"] = json.loads(proc.stdout)["figures"]["produce_msgs_per_s"]
        except (ValueError, KeyError):
            out[f"produce_msgs_per_s_batch{batch}"] = None
            out[f"error_batch{batch}"] = (proc.stdout + proc.stderr)[-500:]
    return out


def _rates(text: str) -> list[float]:
    try:
        rates = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"bench/chaos_load.py: --rates must be a comma list of numbers, got {text!r}") from None
    if not rates or any(r <= 0 for r in rates):
        raise SystemExit(f"bench/chaos_load.py: --rates must list rates > 0, got {text!r}")
    return rates


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--spec", default=str(ROOT / "examples" / "smoke.yaml"))
    p.add_argument("--workloads", default="queue,controller-register",
                   help="comma list; each run uses --workload W ('spec' = the spec's own workloads)")
    p.add_argument("--rates", default="5000", help="comma list of asked total rates (ops/s)")
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--time-limit", type=float, default=20.0)
    p.add_argument("--nemesis", default="none", help="'none' (default), 'spec' (the spec's), or a package list")
    p.add_argument("--seed", type=int)
    p.add_argument("--no-cluster-limit", action="store_true", help="skip bench/broker.py's produce figures")
    p.add_argument("--cluster-limit-s", type=float, default=5.0)
    p.add_argument("--keep", help="keep results under this directory")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    try:
        rates = _rates(args.rates)
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    spec = Path(args.spec)
    if not spec.is_file():
        print(f"bench/chaos_load.py: --spec {args.spec}: no such file", file=sys.stderr)
        return 2
    if not 0 < args.time_limit <= MAX_TIME_LIMIT_S:
        print(f"bench/chaos_load.py: --time-limit must be in (0, {MAX_TIME_LIMIT_S:g}] s, got {args.time_limit}",
              file=sys.stderr)
        return 2
    if args.concurrency < 1:
        print(f"bench/chaos_load.py: --concurrency must be >= 1, got {args.concurrency}", file=sys.stderr)
        return 2
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    runs = []
    with tempfile.TemporaryDirectory(prefix="sb-chaos-load-") as tmp:
        root = Path(args.keep or tmp).resolve()
        for w in workloads:
            for r in rates:
                res = root / f"{w}-{r:g}"
                res.mkdir(parents=True, exist_ok=True)
                fig = run_one(spec.resolve(), res, workload=None if w == "spec" else w, rate=r,
                              concurrency=args.concurrency, time_limit_s=args.time_limit,
                              nemesis=None if args.nemesis == "spec" else args.nemesis, seed=args.seed)
                if not args.keep:
                    fig.pop("run_dir", None)
                runs.append(fig)
                if not args.json:
                    _print_run(fig)
    limit = None if args.no_cluster_limit else cluster_limit(args.cluster_limit_s)
    targets = {"queue_completed_ops_per_s": f">= {TARGET_QUEUE_OPS_PER_S}", "honoured": "1.0 (completed / asked)"}
    if args.json:
        print(json.dumps({"runs": runs, "cluster_limit": limit, "targets": targets}))
        return 0
    if limit is not None:
        print(f"cluster limit (bench/broker.py produce, loadavg {limit['loadavg_1m_before']}): "
              f"batch 1 {limit['produce_msgs_per_s_batch1']} msgs/s, "
              f"batch 64 {limit['produce_msgs_per_s_batch64']} msgs/s")
    return 0


def _print_run(fig: Mapping[str, Any]) -> None:
    if "error" in fig:
        print(f"{fig['workload']} asked {fig['asked_ops_per_s']:g}: {fig['error']}")
        return
    target = f"   target >= {TARGET_QUEUE_OPS_PER_S}" if fig["workload"] == "queue" else ""
    print(f"{fig['workload']} asked {fig['asked_ops_per_s']:g} ops/s x{fig['concurrency']}: completed "
          f"{fig['completed_ops_per_s']} ops/s ({fig['honoured']:.0%} of asked; "
          f"invoked {fig['invoked_ops_per_s']}){target}"
          f"  valid={fig['valid']}  loadavg {fig['loadavg_1m_before']}->{fig['loadavg_1m_after']}")
    cpu = fig["cpu_s"]
    window = fig["cpu_window_s"]
    print(f"  cpu s in {window} s of main phase ({fig['machine_cores']} cores = {window * fig['machine_cores']:.1f} "
          f"cpu s): " + " ".join(f"{k}={v}" for k, v in cpu.items()))
    per = fig["cpu_ms_per_op"]
    print(f"  cpu ms per completed op: harness {per['harness']} cluster {per['cluster']}; "
          f"this run's CPU per op on all {fig['machine_cores']} cores alone: {fig['ops_per_s_if_alone']} ops/s")
    lag = fig.get("replication_lag")
    if lag:
        print(f"  replication lag: {json.dumps(lag)}")


if __name__ == "__main__":
    sys.exit(main())
