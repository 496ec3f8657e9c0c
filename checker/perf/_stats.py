"""Pure performance statistics: latencies, rates, nemesis windows and availability per fault window.

Times in the history are ns since test start; everything returned here is in seconds (``*_s``) or
milliseconds (``*_ms``).  A *nemesis window* is the interval between a fault-starting nemesis op and the
matching healing op (``NEMESIS_PAIRS``, plus any ``start-X``/``stop-X``); an unhealed window ends at the end of
the history.  *Availability* of a window: how long after the fault started client ops kept failing (the
last ``fail``/``info`` completion before the next window starts), and the RTO: the time from the heal to
the first ``ok`` completion.  *Figures per fault kind* (:func:`fault_kind_figures`): recovery, how long no write
succeeded, and p99 latency under each kind of fault -- what the release gate compares between two builds.
"""

from __future__ import annotations

import json
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

NS_PER_S = 1_000_000_000

# fault-starting nemesis f -> healing nemesis f (the one table; "start-X" -> "stop-X" is implied)
NEMESIS_PAIRS: dict[str, str] = {
    "kill": "start", "terminate": "start", "pause": "resume", "bump-clock": "reset-clock",
    "skew-clock": "reset-clock", "strobe-clock": "reset-clock", "partition": "heal",
    "arm-failpoint": "disarm-failpoint",
}
QUANTILES = (0.5, 0.95, 0.99, 1.0)


@dataclass(frozen=True, slots=True)
class Window:
    """One fault window: ``f`` started at ``start_s`` and was healed by ``stop_f`` at ``end_s``."""

    f: str
    start_s: float
    end_s: float
    stop_f: str | None  # None: never healed (end_s is the end of the history)
    start_index: int
    end_index: int
    detail: str = ""  # the starting op's value in short ("isolate-master", "masters"): a band's label says what

    @property
    def label(self) -> str:
        """``f`` and its detail, the text of a fault band (``start-partition isolate-master``)."""
        return f"{self.f} {self.detail}".strip()

    def __post_init__(self) -> None:
        if self.end_s < self.start_s:
            raise ValueError(f"Window {self.f}: end_s {self.end_s} is before start_s {self.start_s}")


@dataclass(frozen=True, slots=True)
class LatencyPoint:
    time_s: float  # invoke time
    latency_ms: float
    type: str  # ok | fail | info
    f: str
    process: Any
    invoke_index: int
    complete_index: int


@dataclass(frozen=True, slots=True)
class Availability:
    f: str
    start_s: float
    end_s: float
    healed: bool
    ops_ok: int
    ops_failed: int  # fail or info completions from start to the next window (or history end)
    first_failure_s: float | None  # after fault start
    last_failure_s: float | None  # after fault start
    rto_s: float | None  # from heal to the first ok completion

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _d(op: Any) -> dict[str, Any]:
    return op if isinstance(op, dict) else op.to_dict()


def healing_f(f: str) -> str | None:
    """The nemesis f that heals fault ``f`` (None if ``f`` does not start a fault)."""
    if f in NEMESIS_PAIRS:
        return NEMESIS_PAIRS[f]
    if f.startswith("start-"):
        return "stop-" + f[len("start-"):]
    return None


