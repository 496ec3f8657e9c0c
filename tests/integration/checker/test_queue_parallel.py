"""``check_queue_file(workers=n)``: real worker processes split the queues, and the verdict is the same.

The pure half (parts of a scan add up to the whole) is a property test in tests/unit/checker_queue; this file
runs the process shell: children started with ``python -m checker.queue._parallel``, their tallies pickled
back, errors raised in the caller, and no child left behind.
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
from pathlib import Path
from typing import Any

import pytest

from checker.history import HistoryError
from checker.queue import check_queue_file

pytestmark = [pytest.mark.integration]

_BENCH = Path(__file__).resolve().parents[3] / "bench" / "queue_checker.py"


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("bench_queue_checker", _BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _records(r: Any) -> list[str]:
    return sorted(json.dumps(a.to_dict(), sort_keys=True, default=str) for v in r.anomalies.values() for a in v)


@pytest.mark.parametrize("workers", [2, 3])
def test_worker_processes_find_what_one_process_finds(tmp_path: Path, workers: int) -> None:
    gen = _generator()
    path = tmp_path / "history.jsonl"
    injected = gen.write_history(path, 60_000, seed=7, lose_rate=0.01, dup_rate=0.01, queues=5)
    one = check_queue_file(path, workers=1, max_records=10**9, engine="python")
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    many = check_queue_file(path, workers=workers, max_records=10**9, engine="python")  # the workers' pass
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime > before  # the parts really ran elsewhere
    assert one.valid is False and one.counts["lost-write"] > 0 and one.counts["duplicate"] > 0
    assert injected["lost"] > 0 and injected["duplicated"] > 0
    assert (many.valid, many.counts, many.stats) == (one.valid, one.counts, one.stats)
    assert _records(many) == _records(one)


def test_an_error_in_the_file_is_raised_by_the_caller_with_its_line(tmp_path: Path) -> None:
    gen = _generator()
    path = tmp_path / "history.jsonl"
    gen.write_history(path, 5_000, seed=3, queues=4)
    lines = path.read_bytes().splitlines(keepends=True)
    lines.insert(2000, b'{"index": 1, "f": "send"\n')
    path.write_bytes(b"".join(lines))
    with pytest.raises(HistoryError, match=r"history\.jsonl:2001: not JSON") as one:
        check_queue_file(path, workers=1)
    with pytest.raises(HistoryError) as many:
        check_queue_file(path, workers=2)
    assert str(many.value) == str(one.value)
    assert not _workers_of(os.getpid())  # the worker was reaped


def test_bad_worker_counts_and_missing_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="workers must be >= 1"):
        check_queue_file(tmp_path / "x.jsonl", workers=0)
    with pytest.raises(FileNotFoundError):
        check_queue_file(tmp_path / "missing.jsonl", workers=2)
    assert not _workers_of(os.getpid())


def _workers_of(pid: int) -> list[int]:
    """Live queue-checker workers started by ``pid`` (other tests may leave unrelated children behind)."""
    kids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
                cmdline = (d / "cmdline").read_bytes()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"checker.queue._parallel" in cmdline:
                kids.append(int(d.name))
    return kids
