"""Queue checker, compose, invariants, perf and timeline: exact anomaly data on tiny notation histories."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from checker.compose import UNKNOWN, Result, check_safe, compose, results_to_json
from checker.history import Op
from checker.invariants import INVARIANT_TYPES, check_invariants
from checker.linearizable import check as check_linearizable
from checker.models import make_model
from checker.perf import analyze_perf
from checker.queue import ANOMALY_TYPES, check_queue, parse_history
from checker.timeline import TYPE_CODES, render_timeline, timeline_data

ANOMALIES_DOC = Path(__file__).resolve().parents[3] / "docs" / "anomalies.md"

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
    ("info-retry-not-duplicate", "0 send q a?; 1 send q a@1; 2 drain q 0:a 1:a", {"duplicate": 0}),
    # the highest offset one poll read counts even when the poll returned it before a lower one
    ("lost-write-after-reordered-poll", "0 send q a@0; 0 send q b@1; 0 send q c@2; 2 poll q 2:c 0:a",
     {"int-nonmonotonic-poll": 1, "lost-write": 1, "unseen": 0}),
    ("same-offset-twice", "0 send q a@0; 1 send q b@0", {"inconsistent-offsets": 1, "nonmonotonic-send-realtime": 0}),
    ("seek-back-is-not-nonmonotonic", "0 send q a@0; 0 send q b@1; 2 poll q 0:a 1:b; 2 poll q from=0 0:a",
     {"nonmonotonic-poll": 0}),
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


UNSEEN_CASES = [
    # (id, history, valid, unseen, unseen_after_drain)
    ("no-drain", "0 send q a@0", True, 1, 0),
    ("drained-queue-missed-it", "0 send q a@0; 1 drain q", False, 1, 1),
    ("other-queue-drained", "0 send q a@0; 1 send r b@0; 2 drain q 0:a", True, 1, 0),
    ("acked-after-drain-began", ">0 send q a; 2 drain q; <0 ok @0", True, 1, 0),
    ("ok-without-offset", "0 send q a@", True, 1, 0),
    ("ok-without-offset-drained", "0 send q a@; 1 drain q", False, 1, 1),
    ("failed-drain-proves-nothing", "0 send q a@0; 1 drain q !", True, 1, 0),
]


@pytest.mark.parametrize(("text", "valid", "unseen", "after"), [c[1:] for c in UNSEEN_CASES],
                         ids=[c[0] for c in UNSEEN_CASES])
def test_unseen_is_bad_only_for_a_drain_of_its_queue_after_the_ack(text: str, valid: bool, unseen: int,
                                                                    after: int) -> None:
    r = check_queue(parse_history(text))
    assert (r.valid, r.stats["unseen"], r.stats["unseen_after_drain"], r.stats["lost"]) == (valid, unseen, after,
                                                                                            after), r.describe()
    assert all(isinstance(i, int) for a in r.anomalies.get("unseen", []) for i in a.ops)


def _doc_examples() -> list[tuple[str, str, str, str]]:
    """(checker, argument, block text, where) for each ``<!-- check: CHECKER ARG... -->`` + fenced block."""
    text = ANOMALIES_DOC.read_text(encoding="utf-8")
    pat = re.compile(r"<!-- check: (\w+) ([^>]*?) -->\n```\w*\n(.*?)```", re.S)
    out = []
    for m in pat.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        out.append((m.group(1), m.group(2).strip(), m.group(3), f"docs/anomalies.md:{line}"))
    return out


def test_docs_cover_every_anomaly_type() -> None:
    text = ANOMALIES_DOC.read_text(encoding="utf-8")
    checked = {(c, arg) for c, arg, _, _ in _doc_examples()}
    for name in ANOMALY_TYPES:
        assert f"### {name}\n" in text and ("queue", name) in checked, f"docs/anomalies.md lacks queue type {name}"
    for name in INVARIANT_TYPES:
        assert f"### {name}\n" in text and ("invariants", name) in checked, f"docs/anomalies.md lacks {name}"


@pytest.mark.parametrize(("checker", "arg", "block", "where"), _doc_examples(), ids=[e[3] for e in _doc_examples()])
def test_docs_anomaly_examples(checker: str, arg: str, block: str, where: str) -> None:
    """Each example in docs/anomalies.md gives the kind its marker names (and an invalid verdict)."""
    if checker == "queue":
        r = check_queue(parse_history(block))
        assert r.valid is False and r.counts.get(arg, 0) >= 1, (where, r.describe())
    elif checker == "invariants":
        data = json.loads(block)
        r = check_invariants(data.get("history", []), data.get("events", []))
        if arg == "valid":  # a counter-example: what the kind above does not cover
            assert r.valid is True, (where, r.describe())
        else:
            assert r.valid is False and set(r.counts) == {arg}, (where, r.describe())
    else:
        model, verdict = arg.split()
        ops = [Op.from_dict(json.loads(line)) for line in block.splitlines() if line.strip()]
        res = check_linearizable(ops, make_model(model))
        assert str(res.valid).lower() == verdict, (where, res.describe())


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
    assert page.startswith("<!DOCTYPE html>") and "start-partition" in page
    assert all(row[3] != TYPE_CODES[None] for row in timeline_data(h)["ops"])  # every op completed


def _poll_history(records_json: str, offset_json: str = "0") -> str:
    ops = [
        '{"index": 0, "type": "invoke", "process": 1, "f": "send", "value": {"queue": "q", "value": 7}}',
        '{"index": 1, "type": "ok", "process": 1, "f": "send", "value": {"queue": "q", "value": 7, "offset": '
        + offset_json + '}}',
        '{"index": 2, "type": "invoke", "process": 2, "f": "poll", "value": {"queue": "q", "offset": 0}}',
        '{"index": 3, "type": "ok", "process": 2, "f": "poll", "value": {"queue": "q", "records": ' + records_json
        + '}}',
    ]
    return "".join(op + "\n" for op in ops)


def _outcome(run: object) -> tuple[object, ...]:
    try:
        r = run()  # type: ignore[operator]
    except Exception as exc:  # both readers must fail alike
        return ("error", type(exc).__name__)
    return ("ok", r.valid, r.counts, {k: v for k, v in r.stats.items() if k != "engine"})  # engine: which reader


@pytest.mark.parametrize("records", ["{}", '""', "0", "false", "null", "[]", '[[0, 7]]', '[[0, 7, 1]]', '"all"',
                                     '[[0]]', '[["0", 7]]'])
def test_records_of_any_shape_read_alike_from_a_file_and_from_dicts(tmp_path: Path, records: str) -> None:
    """The file reader leaves records as JSON text until an ok poll needs them; whatever it finds there, the
    verdict must be the dict reader's (falsy non-lists are no records; other shapes fail both ways)."""
    from checker.queue import check_queue_file

    text = _poll_history(records)
    path = tmp_path / "history.jsonl"
    path.write_text(text)
    want = _outcome(lambda: check_queue([json.loads(line) for line in text.splitlines()]))
    assert _outcome(lambda: check_queue_file(path, workers=1)) == want  # compiled, if installed
    assert _outcome(lambda: check_queue_file(path, workers=1, engine="python")) == want
    if records in ("{}", '""', "0", "false", "null", "[]"):
        assert want[0] == "ok" and want[3]["polls"] == 1 and want[3]["records_read"] == 0  # type: ignore[index]


