"""Property tests of the queue checker against a seeded simulator of a queue (elle's ``sim-*`` tests).

``simulate(params)`` is pure apart from its ``random.Random(params.seed)``: worker threads send unique values
and poll queues concurrently (every op is an invoke, one or more steps of effect, then an ok / fail / info
completion), a nemesis interleaves no-op fault markers, and a final drain reads every queue.  It returns the
history in exactly the ``history.jsonl`` shape the checker reads (``checker/queue/__init__.py``) plus the
ground truth: which sends were acknowledged, which indeterminate sends took effect, and what a bug did.

With ``bug=None`` the simulated broker is correct, so the checker must never flag the history.  Each bug makes
the broker misbehave exactly once, and the checker must report it with the anomaly type given in ``BUGS``.
Every failing example prints its ``SimParams`` (with the seed); ``simulate(SimParams(...))`` replays it.
"""

from __future__ import annotations

import json
import random
import tempfile
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checker.compose import Result
from checker.history import Op
from checker.queue import ANOMALY_TYPES, QueueScan, check_queue, check_queue_file

# bug -> the anomaly type the checker must report ("computed": the simulator works out which of two it is)
BUGS: dict[str, str] = {
    "lose-acked": "computed",  # ack a send, never store it: lost-write, or unseen after the drain if it was last
    "duplicate": "duplicate",  # store an acknowledged send twice
    "swap-in-poll": "int-nonmonotonic-poll",  # one poll returns two adjacent records in swapped order
    "poll-backwards": "nonmonotonic-poll",  # a poll from offset F also returns the record at F-1, first
    "insert-below": "computed",  # store a send below an already acknowledged offset: nonmonotonic-send[-realtime]
    "phantom": "unexpected",  # a record whose value nobody ever sent
    "failed-delivered": "unexpected",  # a send answered ``fail`` (definitely not sent) is stored anyway
}

_HOLE = object()  # a log slot whose record the broker lost: reads skip it, the offset stays taken
_FRESH_PID = 1_000_000  # processes of the epilogue and the drain, far above any renumbered worker


@dataclass(frozen=True)
class SimParams:
    """One simulated run.  Rates are probabilities per op; ``steps`` counts scheduler steps of the main phase."""

    seed: int
    queues: int = 2
    workers: int = 3
    steps: int = 120
    send_fraction: float = 0.5
    fail_rate: float = 0.1
    info_rate: float = 0.15
    poll_fail_rate: float = 0.05
    poll_info_rate: float = 0.05
    explicit_offset_rate: float = 0.5  # polls that name their offset (else the broker resumes the consumer)
    named_consumers: bool = True  # polls carry "consumer" (else the checker keys cursors by process)
    info_dup_rate: float = 0.0  # an indeterminate send stored twice (a client retry the caller never saw)
    abandon_rate: float = 0.2  # ops still open at the end that never complete (the checker treats them as info)
    drain: bool = True
    drain_page: int = 0  # 0: one drain per queue from offset 0; else pages of this many offsets
    bug: str | None = None
    bug_at: int = 0  # the bug fires at its first chance on or after this step (or in the epilogue)


@dataclass
class SimRun:
    """A simulated history and its ground truth."""

    params: SimParams
    history: list[dict[str, Any]] = field(default_factory=list)
    acked: dict[str, tuple[str, int]] = field(default_factory=dict)  # value -> (queue, acknowledged offset)
    failed: set[str] = field(default_factory=set)
    info_stored: dict[str, int] = field(default_factory=dict)  # indeterminate value -> copies stored
    attempted: int = 0
    bug: dict[str, Any] | None = None  # what the bug did: type, value, queue ...


