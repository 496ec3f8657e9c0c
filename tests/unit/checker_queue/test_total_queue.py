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
    for words in ("q0: 'w0-0', acknowledged by n1 at 0.50 s (#1 p0, client on n2, position '1-0'), was never read",
                  "the drain #4-#5 (ok at 4.50 s, 4.0 s later) returned 1 records ('2-0' .. '2-0') without it"):
        assert words in a.explanation, words
    assert r.stats["lost"] == 1 and r.stats["delivered"] == 1 and r.stats["explanation"] == a.explanation
    lines = summary_lines(results_to_json({"total-queue": r}))
    text = "\n".join(lines)  # the CLI's verdict: the kind, then the value, who acknowledged it and when
    assert "lost-write x1" in text and "q0: 'w0-0', acknowledged by n1 at 0.50 s" in text, text


def test_an_unread_send_without_a_later_drain_is_unseen_not_lost() -> None:
    h = _H()
    h.poll(2, "q0", [], f="drain")
    h.send(0, "q0", "w0-0", position="1-0")
    r = check_total_queue(h.ops)
    assert r.valid is True and r.counts == {"unseen": 1} and r.stats["lost"] == 0


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
    assert r.valid is True and r.counts == {"unseen": 1}


@st.composite
def _runs(draw: st.DrawFn) -> dict[str, Any]:
    """A simulated log queue: sends with an outcome (ok / info applied / info not applied / fail), some ok sends
    dropped by the system, some stored twice, some phantom values; polls read the log from a cursor, the drain
    reads all of it.  Returns the history and what the judgement must count."""
    n = draw(st.integers(0, 40))
    outcomes = draw(st.lists(st.sampled_from(["ok", "info+", "info-", "fail"]), min_size=n, max_size=n))
    dropped = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    doubled = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    phantoms = draw(st.integers(0, 3))
    h, log = _H(), []
    cursor, pos = 0, 0
    expect = {"lost": 0, "duplicated": 0, "recovered": 0, "unexpected": phantoms, "acknowledged": 0}
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
    for k in range(phantoms):
        pos += 1
        log.append([f"{pos}-0", f"phantom-{k}"])
    h.poll(1, "q", log, f="drain")
    return {"ops": h.ops, "expect": expect}


@settings(max_examples=200, deadline=None)
@given(_runs(), st.booleans())
def test_the_judgement_counts_what_the_simulated_queue_did(run: dict[str, Any], exactly_once: bool) -> None:
    r = check_total_queue(run["ops"], exactly_once=exactly_once)
    expect = run["expect"]
    assert {k: r.stats[k] for k in expect} == expect
    assert r.counts.get("lost-write", 0) == expect["lost"]
    bad = expect["lost"] + expect["unexpected"] + (expect["duplicated"] if exactly_once else 0)
    assert r.valid is (bad == 0)
    assert r.stats["unseen"] == 0  # the drain ran after every send
