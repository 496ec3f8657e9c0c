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
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from harness import fleet_ledger as fl
from spark_analysis.runfiles import LOST_ATTEMPT_FILE

if TYPE_CHECKING:
    from harness.fleet_ingest import WarehouseSink

__all__ = [
    "CHILD_COMMAND", "FLEET_DIR", "LocalPool", "MasterError", "RunPool", "RunRequest", "RunResult", "SparkPool",
    "check_master", "is_lost_attempt", "mark_lost_attempts", "master_syntax_problem", "open_pool", "run_child",
    "run_dirs_in_log",
]

FLEET_DIR = ".fleet"  # under each results root: one directory per pool, the attempts' logs
EXIT_INTERRUPTED = 130
EXIT_LOST = 2  # every attempt lost with its host: no verdict (the exit code of "unknown")

# What a pool's child runs (its argv continues with "test SPEC ..."); tests point it at an interpreter that
# registers test-only workloads.
CHILD_COMMAND: tuple[str, ...] = (sys.executable, "-m", "harness.cli")

_RUN_DIR_LINE = re.compile(r"^\[splitbrain\] test .* seed=-?\d+ -> (?P<path>.+)$")
_HOST_LINE = re.compile(r"^\[fleet\] run \d+ attempt \d+ on (?P<host>.+?): ")


@dataclass(frozen=True, slots=True)
class RunRequest:
    """One ``splitbrain test`` to run: ``spec_yaml`` is the resolved spec (seed included, ``test_count`` 1 for one
    run), ``extra_argv`` goes to the child untouched (e.g. ``("--sut-revision", SHA)``), ``results_root`` is an
    absolute path every host sees (runs, logs and lost-attempt marks go there)."""

    label: str
    spec_yaml: str
    results_root: str
    extra_argv: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.spec_yaml.strip():
            raise ValueError(f"RunRequest {self.label!r}: spec_yaml is empty")
        if not os.path.isabs(self.results_root):
            raise ValueError(f"RunRequest {self.label!r}: results_root must be absolute (every host resolves it "
                             f"the same way), got {self.results_root!r}")
        if not isinstance(self.extra_argv, tuple) or not all(isinstance(a, str) for a in self.extra_argv):
            raise ValueError(f"RunRequest {self.label!r}: extra_argv must be a tuple of str, got {self.extra_argv!r}")


@dataclass(frozen=True, slots=True)
class RunResult:
    """What one request came back with.

    ``index`` is the request's submission index in its pool; ``run_dirs`` the run directories of the attempt that
    finished (empty: the child failed before making one -- ``last_line`` says why); ``attempts`` counts every
    attempt (1 unless hosts were lost); ``lost_run_dirs`` the marked directories of lost attempts; ``host`` where the
    last attempt ran."""

    index: int
    request: RunRequest
    exit_code: int
    run_dirs: tuple[str, ...]
    last_line: str
    attempts: int
    host: str
    lost_run_dirs: tuple[str, ...] = ()
    duration_s: float = 0.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"RunResult {self.request.label!r}: attempts must be >= 1, got {self.attempts}")

    @property
    def label(self) -> str:
        return self.request.label


class RunPool(Protocol):
    """Runs requests; each result comes back as soon as its run is done.

    Duties of the caller: :meth:`submit` any number of requests, at any time (also while iterating
    :meth:`completed`); :meth:`close` (or ``with``) when done, which waits for the final ingest.
    """

    def submit(self, request: RunRequest) -> int:
        """Queue ``request``; returns its index (0, 1, ... in submission order), which its result carries."""
        ...

    def completed(self) -> Iterator[RunResult]:
        """Each result as its run finishes, until no submitted run is outstanding (requests submitted while
        iterating are waited for too)."""
        ...

    def cancel(self) -> None:
        """Start nothing new and ask running runs to stop (gracefully, as Ctrl-C does); their results still come
        back (interrupted runs), queued requests come back with exit 130 and no run directory."""
        ...

    def close(self) -> None:
        ...

    def __enter__(self) -> RunPool:
        ...

    def __exit__(self, *exc: object) -> None:
        ...


# ---------------------------------------------------------------------------------------------
# Logs and lost attempts (shared by both pools; the Spark task runs these on its executor)


def run_dirs_in_log(text: str) -> list[str]:
    """The run directories a child's output names (``[splitbrain] test NAME seed=S -> DIR``), in order (pure)."""
    return [m.group("path").strip() for m in map(_RUN_DIR_LINE.match, text.splitlines()) if m]


def _host_in_log(text: str) -> str:
    m = _HOST_LINE.match(text.split("\n", 1)[0])
    return m.group("host") if m else "?"


def _log_path(fleet_dir: Path, index: int, attempt: int) -> Path:
    return fleet_dir / f"{index}-{attempt}.log"


def is_lost_attempt(run_dir: str | Path) -> bool:
    """Whether ``run_dir`` carries the lost-attempt mark (a run never to be counted)."""
    return (Path(run_dir) / LOST_ATTEMPT_FILE).exists()