class _Sim:
    def __init__(self, p: SimParams) -> None:
        self.p = p
        self.rng = random.Random(p.seed)
        self.names = [f"t/bs{i % 2}/{i}" for i in range(p.queues)]
        self.logs: dict[str, list[Any]] = {q: [] for q in self.names}
        self.run = SimRun(p)
        self.pids = list(range(p.workers))  # worker -> current process id
        self.open: list[dict[str, Any] | None] = [None] * p.workers
        self.cursors: list[dict[str, int]] = [{} for _ in range(p.workers)]  # client side: next offset to read
        self.deferred: list[tuple[str, str]] = []  # sends that take effect after their completion
        self.dup_values: set[str] = set()  # deferred second copies of acknowledged sends (the duplicate bug)
        self.max_ack: dict[str, int] = {}  # queue -> highest acknowledged offset so far (as the history shows)
        self.last_ack: dict[tuple[Any, str], int] = {}  # (process, queue) -> offset of its last ok send
        self.seq = 0
        self.fresh = _FRESH_PID
        self.step = 0

    # -- output ----------------------------------------------------------------------------------
    def emit(self, type_: str, process: Any, f: str, value: Any) -> None:
        h = self.run.history
        h.append({"index": len(h), "time": len(h) * 1000, "type": type_, "process": process, "f": f, "value": value})

    def fresh_pid(self) -> int:
        self.fresh += 1
        return self.fresh

    def wants_bug(self, name: str) -> bool:
        return self.p.bug == name and self.run.bug is None and self.step >= self.p.bug_at

    def store(self, q: str, v: Any) -> int:
        log = self.logs[q]
        log.append(v)
        return len(log) - 1

    # -- sends -----------------------------------------------------------------------------------
    def invoke_send(self, pid: Any, q: str, outcome: str) -> dict[str, Any]:
        self.seq += 1
        v = f"p{pid}-{self.seq}"
        self.run.attempted += 1
        self.emit("invoke", pid, "send", {"queue": q, "value": v})
        return {"f": "send", "pid": pid, "queue": q, "value": v, "outcome": outcome, "stage": "invoked",
                "inv_max": self.max_ack.get(q)}

    def pick_send_outcome(self) -> str:
        r = self.rng.random()
        if r < self.p.fail_rate:
            return "fail"
        if r < self.p.fail_rate + self.p.info_rate:
            return self.rng.choice(["info-stored", "info-late", "info-never"])
        return "ok"

    def step_send(self, op: dict[str, Any]) -> bool:
        """Advance a send by one step; True when it completed."""
        q, v, outcome = op["queue"], op["value"], op["outcome"]
        if op["stage"] == "invoked" and outcome in ("ok", "info-stored"):
            op["offset"] = self.store_send(op)
            op["stage"] = "stored"
            return False
        if outcome == "ok":
            off = op["offset"]
            self.emit("ok", op["pid"], "send", {"queue": q, "value": v, "offset": off})
            self.run.acked[v] = (q, off)
            self.max_ack[q] = max(self.max_ack.get(q, off), off)
            self.last_ack[(op["pid"], q)] = off
            return True
        if outcome == "fail":
            if self.wants_bug("failed-delivered"):
                off = self.store(q, v)
                self.run.bug = {"type": "unexpected", "value": v, "queue": q, "offset": off}
            self.run.failed.add(v)
            self.emit("fail", op["pid"], "send", {"queue": q, "value": v})
            return True
        if outcome == "info-late":
            self.deferred.append((q, v))
        self.run.info_stored.setdefault(v, 0)
        self.emit("info", op["pid"], "send", {"queue": q, "value": v})
        return True

    def store_send(self, op: dict[str, Any]) -> int:
        q, v = op["queue"], op["value"]
        if op["outcome"] == "info-stored":
            self.run.info_stored[v] = 1
            off = self.store(q, v)
            if self.rng.random() < self.p.info_dup_rate:
                self.store(q, v)
                self.run.info_stored[v] = 2
            return off
        log = self.logs[q]
        if self.wants_bug("lose-acked"):
            off = self.store(q, _HOLE)
            self.run.bug = {"type": "pending", "value": v, "queue": q, "offset": off}
            op["bug"] = True
            return off
        if self.wants_bug("duplicate"):
            off = self.store(q, v)
            if self.rng.random() < 0.5:
                self.store(q, v)
            else:
                self.deferred.append((q, v))
                self.dup_values.add(v)
            self.run.bug = {"type": "duplicate", "value": v, "queue": q}
            op["bug"] = True
            return off
        m = op["inv_max"]
        if m is not None and m >= 1 and self.wants_bug("insert-below"):
            off = self.rng.randrange(m)
            log.insert(off, v)
            last = self.last_ack.get((op["pid"], q))
            kind = "nonmonotonic-send" if last is not None and off < last else "nonmonotonic-send-realtime"
            self.run.bug = {"type": kind, "value": v, "queue": q}
            op["bug"] = True
            return off
        return self.store(q, v)

    # -- polls -----------------------------------------------------------------------------------
    def invoke_poll(self, w: int, q: str) -> dict[str, Any]:
        cursor = self.cursors[w].get(q, 0)
        value: dict[str, Any] = {"queue": q}
        frm = None
        if self.rng.random() < self.p.explicit_offset_rate:
            frm = cursor if self.rng.random() < 0.8 else self.rng.randint(0, cursor)  # seeking back is allowed
            value["offset"] = frm
        if self.p.named_consumers:
            value["consumer"] = f"c{w}"
        r = self.rng.random()
        outcome = "fail" if r < self.p.poll_fail_rate else (
            "info" if r < self.p.poll_fail_rate + self.p.poll_info_rate else "ok")
        self.emit("invoke", self.pids[w], "poll", value)
        return {"f": "poll", "pid": self.pids[w], "queue": q, "from": frm, "start": cursor if frm is None else frm,
                "batch": self.rng.randint(1, 5), "outcome": outcome, "stage": "invoked"}

    def read(self, q: str, start: int, n: int) -> list[list[Any]]:
        log = self.logs[q]
        return [[o, log[o]] for o in range(start, min(len(log), start + n)) if log[o] is not _HOLE]

    def step_poll(self, w: int, op: dict[str, Any]) -> bool:
        q = op["queue"]
        if op["stage"] == "invoked" and op["outcome"] != "fail":
            recs = self.read(q, op["start"], op["batch"])
            visible = op["outcome"] == "ok"  # the records of an info poll never reach the history
            if visible and len(recs) >= 2 and self.wants_bug("swap-in-poll"):
                i = self.rng.randrange(len(recs) - 1)
                recs[i], recs[i + 1] = recs[i + 1], recs[i]
                self.run.bug = {"type": "int-nonmonotonic-poll", "queue": q}
                op["bug"] = True
            frm = op["from"]
            if visible and frm is not None and frm >= 1 and recs and self.wants_bug("poll-backwards"):
                recs.insert(0, [frm - 1, self.logs[q][frm - 1]])
                self.run.bug = {"type": "nonmonotonic-poll", "queue": q}
                op["bug"] = True
            op["records"] = recs
            op["stage"] = "read"
            return False
        if op["outcome"] == "fail":
            self.emit("fail", op["pid"], "poll", None)
        elif op["outcome"] == "info":
            self.emit("info", op["pid"], "poll", None)
            if op["records"] and self.p.drain and self.rng.random() < 0.5:
                # the broker moved the consumer past the records whose reply was lost, so the consumer never
                # reads them; only with a drain, which reads them (else they would look lost, see lost-write)
                self.cursors[w][q] = op["records"][-1][0] + 1
        else:
            recs = op["records"]
            self.emit("ok", op["pid"], "poll", {"queue": q, "records": recs})
            if recs:
                self.cursors[w][q] = recs[-1][0] + 1
            elif op["from"] is not None:
                self.cursors[w][q] = op["from"]
        return True

    # -- the run ---------------------------------------------------------------------------------
    def step_worker(self, w: int) -> None:
        op = self.open[w]
        if op is None:
            q = self.names[self.rng.randrange(len(self.names))]
            if self.rng.random() < 0.05:  # an op the queue checker ignores
                self.emit("invoke", self.pids[w], "commit", {"queue": q, "offset": 0})
                self.emit("ok", self.pids[w], "commit", {"queue": q, "offset": 0})
            elif self.rng.random() < self.p.send_fraction:
                self.open[w] = self.invoke_send(self.pids[w], q, self.pick_send_outcome())
            else:
                self.open[w] = self.invoke_poll(w, q)
            return
        done = self.step_send(op) if op["f"] == "send" else self.step_poll(w, op)
        if done:
            self.open[w] = None
            if self.run.history[-1]["type"] == "info":  # the harness renumbers a process after info
                self.pids[w] += self.p.workers

    def main_phase(self) -> None:
        for step in range(self.p.steps):
            self.step = step
            r = self.rng.random()
            if r < 0.03:
                f = self.rng.choice(["start-partition", "stop-partition", "kill"])
                self.emit("invoke", "nemesis", f, None)
                self.emit("info", "nemesis", f, None)
            elif r < 0.08 and self.deferred:
                q, v = self.deferred.pop(self.rng.randrange(len(self.deferred)))
                self.store(q, v)
                if v not in self.dup_values:
                    self.run.info_stored[v] = self.run.info_stored.get(v, 0) + 1
            elif r < 0.10 and self.wants_bug("phantom"):
                q = self.rng.choice(self.names)
                off = self.store(q, f"phantom-{self.step}")
                self.run.bug = {"type": "unexpected", "value": f"phantom-{self.step}", "queue": q, "offset": off}
            else:
                self.step_worker(self.rng.randrange(self.p.workers))

    def finish_open_ops(self) -> None:
        for w, op in enumerate(self.open):
            if op is None:
                continue
            if not op.get("bug") and self.rng.random() < self.p.abandon_rate:
                # never completes: a send may or may not take effect, like an info send
                if op["f"] == "send" and op["stage"] == "invoked" and self.rng.random() < 0.5:
                    self.store(op["queue"], op["value"])
                    self.run.info_stored[op["value"]] = 1
                elif op["f"] == "send":
                    self.run.info_stored.setdefault(op["value"], 1 if op["stage"] == "stored" else 0)
                continue
            while not (self.step_send(op) if op["f"] == "send" else self.step_poll(w, op)):
                pass
        self.open = [None] * self.p.workers

    def settle_deferred(self) -> None:
        """Late effects happen before the drain: a late indeterminate send lands or not, a late copy lands."""
        for q, v in self.deferred:
            if v in self.dup_values:
                self.store(q, v)
            elif self.rng.random() < 0.5:
                self.store(q, v)
                self.run.info_stored[v] = self.run.info_stored.get(v, 0) + 1
        self.deferred = []

    def epilogue_bug(self) -> None:
        """Make the bug happen once if the main phase gave it no chance (fresh processes, one queue)."""
        if self.p.bug is None or self.run.bug is not None:
            return
        q = self.names[0]
        self.step = max(self.step, self.p.bug_at)

        def send(outcome: str, pid: int | None = None) -> None:
            op = self.invoke_send(self.fresh_pid() if pid is None else pid, q, outcome)
            while not self.step_send(op):
                pass

        bug = self.p.bug
        if bug in ("lose-acked", "duplicate", "failed-delivered"):
            send("fail" if bug == "failed-delivered" else "ok")
        elif bug == "phantom":
            off = self.store(q, "phantom-epilogue")
            self.run.bug = {"type": "unexpected", "value": "phantom-epilogue", "queue": q, "offset": off}
        elif bug == "insert-below":
            p1 = self.fresh_pid()
            send("ok", p1)
            send("ok", p1)
            send("ok")
        else:  # the poll bugs need two records to read
            p1 = self.fresh_pid()
            send("ok", p1)
            send("ok", p1)
            op = {"f": "poll", "pid": self.fresh_pid(), "queue": q, "from": 1 if bug == "poll-backwards" else 0,
                  "batch": len(self.logs[q]), "outcome": "ok", "stage": "invoked"}
            op["start"] = op["from"]
            self.emit("invoke", op["pid"], "poll", {"queue": q, "offset": op["from"]})
            while not self.step_poll(0, op):
                pass
        assert self.run.bug is not None, f"bug {bug} did not fire in the epilogue"

    def drain(self) -> None:
        pid = self.fresh_pid()
        for q in self.names:
            page = self.p.drain_page or max(len(self.logs[q]), 1)
            for start in range(0, max(len(self.logs[q]), 1), page):
                self.emit("invoke", pid, "drain", {"queue": q, "offset": start, "consumer": "drain"})
                self.emit("ok", pid, "drain", {"queue": q, "records": self.read(q, start, page)})

    def resolve_lost(self) -> None:
        bug = self.run.bug
        if bug is None or bug["type"] != "pending":
            return
        log = self.logs[bug["queue"]]
        later = any(v is not _HOLE for v in log[bug["offset"] + 1:])
        bug["type"] = "lost-write" if later else "unseen"


