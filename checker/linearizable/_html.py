"""A check result drawn for a reader: the failing window as data and SVG, and a self-contained HTML page.

:func:`failure_window` turns an invalid :class:`Result` into the JSON window of
:mod:`checker.timeline` (the ops concurrent with the failing op on their real time axis, which of them
were linearized and the state after each, the states the model could be in, the model's reason), which
``results.json`` can carry and the web UI draws with :func:`checker.timeline.window_svg` -- the manner
of Jepsen's ``linear.svg``.

:func:`render_html` writes one page: that picture, then the event-rank timeline of the neighbourhood of
the failure (each call a box spanning its invoke..return, indeterminate calls to the right edge; the
first call that cannot be linearized outlined red, the previous ok call blue, calls in the longest
linearizable prefix carrying their position #k and the state after them on hover; time drawn by event
rank, not by nanoseconds, so bursts stay readable).
"""

from __future__ import annotations

import html
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

from checker.linearizable._calls import INF, Call
from checker.linearizable._result import Result
from checker.models import FAILED, UNKNOWN
from checker.timeline import window_svg

_NEIGHBOURS = 40
_MAX_CALLS = 400
_LANE_PX = 34
_WIDTH_PX = 1400

_CSS = """
body{font:13px system-ui,sans-serif;margin:16px;color:#222}
.tl{position:relative;border:1px solid #ccc;background:#fafafa;overflow-x:auto}
.lane{position:absolute;left:0;font-weight:bold;color:#555;width:60px;text-align:right}
.op{position:absolute;height:22px;border:1px solid #8a8;background:#dfd;border-radius:3px;overflow:hidden;
white-space:nowrap;font-size:11px;padding:1px 3px;box-sizing:border-box}
.op.info{background:#eee;border-color:#aaa;border-style:dashed}
.op.failed{background:#fed;border-color:#c96}
.op.bad{border:3px solid #d00;background:#fdd}
.op.prev{border:3px solid #06c}
.op.lin{box-shadow:inset 0 -3px 0 #393}
table{border-collapse:collapse;margin-top:12px}td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px}
"""


def _label(c: Call) -> str:
    out = "?" if c.output is UNKNOWN else ("failed" if c.output is FAILED else repr(c.output))
    return f"{c.input.f} {c.input.value!r} → {out}"


def _neighbourhood(result: Result) -> list[Call]:
    calls = sorted(result.calls, key=lambda c: (c.call_time, c.id))
    if result.call is None:
        return calls[:_MAX_CALLS]
    fail = result.call
    before = [c for c in calls if c.call_time <= fail.ret_time]
    tail = before[-_NEIGHBOURS:]
    t0 = min((c.call_time for c in tail), default=fail.call_time)
    return [c for c in before if c.ret_time >= t0 or c in tail][-_MAX_CALLS:]


_WINDOW_CALLS = 40
_TAIL = 12


def _short(x: object, n: int = 120) -> str:
    s = repr(x)
    return s if len(s) <= n else s[: n - 1] + "…"


def failure_window(result: Result) -> dict[str, Any] | None:
    """The failing window of an invalid result as JSON data (see :mod:`checker.timeline`), or None.

    Calls shown: those of the deciding partition whose interval overlaps the span from the earliest call
    concurrent with the failing call or the previous ok call to the failing call's return (at most 40,
    nearest first).  ``states`` are the states the search could be in when the failing call had to take
    effect: the result's ``frontier_states`` when the checker records them, else the state after the
    longest linearizable prefix.
    """
    fail = result.call
    if result.valid is not False or fail is None:
        return None
    prev_idx = result.previous_ok.index if result.previous_ok is not None else None
    prev = next((c for c in result.calls if c.completion is not None and c.completion.index == prev_idx), None)
    anchors = [fail] + ([prev] if prev is not None else [])

    def end(c: Call) -> float:
        return c.ret_time if c.ret_time != INF else max(fail.ret_time, c.call_time)

    lo = min(a.call_time for a in anchors)
    for c in result.calls:
        if any(c.call_time <= end(a) and end(c) >= a.call_time for a in anchors):
            lo = min(lo, c.call_time)
    near = [c for c in result.calls if end(c) >= lo and c.call_time <= fail.ret_time]
    near.sort(key=lambda c: abs(c.call_time - fail.call_time))
    shown = sorted(near[:_WINDOW_CALLS] + [a for a in anchors if a not in near[:_WINDOW_CALLS]],
                   key=lambda c: (c.call_time, c.id))
    order: dict[int, tuple[int, Hashable]] = {c.id: (k, st) for k, (c, st) in enumerate(result.linearization, 1)}
    calls = []
    for c in shown:
        k, st = order.get(c.id, (None, None))
        comp = c.completion
        calls.append({
            "id": c.id, "process": str(c.process), "f": c.input.f, "label": _label(c),
            "start_ns": int(c.call_time), "end_ns": None if c.ret_time == INF else int(c.ret_time),
            "type": comp.type if comp is not None else "never",
            "index": comp.index if comp is not None else c.invoke.index, "invoke_index": c.invoke.index,
            "linearized": k, "state": None if k is None else _short(st),
        })
    frontier = getattr(result, "frontier_states", None)
    if frontier:
        states = [_short(s, 200) for s in frontier]
    elif result.linearization:
        states = [_short(result.linearization[-1][1], 200)]
    else:
        states = []
    tail = result.linearization[-_TAIL:]
    first = len(result.linearization) - len(tail) + 1
    return {
        "source": "checker", "model": result.model, "reason": result.reason or "", "explanation": result.describe(),
        "partition": None if result.partition is None else repr(result.partition), "calls": calls,
        "failing": fail.id, "previous_ok": prev.id if prev is not None else None,
        "linearized_tail": [{"k": first + i, "label": _label(c), "state": _short(st)}
                            for i, (c, st) in enumerate(tail)],
        "linearized_total": len(result.linearization), "states": states, "bands": [],
    }


