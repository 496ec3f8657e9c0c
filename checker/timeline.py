"""timeline.html: one self-contained page showing every op as a box in its process's column.

Layout: one column per process (client processes in numeric order, then ``nemesis``); vertical position is
the history index, so a box spans from its invoke to its completion.  Boxes are coloured by completion type
(ok green, info orange, fail red, never completed grey); nemesis fault windows are drawn as bands across
all columns; hovering a box shows the op (``describe_pair``).  The page embeds the ops as JSON and a small
inline script draws only the rows in view, so it stays usable with 100k+ ops.  No external assets.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from checker.perf import nemesis_windows

__all__ = ["TYPE_CODES", "describe_pair", "render_timeline", "timeline_data", "write_timeline"]

# completion type -> code used in the embedded JSON (and the colour table in the script)
TYPE_CODES = {"ok": 0, "info": 1, "fail": 2, None: 3}
_MAX_VALUE_CHARS = 200


def _d(op: Any) -> dict[str, Any]:
    return op if isinstance(op, dict) else op.to_dict()


def _short(v: Any) -> str:
    s = json.dumps(v, separators=(",", ":"), default=str)
    return s if len(s) <= _MAX_VALUE_CHARS else s[:_MAX_VALUE_CHARS] + "..."


def describe_pair(inv: dict[str, Any], comp: dict[str, Any] | None) -> str:
    """One-line text of an invoke/completion pair (used for the hover text)."""
    if comp is None:
        return f"#{inv['index']} p{inv['process']} {inv['f']} {_short(inv.get('value'))} -> never completed"
    ms = (comp["time"] - inv["time"]) / 1e6
    err = f" error={_short(comp['error'])}" if comp.get("error") is not None else ""
    node = f" node={inv['node']}" if inv.get("node") else ""
    return (f"#{inv['index']}..#{comp['index']} p{inv['process']} {inv['f']} {_short(inv.get('value'))} -> "
            f"{comp['type']} {_short(comp.get('value'))}{err}{node} ({ms:.1f} ms)")


def timeline_data(history: Iterable[Any]) -> dict[str, Any]:
    """The JSON embedded in the page: processes, ops [col, start, end, type code, text] and bands."""
    ops = [_d(o) for o in history]
    open_: dict[Any, dict[str, Any]] = {}
    pairs: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    slot: dict[Any, int] = {}
    for d in ops:
        p = d["process"]
        if d["type"] == "invoke":
            if p in open_:  # a second invoke without completion: the first never completed
                pairs[slot.pop(p)] = (open_.pop(p), None)
            open_[p] = d
            slot[p] = len(pairs)
            pairs.append((d, None))
        elif p in open_:
            pairs[slot.pop(p)] = (open_.pop(p), d)
        else:
            pairs.append((d, d))
    procs = sorted({d["process"] for d in ops}, key=lambda p: (p == "nemesis", str(type(p)), p))
    col = {p: i for i, p in enumerate(procs)}
    last = ops[-1]["index"] if ops else 0
    rows = []
    for inv, comp in pairs:
        end = comp["index"] if comp is not None else last
        rows.append([col[inv["process"]], inv["index"], end, TYPE_CODES[comp["type"] if comp else None],
                     describe_pair(inv, comp)])
    rows.sort(key=lambda r: r[1])
    bands = [[w.start_index, w.end_index, w.f] for w in nemesis_windows(ops)]
    return {"processes": [str(p) for p in procs], "ops": rows, "bands": bands, "last_index": last}


_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>%(title)s</title>
<style>
body{font-family:sans-serif;margin:0}
#hdr{position:sticky;top:0;background:#fff;z-index:3;border-bottom:1px solid #ccc;white-space:nowrap;height:22px}
#hdr div{display:inline-block;width:%(colw)dpx;font-size:11px;text-align:center;overflow:hidden}
#view{position:relative;height:calc(100vh - 60px);overflow:auto}
#space{position:relative}
.op{position:absolute;box-sizing:border-box;border:1px solid #0003;font-size:9px;overflow:hidden;cursor:default}
.band{position:absolute;left:0;right:0;background:#1f77b422;border-top:1px dashed #1f77b4;font-size:10px;color:#1f77b4}
#info{font-size:12px;padding:4px;height:28px;overflow:hidden}
</style></head><body>
<div id="info">%(title)s: %(n)d ops, %(p)d processes. Hover a box for details.</div>
<div id="view"><div id="hdr"></div><div id="space"></div></div>
<script id="data" type="application/json">%(data)s</script>
<script>
(function(){
var D=JSON.parse(document.getElementById('data').textContent);
var ROW=%(row)d, COLW=%(colw)d, COLORS=['#8fd18f','#ffbf80','#f08080','#cccccc'];
var view=document.getElementById('view'), space=document.getElementById('space'), hdr=document.getElementById('hdr');
space.style.height=((D.last_index+2)*ROW)+'px'; space.style.width=(D.processes.length*COLW)+'px';
hdr.style.width=space.style.width;
D.processes.forEach(function(p){var e=document.createElement('div');e.textContent=p;hdr.appendChild(e);});
var ops=D.ops, maxSpan=0;
for(var i=0;i<ops.length;i++){maxSpan=Math.max(maxSpan,ops[i][2]-ops[i][1]);}
function firstStartAtLeast(v){var lo=0,hi=ops.length;
  while(lo<hi){var m=(lo+hi)>>1;if(ops[m][1]<v)lo=m+1;else hi=m;}return lo;}
var layer=document.createElement('div');space.appendChild(layer);
function draw(){
  var top=Math.floor(view.scrollTop/ROW)-5, bottom=Math.ceil((view.scrollTop+view.clientHeight)/ROW)+5;
  var frag=document.createDocumentFragment();
  D.bands.forEach(function(b){if(b[1]>=top&&b[0]<=bottom){var e=document.createElement('div');e.className='band';
    e.style.top=(b[0]*ROW)+'px';e.style.height=(Math.max(1,b[1]-b[0])*ROW)+'px';e.textContent=b[2];frag.appendChild(e);}});
  var start=firstStartAtLeast(top-maxSpan), n=0;
  for(var i=start;i<ops.length&&ops[i][1]<=bottom&&n<20000;i++){
    var o=ops[i]; if(o[2]<top) continue;
    var e=document.createElement('div');e.className='op';
    e.style.left=(o[0]*COLW+1)+'px';e.style.width=(COLW-2)+'px';
    e.style.top=(o[1]*ROW)+'px';e.style.height=(Math.max(1,o[2]-o[1]+1)*ROW)+'px';
    e.style.background=COLORS[o[3]];e.title=o[4];frag.appendChild(e);n++;
  }
  layer.replaceChildren(frag);
}
var pending=false;
view.addEventListener('scroll',function(){if(!pending){pending=true;requestAnimationFrame(function(){pending=false;draw();});}});
window.addEventListener('resize',draw);
draw();
})();
</script></body></html>
"""


def render_timeline(history: Iterable[Any], *, title: str = "timeline", row_px: int = 6, col_px: int = 90) -> str:
    """The complete HTML page as a string."""
    data = timeline_data(history)
    # "</" inside a script element would end it early; JSON allows the escaped form.
    embedded = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    return _PAGE % {"title": html.escape(title), "data": embedded, "row": row_px, "colw": col_px,
                    "n": len(data["ops"]), "p": len(data["processes"])}


def write_timeline(history: Iterable[Any], path: str | Path, *, title: str = "timeline") -> None:
    """Write timeline.html to ``path``."""
    Path(path).write_text(render_timeline(history, title=title), encoding="utf-8")
