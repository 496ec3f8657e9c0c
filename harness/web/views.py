"""HTML of the web UI's debugging views: a run's anomalies with their ops, the failing window of a
linearizability failure, the live view of a running test, and two runs side by side.

Pure functions from summaries, ``results.json`` documents and op texts to strings (the server reads the
files); every value from disk goes through :func:`html.escape`.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

from checker.timeline import AnomalyRecord, anomaly_records, window_svg
from harness.explain import checker_verdicts, verdict_label
from harness.runs import RunSummary

__all__ = ["render_anomalies", "render_compare", "render_live", "render_windows"]


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _u(rel: str) -> str:
    return quote(rel, safe="/")


def render_anomalies(rel: str, records: Sequence[AnomalyRecord], op_text: Mapping[int, str], *,
                     limit: int = 60) -> str:
    """Each anomaly: its checker, kind, key and explanation, and the ops it involves -- each op described and
    linked to the timeline, which selects and scrolls to it; one link shows all of an anomaly's ops."""
    if not records:
        return ""
    rows = []
    for n, r in enumerate(records[:limit]):
        ops = ",".join(str(i) for i in r.ops)
        link = f"/timeline/{_u(rel)}/#op={ops}" if ops else f"/timeline/{_u(rel)}/"
        shown: dict[str, int] = {}  # an anomaly naming an op's invoke and its completion shows the pair once
        for i in r.ops[:12]:
            shown.setdefault(op_text.get(i, f"#{i}"), i)
        items = "".join(f"<li><a href='/timeline/{_u(rel)}/#op={i}'>#{i}</a> <code>{_e(text)}</code></li>"
                        for text, i in shown.items())
        more = f"<li>&hellip; {len(r.ops) - 12} more</li>" if len(r.ops) > 12 else ""
        rows.append(f"<tr class='anomaly' id='anomaly-{n}'><td>{_e(r.checker)}</td><td class='bad'>{_e(r.type)}</td>"
                    f"<td>{_e(r.key)}</td><td>{_e(r.explanation)}<ul class='ops'>{items}{more}</ul></td>"
                    f"<td><a class='tl' href='{_e(link)}'>show in timeline</a></td></tr>")
    cut = f"<p>{len(records) - limit} more anomalies not shown</p>" if len(records) > limit else ""
    return ("<h3>anomalies and their ops</h3><table class='anomalies'><tr><th>checker</th><th>anomaly</th>"
            "<th>key</th><th>explanation and ops</th><th></th></tr>" + "".join(rows) + "</table>" + cut)


