"""What both run pools of :mod:`harness.fleet` share: the request and result types, the pool protocol, the child
command and its attempt logs, the lost-attempt marks, the progress printer and the pool machinery (ledger, result
queue, warehouse sink).  Read :mod:`harness.fleet` first: its docstring is the theory of operation.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Protocol

from harness import fleet_ledger as fl
from spark_analysis.runfiles import LOST_ATTEMPT_FILE

if TYPE_CHECKING:
    from harness.fleet_ingest import WarehouseSink

__all__ = [
    "CHILD_COMMAND", "EXIT_INTERRUPTED", "EXIT_LOST", "FLEET_DIR", "PoolBase", "RunPool", "RunRequest", "RunResult",
    "attempt_log_path", "is_lost_attempt", "make_fleet_dir", "mark_lost_attempts", "new_fleet_id", "run_child",
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


def attempt_log_path(fleet_dir: Path, index: int, attempt: int) -> Path:
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
            text = attempt_log_path(fleet_dir, index, attempt).read_text(encoding="utf-8", errors="replace")
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


def new_fleet_id(now: _dt.datetime) -> str:
    return f"{now.strftime('%Y%m%dT%H%M%S.%fZ')}-{os.getpid()}"


def make_fleet_dir(request: RunRequest, fleet_id: str) -> Path:
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


class PoolBase:
    def __init__(self, *, child_command: Sequence[str], warehouse: str | None, progress: IO[str] | None) -> None:
        self._command = tuple(child_command)
        self._fleet_id = new_fleet_id(_dt.datetime.now(_dt.UTC))
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

    def __enter__(self) -> PoolBase:
        return self
