"""Recorded porcupine and knossos histories: every verdict in both EXPECTED.md files, and knossos' failing ops."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from checker.linearizable import check
from checker.models import make_model
from checker.readers import format_defaults, read_history

# The shared data folder sits beside the checkout (``../shared/checker-data``); SPLITBRAIN_CHECKER_DATA points
# elsewhere.  No absolute path: the suite runs from any clone.
DATA = Path(os.environ.get("SPLITBRAIN_CHECKER_DATA",
                           Path(__file__).resolve().parents[3].parent / "shared" / "checker-data"))
pytestmark = pytest.mark.skipif(not DATA.exists(), reason="checker test data not present")


def _expected() -> list[tuple[str, str, bool]]:
    rows: list[tuple[str, str, bool]] = []
    if not DATA.exists():
        return rows
    for line in (DATA / "porcupine/EXPECTED.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 8 and cells[1].endswith((".log", ".txt")):
            rows.append(("porcupine/" + cells[1], "kv" if "/kv/" in "/" + cells[1] else "cas-register",
                         cells[-2] == "true"))
    for line in (DATA / "knossos/EXPECTED.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 12 and cells[1].startswith("data/"):
            model = cells[2].split(" ")[0]
            rows.append(("knossos/" + cells[1], model, cells[11] == "true"))
    return rows


EXPECTED = _expected()


def _check(rel: str, model: str, **overrides: object) -> object:
    hist = read_history(DATA / rel)
    opts = {**format_defaults(hist.format, model), **overrides}
    return check(hist.ops, make_model(model, **opts))  # no time limit: a slow machine must not turn a verdict unknown


def test_every_file_is_listed() -> None:
    """Each history file in the folder has exactly one verdict row, and each row names a file that exists
    (compared as sets, so adding a history with its row needs no edit here)."""
    on_disk = {str(p.relative_to(DATA)) for p in DATA.rglob("*") if p.suffix in (".log", ".txt", ".edn")}
    listed = [r[0] for r in EXPECTED]
    assert len(listed) == len(set(listed))
    assert set(listed) == on_disk


@pytest.mark.parametrize(("rel", "model", "want"), EXPECTED, ids=[r[0] for r in EXPECTED])
def test_expected_verdict(rel: str, model: str, want: bool) -> None:
    result = _check(rel, model)
    assert result.valid is want, result.describe()  # type: ignore[attr-defined]


@pytest.mark.parametrize("rel", ["porcupine/kv/c10-ok.txt", "porcupine/kv/c10-bad.txt",
                                 "porcupine/kv/c01-ok.txt", "porcupine/kv/c01-bad.txt"])
def test_kv_unpartitioned_agrees(rel: str) -> None:
    hist = read_history(DATA / rel)
    res = check(hist.ops, make_model("kv"), partition=False)
    assert res.valid is rel.endswith("-ok.txt")


# (file, initial override or None, process, completion index, previous ok (process, index) or None)
KNOSSOS_FAILURES = [
    ("bad/bad-analysis.edn", None, 21, 14, (19, 11)),
    ("bad/cas-failure.edn", None, 70, 491, "any"),
    ("bad/immediate-failure.edn", None, 1, 3, None),
    ("bad/rethink-fail-minimal.edn", "nil", 1, 4, "any"),
    ("bad/rethink-fail-smaller.edn", "nil", 12, 217, "any"),
]


@pytest.mark.parametrize(("name", "initial", "proc", "index", "prev"), KNOSSOS_FAILURES,
                         ids=[k[0] for k in KNOSSOS_FAILURES])
def test_same_first_failure_as_knossos(name: str, initial: object, proc: int, index: int, prev: object) -> None:
    overrides = {} if initial is None else {"initial": None}
    res = _check("knossos/data/cas-register/" + name, "cas-register", **overrides)
    assert res.valid is False  # type: ignore[attr-defined]
    assert (res.op.process, res.op.index, res.op.type) == (proc, index, "ok")  # type: ignore[attr-defined]
    if prev is None:
        assert res.previous_ok is None  # type: ignore[attr-defined]
    elif prev != "any":
        assert (res.previous_ok.process, res.previous_ok.index) == prev  # type: ignore[attr-defined]


def _ticking(step_s: float) -> Callable[[], float]:
    """An injected clock that advances ``step_s`` each time the checker reads it (0 stands the clock still)."""
    reads = iter(range(10**9))
    return lambda: next(reads) * step_s


@pytest.mark.parametrize("name", ["memstress3-12.edn", "memstress3-14.edn"])
def test_one_millisecond_limit_is_unknown_timeout(name: str) -> None:
    hist = read_history(DATA / "knossos/data/cas-register/good" / name)
    model = make_model("cas-register", **format_defaults(hist.format, "cas-register"))
    # The same 1 ms limit passes while the clock stands still and times out once 1 ms goes by per read:
    # the limit, not the machine's speed, decides.
    res = check(hist.ops, model, time_limit_s=0.001, clock=_ticking(0.0))
    assert res.valid is True, res.describe()
    res = check(hist.ops, model, time_limit_s=0.001, clock=_ticking(0.001))
    assert (res.valid, res.cause) == ("unknown", "timeout")


def test_etcd_failure_names_the_read() -> None:
    res = _check("porcupine/jepsen/etcd_000.log", "cas-register")
    assert res.valid is False  # type: ignore[attr-defined]
    assert res.op.f == "read" and re.search(r"read \d", res.reason)  # type: ignore[attr-defined]