def simulate(params: SimParams) -> SimRun:
    """Run the simulator (deterministic for given params)."""
    if params.bug is not None and params.bug not in BUGS:
        raise ValueError(f"SimParams.bug must be None or one of {sorted(BUGS)}, got {params.bug!r}")
    sim = _Sim(params)
    sim.main_phase()
    sim.finish_open_ops()
    sim.epilogue_bug()
    sim.settle_deferred()
    if params.drain:
        sim.drain()
    sim.resolve_lost()
    return sim.run


# ---------------------------------------------------------------------------------------------
# strategies and helpers

def _params(*, bug: str | None = None) -> st.SearchStrategy[SimParams]:
    return st.builds(
        SimParams,
        seed=st.integers(0, 2**32 - 1),
        queues=st.integers(1, 3),
        workers=st.integers(1, 5),
        steps=st.integers(0, 250),
        send_fraction=st.sampled_from([0.2, 0.5, 0.8]),
        fail_rate=st.sampled_from([0.0, 0.1, 0.3]),
        info_rate=st.sampled_from([0.0, 0.15, 0.4]),
        poll_fail_rate=st.sampled_from([0.0, 0.1]),
        poll_info_rate=st.sampled_from([0.0, 0.1]),
        explicit_offset_rate=st.sampled_from([0.0, 0.5, 1.0]),
        named_consumers=st.booleans(),
        info_dup_rate=st.sampled_from([0.0, 0.3]) if bug is None else st.just(0.0),
        abandon_rate=st.sampled_from([0.0, 0.3]),
        drain=st.booleans() if bug is None else st.just(True),
        drain_page=st.sampled_from([0, 1, 3]),
        bug=st.just(bug),
        bug_at=st.integers(0, 250),
    )


