"""The failing window of a linearizability failure as one SVG, in the manner of Jepsen's ``linear.svg``.

A *window* is JSON data (so ``results.json`` can carry it and the web UI can draw it without the model):

* ``calls``: the ops around the failing op -- the ones concurrent with it and with the previous ok op --
  each ``{"id", "process", "f", "label", "start_ns", "end_ns" (None: never completed), "type", "index",
  "linearized" (its position in the longest linearizable prefix, or None), "state" (the state after it)}``;
* ``failing`` / ``previous_ok``: call ids; ``reason``: why the failing op cannot fit (the model's sentence);
* ``linearized_tail``: the last steps of the longest linearizable prefix ``{"k", "label", "state"}`` and
  ``linearized_total``; ``states``: the states the model could be in when the failing op had to take effect;
* ``bands``: fault windows overlapping it ``[start_ns, end_ns, label, colour]``; ``source``: ``"checker"``
  (built from the check result, :func:`checker.linearizable.failure_window`) or ``"history"`` (rebuilt from
  the history and ``first_failure`` alone: no linearization or states known).

:func:`window_from_history` builds the second kind; :func:`window_svg` draws either.  Pure.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from checker.perf import fault_colour, nemesis_windows
from checker.timeline._marks import first_failure

__all__ = ["failure_windows", "window_from_history", "window_svg"]

_W = 1100
_LANE = 30
_LEFT = 70
_MAX_CALLS = 60


def _short(v: Any, n: int = 60) -> str:
    s = v if isinstance(v, str) else json.dumps(v, separators=(",", ":"), default=str)
    return s if len(s) <= n else s[: n - 1] + "…"


def _d(op: Any) -> dict[str, Any]:
    return op if isinstance(op, dict) else op.to_dict()


def window_from_history(history: Iterable[Any], first_failure: Mapping[str, Any], *,
                        explanation: str = "", model: str = "") -> dict[str, Any] | None:
    """A ``"history"`` window around ``first_failure`` (a linearizability checker's ``first_failure``).

    The calls shown are the client ops of the failing op's partition (ops whose value names the partition
    key, when one is given) whose interval overlaps the span from the earliest op concurrent with the failing
    op or the previous ok op to the failing op's completion.  None if the failing op is not in the history.
    """
    ops = [_d(o) for o in history]
    fail_idx, prev = first_failure.get("index"), first_failure.get("previous_ok")
    prev_idx = prev.get("index") if isinstance(prev, Mapping) else None
    open_: dict[Any, int] = {}
    pairs: list[list[Any]] = []
    for d in ops:
        if d["process"] == "nemesis":
            continue
        if d["type"] == "invoke":
            open_[d["process"]] = len(pairs)
            pairs.append([d, None])
        elif d["process"] in open_:
            pairs[open_.pop(d["process"])][1] = d
    end_ns = max((d["time"] for d in ops), default=0)

    def holds(p: list[Any], i: Any) -> bool:
        return bool(p[0]["index"] == i or (p[1] is not None and p[1]["index"] == i))

    failing = next((p for p in pairs if holds(p, fail_idx)), None)
    if failing is None:
        return None
    previous = next((p for p in pairs if prev_idx is not None and holds(p, prev_idx)), None)
    key = str(first_failure.get("partition") or "").strip("'\"")

    def in_partition(p: list[Any]) -> bool:
        if not key:
            return True
        text = json.dumps([p[0].get("value"), p[1].get("value") if p[1] else None], default=str)
        return f'"{key}"' in text or f":{key}," in text or f"[{key}," in text

    def span(p: list[Any]) -> tuple[int, int]:
        return p[0]["time"], (p[1]["time"] if p[1] is not None else end_ns)

    f0, f1 = span(failing)
    anchors = [failing] + ([previous] if previous is not None else [])
    lo = min(span(a)[0] for a in anchors)
    hi = f1
    same = [p for p in pairs if in_partition(p)] or pairs
    for p in same:  # widen to the ops concurrent with the anchors
        s, e = span(p)
        if any(s <= span(a)[1] and e >= span(a)[0] for a in anchors):
            lo = min(lo, s)
    shown = [p for p in same if span(p)[1] >= lo and span(p)[0] <= hi]
    shown.sort(key=lambda p: abs(span(p)[0] - f0))
    shown = sorted(shown[:_MAX_CALLS], key=lambda p: (span(p)[0], p[0]["index"]))
    calls = []
    for i, (inv, comp) in enumerate(shown):
        out = "?" if comp is None or comp["type"] == "info" else _short(comp.get("value"), 40)
        calls.append({"id": i, "process": str(inv["process"]), "f": inv["f"],
                      "label": f"{inv['f']} {_short(inv.get('value'), 40)} → {out}",
                      "start_ns": inv["time"],
                      "end_ns": None if comp is None or comp["type"] == "info" else comp["time"],
                      "type": "never" if comp is None else comp["type"],
                      "index": comp["index"] if comp is not None else inv["index"], "invoke_index": inv["index"],
                      "linearized": None, "state": None})
    ids = {c["invoke_index"]: c["id"] for c in calls}
    bands = [[int(w.start_s * 1e9), int(w.end_s * 1e9), w.label, fault_colour(w.f)] for w in nemesis_windows(ops)
             if w.end_s * 1e9 >= lo and w.start_s * 1e9 <= hi]
    return {
        "source": "history", "model": model, "reason": str(first_failure.get("reason") or ""),
        "explanation": explanation, "partition": first_failure.get("partition"), "calls": calls,
        "failing": ids.get(failing[0]["index"]), "previous_ok": ids.get(previous[0]["index"]) if previous else None,
        "linearized_tail": [], "linearized_total": first_failure.get("linearized_prefix"), "states": [],
        "bands": bands,
    }


def failure_windows(doc: Mapping[str, Any], history: Callable[[], Sequence[Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(checker, window) for every invalid checker of a ``results.json`` that has a ``first_failure``: the window
    the checker stored (``failure_window``, top level or under ``stats``) or else one rebuilt from the history.

    ``history`` is called (once) only when a window has to be rebuilt, so a run page whose checkers stored their
    windows never reads its history.
    """
    out: list[tuple[str, dict[str, Any]]] = []
    loaded: list[Sequence[Any]] = []
    checkers = doc.get("checkers")
    for name, entry in (checkers.items() if isinstance(checkers, Mapping) else ()):
        if not isinstance(entry, Mapping) or entry.get("valid") is not False:
            continue
        ff = first_failure(entry)
        if ff is None:
            continue
        raw_stats = entry.get("stats")
        stats: Mapping[str, Any] = raw_stats if isinstance(raw_stats, Mapping) else {}
        stored = entry.get("failure_window")
        if not isinstance(stored, Mapping):
            stored = stats.get("failure_window")
        if isinstance(stored, Mapping):
            out.append((str(name), dict(stored)))
            continue
        if not loaded:
            loaded.append(history())
        w = window_from_history(loaded[0], ff, explanation=str(stats.get("explanation") or ""),
                                model=str(stats.get("model") or ""))
        if w is not None:
            out.append((str(name), w))
    return out


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _int(x: Any) -> int | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, int | float):
        return int(x)
    return None