@pytest.mark.parametrize("offset", ["1.5", '"3"', "true", str(2**63), str(-(2**63))])
def test_an_offset_that_is_not_an_integer_is_named(tmp_path: Path, offset: str) -> None:
    from checker.history import HistoryError
    from checker.queue import check_queue_file

    text = _poll_history("[]", offset)
    path = tmp_path / "history.jsonl"
    path.write_text(text)
    for run in (lambda: check_queue([json.loads(line) for line in text.splitlines()]),
                lambda: check_queue_file(path, workers=1)):
        with pytest.raises(HistoryError, match=r"queue 'q': offset .* (is not an integer|does not fit in 64 bits)"):
            run()


def test_offsets_far_apart_and_negative_are_kept_exactly() -> None:
    """Offsets beyond the dense table (negative, or far past the known ones) live in a side table: a value
    read there is still matched, and a skip over them is still found."""
    ops = []
    offsets = [-5, 0, 1, 10**12, 10**12 + 1]
    for i, off in enumerate(offsets):
        ops += [{"index": 2 * i, "type": "invoke", "process": 1, "f": "send", "value": {"queue": "q", "value": i}},
                {"index": 2 * i + 1, "type": "ok", "process": 1, "f": "send",
                 "value": {"queue": "q", "value": i, "offset": off}}]
    n = len(ops)
    recs = [[off, i] for i, off in enumerate(offsets) if off != 1]  # skips offset 1, inside one poll
    ops += [{"index": n, "type": "invoke", "process": 2, "f": "poll", "value": {"queue": "q", "offset": -5}},
            {"index": n + 1, "type": "ok", "process": 2, "f": "poll", "value": {"queue": "q", "records": recs}}]
    r = check_queue(ops)
    assert r.counts == {"int-poll-skip": 1, "lost-write": 1}
    (skip,) = r.anomalies["int-poll-skip"]
    assert skip.expected == {"offsets": [1]}
    assert r.stats["delivered"] == 4