def _describe(run: SimRun, result: Result) -> str:
    lines = [result.describe(), repr(run.params)]
    lines += [f"{t}: {a.describe()}" for t, recs in result.anomalies.items() for a in recs[:3]]
    return "\n".join(lines)


def _summary(r: Result) -> tuple[Any, ...]:
    """What must not depend on how a history is read; ``stats["engine"]`` (check_queue_file's) names the way."""
    stats = {k: v for k, v in r.stats.items() if k != "engine"}
    return (r.valid, r.counts, stats, {t: [a.to_dict() for a in v] for t, v in r.anomalies.items()})


# ---------------------------------------------------------------------------------------------
# a correct queue is never flagged

@settings(max_examples=150, deadline=None)
@given(params=_params())
def test_correct_queue_is_never_flagged(params: SimParams) -> None:
    run = simulate(params)
    r = check_queue(run.history)
    why = _describe(run, r)
    assert r.valid is True, why
    bad = {t for t, n in r.counts.items() if ANOMALY_TYPES[t].bad}
    assert not bad, why
    st_ = r.stats
    assert st_["attempted"] == run.attempted, why
    assert st_["acknowledged"] == len(run.acked), why
    assert st_["failed"] == len(run.failed), why
    assert (st_["lost"], st_["duplicated"], st_["unexpected"]) == (0, 0, 0), why
    stored_info = sum(1 for n in run.info_stored.values() if n)
    if params.drain:  # the drain read every record, so every outcome is known exactly
        assert st_["unseen"] == 0, why
        assert st_["recovered"] == stored_info, why
        assert st_["delivered"] == len(run.acked) + stored_info, why
    else:
        assert st_["recovered"] <= stored_info, why


