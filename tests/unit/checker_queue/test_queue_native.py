"""The compiled queue pass (``native/queuescan``) against the Python pass, its reference.

On simulated histories -- correct or with one broker bug, with malformed and odd lines spliced in, a torn last
line, and small ``max_records`` -- ``check_queue_file`` (which runs the compiled pass when it can) must give
exactly what the Python dict pass gives: verdict, counts, statistics and every kept record in order, or the
same error.  Where the compiled pass does not model a line it must hand the file back (``stats["engine"]``
says so) rather than guess; on the plain histories it must not.  The differential tests skip, saying why, when
``queuescan_native`` is not installed; the engine-selection tests run either way.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checker.compose import Result
from checker.history import HistoryError
from checker.queue import QueueScan, check_queue_file, iter_history_chunks
from checker.queue import _native as native
from checker.queue._scan import merge_tallies

_PROPS = Path(__file__).with_name("test_queue_properties.py")
_spec = importlib.util.spec_from_file_location("queue_properties_for_native", _PROPS)
assert _spec is not None and _spec.loader is not None
props: Any = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = props  # dataclasses look their module up while the file runs
_spec.loader.exec_module(props)

needs_native = pytest.mark.skipif(
    not native.NATIVE_AVAILABLE,
    reason="queuescan_native is not importable (not built: scripts/build_native.sh builds native/queuescan)")

# Lines the compiled pass must read exactly or hand back: JSON it decodes its own way (escapes, non-ASCII,
# numbers), shapes the Python pass reads loosely (bools and floats compare equal to ints there, key order)
_ODD_LINES = (
    '{"f":"send","value":{"value":"v\\u00e9\\ud83d\\ude00","queue":"t/\\u0031"},"process":"w\\"1","type":"invoke",'
    '"index":900001}',
    '{"index":900002,"type":"ok","process":"w\\"1","f":"send","value":{"queue":"t/1","value":"x","offset":-3}}',
    '{"index":900003,"type":"invoke","process":7,"f":"send","value":{"queue":"t/1","value":true}}',
    '{"index":900004,"type":"invoke","process":7,"f":"send","value":{"queue":"t/1","value":1.0}}',
    '{"index":900005,"type":"invoke","process":7,"f":"send","value":{"queue":"t/1","value":123456789012345678901}}',
    '{"index":900006,"type":"invoke","process":7,"f":"poll","value":{"queue":"t/1","offset":2.5}}',
    '{"index":900007,"type":"invoke","process":7,"f":"send","value":{"queue":"t/1","value":-0}}',
    '{"index":900008,"type":"invoke","process":7,"f":"send","value":{"queue":"t/1","value":"\\ud800"}}',
    '{"index":900009,"type":"invoke","process":7,"f":"send","f":"send","value":{"queue":"t/1","value":5}}',
    '{"index":900010,"time":1e400,"type":"invoke","process":7,"f":"send","value":{"queue":"t/1","value":5}}',
    '{"index":900011,"time":1.5e3,"type":"info","process":null,"f":"poll","value":{"queue":"t/1"}}',
    '{"index":900012,"type":"ok","process":7,"f":"poll","value":{"queue":"t/1","records":[[0,"\\u00e9"],[1,5]]}}',
    '{"index":900013,"type":"invoke","process":7,"f":"drain","value":{"queue":7,"consumer":8}}',
    '{"index":900014,"type":"ok","process":7,"f":"drain","value":{"queue":7,"records":[[4611686018427387905,1]]}}',
    '{"index":900015,"type":"ok","process":7,"f":"send","value":{"queue":"t/1","value":1,"offset":"1"}}',
    '{"index":900016,"type":"invoke","process":7,"f":"poll","value":{"queue":"t/1","consumer":null}}',
    '{"index":900017,"type":"ok","process":7,"f":"poll","value":{"queue":"t/1","records":[[0,[1]]]}}',
    '{"index":900018,"type":"ok","process":7,"f":"poll","value":{"queue":"t/1","records":{"0":1}}}',
    '{"index":900019,"type":"ok","process":7,"f":"poll","value":{"queue":"t/1","records":0}}',
    '{"index":-9223372036854775808,"type":"invoke","process":7,"f":"send","value":{"queue":"t/1","value":1}}',
    '{"index":900020,"type":"invoke","process":7,"f":"send","value":{"queue":"t/1","value":"\xe9\xa0"}}',
    '{"index":900021,"type":"invoke","process":7,"f":"send","value":{"queue":"t/1","value":7,"x":[[[[[]]]]]}}',
    '\t{"index":900022,"type":"fail","process":7,"f":"send"}  ',
    '{"index":900023,"type":"invoke","process":7,"f":"poll","value":{"queue":"t/1","offset":0}}',
    '{"index":900024,"type":"ok","process":7,"f":"send","value":null}',
)


def _reference(path: Path, max_records: int) -> Result:
    """The Python dict pass over the whole file: the reference."""
    scan = QueueScan(max_records=max_records)
    for chunk in iter_history_chunks(path):
        scan.feed(chunk)
    return scan.result()


def _record(a: Any) -> dict[str, Any]:
    d = a.to_dict()
    if not isinstance(d["key"], str | int):  # a poll completing a send's invoke: the Python pass keys the
        d["key"] = type(d["key"]).__name__   # queue by its state object, whose repr differs from run to run
        d["explanation"] = re.sub(r" at 0x[0-9a-f]+", "", d["explanation"])
    return d


def _summary(r: Result) -> tuple[Any, ...]:
    stats = {k: v for k, v in r.stats.items() if k != "engine"}
    return (r.valid, r.counts, list(r.counts), stats,
            {t: [_record(a) for a in v] for t, v in r.anomalies.items()}, list(r.anomalies))


def _outcome(run: Any) -> tuple[Any, ...]:
    try:
        r = run()
    except Exception as exc:
        return ("error", type(exc).__name__, str(exc))
    return ("ok", _summary(r))


def _history_text(params: Any, bug: str | None, mutations: list[tuple[int, str]], odd: list[tuple[int, int]],
                  torn: int) -> str:
    run = props.simulate(replace(params, bug=bug, drain=params.drain or bug is not None,
                                 info_dup_rate=0.0 if bug else params.info_dup_rate))
    h = [json.loads(json.dumps(op)) for op in run.history]
    lines = props._mutated_lines(h, mutations, (",", ":"))
    for at, which in odd:
        lines.insert(at % (len(lines) + 1), _ODD_LINES[which % len(_ODD_LINES)])
    text = "".join(line + "\n" for line in lines)
    if torn >= 0 and lines:
        text = text[:len(text) - 1 - min(torn, len(lines[-1]))]
    return text


@needs_native
@settings(max_examples=150, deadline=None)
@given(params=props._params(), bug=st.sampled_from([None, *sorted(props.BUGS)]),
       mutations=st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(props._MUTATIONS)), max_size=3),
       odd=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, len(_ODD_LINES) - 1)), max_size=2),
       torn=st.integers(-3, 40), max_records=st.sampled_from([0, 1, 3, 1000]))
def test_the_compiled_pass_agrees_with_the_python_pass(params: Any, bug: str | None, mutations: list[tuple[int, str]],
                                                       odd: list[tuple[int, int]], torn: int, max_records: int) -> None:
    text = _history_text(params, bug, mutations, odd, torn)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "history.jsonl"
        path.write_bytes(text.encode("utf-8", "surrogateescape"))
        want = _outcome(lambda: _reference(path, max_records))
        handed = native.scan_file_native(path, max_records=max_records)
        if isinstance(handed, str):  # handed back: the Python engine decides, as its own tests check
            assert mutations or odd or torn >= 0, handed  # plain histories are the compiled pass's to check
            return
        assert _outcome(lambda: merge_tallies([handed], max_records=max_records)) == want
        got = check_queue_file(path, max_records=max_records)
        assert got.stats["engine"] == "native" and _summary(got) == want[1]


@needs_native
@settings(max_examples=60, deadline=None)
@given(params=props._params(), bug=st.sampled_from([None, *sorted(props.BUGS)]), parts=st.integers(2, 3),
       queues=st.integers(1, 5))
def test_the_compiled_pass_is_the_sum_of_the_python_parts(params: Any, bug: str | None, parts: int,
                                                          queues: int) -> None:
    """What ``check_queue_file`` gives with either engine: one compiled pass, or n Python parts merged."""
    text = _history_text(replace(params, queues=queues), bug, [], [], -1)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "history.jsonl"
        path.write_text(text)
        whole = native.scan_file_native(path, max_records=10**9)
        assert not isinstance(whole, str), whole
        tallies = []
        for part in range(parts):
            scan = QueueScan(max_records=10**9, part=part, parts=parts)
            for chunk in iter_history_chunks(path):
                scan.feed(chunk)
            tallies.append(scan.tally())
        merged, one = merge_tallies(tallies, max_records=10**9), merge_tallies([whole], max_records=10**9)
        assert (merged.valid, merged.counts, merged.stats) == (one.valid, one.counts, one.stats)
        assert props._records(merged) == props._records(one)


@needs_native
def test_a_line_the_compiled_pass_does_not_model_hands_the_file_back(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text('{"index":0,"type":"invoke","process":1,"f":"send","value":{"queue":"q","value":1}}\n'
                    '{"index":1,"type":"ok","process":1,"f":"send","value":{"queue":"q","value":1,"offset":0.0}}\n')
    handed = native.scan_file_native(path, max_records=10)
    assert isinstance(handed, str) and handed.startswith("line 2:") and "offset" in handed
    with pytest.raises(HistoryError, match=r"offset 0\.0 is not an integer"):
        check_queue_file(path)  # the Python pass then decides, with its own error


def test_the_engine_is_named_in_the_stats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text('{"index":0,"type":"invoke","process":1,"f":"send","value":{"queue":"q","value":1}}\n'
                    '{"index":1,"type":"ok","process":1,"f":"send","value":{"queue":"q","value":1,"offset":0}}\n')
    assert check_queue_file(path, engine="python").stats["engine"] == "python"
    if native.NATIVE_AVAILABLE:
        assert check_queue_file(path).stats["engine"] == "native"
    monkeypatch.setattr(native, "_native", None)
    r = check_queue_file(path)
    assert r.stats["engine"] == native.ENGINE_MISSING and r.stats["acknowledged"] == 1
    with pytest.raises(ValueError, match="engine must be"):
        check_queue_file(path, engine="rust")