def _clean(window: Mapping[str, Any]) -> dict[str, Any]:
    """The window with every malformed part dropped (a stored window comes from a file: never trust it)."""

    def listed(key: str) -> list[Any]:
        value = window.get(key)
        return value if isinstance(value, list) else []

    calls = []
    for c in listed("calls"):
        start = _int(c.get("start_ns")) if isinstance(c, Mapping) else None
        if start is not None:
            end = _int(c.get("end_ns"))
            calls.append({**c, "start_ns": start, "end_ns": None if end is None else max(end, 0)})
    bands = [b for b in listed("bands") if isinstance(b, list | tuple) and len(b) >= 4
             and _int(b[0]) is not None and _int(b[1]) is not None]
    return {**window, "calls": calls, "bands": bands, "states": listed("states"),
            "linearized_tail": listed("linearized_tail")}


class _Frame:
    """The picture's geometry: one lane per process (numeric ids in order), and a time axis from a little
    before the first call to a little after the last end, mapped onto the drawing's width."""

    def __init__(self, calls: Sequence[Mapping[str, Any]]) -> None:
        procs = sorted({str(c.get("process")) for c in calls},
                       key=lambda p: (not p.lstrip("-").isdigit(), int(p) if p.lstrip("-").isdigit() else 0, p))
        self.lane = {p: i for i, p in enumerate(procs)}
        t0 = min((int(c.get("start_ns") or 0) for c in calls), default=0)
        ends = [int(c["end_ns"]) for c in calls if c.get("end_ns") is not None]
        ends += [int(c.get("start_ns") or 0) for c in calls]
        t1 = max(ends, default=t0 + 1)
        pad = max((t1 - t0) // 12, 1_000_000)
        self.a, self.b = t0 - pad // 2, t1 + pad
        self.top = 30
        self.lanes_h = len(procs) * _LANE

    def x(self, t: float) -> float:
        return _LEFT + (t - self.a) / max(self.b - self.a, 1) * (_W - _LEFT - 10)


def _bands_and_lanes(f: _Frame, bands: Sequence[Any]) -> list[str]:
    """The fault bands behind everything, then each lane's process label and baseline."""
    out: list[str] = []
    for band in bands:
        s, e, label, colour = band[0], band[1], band[2], band[3]
        xs, xe = max(f.x(s), _LEFT), min(f.x(e), _W - 10)
        if xe > xs:
            out.append(f'<rect x="{xs:.1f}" y="{f.top - 14}" width="{xe - xs:.1f}" height="{f.lanes_h + 14}" '
                       f'fill="{_e(colour)}" fill-opacity="0.15"/><text x="{xs + 2:.1f}" y="{f.top - 4}" '
                       f'font-size="10" fill="{_e(colour)}" font-weight="bold">{_e(label)}</text>')
    for p, i in f.lane.items():
        y = f.top + i * _LANE
        out.append(f'<text x="{_LEFT - 6}" y="{y + 17}" font-size="12" text-anchor="end" fill="#555">p{_e(p)}</text>'
                   f'<line x1="{_LEFT}" x2="{_W - 10}" y1="{y + _LANE - 2}" y2="{y + _LANE - 2}" stroke="#eee"/>')
    return out


def _call_style(c: Mapping[str, Any], window: Mapping[str, Any]) -> tuple[str, str, int, str, str]:
    """(fill, stroke, stroke width, dash attribute, class) of a call's box: by its type, then failing or
    previous-ok."""
    fill, stroke, sw, dash = "#dff0df", "#6a6", 1, ""
    if c.get("type") in ("info", "never"):
        fill, stroke, dash = "#eeeeee", "#999", ' stroke-dasharray="4 3"'
    elif c.get("type") == "fail":
        fill, stroke = "#fde8d8", "#c96"
    cls = "call"
    if c.get("id") == window.get("failing"):
        fill, stroke, sw, cls = "#fdd", "#d00", 3, "call failing"
    elif c.get("id") == window.get("previous_ok"):
        stroke, sw, cls = "#06c", 3, "call previous-ok"
    return fill, stroke, sw, dash, cls


def _calls(f: _Frame, calls: Sequence[Mapping[str, Any]], window: Mapping[str, Any]) -> list[str]:
    """A box per call on its lane, its label clipped to the room it has (a narrow box's label runs beside it,
    up to the lane's next call, or ends at the box when there is more room on the left)."""
    starts: dict[str, list[float]] = {}
    lane_ends: dict[str, list[float]] = {}
    for c in calls:
        starts.setdefault(str(c.get("process")), []).append(f.x(int(c.get("start_ns") or 0)))
        e_ns = c.get("end_ns")
        lane_ends.setdefault(str(c.get("process")), []).append(f.x(int(e_ns)) if e_ns is not None else _W - 10.0)
    out: list[str] = []
    for c in calls:
        y = f.top + f.lane[str(c.get("process"))] * _LANE + 3
        s = int(c.get("start_ns") or 0)
        e = f.b if c.get("end_ns") is None else int(c["end_ns"])
        x0, x1 = f.x(s), f.x(e)
        w = max(x1 - x0, 6)
        fill, stroke, sw, dash, cls = _call_style(c, window)
        k = c.get("linearized")
        label = (f"#{k} " if k is not None else "") + str(c.get("label") or c.get("f"))
        clip = f"cl{_e(window.get('clip_prefix', ''))}{_e(c.get('id'))}"
        nxt = min((sx for sx in starts[str(c.get("process"))] if sx > x0 + 0.5), default=_W - 10.0)
        tx = x0 if w >= 90 else x0 + w + 2  # a narrow box: its label beside it, not cut to nothing
        room = max(min(nxt, _W - 10.0) - tx - 2, 0.0) if w < 90 else w
        prev_end = max((ex for ex in lane_ends[str(c.get("process"))] if ex < x0 - 0.5), default=float(_LEFT))
        anchor = ""
        if w < 90 and room < 160 and x0 - prev_end - 4 > room:  # more room on the left: the label ends at the box
            room = x0 - prev_end - 4
            tx, anchor = x0 - 2 - room, ' text-anchor="end"'
        text_x = tx + room - 1 if anchor else tx + 3
        tip = f"{label}\nhistory #{c.get('index')}"
        if c.get("state") is not None:
            tip += f"\nstate after: {c['state']}"
        out.append(f'<g class="{cls}" data-index="{_e(c.get("index"))}"><title>{_e(tip)}</title>'
                   f'<rect x="{x0:.1f}" y="{y}" width="{w:.1f}" height="{_LANE - 8}" rx="3" fill="{fill}" '
                   f'stroke="{stroke}" stroke-width="{sw}"{dash}/>'
                   f'<clipPath id="{clip}"><rect x="{tx:.1f}" y="{y}" width="{room:.1f}" height="{_LANE}"/>'
                   f'</clipPath><text x="{text_x:.1f}" y="{y + 15}" font-size="11"{anchor} clip-path="url(#{clip})">'
                   f'{_e(label)}</text></g>')
        if k is not None:
            out.append(f'<rect x="{x0:.1f}" y="{y + _LANE - 9}" width="{w:.1f}" height="2" fill="#393"/>')
    return out


def _axis(f: _Frame) -> list[str]:
    """The time axis under the lanes, six ticks in seconds since the test started."""
    axis_y = f.top + f.lanes_h + 6
    out = [f'<line x1="{_LEFT}" x2="{_W - 10}" y1="{axis_y}" y2="{axis_y}" stroke="#888"/>']
    for j in range(6):
        t = f.a + (f.b - f.a) * j / 5
        anchor = "start" if j == 0 else ("end" if j == 5 else "middle")
        out.append(f'<text x="{f.x(t):.1f}" y="{axis_y + 14}" font-size="10" text-anchor="{anchor}" fill="#666">'
                   f'{t / 1e9:.3f}s</text>')
    return out


def _caption(window: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The text under the picture as (kind, line): why the op cannot fit, the possible states, the tail of
    the linearization, and the legend."""
    lines: list[tuple[str, str]] = []
    model = window.get("model")
    lines.append(("h", f"Why it cannot fit{' (' + str(model) + ')' if model else ''}:"))
    why = window.get("reason") or window.get("explanation") or "no order of the ops lets it complete"
    lines.append(("bad", str(why)))
    states = [str(s) for s in window.get("states") or []]
    if states:
        lines.append(("h", f"States the model could be in when the failing op had to take effect ({len(states)}):"))
        lines += [("", "  " + _short(s, 150)) for s in states[:8]]
    tail = [t for t in window.get("linearized_tail") or [] if isinstance(t, Mapping)]
    total = window.get("linearized_total")
    if tail:
        lines.append(("h", f"Linearized (the last {len(tail)} of the longest linearizable prefix, {total} ops):"))
        lines += [("", f"  #{t.get('k')} {_short(t.get('label'), 80)}  ⇒  state {_short(t.get('state'), 70)}")
                  for t in tail]
    elif window.get("source") == "history":
        lines.append(("h", f"Linearized: a prefix of {total if total is not None else '?'} ops (the check result "
                           "recorded no linearization or states; only the ops are shown)"))
    lines.append(("note", "red: the op that cannot be linearized · blue: the previous ok op · dashed: may or may not "
                          "have happened · green underline: linearized (#k) · bands: faults"))
    return lines


_CAPTION_STYLE = {"h": ' font-weight="bold"', "bad": ' fill="#a40000" font-weight="bold"', "note": ' fill="#666"'}


def window_svg(window: Mapping[str, Any]) -> str:
    """One ``<svg>`` element: lanes per process on a real time axis, the failing op red, the previous ok op
    blue, linearized ops numbered with the state after them, fault bands behind, and below the picture the
    tail of the linearization, the states the model could be in, and why the failing op cannot fit."""
    window = _clean(window)
    calls: Sequence[Mapping[str, Any]] = [c for c in window.get("calls") or [] if isinstance(c, Mapping)]
    f = _Frame(calls)
    out = [*_bands_and_lanes(f, window.get("bands") or []), *_calls(f, calls, window), *_axis(f)]
    y = f.top + f.lanes_h + 6 + 36
    for kind, text in _caption(window):
        out.append(f'<text x="10" y="{y}" font-size="12"{_CAPTION_STYLE.get(kind, "")} class="{kind or "line"}">'
                   f'{_e(text)}</text>')
        y += 17
    height = y + 4
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="linear" width="{_W}" height="{height}" '
            f'viewBox="0 0 {_W} {height}" font-family="system-ui,sans-serif" role="img" '
            f'aria-label="failing window">{"".join(out)}</svg>')