def render_windows(rel: str, windows: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """The failing window of each linearizability failure (:func:`checker.timeline.window_svg`)."""
    out = []
    for checker, w in windows:
        src = ("" if w.get("source") == "checker" else
               " <small>(rebuilt from the history: the check result kept no linearization states)</small>")
        failing = next((c for c in w.get("calls") or [] if isinstance(c, Mapping) and c.get("id") == w.get("failing")),
                       None)
        link = f" &middot; <a href='/timeline/{_u(rel)}/#op={_e(failing.get('index'))}'>in the timeline</a>" \
            if isinstance(failing, Mapping) else ""
        link += f" &middot; <a href='/linear.svg?{_e(urlencode({'run': rel, 'checker': checker}))}'>SVG</a>"
        out.append(f"<h3 class='window'>{_e(checker)}: the failing window{src}{link}</h3>"
                   f"<div class='svgwrap'>{window_svg(w)}</div>")
    return "".join(out)


def render_live(s: RunSummary, *, status: str) -> str:
    """The live page: polls ``/api/live/<run>`` every second and redraws progress, ops/s and faults."""
    rel = _u(s.rel_path)
    return f"""
<p><a href='/'>&larr; all runs</a> &middot; <a href='/run/{rel}/'>run page</a></p>
<h2>{_e(s.name)} {_e(s.ts)} <span id='status' class='v'>{_e(status)}</span></h2>
<p id='line' style='font-family:monospace'>waiting for the history&hellip;</p>
<table><tr><th>elapsed</th><th>ops/s (last 5 s)</th><th>invoked</th><th>ok</th><th>fail</th><th>info</th>
<th>faults active</th></tr><tr><td id='elapsed'></td><td id='rate'></td><td id='invoke'></td><td id='ok'></td>
<td id='fail'></td><td id='info'></td><td id='active'></td></tr></table>
<h3>completions per second</h3><svg id='spark' width='1000' height='160' style='border:1px solid #ddd'></svg>
<h3>faults</h3><table id='faults'><tr><th>fault</th><th>value</th><th>from</th><th>to</th></tr></table>
<script>
(function(){{
var url='/api/live/{rel}';
function esc(s){{return String(s).replace(/[&<>"]/g,function(c){{
  return {{'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}}[c];}});}}
function set(id,v){{document.getElementById(id).textContent=v;}}
function draw(d){{
  set('status',d.status); set('elapsed',d.elapsed_s.toFixed(1)+' s'); set('rate',d.ops_per_s);
  ['invoke','ok','fail','info'].forEach(function(k){{set(k,d.counts[k]);}});
  set('active',d.active_faults.join(', ')||'none');
  set('line',d.status+': '+d.elapsed_s.toFixed(1)+'s, '+d.ops_per_s+' ops/s, ok '+d.counts.ok+' fail '+d.counts.fail+
    ' info '+d.counts.info+', faults: '+(d.active_faults.join(', ')||'none'));
  // while running, the current second is still filling: leave it out rather than draw a false drop
  var svg=document.getElementById('spark'),W=1000,H=160,s=d.status==='running'?d.series.slice(0,-1):d.series,
    maxT=Math.max(d.elapsed_s,1),
    maxN=Math.max.apply(null,[1].concat(s.map(function(p){{return p[1];}})));
  var h='';
  d.faults.forEach(function(f,i){{var x0=f.start_s/maxT*W, x1=(f.end_s===null?d.elapsed_s:f.end_s)/maxT*W;
    h+='<rect x="'+x0+'" y="0" width="'+Math.max(2,x1-x0)+'" height="'+H+'" fill="'+f.colour+'" fill-opacity="0.2"/>'+
      '<text x="'+(x0+2)+'" y="'+(12+12*(i%3))+'" font-size="10" fill="'+f.colour+'">'+esc(f.f)+'</text>';}});
  h+='<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="'+s.map(function(p){{
    return (p[0]/maxT*W)+','+(H-4-p[1]/maxN*(H-20));}}).join(' ')+'"/>';
  h+='<text x="4" y="'+(H-6)+'" font-size="10" fill="#666">max '+maxN+'/s</text>';
  svg.innerHTML=h;
  var t='<tr><th>fault</th><th>value</th><th>from</th><th>to</th></tr>';
  d.faults.forEach(function(f){{t+='<tr><td style="color:'+f.colour+'">'+esc(f.f)+'</td><td>'+esc(f.value)+'</td><td>'+
    f.start_s.toFixed(1)+'s</td><td>'+(f.end_s===null?'active':f.end_s.toFixed(1)+'s')+'</td></tr>';}});
  if(!d.faults.length) t+='<tr><td colspan="4">none so far</td></tr>';
  document.getElementById('faults').innerHTML=t;
  if(d.status==='finished') {{set('line','finished: '+d.verdict+' -- see the run page and the timeline');}}
}}
function poll(){{fetch(url).then(function(r){{return r.json();}}).then(function(d){{draw(d);
  if(d.status!=='finished') setTimeout(poll,1000);}}).catch(function(){{setTimeout(poll,3000);}});}}
poll();
}})();
</script>"""


def _doc_counts(doc: Mapping[str, Any]) -> dict[str, int]:
    raw = doc.get("anomaly_counts")
    return {str(k): v for k, v in raw.items() if isinstance(v, int)} if isinstance(raw, Mapping) else {}


def _faults(doc: Mapping[str, Any]) -> dict[str, str]:
    raw = doc.get("faults")
    out = {}
    if isinstance(raw, Mapping):
        for k, v in raw.items():
            if isinstance(v, Mapping):
                out[str(k)] = f"{v.get('effective', 0)} of {v.get('requested', 0)} took effect"
    return out


def render_compare(a: tuple[RunSummary, Mapping[str, Any]], b: tuple[RunSummary, Mapping[str, Any]]) -> str:
    """Two runs side by side: verdicts per checker, anomaly counts, fault summaries, facts; rows that differ
    are marked."""
    (sa, da), (sb, db) = a, b

    def row(label: str, x: Any, y: Any) -> str:
        cls = " class='diff'" if str(x) != str(y) else ""
        return f"<tr{cls}><th>{_e(label)}</th><td>{_e(x)}</td><td>{_e(y)}</td></tr>"

    def head(s: RunSummary) -> str:
        return f"<a href='/run/{_u(s.rel_path)}/'>{_e(s.rel_path)}</a>"

    rows = [f"<tr><th></th><th>{head(sa)}</th><th>{head(sb)}</th></tr>", row("verdict", sa.verdict, sb.verdict),
            row("seed", sa.seed, sb.seed),
            row("duration", "" if sa.duration_s is None else f"{sa.duration_s:.1f}s",
                "" if sb.duration_s is None else f"{sb.duration_s:.1f}s")]
    va = {v.name: v for v in checker_verdicts(da)} if da else {}
    vb = {v.name: v for v in checker_verdicts(db)} if db else {}
    derived = {side: {r.checker: r.type for r in anomaly_records(doc)} for side, doc in (("a", da), ("b", db))}
    rows.append("<tr><th colspan='3'>checkers</th></tr>")

    def cell(v: Any, side: str) -> str:
        if v is None:
            return "absent"
        kinds = ", ".join(f"{k} x{n}" for k, n in v.anomalies)
        if not kinds and v.valid is False and v.name in derived[side]:  # a first_failure only (linearizability)
            kinds = derived[side][v.name]
        return verdict_label(v.valid) + (f" ({kinds})" if kinds else "")

    for name in sorted(set(va) | set(vb)):
        rows.append(row(name, cell(va.get(name), "a"), cell(vb.get(name), "b")))
    ca, cb = _doc_counts(da), _doc_counts(db)
    rows.append("<tr><th colspan='3'>anomaly counts</th></tr>")
    for k in sorted(set(ca) | set(cb)):
        rows.append(row(k, ca.get(k, 0), cb.get(k, 0)))
    if not (ca or cb):
        rows.append(row("(none)", 0, 0))
    fa, fb = _faults(da), _faults(db)
    rows.append("<tr><th colspan='3'>faults</th></tr>")
    for k in sorted(set(fa) | set(fb)):
        rows.append(row(k, fa.get(k, "not requested"), fb.get(k, "not requested")))
    rows.append("<tr><th colspan='3'>load</th></tr>")
    for label, key, sub in (("ops ok", "counts", "ok"), ("ops fail", "counts", "fail"), ("ops info", "counts", "info"),
                            ("achieved ops/s", "load", "achieved_ops_per_s"),
                            ("configured ops/s", "load", "configured_ops_per_s")):
        x, y = (d.get(key, {}).get(sub, "") if isinstance(d.get(key), Mapping) else "" for d in (da, db))
        if x != "" or y != "":
            rows.append(row(label, x, y))
    return ("<p><a href='/'>&larr; all runs</a></p><h2>compare two runs</h2>"
            "<table class='compare'>" + "".join(rows) + "</table>"
            "<p><small>highlighted rows differ</small></p>")
