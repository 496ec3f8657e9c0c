"""A self-contained HTML timeline of a check result: one lane per process around the failure.

Each call is a box spanning its invoke..return (indeterminate calls run to the right edge).  The first
call that cannot be linearized is outlined red, the previous ok call blue; calls in the longest
linearizable prefix carry their position in it (#k) and the state after them on hover.  Time is drawn
by event rank, not by nanoseconds, so bursts stay readable.
"""

from __future__ import annotations

import html
from collections.abc import Hashable, Sequence
from pathlib import Path

from checker.linearizable._calls import INF, Call
from checker.linearizable._result import Result
from checker.models import FAILED, UNKNOWN

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
    rows = _prefix_rows(result.linearization[-30:], len(result.linearization))
    doc = f"""<!doctype html><html><head><meta charset="utf-8"><title>splitbrain check: {html.escape(verdict)}</title>
<style>{_CSS}</style></head><body>
<h2>{html.escape(verdict)} — {html.escape(result.model)}</h2>
<p>{html.escape(result.describe())}</p>
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