@settings(max_examples=60, deadline=None)
@given(params=_params(), info_stored=st.booleans())
def test_indeterminate_sends_may_or_may_not_appear(params: SimParams, info_stored: bool) -> None:
    """Every send is indeterminate: all stored (recovered) or none stored (never lost) -- both are valid."""
    outcome = "info-stored" if info_stored else "info-never"
    params = replace(params, send_fraction=0.8, fail_rate=0.0, info_rate=1.0, abandon_rate=0.0, drain=True)
    sim = _Sim(params)
    sim.pick_send_outcome = lambda: outcome  # type: ignore[method-assign]
    sim.main_phase()
    sim.finish_open_ops()
    sim.settle_deferred()
    sim.drain()
    run = sim.run
    r = check_queue(run.history)
    why = _describe(run, r)
    assert r.valid is True and not r.counts.get("lost-write") and not r.counts.get("unseen"), why
    stored = sum(1 for n in run.info_stored.values() if n)
    assert r.stats["recovered"] == stored and r.stats["lost"] == 0 and r.stats["duplicated"] == 0, why
    assert stored == (r.stats["indeterminate"] if info_stored else 0), why  # not vacuous: they did show up


# ---------------------------------------------------------------------------------------------
# each bug is caught, with the right anomaly type, naming the right value

