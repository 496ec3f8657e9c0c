"""Run pools: where ``splitbrain test-all`` and ``splitbrain gate`` execute runs -- this machine, or a Spark fleet.

Vocabulary.  A *run request* (:class:`RunRequest`) is one ``splitbrain test`` of one resolved spec (its seed in the
YAML), with extra argv for the child (``--sut-revision SHA``) and the results root it writes to.  A *run result*
(:class:`RunResult`) is what came back: exit code, the run directories the child made, its last printed line, how
many attempts it took and on which host the last one ran.  A *pool* (:class:`RunPool`) takes requests at any time
and hands back each result as soon as its run is done (:meth:`RunPool.completed`), so a caller that decides
sequentially (the gate) can submit more runs from what finished.

Two pools, one child command (``python -m harness.cli test SPEC --results ROOT --quiet --run-dirs-file F ...``):

* :class:`LocalPool` (``--jobs N``): up to N children at once on this machine, each from a thread.
* :class:`SparkPool` (``--master spark://HOST:7077`` or ``local[N]``): each request is one Spark job of one task,
  submitted from a thread of the driver (Spark runs the jobs of concurrent threads at once and returns each job's
  result to its own thread, so results stream back run by run with Spark's own result channel; one job of many
  tasks would only return at its end).  The task runs the child on its executor's host.  How many runs share a
  host is Spark's business: each task takes ``spark.task.cpus`` of a worker's cores.  Speculative execution is
  forced off (two live attempts of one run would be two runs).

Logs.  Every attempt's output goes to ``<results>/.fleet/<fleet id>/<n>-<attempt>.log`` (n: the submission index,
attempt from 1), on the results root that every host mounts at the same path.  The log starts with a line naming
the host, then the child's output, whose ``[splitbrain] test NAME seed=S -> RUN_DIR`` line names the run directory
as soon as it exists.

Lost attempts.  A Spark task fails only when its executor is lost (the task never raises: a run that crashes the
harness is exit 255, a result, and is not retried).  Spark then runs the task again elsewhere, with the same request,
so the same seed.  The new attempt, before it starts its child, reads the logs of the earlier attempts and writes
:data:`~spark_analysis.runfiles.LOST_ATTEMPT_FILE` into each run directory they made; ingest (and so the warehouse,
``spark gate`` and the dashboard) skips a marked directory, and the result lists it in ``lost_run_dirs``, never in
``run_dirs``.  The child of a lost attempt is asked to stop (SIGTERM, sent by the kernel when the Python worker
that started it dies), so on a host that survives its executor it stops gracefully; its directory stays marked.

Ingest.  With a warehouse (:mod:`harness.fleet_ingest`), every finished run's directories are ingested as the
result arrives, by a helper process with an embedded Spark session of its own (the fleet's executors may all be
busy with runs for minutes; the ingest must not queue behind them).

Modules: this one is the public face (the local pool, :func:`open_pool`, and every public name);
:mod:`harness.fleet_base` holds what both pools share (types, child, logs, marks, progress),
:mod:`harness.fleet_spark` the Spark pool, :mod:`harness.fleet_ledger` the pure counts and ETA,
:mod:`harness.fleet_ingest` the warehouse sink.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import IO

from harness.fleet_base import (
    CHILD_COMMAND,
    EXIT_INTERRUPTED,
    FLEET_DIR,
    PoolBase,
    RunPool,
    RunRequest,
    RunResult,
    attempt_log_path,
    is_lost_attempt,
    make_fleet_dir,
    mark_lost_attempts,
    run_child,
    run_dirs_in_log,
)
from harness.fleet_spark import MasterError, SparkPool, check_master, master_syntax_problem

__all__ = [
    "CHILD_COMMAND", "FLEET_DIR", "LocalPool", "MasterError", "RunPool", "RunRequest", "RunResult", "SparkPool",
    "check_master", "is_lost_attempt", "mark_lost_attempts", "master_syntax_problem", "open_pool", "run_child",
    "run_dirs_in_log",
]


class LocalPool(PoolBase):
    """Up to ``jobs`` ``splitbrain test`` children at once on this machine (``test-all --jobs N``).

    Children share this process's group, so Ctrl-C at the terminal reaches them (each stops gracefully and writes
    its run directory); :meth:`cancel` sends them SIGTERM (the same graceful stop)."""

    def __init__(self, jobs: int, *, child_command: Sequence[str] = CHILD_COMMAND, warehouse: str | None = None,
                 progress: IO[str] | None = None) -> None:
        if not 1 <= jobs <= 64:
            raise ValueError(f"LocalPool: jobs must be in 1..64, got {jobs}")
        super().__init__(child_command=child_command, warehouse=warehouse, progress=progress)
        self._threads = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="fleet-local")
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        self._host = socket.gethostname()

    def submit(self, request: RunRequest) -> int:
        index = self._submitted(request)
        self._threads.submit(self._run, index, request)
        return index

    def _run(self, index: int, request: RunRequest) -> None:
        started = time.monotonic()
        if self._cancelled.is_set():
            self._deliver(RunResult(index, request, EXIT_INTERRUPTED, (), "not started: cancelled", 1, self._host))
            return
        try:
            fleet_dir = make_fleet_dir(request, self._fleet_id)
            log_path = attempt_log_path(fleet_dir, index, 1)
            self._observe(index, running=True, note=f" (log {log_path})")

            def started_child(proc: subprocess.Popen[bytes]) -> None:
                with self._lock:
                    self._children[index] = proc
                if self._cancelled.is_set():
                    proc.send_signal(signal.SIGTERM)

            code, run_dirs, last = run_child(request, command=self._command, log_path=log_path,
                                             header=f"[fleet] run {index} attempt 1 on {self._host}: {request.label}",
                                             on_start=started_child)
        except Exception as exc:  # the pool itself failed for this run: a crashed run, reported
            code, run_dirs, last = 255, [], f"pool error: {exc.__class__.__name__}: {exc}"
        finally:
            with self._lock:
                self._children.pop(index, None)
        self._deliver(RunResult(index, request, code, tuple(run_dirs), last, 1, self._host,
                                duration_s=time.monotonic() - started))

    def cancel(self, *, signal_children: bool = True) -> None:
        """See :meth:`RunPool.cancel`; ``signal_children=False`` after a Ctrl-C at the terminal, which reached the
        children already (a second signal would cancel their runs instead of stopping them gracefully)."""
        self._cancelled.set()
        if not signal_children:
            return
        with self._lock:
            children = list(self._children.values())
        for proc in children:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)

    def close(self) -> None:
        self._threads.shutdown(wait=True)
        self._close_common()

    def __exit__(self, *exc: object) -> None:
        if exc and exc[0] is not None:
            self.cancel()
        self.close()


def open_pool(*, master: str | None = None, jobs: int = 1, child_command: Sequence[str] | None = None,
              warehouse: str | None = None, progress: IO[str] | None = None, conf: dict[str, str] | None = None
              ) -> LocalPool | SparkPool:
    """The pool the flags name: a :class:`SparkPool` on ``master`` when given, else a :class:`LocalPool` of ``jobs``.
    ``child_command`` defaults to :data:`CHILD_COMMAND` as it is when called.

    Raises:
        MasterError: see :class:`SparkPool`.
        ValueError: ``conf`` without ``master``, or ``jobs`` outside 1..64.
    """
    command = CHILD_COMMAND if child_command is None else tuple(child_command)
    if master is not None:
        return SparkPool(master, child_command=command, warehouse=warehouse, progress=progress, conf=conf)
    if conf:
        raise ValueError("open_pool: Spark options need a master")
    return LocalPool(jobs, child_command=command, warehouse=warehouse, progress=progress)
