"""The Spark run pool (``--master spark://HOST:7077`` or ``local[N]``): each request is one Spark job of one task
that runs the ``splitbrain test`` child on its executor's host (:mod:`harness.fleet` explains why, and what
happens to a run whose host is lost).  pyspark is imported only when a pool opens or a task runs.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

from harness.fleet_base import (
    CHILD_COMMAND,
    EXIT_INTERRUPTED,
    EXIT_LOST,
    FLEET_DIR,
    PoolBase,
    RunRequest,
    RunResult,
    attempt_log_path,
    make_fleet_dir,
    mark_lost_attempts,
    run_child,
    run_dirs_in_log,
)

__all__ = ["MasterError", "SparkPool", "check_master", "master_syntax_problem"]


class MasterError(ValueError):
    """A ``--master`` value this pool cannot use (one line: the value, why, what is accepted)."""


_LOCAL_MASTER = re.compile(r"^local(\[(\*|[1-9]\d*)(,[1-9]\d*)?\])?$")
_SPARK_MASTER = re.compile(r"^spark://(?P<hosts>[^/\s]+)$")


def _spark_hosts(master: str) -> list[tuple[str, int]] | None:
    m = _SPARK_MASTER.match(master)
    if not m:
        return None
    out = []
    for part in m.group("hosts").split(","):
        host, sep, port = part.rpartition(":")
        if not sep or not host or not port.isdecimal() or not 0 < int(port) < 65536:
            return None
        out.append((host.strip("[]"), int(port)))
    return out


def master_syntax_problem(master: str) -> str | None:
    """Why ``master`` is not ``local``, ``local[N]``, ``local[*]``, ``local[N,F]`` or
    ``spark://HOST:PORT[,HOST:PORT...]`` (one line), or None (pure)."""
    if _LOCAL_MASTER.match(master) or _spark_hosts(master) is not None:
        return None
    return (f"--master {master!r}: expected spark://HOST:PORT (a standalone master) or local[N] (Spark on this "
            f"machine)")


def check_master(master: str, *, timeout_s: float = 5.0) -> None:
    """Refuse a ``--master`` of the wrong form (:func:`master_syntax_problem`) and a standalone master none of whose
    addresses accepts a connection.

    Raises:
        MasterError: naming the value and the reason.
    """
    problem = master_syntax_problem(master)
    if problem:
        raise MasterError(problem)
    hosts = _spark_hosts(master)
    if hosts is None:  # local[...]
        return
    problems = []
    for host, port in hosts:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return
        except OSError as exc:
            problems.append(f"{host}:{port} ({exc.strerror or exc})")
    raise MasterError(f"--master {master}: cannot reach the Spark master at {', '.join(problems)}; is it running?")


def _executor_host() -> str:
    """``<hostname> (executor <id>)`` for the executor this task runs on (standalone executors' log URL names it)."""
    from urllib.parse import parse_qs, urlparse

    url = os.environ.get("SPARK_LOG_URL_STDERR", "")
    ids = parse_qs(urlparse(url).query).get("executorId") if url else None
    return f"{socket.gethostname()} (executor {ids[0] if ids else 'driver'})"


def _spark_task(payload: tuple[int, RunRequest, str, tuple[str, ...]]) -> dict[str, Any]:
    """Executor side of one request: mark the logs' run directories of earlier (lost) attempts, then run the child.

    Never raises for a run's outcome: an exception here would make Spark retry a run that was not lost."""
    from pyspark import TaskContext

    index, request, fleet_id, command = payload
    ctx = TaskContext.get()
    attempt = (ctx.attemptNumber() if ctx is not None else 0) + 1
    host = _executor_host()
    started = time.monotonic()
    out: dict[str, Any] = {"attempt": attempt, "host": host, "lost": [], "code": 255, "dirs": [], "last": ""}
    try:
        if not os.path.isdir(request.results_root):
            out.update(code=2, last=f"results root {request.results_root} is not mounted on {host}")
            return out
        fleet_dir = make_fleet_dir(request, fleet_id)
        if attempt > 1:
            out["lost"] = mark_lost_attempts(fleet_dir, index, range(1, attempt), request, retried_by=attempt)
        code, dirs, last = run_child(request, command=command, log_path=attempt_log_path(fleet_dir, index, attempt),
                                     header=f"[fleet] run {index} attempt {attempt} on {host}: {request.label}",
                                     detach=True)
        out.update(code=code, dirs=dirs, last=last)
    except Exception as exc:  # reported as a crashed run, not retried
        out.update(code=255, last=f"fleet task error on {host}: {exc.__class__.__name__}: {exc}")
    out["duration_s"] = time.monotonic() - started
    return out


_SPARK_DEFAULTS = {
    "spark.speculation": "false",  # two live attempts of one run would be two runs
    "spark.task.cpus": "1",
    "spark.executor.memory": "1g",
}


