"""The one colour table of the plots and the timeline: a distinct colour per op kind (``f``) and per fault kind.

Why a table and not matplotlib's colour cycle: a reader compares plots of several runs and the timeline of one
run, so ``send`` must be the same colour everywhere and a partition band must never share its colour with a
kill band.  Known kinds get fixed colours chosen to stay distinct in print (colour-blind-safe hues, then
darker/lighter variants); an unknown kind gets a stable colour from a hash of its name, never the one of a
known kind.  Completion types keep a line style/marker of their own (``TYPE_STYLES``) so colour is free for
the kind.  Pure.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

__all__ = ["FAULT_COLOURS", "OP_COLOURS", "TYPE_COLOURS", "TYPE_STYLES", "fault_colour", "op_colour", "op_colours"]

# completion type -> colour (timeline boxes, which show one op kind per lane anyway)
TYPE_COLOURS = {"ok": "#2ca02c", "info": "#ff7f0e", "fail": "#d62728"}
# completion type -> (line style, marker) in the plots: ok solid/dot, info dashed/triangle, fail dotted/cross
TYPE_STYLES = {"ok": ("-", "o"), "info": ("--", "^"), "fail": (":", "x")}

OP_COLOURS = {
    # queue
    "send": "#1f77b4", "poll": "#2ca02c", "commit": "#9467bd", "drain": "#8c564b",
    # broker ids
    "next-id": "#17becf", "apply-id": "#d62728", "read-ids": "#bcbd22", "read-table": "#7f7f7f",
    # controller register
    "read": "#9467bd", "elect": "#ff7f0e", "alter": "#1f77b4", "write": "#d62728", "cas": "#8c564b",
    # membership / fencing and restarts
    "bounce": "#e377c2", "leave": "#17becf", "stale-heartbeat": "#ff7f0e", "pause-write": "#2ca02c",
    "crash-broker": "#d62728", "start-broker": "#2ca02c", "stop-broker": "#7f7f7f",
}
FAULT_COLOURS = {
    "start-partition": "#4c72b0", "partition": "#4c72b0", "kill": "#c44e52", "pause": "#8172b2",
    "bump-clock": "#ccb974", "strobe-clock": "#937860", "arm-failpoint": "#da8bc3", "start-disk": "#64b5cd",
    "start-packet": "#55a868", "registration-crash": "#8c8c8c",
}
# for kinds not in the tables: well-separated hues that are not already used above
_SPARE = ("#6b6ecf", "#b5cf6b", "#e7ba52", "#ad494a", "#a55194", "#3182bd", "#31a354", "#756bb1", "#636363",
          "#e6550d", "#969696", "#9c9ede", "#cedb9c", "#e7969c", "#de9ed6")


def _spare(name: str) -> str:
    return _SPARE[zlib.crc32(name.encode("utf-8")) % len(_SPARE)]


def op_colour(f: str) -> str:
    """The colour of op kind ``f`` (fixed for known kinds, a stable hashed spare colour otherwise)."""
    return OP_COLOURS.get(f) or _spare(f)


def op_colours(fs: Iterable[str]) -> dict[str, str]:
    """Distinct colours for the op kinds drawn together: each kind's own colour unless another kind of the set
    already has it (unknown kinds, or kinds of different workloads that share a colour), then the next spare."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for f in sorted(set(fs), key=lambda f: (f not in OP_COLOURS, f)):
        c = op_colour(f)
        if c in used:
            start = _SPARE.index(c) if c in _SPARE else zlib.crc32(f.encode("utf-8")) % len(_SPARE)
            c = next((x for k in range(len(_SPARE)) if (x := _SPARE[(start + k) % len(_SPARE)]) not in used), c)
        out[f] = c
        used.add(c)
    return out


def fault_colour(f: str) -> str:
    """The colour of fault kind ``f`` (a nemesis f that starts a fault)."""
    return FAULT_COLOURS.get(f) or _spare("fault:" + f)