@pytest.mark.parametrize("bug", sorted(BUGS))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_bug_is_caught_with_its_anomaly_type(bug: str, data: st.DataObject) -> None:
    params = data.draw(_params(bug=bug))
    run = simulate(params)
    assert run.bug is not None
    r = check_queue(run.history, max_records=10_000)
    why = _describe(run, r) + f"\nbug: {run.bug}"
    kind = run.bug["type"]
    assert BUGS[bug] in (kind, "computed"), why
    assert r.valid is False, why
    assert r.counts.get(kind, 0) >= 1, why
    if "value" in run.bug:  # the report names the value the bug touched
        named = [a for a in r.anomalies[kind]
                 if run.bug["value"] in ((a.expected or {}).get("value"), (a.observed or {}).get("value"))]
        assert named, why
    if kind == "unseen":
        assert r.stats["lost"] >= 1, why


# ---------------------------------------------------------------------------------------------
# the ways in are equivalent: dicts, Op objects, chunked feeding and the streaming file reader

@settings(max_examples=30, deadline=None)
@given(params=_params(), bug=st.sampled_from([None, *sorted(BUGS)]), cut=st.integers(0, 10_000))
def test_inputs_agree(params: SimParams, bug: str | None, cut: int) -> None:
    run = simulate(replace(params, bug=bug, drain=params.drain or bug is not None,
                           info_dup_rate=0.0 if bug else params.info_dup_rate))
    h = run.history
    want = _summary(check_queue(h))
    assert _summary(check_queue([Op.from_dict(d) for d in h])) == want
    scan = QueueScan()
    cut = cut % (len(h) + 1)
    scan.feed(h[:cut])
    scan.feed(h[cut:])
    assert _summary(scan.result()) == want
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "history.jsonl"
        path.write_text("".join(json.dumps(op) + "\n" for op in h))
        assert _summary(check_queue_file(path)) == want


def test_simulator_is_deterministic_and_rejects_unknown_bugs() -> None:
    p = SimParams(seed=7, steps=200, bug="duplicate", bug_at=50)
    assert simulate(p).history == simulate(p).history
    with pytest.raises(ValueError, match=r"SimParams\.bug"):
        simulate(replace(p, bug="nope"))


# ---------------------------------------------------------------------------------------------
# the block decoder (checker/queue/_lines.py) agrees with the line-by-line dict reader, on any input

_MUTATIONS = ("drop-index", "drop-type", "drop-process", "drop-f", "drop-value", "drop-queue", "drop-send-value",
              "drop-offset", "drop-consumer", "drop-records", "null-value", "list-value", "float-send-value",
              "list-send-value", "nemesis", "extra-keys", "triple-record", "string-offset", "pretty-line",
              "two-per-line", "blank-line", "crlf", "bad-json")


