"""Ingest each finished run of a fleet into a warehouse while the fleet is still working.

:class:`WarehouseSink` is the pool's side: :meth:`~WarehouseSink.add` hands it the run directories of a run that
just finished, and a helper process (``python -m harness.fleet_ingest WAREHOUSE``, this module's :func:`main`)
ingests them with the existing ingest code (:func:`spark_analysis.ingest.ingest_refs`: only those runs, never a
whole results root, where other runs are still being written and would be ingested half-done).  The helper reads
run directories one per line on stdin, ingests whatever has arrived since its last batch, and prints one line per
batch; it has its own embedded ``local[1]`` Spark session, so ingest never waits for the fleet's executors (which
may all be busy with runs for minutes) and works the same under the local pool, which has no Spark at all.

A batch that fails is reported (its runs are not in the manifest, so a later ``splitbrain spark ingest`` of the
results root picks them up) and the helper goes on with the next one.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["IngestTotals", "WarehouseSink", "main"]

INGEST_COMMAND: tuple[str, ...] = (sys.executable, "-m", "harness.fleet_ingest")
_LOG_NAME = "_fleet_ingest.log"  # in the warehouse; Spark and Hive skip names starting with "_"


@dataclass
class IngestTotals:
    """What the helper reported: runs handed over, ingested, by status, and failed batches' errors."""

    warehouse: str
    handed: int = 0
    ingested: int = 0
    batches: int = 0
    busy_s: float = 0.0  # the helper's time spent ingesting (not counting its start)
    statuses: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        st = ", ".join(f"{k}={v}" for k, v in sorted(self.statuses.items())) or "-"
        err = f"; {len(self.errors)} batch(es) failed, first: {self.errors[0]}" if self.errors else ""
        return (f"warehouse {self.warehouse}: {self.ingested} of {self.handed} runs ingested ({st}) in "
                f"{self.batches} batch(es), {self.busy_s:.1f} s of ingest{err}")


class WarehouseSink:
    """Feeds run directories to the ingest helper process (module docstring).  Thread-safe."""

    def __init__(self, warehouse: str) -> None:
        Path(warehouse).mkdir(parents=True, exist_ok=True)
        self.totals = IngestTotals(warehouse)
        self._lock = threading.Lock()
        self._log = open(Path(warehouse) / _LOG_NAME, "ab")  # noqa: SIM115 -- closed in close()
        self._proc = subprocess.Popen([*INGEST_COMMAND, str(Path(warehouse).resolve())], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=self._log, text=True, bufsize=1)
        self._reader = threading.Thread(target=self._read, name="fleet-ingest-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                if "error" in doc:
                    self.totals.errors.append(str(doc["error"]))
                    continue
                self.totals.ingested += int(doc.get("ingested", 0))
                self.totals.batches += 1
                self.totals.busy_s += float(doc.get("elapsed_s", 0.0))
                for k, v in dict(doc.get("statuses", {})).items():
                    self.totals.statuses[k] = self.totals.statuses.get(k, 0) + int(v)

    def add(self, run_dirs: Sequence[str]) -> None:
        """Queue ``run_dirs`` (finished runs) for ingest; returns at once."""
        if not run_dirs:
            return
        with self._lock:
            self.totals.handed += len(run_dirs)
            assert self._proc.stdin is not None
            try:
                self._proc.stdin.write("".join(f"{d}\n" for d in run_dirs))
                self._proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                self.totals.errors.append(f"the ingest helper exited (code {self._proc.poll()}); see "
                                          f"{Path(self.totals.warehouse) / _LOG_NAME}")

    def close(self, timeout_s: float = 600.0) -> IngestTotals:
        """Wait for everything handed over to be ingested (at most ``timeout_s``), stop the helper."""
        with self._lock:
            if self._proc.stdin is not None and not self._proc.stdin.closed:
                try:
                    self._proc.stdin.close()
                except BrokenPipeError:
                    pass
        try:
            self._proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
            self.totals.errors.append(f"the ingest helper did not finish within {timeout_s:g} s")
        self._reader.join(10)
        self._log.close()
        return self.totals


def _stdin_lines(out: queue.Queue[str | None]) -> None:
    for line in sys.stdin:
        if line.strip():
            out.put(line.strip())
    out.put(None)


def main(argv: Sequence[str] | None = None) -> int:
    """The helper: ``python -m harness.fleet_ingest WAREHOUSE`` (run directories on stdin, one JSON line per batch
    on stdout)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m harness.fleet_ingest WAREHOUSE", file=sys.stderr)
        return 2
    warehouse = args[0]
    from spark_analysis.ingest import RunRef, ingest_refs
    from spark_analysis.runfiles import LOST_ATTEMPT_FILE
    from spark_analysis.session import get_session

    spark = get_session("local[1]", app_name="splitbrain-fleet-ingest", shuffle_partitions=1, driver_memory="1g")
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_stdin_lines, args=(lines,), daemon=True).start()
    done = False
    while not done:
        batch = [lines.get()]
        while True:
            try:
                batch.append(lines.get_nowait())
            except queue.Empty:
                break
        done = None in batch
        refs = []
        for d in (p for p in batch if p is not None):
            path = Path(d).resolve()
            if (path / LOST_ATTEMPT_FILE).exists():
                continue
            refs.append(RunRef(f"{path.parent.name}/{path.name}", str(path.parent.parent), str(path)))
        if not refs:
            continue
        started = time.monotonic()
        try:
            s = ingest_refs(spark, refs, warehouse)
            print(json.dumps({"ingested": s.ingested, "statuses": s.statuses, "batch": s.batch_id,
                              "elapsed_s": round(time.monotonic() - started, 3)}), flush=True)
        except Exception as exc:  # reported to the pool; the next batch is tried
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            print(json.dumps({"error": f"{exc.__class__.__name__}: {first}"}), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
