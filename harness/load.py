"""Load figures of a run: the client rate it achieved, overall and outside fault windows, per worker and per node.

Vocabulary.  The *main phase* is the span the runner ran the main generator (``[start_ns, end_ns)`` on the
history clock); a *client op* is a client invocation in it; a *fault window* is a nemesis fault from its
starting op to its heal (:func:`checker.perf.nemesis_windows`), clipped to the main phase.  The *achieved
rate outside fault windows* is the client ops invoked outside every window divided by the main-phase time
outside every window -- what the spec's ``rate`` promises when no fault slows the cluster down.  A worker's
*fair share* is client ops / concurrency; ``max_worker_share`` is the busiest worker's count over it (1.0 =
perfectly even).  A worker is ``process % concurrency`` (processes are renumbered after ``info``).

A fault also holds up the ops it caught: an op in flight during a window may complete only seconds after the
heal (a timeout), and its worker starts nothing meanwhile.  A window's *reach* extends it to the last
completion of a client op that overlapped it; the rate *outside fault reach* is the one the load generator
itself is answerable for (no fault and no op a fault caught in the way).  Both are reported, and the rate
*before the first fault* (the cluster has not been disturbed yet).

Pure: the history and the phase span come in, a JSON-ready dict comes out (:func:`load_figures`);
:func:`describe_load` is its one-line text form, used by the runner's summary and ``bench/load.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["describe_load", "fault_windows_s", "load_figures"]

NS_PER_S = 1_000_000_000


def fault_windows_s(history: Iterable[Any]) -> list[tuple[float, float]]:
    """``(start_s, end_s)`` of every fault window of ``history`` (the perf checker's pairing of nemesis ops)."""
    from checker.perf import nemesis_windows  # matplotlib comes with checker.perf: only when asked

    return [(w.start_s, w.end_s) for w in nemesis_windows(history)]


def _merged(windows: Iterable[tuple[float, float]], lo: float, hi: float) -> list[tuple[float, float]]:
    """Windows clipped to ``[lo, hi]``, overlaps merged, in order."""
    clipped = sorted((max(a, lo), min(b, hi)) for a, b in windows if b > lo and a < hi)
    out: list[tuple[float, float]] = []
    for a, b in clipped:
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _reach(ops: Sequence[Any], windows: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Each window extended to the last completion of a client op that overlapped it (invoked before its end,
    completed after its start); an op that never completed does not extend it."""
    spans: list[tuple[float, float]] = []
    open_: dict[Any, float] = {}
    for raw in ops:
        kind, process, t_ns = _fields(raw)
        if not isinstance(process, int):
            continue
        if kind == "invoke":
            open_[process] = t_ns / NS_PER_S
        elif process in open_:
            spans.append((open_.pop(process), t_ns / NS_PER_S))
    out = []
    for a, b in windows:
        end = max([b, *(done for inv, done in spans if inv < b and done > a)])
        out.append((a, end))
    return out


def _fields(op: Any) -> tuple[Any, Any, Any]:
    """(type, process, time) of a dict or a ``checker.history.Op``."""
    if isinstance(op, Mapping):
        return op.get("type"), op.get("process"), op.get("time")
    return op.type, op.process, op.time


def load_figures(
    history: Iterable[Any], *, concurrency: int, rate_hz: float, main_start_ns: int, main_end_ns: int,
    windows_s: Sequence[tuple[float, float]], nodes: Sequence[str] = (),
) -> dict[str, Any]:
    """The load figures of one run (see the module docstring for the words).

    Args:
        history: ops (dicts or ``Op``), times in ns on the clock of ``main_start_ns``/``main_end_ns``.
        concurrency: client worker threads.
        rate_hz: the configured total client rate.
        main_start_ns, main_end_ns: the main phase.
        windows_s: fault windows in seconds (:func:`fault_windows_s`).
        nodes: the nodes workers are bound to (worker ``t`` -> ``nodes[t % len(nodes)]``); empty = no per-node counts.

    Raises:
        ValueError: ``concurrency`` < 1 or the phase ends before it starts.
    """
    if concurrency < 1:
        raise ValueError(f"load_figures: concurrency must be >= 1, got {concurrency}")
    if main_end_ns < main_start_ns:
        raise ValueError(f"load_figures: main phase ends at {main_end_ns} ns, before its start {main_start_ns} ns")
    lo, hi = main_start_ns / NS_PER_S, main_end_ns / NS_PER_S
    ops = list(history)
    merged = _merged(windows_s, lo, hi)
    reach = _merged(_reach(ops, windows_s), lo, hi)
    per_worker = [0] * concurrency
    total = outside = outside_reach = before = 0
    first_fault = merged[0][0] if merged else hi
    for raw in ops:
        kind, process, t_ns = _fields(raw)
        if kind != "invoke" or not isinstance(process, int):
            continue
        if not main_start_ns <= t_ns < main_end_ns:
            continue
        total += 1
        per_worker[process % concurrency] += 1
        t_s = t_ns / NS_PER_S
        if not any(a <= t_s < b for a, b in merged):
            outside += 1
        if not any(a <= t_s < b for a, b in reach):
            outside_reach += 1
        if t_s < first_fault:
            before += 1
    main_s = hi - lo
    fault_s = sum(b - a for a, b in merged)
    outside_s = main_s - fault_s
    outside_reach_s = main_s - sum(b - a for a, b in reach)
    fair = total / concurrency
    per_node: dict[str, int] = {}
    for t, n in enumerate(per_worker):
        if nodes:
            node = nodes[t % len(nodes)]
            per_node[node] = per_node.get(node, 0) + n
    return {
        "configured_ops_per_s": rate_hz,
        "concurrency": concurrency,
        "main_phase_s": round(main_s, 3),
        "client_ops": total,
        "achieved_ops_per_s": round(total / main_s, 3) if main_s > 0 else None,
        "fault_windows": len(merged),
        "fault_window_s": round(fault_s, 3),
        "outside_fault_windows_s": round(outside_s, 3),
        "client_ops_outside_fault_windows": outside,
        "achieved_ops_per_s_outside_fault_windows": round(outside / outside_s, 3) if outside_s > 0 else None,
        "outside_fault_reach_s": round(outside_reach_s, 3),
        "client_ops_outside_fault_reach": outside_reach,
        "achieved_ops_per_s_outside_fault_reach": (round(outside_reach / outside_reach_s, 3)
                                                   if outside_reach_s > 0 else None),
        "before_first_fault_s": round(first_fault - lo, 3),
        "achieved_ops_per_s_before_first_fault": round(before / (first_fault - lo), 3) if first_fault > lo else None,
        "ops_per_worker": {str(t): n for t, n in enumerate(per_worker)},
        "fair_share_per_worker": round(fair, 3),
        "max_worker_share": round(max(per_worker) / fair, 3) if total else None,
        "ops_per_node": per_node,
    }


def _num(x: Any, fmt: str) -> str:
    return "n/a" if x is None else format(x, fmt)


def describe_load(fig: Mapping[str, Any]) -> str:
    """One line: achieved vs configured rate, outside fault windows, per worker and per node."""
    workers = " ".join(f"{t}:{n}" for t, n in fig["ops_per_worker"].items())
    nodes = " ".join(f"{k}:{n}" for k, n in fig["ops_per_node"].items())
    return (f"load {_num(fig['achieved_ops_per_s'], '.1f')} ops/s of {fig['configured_ops_per_s']:g} configured "
            f"({_num(fig['achieved_ops_per_s_outside_fault_windows'], '.1f')} outside fault windows, "
            f"{fig['outside_fault_windows_s']:.1f} of {fig['main_phase_s']:.1f} s; "
            f"{_num(fig['achieved_ops_per_s_outside_fault_reach'], '.1f')} outside their reach); "
            f"per worker {workers} (busiest {_num(fig['max_worker_share'], '.2f')}x fair share)"
            + (f"; per node {nodes}" if nodes else ""))