def _mutate(h: list[dict[str, Any]], at: int, kind: str) -> list[str]:
    """Apply one mutation to op ``at`` of ``h`` (in place); return extra raw lines to splice in after it."""
    op = h[at]
    v = op.get("value")
    key = kind.removeprefix("drop-")
    if kind in ("drop-index", "drop-type", "drop-process", "drop-f", "drop-value"):
        op.pop(key, None)
    elif kind in ("drop-queue", "drop-offset", "drop-consumer", "drop-records") and isinstance(v, dict):
        v.pop(key, None)
    elif kind == "drop-send-value" and isinstance(v, dict):
        v.pop("value", None)
    elif kind == "null-value":
        op["value"] = None
    elif kind == "list-value":
        op["value"] = [1, {"queue": "x"}]
    elif kind == "float-send-value" and isinstance(v, dict) and "value" in v:
        v["value"] = 1.5
    elif kind == "list-send-value" and isinstance(v, dict) and "value" in v:
        v["value"] = [1, {"b": 2, "a": None}]
    elif kind == "nemesis":
        return [json.dumps({"index": -1, "time": 0, "type": "info", "process": "nemesis", "f": "kill",
                            "value": {"queue": ["n1"], "records": "all"}})]
    elif kind == "extra-keys":
        op["zz"] = {"records": [1]}
        if isinstance(v, dict):
            v["zz"] = [[1, 2, 3]]
    elif kind == "triple-record" and isinstance(v, dict) and v.get("records"):
        v["records"][0] = [*v["records"][0], 0]
    elif kind == "string-offset" and isinstance(v, dict) and v.get("records"):
        v["records"][0] = [str(v["records"][0][0]), v["records"][0][1]]
    elif kind == "pretty-line":
        return [json.dumps(op, indent=1)]
    elif kind == "two-per-line":
        return [json.dumps(op) + " " + json.dumps(op)]
    elif kind == "blank-line":
        return ["   "]
    elif kind == "crlf":
        return [json.dumps(op) + "\r"]
    elif kind == "bad-json":
        return ['{"index": 1, "f": "send"']
    return []


def _outcome(run: Any) -> tuple[Any, ...]:
    try:
        return ("ok", _summary(run()))
    except Exception as exc:  # the two readers must fail the same way, too
        return ("error", type(exc).__name__)


def _mutated_lines(h: list[dict[str, Any]], mutations: list[tuple[int, str]], seps: tuple[str, str]) -> list[str]:
    """The history's lines (spelled with ``seps``), each followed by the malformed lines its mutations add."""
    extra: dict[int, list[str]] = {}
    for at, kind in mutations:
        if h:
            extra.setdefault(at % len(h), []).extend(_mutate(h, at % len(h), kind))
    lines = []
    for i, op in enumerate(h):
        lines.append(json.dumps(op, separators=seps))
        lines.extend(extra.get(i, []))
    return lines


def _scan_by_dicts(path: Path, **part: int) -> Result:
    """The reference pass: dict chunks through ``feed``."""
    from checker.queue import iter_history_chunks

    scan = QueueScan(**part)
    for chunk in iter_history_chunks(path):
        scan.feed(chunk)
    return scan.result()


def _scan_by_blocks(path: Path, block: int, **part: int) -> Result:
    """The workers' pass: decoded blocks through ``feed_decoded`` (dicts where a block could not be decoded)."""
    from checker.queue import iter_history_ops

    scan = QueueScan(**part)
    for decoded, ops in iter_history_ops(path, block_bytes=block):
        if decoded:
            scan.feed_decoded(ops)
        else:
            scan.feed(ops)
    return scan.result()


@settings(max_examples=80, deadline=None)
@given(params=_params(), bug=st.sampled_from([None, *sorted(BUGS)]), block=st.integers(16, 4096),
       mutations=st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(_MUTATIONS)), max_size=4),
       spaced=st.booleans(), torn=st.integers(-1, 60))
def test_block_decoder_agrees_with_dict_reader(params: SimParams, bug: str | None, block: int,
                                               mutations: list[tuple[int, str]], spaced: bool, torn: int) -> None:
    """Small blocks cut lines anywhere; malformed ops, odd layouts and a torn last line must change nothing."""
    run = simulate(replace(params, bug=bug, drain=params.drain or bug is not None,
                           info_dup_rate=0.0 if bug else params.info_dup_rate))
    h = [json.loads(json.dumps(op)) for op in run.history]
    lines = _mutated_lines(h, mutations, (", ", ": ") if spaced else (",", ":"))
    text = "".join(line + "\n" for line in lines)
    if torn >= 0 and lines:
        text = text[:len(text) - 1 - min(torn, len(lines[-1]))]  # drop the last newline and part of the line
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "history.jsonl"
        path.write_text(text)
        want = _outcome(lambda: _scan_by_dicts(path))
        got = _outcome(lambda: _scan_by_blocks(path, block))
        if want[0] == got[0] == "error" and block < len(text.encode()):
            return  # both fail; which error comes first depends on where the readers cut (read vs. feed)
        assert got == want
        assert _outcome(lambda: check_queue_file(path)) == want