def fault_detail(value: Any, width: int = 40) -> str:
    """A nemesis op's value in a few words, for a band's label: a ``kind`` (and ``targets``) of a mapping, a
    string as is, anything else as compact JSON; at most ``width`` characters."""
    if value is None:
        return ""
    if isinstance(value, dict):
        parts = [str(value[k]) for k in ("kind", "targets", "failpoint", "node") if value.get(k) not in (None, "")]
        text = " ".join(parts) if parts else json.dumps(value, separators=(",", ":"), default=str, sort_keys=True)
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, separators=(",", ":"), default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def nemesis_windows(history: Iterable[Any]) -> list[Window]:
    """Pair fault-starting and healing nemesis ops by f, in history order."""
    open_: dict[str, tuple[float, int, str]] = {}
    heals: dict[str, list[str]] = {}
    out: list[Window] = []
    end_s, end_i = 0.0, 0
    for raw in history:
        d = _d(raw)
        end_s, end_i = max(end_s, d["time"] / NS_PER_S), d["index"]
        if d["process"] != "nemesis":
            continue
        f = d["f"]
        stop = healing_f(f)
        if stop is not None and d["type"] == "invoke" and f not in open_:
            open_[f] = (d["time"] / NS_PER_S, d["index"], fault_detail(d.get("value")))
            heals.setdefault(stop, []).append(f)
        elif d["type"] != "invoke" and heals.get(f):
            for start_f in heals.pop(f):
                st, si, detail = open_.pop(start_f)
                out.append(Window(start_f, st, d["time"] / NS_PER_S, f, si, d["index"], detail))
    for start_f, (st, si, detail) in open_.items():
        out.append(Window(start_f, st, max(st, end_s), None, si, end_i, detail))
    out.sort(key=lambda w: w.start_s)
    return out


def latency_points(history: Iterable[Any]) -> list[LatencyPoint]:
    """One point per completed client op (an invoke never completed is not plotted)."""
    open_: dict[Any, dict[str, Any]] = {}
    out = []
    for raw in history:
        d = _d(raw)
        if d["process"] == "nemesis":
            continue
        if d["type"] == "invoke":
            open_[d["process"]] = d
            continue
        inv = open_.pop(d["process"], None)
        if inv is None:
            continue
        out.append(LatencyPoint(inv["time"] / NS_PER_S, (d["time"] - inv["time"]) / 1e6, d["type"], d["f"],
                                d["process"], inv["index"], d["index"]))
    return out


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank quantile of an ascending non-empty sequence."""
    if not sorted_values:
        raise ValueError("quantile of an empty sequence; expected at least one value")
    i = min(len(sorted_values) - 1, max(0, int(q * len(sorted_values) + 0.5) - 1))
    return sorted_values[i]


def quantile_series(points: Sequence[LatencyPoint], *, bucket_s: float,
                    qs: Sequence[float] = QUANTILES) -> dict[str, dict[float, list[tuple[float, float]]]]:
    """f -> quantile -> [(bucket mid time s, latency ms)] over ok ops, per time bucket."""
    buckets: dict[str, dict[int, list[float]]] = {}
    for p in points:
        if p.type == "ok":
            buckets.setdefault(p.f, {}).setdefault(int(p.time_s // bucket_s), []).append(p.latency_ms)
    out: dict[str, dict[float, list[tuple[float, float]]]] = {}
    for f, by_bucket in buckets.items():
        series: dict[float, list[tuple[float, float]]] = {q: [] for q in qs}
        for b in sorted(by_bucket):
            vals = sorted(by_bucket[b])
            for q in qs:
                series[q].append(((b + 0.5) * bucket_s, quantile(vals, q)))
        out[f] = series
    return out


def rate_series(points: Sequence[LatencyPoint], *, bucket_s: float) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """(f, type) -> [(bucket mid time s, completions per second)], by completion bucket of the invoke time."""
    counts: dict[tuple[str, str], dict[int, int]] = {}
    last = 0
    for p in points:
        b = int(p.time_s // bucket_s)
        last = max(last, b)
        c = counts.setdefault((p.f, p.type), {})
        c[b] = c.get(b, 0) + 1
    return {k: [((b + 0.5) * bucket_s, c.get(b, 0) / bucket_s) for b in range(last + 1)] for k, c in counts.items()}


def availability(points: Sequence[LatencyPoint], windows: Sequence[Window]) -> list[Availability]:
    """Per window: failures from its start to the next window's start, and the RTO after its heal."""
    done = sorted((p.time_s + p.latency_ms / 1000.0, p.type) for p in points)
    times = [t for t, _ in done]
    out = []
    for i, w in enumerate(windows):
        horizon = windows[i + 1].start_s if i + 1 < len(windows) else float("inf")
        span = done[bisect_left(times, w.start_s):bisect_left(times, horizon)]
        fails = [t for t, ty in span if ty != "ok"]
        rto = None
        if w.stop_f is not None:
            rto = next((t - w.end_s for t, ty in done[bisect_left(times, w.end_s):] if ty == "ok"), None)
        out.append(Availability(
            w.f, w.start_s, w.end_s, w.stop_f is not None, len(span) - len(fails), len(fails),
            (fails[0] - w.start_s) if fails else None, (fails[-1] - w.start_s) if fails else None, rto))
    return out