class SparkPool(PoolBase):
    """Each request is one Spark job of one task that runs the child on its executor's host (module docstring).

    Opening connects to ``master`` (checked first with :func:`check_master`) and, for a standalone master, waits up
    to ``executor_wait_s`` for an executor to register.  ``conf`` adds Spark options (e.g. ``spark.task.cpus``:
    cores each run takes on a worker, hence how many runs share a host; ``spark.task.maxFailures``: attempts per
    run before it is given up as lost, default 4 on a cluster, 1 on ``local[N]`` -- ``local[N,F]`` allows F).

    Raises:
        MasterError: a bad or unreachable master, or no executor within ``executor_wait_s``.
    """

    def __init__(self, master: str, *, child_command: Sequence[str] = CHILD_COMMAND, warehouse: str | None = None,
                 progress: IO[str] | None = None, conf: dict[str, str] | None = None, executor_wait_s: float = 90.0,
                 poll_every_s: float = 2.0) -> None:
        check_master(master)
        from spark_analysis.session import get_session

        self._spark = get_session(master, app_name="splitbrain-fleet", conf={**_SPARK_DEFAULTS, **(conf or {})})
        self._sc = self._spark.sparkContext
        if master.startswith("spark://"):
            self._wait_for_executor(master, executor_wait_s)
        super().__init__(child_command=child_command, warehouse=warehouse, progress=progress)
        slots = max(1, int(self._sc.defaultParallelism))
        # Jobs handed to Spark at once: more than it can run, so no slot waits for us; Spark picks which run where.
        self._threads = ThreadPoolExecutor(max_workers=max(64, 4 * slots), thread_name_prefix="fleet-spark")
        self._groups: dict[int, str] = {}
        self._stages: dict[int, int] = {}
        self._poll_every_s = poll_every_s
        self._poller = threading.Thread(target=self._poll_loop, name="fleet-spark-poll", daemon=True)
        self._poll_stop = threading.Event()
        self._poller.start()

    def _wait_for_executor(self, master: str, wait_s: float) -> None:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self._sc._jsc.sc().getExecutorMemoryStatus().size() > 1:  # the driver counts as one
                return
            time.sleep(0.5)
        self._spark.stop()
        raise MasterError(f"--master {master}: no executor registered within {wait_s:g} s; does the master have an "
                          f"alive worker with a free core and {_SPARK_DEFAULTS['spark.executor.memory']} of memory?")

    def submit(self, request: RunRequest) -> int:
        index = self._submitted(request)
        self._threads.submit(self._run, index, request)
        return index

    def _run(self, index: int, request: RunRequest) -> None:
        started = time.monotonic()
        group = f"splitbrain-fleet-{self._fleet_id}-{index}"
        with self._lock:
            self._groups[index] = group
        try:
            if self._cancelled.is_set():
                raise _Cancelled
            make_fleet_dir(request, self._fleet_id)  # the driver also sees the root: the logs' directory exists
            self._sc.setJobGroup(group, request.label, interruptOnCancel=True)
            payload = (index, request, self._fleet_id, self._command)
            out = self._sc.parallelize([payload], 1).map(_spark_task).collect()[0]
            result = RunResult(index, request, int(out["code"]), tuple(out["dirs"]), str(out["last"]),
                               int(out["attempt"]), str(out["host"]), tuple(out["lost"]),
                               duration_s=time.monotonic() - started)
        except Exception as exc:  # the job failed: every attempt lost, or cancelled
            result = self._failed_job(index, request, exc, time.monotonic() - started)
        finally:
            with self._lock:
                self._groups.pop(index, None)
                self._stages.pop(index, None)
        self._deliver(result)

    def _failed_job(self, index: int, request: RunRequest, exc: BaseException, duration_s: float) -> RunResult:
        """No attempt finished: mark every attempt's run directory (none is a run to count) and say why."""
        fleet_dir = Path(request.results_root) / FLEET_DIR / self._fleet_id
        attempts = sorted(int(p.stem.rsplit("-", 1)[1]) for p in fleet_dir.glob(f"{index}-*.log"))
        cancelled = self._cancelled.is_set()
        if cancelled:
            # A cancelled run's child was stopped gracefully: its run directory is an interrupted run, not lost.
            dirs = [d for a in attempts[-1:] for d in run_dirs_in_log(
                attempt_log_path(fleet_dir, index, a).read_text(encoding="utf-8", errors="replace"))]
            lost = mark_lost_attempts(fleet_dir, index, range(1, attempts[-1]), request, retried_by=None) \
                if attempts else []
            return RunResult(index, request, EXIT_INTERRUPTED, tuple(dirs), "cancelled", max(1, len(attempts)),
                             "-", tuple(lost), duration_s)
        lost = mark_lost_attempts(fleet_dir, index, range(1, (attempts[-1] if attempts else 0) + 1), request,
                                  retried_by=None)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
        return RunResult(index, request, EXIT_LOST, (), f"lost on every attempt ({len(attempts)}): {first[:300]}",
                         max(1, len(attempts)), "-", tuple(lost), duration_s)

    def _poll_loop(self) -> None:
        tracker = self._sc.statusTracker()
        while not self._poll_stop.wait(self._poll_every_s):
            with self._lock:
                groups = dict(self._groups)
            for index, group in groups.items():
                with contextlib.suppress(Exception):  # a poll is best effort: the job may just have ended
                    self._poll_one(tracker, index, group)

    def _poll_one(self, tracker: Any, index: int, group: str) -> None:
        stage = self._stages.get(index)
        if stage is None:
            jobs = tracker.getJobIdsForGroup(group)
            info = tracker.getJobInfo(jobs[0]) if jobs else None
            if info is None or not info.stageIds:
                return
            stage = self._stages[index] = info.stageIds[0]
        si = tracker.getStageInfo(stage)
        if si is not None:
            self._observe(index, running=si.numActiveTasks > 0, lost_attempts=si.numFailedTasks)

    def cancel(self) -> None:
        self._cancelled.set()
        with self._lock:
            groups = list(self._groups.values())
        for g in groups:
            with contextlib.suppress(Exception):
                self._sc.cancelJobGroup(g)

    def close(self) -> None:
        self._threads.shutdown(wait=True)
        self._poll_stop.set()
        self._poller.join(10)
        self._close_common()
        self._spark.stop()

    def __exit__(self, *exc: object) -> None:
        if exc and exc[0] is not None:
            self.cancel()
        self.close()


class _Cancelled(Exception):
    """The pool was cancelled before this request's job was submitted."""

    def __str__(self) -> str:
        return "cancelled before it started"