def mark_lost_attempts(fleet_dir: Path, index: int, attempts: range, request: RunRequest, *,
                       retried_by: int | None) -> list[str]:
    """Mark the run directories that the given attempts of run ``index`` made (read from their logs) as lost;
    returns them.  Idempotent.  Only directories inside the request's results root are touched."""
    root = Path(request.results_root).resolve()
    marked: list[str] = []
    for attempt in attempts:
        try:
            text = _log_path(fleet_dir, index, attempt).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue  # that attempt never got to write its log: it made no run directory
        for d in run_dirs_in_log(text):
            p = Path(d)
            if not p.is_dir() or root not in p.resolve().parents:
                continue
            mark = {"lost": True, "label": request.label, "attempt": attempt, "host": _host_in_log(text),
                    "retried_by_attempt": retried_by,
                    "why": "the host running this attempt was lost; the run was retried with the same seed, "
                           "so this directory is never counted"}
            tmp = p / f".{LOST_ATTEMPT_FILE}.tmp"
            tmp.write_text(json.dumps(mark, indent=1) + "\n", encoding="utf-8")
            os.replace(tmp, p / LOST_ATTEMPT_FILE)
            marked.append(str(p))
    return marked


def _parent_death_signal() -> Callable[[], None] | None:
    """A ``preexec_fn`` that asks for SIGTERM when the process that started the child dies (Linux
    ``PR_SET_PDEATHSIG``), or None where there is no such call.  libc is loaded here, in the parent: the function
    itself runs between fork and exec, where loading a library is not safe."""
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the request took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


def _child_argv(request: RunRequest, command: Sequence[str], spec_file: Path, dirs_file: Path) -> list[str]:
    return [*command, "test", str(spec_file), "--results", request.results_root, "--quiet",
            "--run-dirs-file", str(dirs_file), *request.extra_argv]


def run_child(request: RunRequest, *, command: Sequence[str], log_path: Path, header: str,
              on_start: Callable[[subprocess.Popen[bytes]], None] | None = None, detach: bool = False,
              ) -> tuple[int, list[str], str]:
    """Run ``splitbrain test`` for ``request`` with its output in ``log_path`` (after ``header``); returns
    (exit code, its run directories, its last non-empty line).  A child killed by a signal is exit 255 (the harness
    did not finish).  ``detach``: the child gets a session of its own and SIGTERM when its parent dies (executors)."""
    with tempfile.TemporaryDirectory(prefix="splitbrain-fleet-") as work:
        spec_file, dirs_file = Path(work) / "spec.yaml", Path(work) / "runs"
        spec_file.write_text(request.spec_yaml, encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if k != "PYTHON_WORKER_FACTORY_SECRET"}
        with open(log_path, "wb") as log:
            log.write(header.encode() + b"\n")
            log.flush()
            proc = subprocess.Popen(_child_argv(request, command, spec_file, dirs_file), stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                    start_new_session=detach,
                                    preexec_fn=_parent_death_signal() if detach else None)
            if on_start is not None:
                on_start(proc)
            code = proc.wait()
        try:
            run_dirs = [ln for ln in dirs_file.read_text(encoding="utf-8").splitlines() if ln]
        except OSError:
            run_dirs = []
    lines = [ln for ln in log_path.read_text(encoding="utf-8", errors="replace").splitlines()[1:] if ln.strip()]
    return (255 if code < 0 else code), run_dirs, (lines[-1] if lines else "")


def _fleet_id(now: _dt.datetime) -> str:
    return f"{now.strftime('%Y%m%dT%H%M%S.%fZ')}-{os.getpid()}"


def _fleet_dir(request: RunRequest, fleet_id: str) -> Path:
    d = Path(request.results_root) / FLEET_DIR / fleet_id
    d.mkdir(parents=True, exist_ok=True)
    return d


# ---------------------------------------------------------------------------------------------
# Progress: one line rewritten on a terminal, plain lines otherwise


class _Progress:
    """Draws the ledger's line: on a terminal (``stream`` a TTY) every second in place; otherwise a plain line
    each time a run finishes and every ``plain_every_s``.  ``note`` prints a line above it (start/done lines)."""

    def __init__(self, ledger: Callable[[], fl.Ledger], *, stream: IO[str] | None, plain_every_s: float = 30.0
                 ) -> None:
        self._ledger = ledger
        self._stream = stream
        self._tty = bool(stream is not None and stream.isatty())
        self._every_s = 1.0 if self._tty else plain_every_s
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._drawn = False

    def start(self) -> None:
        if self._stream is None:
            return
        self._thread = threading.Thread(target=self._loop, name="fleet-progress", daemon=True)
        self._thread.start()

    def _width(self) -> int | None:
        if not self._tty:
            return None
        import shutil

        return max(20, shutil.get_terminal_size((100, 20)).columns - 1)

    def _draw(self) -> None:
        if self._stream is None:
            return
        text = fl.progress_line(self._ledger(), time.monotonic(), self._width())
        if self._tty:
            self._stream.write(f"\r\x1b[K{text}")
            self._drawn = True
        else:
            self._stream.write(f"[splitbrain] {text}\n")
        self._stream.flush()

    def _loop(self) -> None:
        while not self._stop.wait(self._every_s):
            with self._lock:
                self._draw()

    def note(self, line: str, *, redraw: bool = False) -> None:
        """Print ``line`` (above the live line on a terminal); ``redraw``: a run finished, show the counts now."""
        with self._lock:
            if self._stream is not None and self._drawn:
                self._stream.write("\r\x1b[K")
                self._drawn = False
            print(line, flush=True)
            if redraw or self._tty:
                self._draw()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        with self._lock:
            if self._stream is not None and self._drawn:
                self._stream.write("\n")
                self._stream.flush()
                self._drawn = False