@settings(max_examples=60, deadline=None)
@given(params=_params(), bug=st.sampled_from([None, *sorted(BUGS)]), parts=st.integers(2, 3),
       queues=st.integers(1, 5), block=st.integers(64, 4096),
       mutations=st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(_MUTATIONS)), max_size=3))
def test_a_parts_block_pass_agrees_with_its_dict_pass(params: SimParams, bug: str | None, parts: int, queues: int,
                                                      block: int, mutations: list[tuple[int, str]]) -> None:
    """feed_decoded's shortcut for other parts' queues (no _claim per invoke) must not change a part's tally."""
    run = simulate(replace(params, queues=queues, bug=bug, drain=params.drain or bug is not None,
                           info_dup_rate=0.0 if bug else params.info_dup_rate))
    h = [json.loads(json.dumps(op)) for op in run.history]
    lines = _mutated_lines(h, mutations, (",", ":"))
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "history.jsonl"
        path.write_text("".join(line + "\n" for line in lines))
        for part in range(parts):
            want = _outcome(partial(_scan_by_dicts, path, part=part, parts=parts))
            got = _outcome(partial(_scan_by_blocks, path, block, part=part, parts=parts))
            if want[0] == got[0] == "error":
                continue  # which error comes first depends on where the readers cut (see the test above)
            assert got == want


# ---------------------------------------------------------------------------------------------
# scans that split the queues between them add up to the whole scan

def _records(r: Result) -> list[str]:
    return sorted(json.dumps(a.to_dict(), sort_keys=True, default=str) for v in r.anomalies.values() for a in v)


@settings(max_examples=80, deadline=None)
@given(params=_params(), bug=st.sampled_from([None, *sorted(BUGS)]), parts=st.integers(2, 4),
       queues=st.integers(1, 5))
def test_parts_add_up_to_the_whole_scan(params: SimParams, bug: str | None, parts: int, queues: int) -> None:
    """What ``check_queue_file(workers=n)`` relies on: parts 0..n-1 of a history, merged, are the whole."""
    from checker.queue._scan import merge_tallies

    run = simulate(replace(params, queues=queues, bug=bug, drain=params.drain or bug is not None,
                           info_dup_rate=0.0 if bug else params.info_dup_rate))
    whole = check_queue(run.history, max_records=10**9)
    tallies = []
    for part in range(parts):
        scan = QueueScan(max_records=10**9, part=part, parts=parts)
        scan.feed(run.history)
        tallies.append(scan.tally())
    merged = merge_tallies(tallies, max_records=10**9)
    assert (merged.valid, merged.counts, merged.stats) == (whole.valid, whole.counts, whole.stats)
    assert _records(merged) == _records(whole)
    assert sum(t.stats["queues"] for t in tallies) == whole.stats["queues"]
    named = {op["value"]["queue"] for op in run.history if op["f"] in ("send", "poll", "drain")
             and op["type"] == "invoke"}
    if len(named) == whole.stats["queues"] >= parts:  # round-robin by first appearance: every part got a queue
        assert all(t.stats["queues"] >= 1 for t in tallies)  # (a queue only a failed poll named is never made)


def test_merged_parts_keep_the_earliest_records_of_a_type() -> None:
    h = []
    for i in range(6):  # six queues, one unexpected read each, op indices increasing
        q = f"q{i}"
        h += [{"index": 2 * i, "type": "invoke", "process": 0, "f": "poll", "value": {"queue": q}},
              {"index": 2 * i + 1, "type": "ok", "process": 0, "f": "poll",
               "value": {"queue": q, "records": [[0, f"ghost{i}"]]}}]
    tallies = []
    for part in range(3):
        scan = QueueScan(max_records=2, part=part, parts=3)
        scan.feed(h)
        tallies.append(scan.tally())
    from checker.queue._scan import merge_tallies

    merged = merge_tallies(tallies, max_records=2)
    assert merged.counts["unexpected"] == 6 and merged.stats["unexpected"] == 6
    assert [a.ops for a in merged.anomalies["unexpected"]] == [(1,), (3,)]


@pytest.mark.parametrize(("part", "parts"), [(-1, 2), (2, 2), (0, 0)])
def test_a_part_outside_the_parts_is_refused(part: int, parts: int) -> None:
    with pytest.raises(ValueError, match="part must be in"):
        QueueScan(part=part, parts=parts)
