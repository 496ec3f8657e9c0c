"""Queue checker, compose, invariants, perf and timeline: exact anomaly data on tiny notation histories."""

from __future__ import annotations

import pytest

from checker.compose import UNKNOWN, Result, check_safe, compose, results_to_json
from checker.invariants import check_invariants
from checker.perf import analyze_perf
from checker.queue import check_queue, parse_history
from checker.timeline import render_timeline

CASES = [
    ("clean", "0 send q a@0; 1 send q b@1; 2 poll q 0:a 1:b", {}),
    ("lost-write", "0 send q a@0; 1 send q b@1; 2 poll q 1:b", {"lost-write": 1, "poll-skip": 0}),
    ("duplicate", "0 send q a@0; 2 poll q 0:a 1:a", {"duplicate": 1}),
    ("unexpected-never-sent", "2 poll q 0:z", {"unexpected": 1}),
    ("unexpected-failed-send", "0 send q a!; 2 poll q 0:a", {"unexpected": 1}),
    ("inconsistent-offsets", "0 send q a@0; 2 poll q 0:b", {"inconsistent-offsets": 1, "unexpected": 1}),
    ("int-poll-skip", "0 send q a@0; 0 send q b@1; 0 send q c@2; 2 poll q 0:a 2:c", {"int-poll-skip": 1}),
    ("poll-skip", "0 send q a@0; 0 send q b@1; 0 send q c@2; 2 poll q 0:a; 2 poll q 2:c", {"poll-skip": 1}),
    ("nonmonotonic-poll", "0 send q a@0; 0 send q b@1; 2 poll q 0:a 1:b; 2 poll q 0:a", {"nonmonotonic-poll": 1}),
    ("int-nonmonotonic-poll", "0 send q a@0; 0 send q b@1; 2 poll q 1:b 0:a", {"int-nonmonotonic-poll": 1}),
    ("nonmonotonic-send", "0 send q a@5; 0 send q b@3", {"nonmonotonic-send": 1}),
    ("realtime", "0 send q a@5; 1 send q b@3", {"nonmonotonic-send-realtime": 1}),
    ("info-recovered", "0 send q a?; 2 drain q 0:a", {}),
    ("info-not-lost", "0 send q a?; 0 send q b@0; 2 drain q 0:b", {}),
]


@pytest.mark.parametrize(("text", "expected"), [(t, e) for _, t, e in CASES], ids=[i for i, _, _ in CASES])
def test_anomaly_types(text: str, expected: dict[str, int]) -> None:
    r = check_queue(parse_history(text))
    for t, n in expected.items():
        assert r.counts.get(t, 0) == n, r.describe()
    assert r.valid is (not any(expected.values())), r.describe()


def test_lost_write_record_is_exact() -> None:
    r = check_queue(parse_history("0 send q a@0; 1 send q b@1; 2 poll q 1:b"))
    (a,) = r.anomalies["lost-write"]
    assert (a.key, a.ops, a.expected, a.observed) == ("q", (0, 1, 5), {"offset": 0, "value": "a"},
                                                      {"max_polled_offset": 1})


def test_info_recovered_counts() -> None:
    r = check_queue(parse_history("0 send q a?; 1 send q b?; 2 drain q 0:a"))
    assert r.valid is True and r.stats["recovered"] == 1 and r.stats["lost"] == 0


def test_unseen_only_bad_after_drain() -> None:
    assert check_queue(parse_history("0 send q a@0")).valid is True
    assert check_queue(parse_history("0 send q a@0; 1 send q b@1; 2 drain q 1:b")).valid is False


def test_compose_priority_and_check_safe() -> None:
    def boom() -> Result:
        raise RuntimeError("x")

    crashed = check_safe(boom)
    assert crashed.valid == UNKNOWN and "RuntimeError" in (crashed.error or "")
    assert compose({"a": Result(True), "b": crashed}).valid == UNKNOWN
    assert compose({"a": Result(False), "b": crashed}).valid is False
    bad = check_queue(parse_history("2 poll q 0:z"))
    j = results_to_json({"queue": bad, "x": crashed})
    assert j["valid"] is False and j["anomaly_counts"] == {"unexpected": 1}
    assert j["anomaly_examples"]["unexpected"][0]["key"] == "q"


def test_invariants_table() -> None:
    ev = [
        {"node": "b1", "event": "became-master", "broker_name": "bs", "master_epoch": 1, "broker_id": 1, "time": 10},
        {"node": "b2", "event": "became-master", "broker_name": "bs", "master_epoch": 2, "broker_id": 2, "time": 100},
        {"node": "b3", "event": "became-master", "broker_name": "bs", "master_epoch": 2, "broker_id": 2, "time": 110},
        {"node": "b1", "event": "fenced", "broker_name": "bs", "time": 90},
    ]
    h = [{"index": 0, "time": 200, "type": "invoke", "process": 0, "f": "send", "value": {"queue": "t/bs/0",
          "value": 1}, "node": "b1"},
         {"index": 1, "time": 210, "type": "ok", "process": 0, "f": "send", "value": {"queue": "t/bs/0", "value": 1,
          "offset": 0}, "node": "b1"}]
    r = check_invariants(h, ev)
    assert r.counts == {"multiple-masters-in-epoch": 1, "write-on-fenced-master": 1,
                        "write-on-superseded-master": 1, "broker-id-not-unique": 1}
    assert check_invariants(h, ev[:1]).valid is True


def test_perf_and_timeline_files(tmp_path: object) -> None:
    h = parse_history("nemesis start-partition; 0 send q a@0; 1 send q b!; nemesis stop-partition; 2 poll q 0:a")
    stats = analyze_perf(h, tmp_path)  # type: ignore[arg-type]
    for name in ("latency.png", "rate.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # type: ignore[operator]
    assert stats["availability"][0]["healed"] is True
    page = render_timeline(h)
    assert page.startswith("<!DOCTYPE html>") and "start-partition" in page and "never completed" not in page