# ---------------------------------------------------------------------------------------------
# The common machinery of both pools: the ledger, the result queue, the warehouse sink, progress


class _PoolBase:
    def __init__(self, *, child_command: Sequence[str], warehouse: str | None, progress: IO[str] | None) -> None:
        self._command = tuple(child_command)
        self._fleet_id = _fleet_id(_dt.datetime.now(_dt.UTC))
        self._lock = threading.Lock()
        self._ledger = fl.Ledger(started_s=time.monotonic())
        self._results: queue.Queue[RunResult] = queue.Queue()
        self._outstanding = 0
        self._next_index = 0
        self._cancelled = threading.Event()
        self._sink: WarehouseSink | None = None
        if warehouse is not None:
            from harness.fleet_ingest import WarehouseSink

            self._sink = WarehouseSink(warehouse)
        self._progress = _Progress(self.ledger, stream=progress)
        self._progress.start()

    @property
    def fleet_id(self) -> str:
        return self._fleet_id

    def ledger(self) -> fl.Ledger:
        with self._lock:
            return self._ledger

    def _submitted(self, request: RunRequest) -> int:
        with self._lock:
            index = self._next_index
            self._next_index += 1
            self._outstanding += 1
            self._ledger = fl.submitted(self._ledger, index, request.label)
        return index

    def _observe(self, index: int, *, running: bool, lost_attempts: int = 0, note: str = "") -> None:
        """Record a poll (or the local pool's start); print a line when a run starts or loses an attempt."""
        with self._lock:
            before = self._ledger.records[index]
            self._ledger = fl.observed(self._ledger, index, running=running, lost_attempts=lost_attempts)
            after = self._ledger.records[index]
        if after.lost_attempts > before.lost_attempts:
            self._progress.note(f"[splitbrain] run {index + 1}: {after.label}: attempt {after.lost_attempts} lost "
                                f"with its host; Spark runs it again (same seed)", redraw=True)
        if before.state is fl.RunState.QUEUED and after.state is fl.RunState.RUNNING:
            self._progress.note(f"[splitbrain] start {index + 1}: {after.label}{note}")

    def _deliver(self, result: RunResult) -> None:
        """Record ``result``, hand its run directories to the warehouse sink, queue it for :meth:`completed`."""
        with self._lock:
            self._ledger = fl.finished(self._ledger, result.index, exit_code=result.exit_code,
                                       lost_attempts=result.attempts - 1)
        if self._sink is not None and result.run_dirs:
            self._sink.add([d for d in result.run_dirs if not is_lost_attempt(d)])
        lost = f"; {result.attempts - 1} attempt(s) lost with their host, marked: {', '.join(result.lost_run_dirs)}" \
            if result.attempts > 1 else ""
        self._progress.note(f"[splitbrain] done {result.index + 1}: {result.label}: exit {result.exit_code} on "
                            f"{result.host}{lost}", redraw=True)
        self._results.put(result)

    def completed(self) -> Iterator[RunResult]:
        while True:
            with self._lock:
                if self._outstanding == 0:
                    return
            result = self._results.get()
            with self._lock:
                self._outstanding -= 1
            yield result

    def _close_common(self) -> None:
        self._progress.stop()
        if self._sink is not None:
            summary = self._sink.close()
            print(f"[splitbrain] {summary}", flush=True)

    def __enter__(self) -> _PoolBase:
        return self


# ---------------------------------------------------------------------------------------------
# This machine


class LocalPool(_PoolBase):
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
            fleet_dir = _fleet_dir(request, self._fleet_id)
            log_path = _log_path(fleet_dir, index, 1)
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


# ---------------------------------------------------------------------------------------------
# Spark


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
        fleet_dir = _fleet_dir(request, fleet_id)
        if attempt > 1:
            out["lost"] = mark_lost_attempts(fleet_dir, index, range(1, attempt), request, retried_by=attempt)
        code, dirs, last = run_child(request, command=command, log_path=_log_path(fleet_dir, index, attempt),
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


class SparkPool(_PoolBase):
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
            _fleet_dir(request, self._fleet_id)  # the driver also sees the root: the logs' directory exists
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
                _log_path(fleet_dir, index, a).read_text(encoding="utf-8", errors="replace"))]
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


class _Cancelled(Exception):
    """The pool was cancelled before this request's job was submitted."""

    def __str__(self) -> str:
        return "cancelled before it started"

