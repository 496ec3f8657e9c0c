"""The data behind a timeline: ops as invoke..completion intervals in real time, fault bands, marks, log lines.

Pure: a history (``Op`` objects or dicts), anomaly marks and aligned log lines in; one JSON-ready mapping out,
which :mod:`._page` embeds and draws.  Each op row is
``[column, start_ns, end_ns, type code, f code, invoke index, completion index or -1, text]``; an op that
never completed runs to the end of the history.  A band is ``[start_ns, end_ns, label, colour, healed]``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from checker.perf import fault_colour, nemesis_windows, op_colours
from checker.timeline._logs import LogLine

__all__ = ["TYPE_CODES", "describe_pair", "timeline_data"]

# completion type -> code used in the embedded JSON (and the colour table in the page's script)
TYPE_CODES = {"ok": 0, "info": 1, "fail": 2, None: 3}
_MAX_VALUE_CHARS = 200
NS_PER_MS = 1_000_000


def _d(op: Any) -> dict[str, Any]:
    return op if isinstance(op, dict) else op.to_dict()


def _short(v: Any) -> str:
    s = json.dumps(v, separators=(",", ":"), default=str)
    return s if len(s) <= _MAX_VALUE_CHARS else s[:_MAX_VALUE_CHARS] + "..."


def describe_pair(inv: Mapping[str, Any], comp: Mapping[str, Any] | None) -> str:
    """One-line text of an invoke/completion pair (the detail shown for a selected op)."""
    t = f"t={inv['time'] / 1e9:.3f}s"
    if comp is None:
        return f"#{inv['index']} p{inv['process']} {inv['f']} {_short(inv.get('value'))} -> never completed ({t})"
    ms = (comp["time"] - inv["time"]) / NS_PER_MS
    err = f" error={_short(comp['error'])}" if comp.get("error") is not None else ""
    node = f" node={inv['node']}" if inv.get("node") else ""
    return (f"#{inv['index']}..#{comp['index']} p{inv['process']} {inv['f']} {_short(inv.get('value'))} -> "
            f"{comp['type']} {_short(comp.get('value'))}{err}{node} ({t}, {ms:.1f} ms)")


def _pairs(ops: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    open_: dict[Any, int] = {}
    pairs: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    for d in ops:
        p = d["process"]
        if d["type"] == "invoke":
            open_[p] = len(pairs)  # a second invoke without completion: the first stays never-completed
            pairs.append((d, None))
        elif p in open_:
            i = open_.pop(p)
            pairs[i] = (pairs[i][0], d)
        else:  # a completion with no invoke (e.g. a nemesis op recorded once): a zero-length op
            pairs.append((d, d))
    return pairs


def timeline_data(history: Iterable[Any], *, marks: Mapping[int, Sequence[str]] | None = None,
                  logs: Sequence[LogLine] = ()) -> dict[str, Any]:
    """The JSON embedded in the page.

    Args:
        history: ops in history order.
        marks: history index -> anomaly descriptions; an op is marked when its invoke or completion is; the
            first key's op is the one the page selects on load.
        logs: node log lines on the history's clock (:func:`checker.timeline.align_logs`).
    """
    ops = [_d(o) for o in history]
    marks = marks or {}
    procs = sorted({d["process"] for d in ops}, key=lambda p: (p == "nemesis", str(type(p)), p))
    col = {p: i for i, p in enumerate(procs)}
    end_ns = max((d["time"] for d in ops), default=0)
    colours = op_colours(d["f"] for d in ops if d["process"] != "nemesis")
    fs = sorted({d["f"] for d in ops})
    fcode = {f: i for i, f in enumerate(fs)}
    rows: list[list[Any]] = []
    marked: dict[str, list[str]] = {}
    for inv, comp in _pairs(ops):
        end = comp["time"] if comp is not None else end_ns
        ci = comp["index"] if comp is not None and comp is not inv else -1
        rows.append([col[inv["process"]], inv["time"], end, TYPE_CODES[comp["type"] if comp else None],
                     fcode[inv["f"]], inv["index"], ci, describe_pair(inv, comp)])
        why = list(marks.get(inv["index"], ())) + (list(marks.get(ci, ())) if ci >= 0 else [])
        if why:
            marked[str(inv["index"])] = list(dict.fromkeys(why))
    rows.sort(key=lambda r: (r[1], r[5]))
    # the op to show first: the first op of the first anomaly (marks keep the anomalies' order)
    by_op = {i: r[5] for r in rows for i in (r[5], r[6]) if i >= 0}
    focus = next((by_op[i] for i in marks if i in by_op), None)
    by_index = {d["index"]: d for d in ops if d["process"] == "nemesis"}
    bands = []
    for w in nemesis_windows(ops):
        start = by_index.get(w.start_index, {}).get("time", int(w.start_s * 1e9))
        stop = by_index.get(w.end_index, {}).get("time", int(w.end_s * 1e9)) if w.stop_f else end_ns
        bands.append([start, max(stop, start), w.label, fault_colour(w.f), w.stop_f is not None])
    nodes = sorted({ln.node for ln in logs})
    ncode = {n: i for i, n in enumerate(nodes)}
    return {
        "processes": [str(p) for p in procs], "fs": fs, "f_colours": [colours.get(f, "#999") for f in fs],
        "ops": rows, "bands": bands, "end_ns": end_ns, "marks": marked, "focus": focus,
        "nodes": nodes, "logs": [[ln.time_ns, ncode[ln.node], ln.text] for ln in logs],
    }
