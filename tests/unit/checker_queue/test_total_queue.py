"""The total-queue judgement of opaque-position queues (checker/total_queue.py): examples and a property test that
runs the judgement on histories of a simulated queue with known losses, duplicates, phantoms and recoveries."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from checker.compose import results_to_json
from checker.total_queue import check_total_queue
from harness.explain import summary_lines


class _H:
    """A sequential history builder: each op is an invoke and its completion on process ``p``."""

    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []

    def op(self, p: int, f: str, value: dict[str, Any], kind: str = "ok", done: dict[str, Any] | None = None,
           **extra: Any) -> int:
        t = len(self.ops) * 1_000_000_000
        self.ops.append({"index": len(self.ops), "time": t, "type": "invoke", "process": p, "f": f, "value": value})
        self.ops.append({"index": len(self.ops), "time": t + 500_000_000, "type": kind, "process": p, "f": f,
                         "value": {**value, **(done or {})}, **extra})
        return len(self.ops) - 1

    def send(self, p: int, q: str, v: str, kind: str = "ok", position: Any = None, **extra: Any) -> int:
        return self.op(p, "send", {"queue": q, "value": v}, kind,
                       {"position": position} if position is not None else None, **extra)

    def poll(self, p: int, q: str, records: list[list[Any]], f: str = "poll") -> int:
        return self.op(p, f, {"queue": q} if f == "drain" else {"queue": q, "max": 16}, "ok", {"records": records})


def test_a_lost_write_is_explained_by_its_acknowledgement_and_the_drain_that_missed_it() -> None:
    h = _H()
    h.send(0, "q0", "w0-0", position="1-0", node="n1", client_node="n2")
    h.send(1, "q0", "w1-0", position="2-0", node="n2")
    h.poll(2, "q0", [["2-0", "w1-0"]], f="drain")
    r = check_total_queue(h.ops)
    assert r.valid is False and r.counts == {"lost-write": 1}
    a = r.anomalies["lost-write"][0]
    assert a.key == "q0" and a.ops == (0, 1, 5)
    for words in ("q0: 'w0-0', acknowledged by n1 at 0.50 s (#1 p0, client on n2, position '1-0'), is gone",
                  "the drain #4-#5 (ok at 4.50 s, 4.0 s later) returned 1 records ('2-0' .. '2-0') without it, nor "
                  "did any poll"):
        assert words in a.explanation, words
    assert r.stats["lost"] == 1 and r.stats["delivered"] == 1 and r.stats["explanation"] == a.explanation
    lines = summary_lines(results_to_json({"total-queue": r}))
    text = "\n".join(lines)  # the CLI's verdict: the kind, then the value, who acknowledged it and when
    assert "lost-write x1" in text and "q0: 'w0-0', acknowledged by n1 at 0.50 s" in text, text


def test_on_a_log_a_send_a_poll_read_but_the_drain_lacks_is_lost_on_a_queue_it_was_consumed() -> None:
    h = _H()
    h.send(0, "q0", "w0-0", position="1-0", node="n1")
    h.op(1, "poll", {"queue": "q0", "max": 4}, "ok", {"records": [["1-0", "w0-0"]]}, node="n1")
    h.send(0, "q0", "w0-1", position="1-0", node="n2")
    h.op(1, "drain", {"queue": "q0"}, "ok", {"records": [["1-0", "w0-1"]]}, node="n2")
    as_queue = check_total_queue(h.ops)
    assert as_queue.valid is True and as_queue.stats["delivered"] == 2
    as_log = check_total_queue(h.ops, log=True)
    assert as_log.valid is False and as_log.counts == {"lost-write": 1}
    assert as_log.stats["lost"] == as_log.stats["lost_after_read"] == 1
    text = as_log.anomalies["lost-write"][0].explanation
    assert text.startswith("q0: 'w0-0', acknowledged by n1 at 0.50 s (#1 p0, position '1-0'), is gone: the drain "
                           "#6-#7 from n2"), text
    assert text.endswith("without it, although a poll had read it (#3 from n1 at 2.50 s)"), text


def test_an_unread_send_without_a_later_drain_is_unseen_not_lost() -> None:
    h = _H()
    h.poll(2, "q0", [], f="drain")
    h.send(0, "q0", "w0-0", position="1-0")
    r = check_total_queue(h.ops)
    assert r.valid == "unknown" and r.counts == {"unseen": 1} and r.stats["lost"] == 0
    assert r.error is not None and "1 acknowledged send(s) were never read" in r.error and "(q0)" in r.error


def test_a_log_re_read_at_the_same_position_is_no_duplicate_but_another_position_is() -> None:
    h = _H()
    h.send(0, "q0", "a", position="1-0")
    h.poll(1, "q0", [["1-0", "a"]])
    h.poll(1, "q0", [["1-0", "a"]], f="drain")
    assert check_total_queue(h.ops).stats["duplicated"] == 0
    h.poll(1, "q0", [["7-0", "a"]], f="drain")
    at_least_once = check_total_queue(h.ops)
    assert at_least_once.valid is True and at_least_once.stats["duplicated"] == 1
    exactly_once = check_total_queue(h.ops, exactly_once=True)
    assert exactly_once.valid is False and exactly_once.counts == {"duplicate": 1}


def test_null_positions_are_separate_deliveries_and_an_info_send_is_never_a_duplicate() -> None:
    h = _H()
    h.send(0, "q0", "a")
    h.send(0, "q0", "b", kind="info")
    h.poll(1, "q0", [[None, "a"], [None, "b"]])
    h.poll(1, "q0", [[None, "a"], [None, "b"]], f="drain")
    r = check_total_queue(h.ops, exactly_once=True)
    assert r.counts == {"duplicate": 1} and r.anomalies["duplicate"][0].observed == 2
    assert r.stats["recovered"] == 1


def test_a_value_nobody_sent_or_only_failed_sends_carried_is_unexpected() -> None:
    h = _H()
    h.send(0, "q0", "a", kind="fail")
    h.send(0, "q1", "b")
    h.poll(1, "q0", [["1", "a"], ["2", "zz"], ["3", "b"]], f="drain")  # b went to q1, not q0
    h.poll(1, "q1", [["1", "b"]], f="drain")
    r = check_total_queue(h.ops)
    assert r.valid is False and r.counts == {"unexpected": 3}
    assert {a.observed for a in r.anomalies["unexpected"]} == {"a", "zz", "b"}


def test_reads_that_failed_prove_nothing() -> None:
    h = _H()
    h.send(0, "q0", "a", position="1")
    h.op(1, "drain", {"queue": "q0"}, "fail")
    r = check_total_queue(h.ops)
    assert r.valid == "unknown" and r.counts == {"unseen": 1}  # not valid: it could not be read at all


@st.composite
def _runs(draw: st.DrawFn) -> dict[str, Any]:
    """A simulated log queue: sends with an outcome (ok / info applied / info not applied / fail), some ok sends
    dropped by the system, some stored twice, some phantom values; polls read the log from a cursor, the drain
    reads all of it.  Returns the history and what the judgement must count."""
    n = draw(st.integers(0, 40))
    outcomes = draw(st.lists(st.sampled_from(["ok", "info+", "info-", "fail"]), min_size=n, max_size=n))
    dropped = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    vanish = draw(st.lists(st.booleans(), min_size=n, max_size=n))  # stored, then gone before the drain
    doubled = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    phantoms = draw(st.integers(0, 3))
    h, log = _H(), []
    cursor, pos = 0, 0
    expect = {"lost": 0, "duplicated": 0, "recovered": 0, "unexpected": phantoms, "acknowledged": 0}
    gone: set[str] = set()  # acknowledged values a poll read and the log then lost
    for i, out in enumerate(outcomes):
        v = f"w0-{i}"
        stored = out == "info+" or (out == "ok" and not dropped[i])
        copies = 2 if stored and doubled[i] else (1 if stored else 0)
        for _ in range(copies):
            pos += 1
            log.append([f"{pos}-0", v])
        h.send(0, "q", v, kind="ok" if out == "ok" else ("fail" if out == "fail" else "info"),
               position=f"{pos}-0" if out == "ok" else None)
        expect["acknowledged"] += out == "ok"
        expect["lost"] += out == "ok" and not stored
        expect["duplicated"] += out == "ok" and copies == 2
        expect["recovered"] += out == "info+"
        if draw(st.booleans()):
            batch = log[cursor:cursor + draw(st.integers(1, 4))]
            h.poll(1, "q", batch)
            cursor += len(batch)
            gone |= {val for _, val in batch if vanish[int(val.split("-")[1])]
                     and outcomes[int(val.split("-")[1])] == "ok" and not doubled[int(val.split("-")[1])]}
    for k in range(phantoms):
        pos += 1
        log.append([f"{pos}-0", f"phantom-{k}"])
    h.poll(1, "q", [r for r in log if r[1] not in gone], f="drain")
    return {"ops": h.ops, "expect": expect, "gone": len(gone)}


@settings(max_examples=200, deadline=None)
@given(_runs(), st.booleans(), st.booleans())
def test_the_judgement_counts_what_the_simulated_queue_did(run: dict[str, Any], exactly_once: bool,
                                                           log: bool) -> None:
    """As a queue, a value a poll read is delivered whatever the drain says; as a log, the drain must still
    hold it, so the values that vanished after a poll are lost too."""
    r = check_total_queue(run["ops"], exactly_once=exactly_once, log=log)
    expect = {**run["expect"]}
    if log:
        expect["lost"] += run["gone"]
    assert {k: r.stats[k] for k in expect} == expect
    assert r.stats["lost_after_read"] == (run["gone"] if log else 0)
    assert r.counts.get("lost-write", 0) == expect["lost"]
    bad = expect["lost"] + expect["unexpected"] + (expect["duplicated"] if exactly_once else 0)
    assert r.valid is (bad == 0)
    assert r.stats["unseen"] == 0  # the drain ran after every send