def write_gap_s(ok_writes_s: Sequence[float], start_s: float, end_s: float, history_end_s: float) -> float:
    """The longest stretch without an ok write (completion times ``ok_writes_s``, ascending) that overlaps
    ``[start_s, end_s]``, counted from ``start_s`` at the earliest; a stretch no write ends, ends at
    ``history_end_s``."""
    i = bisect_right(ok_writes_s, start_s)  # the first ok write after the window starts
    gap, since = 0.0, start_s
    while True:
        nxt = ok_writes_s[i] if i < len(ok_writes_s) else history_end_s
        gap = max(gap, nxt - since)
        if i >= len(ok_writes_s) or nxt >= end_s:
            return gap
        since, i = nxt, i + 1


@dataclass(frozen=True, slots=True)
class FaultKindFigures:
    """One run's figures under one fault kind (a window's ``f``), each the median over the run's windows of that
    kind, None when not measured.  The release gate compares them between two builds (:mod:`harness.gate_outcome`,
    ``splitbrain spark gate``).

    ``recovery_s``: the window's RTO (:func:`availability`); a healed window never followed by an ok completion
    counts until the end of the history (a lower bound: a build that never recovers compares as slow, not as "not
    measured").  ``unavailable_s``: :func:`write_gap_s` over the ok completions of writes -- how long the cluster
    took no write, a failover's length.  Not "the last failed op" (:attr:`Availability.last_failure_s`): workers
    bound to the faulted node fail until it returns whatever the cluster does, which would hide a slower failover.
    None when the run has no writes.  ``p99_latency_ms``: of ok client ops invoked inside windows of the kind.
    """

    recovery_s: float | None
    unavailable_s: float | None
    p99_latency_ms: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _median(xs: Sequence[float]) -> float | None:
    if not xs:
        return None
    s, n = sorted(xs), len(xs)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def fault_kind_figures(points: Sequence[LatencyPoint], windows: Sequence[Window], *, write_fs: Iterable[str],
                       end_s: float) -> dict[str, FaultKindFigures]:
    """Per fault kind, the run's :class:`FaultKindFigures`; ``write_fs`` are the ops that are writes, ``end_s``
    the end of the history."""
    if not windows:
        return {}
    writes = frozenset(write_fs)
    ok_writes = sorted(p.time_s + p.latency_ms / 1000.0 for p in points if p.type == "ok" and p.f in writes)
    has_writes = any(p.f in writes for p in points)
    by_invoke = sorted((p.time_s, p.latency_ms) for p in points if p.type == "ok")
    invoked = [t for t, _ in by_invoke]
    per: dict[str, tuple[list[float], list[float], list[float]]] = {}
    for w, a in zip(windows, availability(points, windows), strict=True):
        rec, unav, lat = per.setdefault(w.f, ([], [], []))
        if a.healed:
            rec.append(a.rto_s if a.rto_s is not None else max(0.0, end_s - w.end_s))
        if has_writes:
            unav.append(write_gap_s(ok_writes, w.start_s, w.end_s, end_s))
        lat += [ms for _, ms in by_invoke[bisect_left(invoked, w.start_s):bisect_right(invoked, w.end_s)]]
    return {kind: FaultKindFigures(_median(rec), _median(unav), quantile(sorted(lat), 0.99) if lat else None)
            for kind, (rec, unav, lat) in sorted(per.items())}


def op_counts(points: Sequence[LatencyPoint]) -> dict[str, dict[str, int]]:
    """f -> {"ok": n, "fail": n, "info": n}."""
    out: dict[str, dict[str, int]] = {}
    for p in points:
        c = out.setdefault(p.f, {"ok": 0, "fail": 0, "info": 0})
        c[p.type] = c.get(p.type, 0) + 1
    return out