def render_html(result: Result, path: str | Path) -> Path:
    """Write the timeline of ``result`` to ``path`` (one self-contained HTML file) and return the path."""
    shown = _neighbourhood(result)
    times = sorted({c.call_time for c in shown} | {c.ret_time for c in shown if c.ret_time != INF})
    rank = {t: i for i, t in enumerate(times)}
    span = max(len(times), 1) + 1
    procs = sorted({c.process for c in shown}, key=lambda p: (isinstance(p, str), str(p) if isinstance(p, str) else p))
    lane = {p: i for i, p in enumerate(procs)}
    order: dict[int, tuple[int, Hashable]] = {c.id: (k, st) for k, (c, st) in enumerate(result.linearization, 1)}
    prev_idx = result.previous_ok.index if result.previous_ok is not None else None
    scale = (_WIDTH_PX - 80) / span
    boxes: list[str] = []
    for p in procs:
        boxes.append(f'<div class="lane" style="top:{lane[p] * _LANE_PX + 6}px">p{html.escape(str(p))}</div>')
    for c in shown:
        x0 = 70 + rank[c.call_time] * scale
        x1 = 70 + (rank[c.ret_time] if c.ret_time != INF else span) * scale
        cls = ["op"]
        if c.output is UNKNOWN:
            cls.append("info")
        elif c.output is FAILED:
            cls.append("failed")
        if result.call is not None and c.id == result.call.id:
            cls.append("bad")
        if c.completion is not None and c.completion.index == prev_idx:
            cls.append("prev")
        title = c.describe()
        text = _label(c)
        if c.id in order:
            k, st = order[c.id]
            cls.append("lin")
            title += f"\nlinearized #{k}; state after: {st!r}"
            text = f"#{k} {text}"
        boxes.append(
            f'<div class="{" ".join(cls)}" title="{html.escape(title)}" style="left:{x0:.0f}px;'
            f'width:{max(x1 - x0, 12):.0f}px;top:{lane[c.process] * _LANE_PX + 4}px">{html.escape(text)}</div>'
        )
    height = len(procs) * _LANE_PX + 10
    verdict = _verdict_text(result)
    window = failure_window(result)
    rows = _prefix_rows(result.linearization[-30:], len(result.linearization))
    doc = f"""<!doctype html><html><head><meta charset="utf-8"><title>splitbrain check: {html.escape(verdict)}</title>
<style>{_CSS}</style></head><body>
<h2>{html.escape(verdict)} — {html.escape(result.model)}</h2>
<p>{html.escape(result.describe())}</p>
{window_svg(window) if window is not None else ""}
<p>Partition: {html.escape(repr(result.partition))}; showing {len(shown)} of {len(result.calls)} calls;
{result.steps} search steps. Red: first op that cannot be linearized; blue: previous ok op; dashed: indeterminate;
green underline: in the longest linearizable prefix (#k = its position).</p>
<div class="tl" style="height:{height}px;width:{_WIDTH_PX}px">{"".join(boxes)}</div>
<h3>Longest linearizable prefix (last {len(rows)} of {len(result.linearization)})</h3>
<table><tr><th>#</th><th>op</th><th>state after</th></tr>{"".join(rows)}</table>
</body></html>
"""
    out = Path(path)
    out.write_text(doc, encoding="utf-8")
    return out


def _verdict_text(result: Result) -> str:
    if result.valid is True:
        return "linearizable"
    if result.valid is False:
        return "NOT linearizable"
    return f"unknown ({result.cause})"


def _prefix_rows(steps: Sequence[tuple[Call, Hashable]], total: int) -> list[str]:
    first = total - len(steps) + 1
    return [f"<tr><td>{first + k}</td><td>{html.escape(c.describe())}</td><td>{html.escape(repr(st))}</td></tr>"
            for k, (c, st) in enumerate(steps)]
