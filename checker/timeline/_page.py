"""The timeline page: one self-contained HTML file (no external assets) drawn from :func:`timeline_data`.

What a reader gets (issue 15, after Jepsen's timeline.html):

* one column per process (clients in numeric order, then ``nemesis``), then one thin lane per node whose
  ticks are that node's log lines; the vertical axis is real time (seconds since the test started, ticks
  on the left), zoomable;
* fault windows as bands across all columns in their fault kind's colour, labelled;
* ops as boxes from invoke to completion, filled by completion type, their left edge in the op kind's
  colour; ops involved in an anomaly outlined red, listed at the top, and the first one selected and
  scrolled to on load (``#op=12,40`` in the URL selects those instead);
* filters by process, f and completion type;
* selecting an op (click) shows its detail and, beside the ops, the node log lines of its window (its
  interval plus a second either side); with nothing selected, the log lines of the visible time range.

Only the rows in view are drawn, so the page stays usable with 100k+ ops.
"""

from __future__ import annotations

import html
import json
from typing import Any

__all__ = ["render_page"]

_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>%(title)s</title>
<style>
body{font-family:system-ui,sans-serif;margin:0;font-size:13px;color:#222;height:100vh;display:flex;
flex-direction:column}
#top{padding:4px 8px;border-bottom:1px solid #ccc;background:#fafafa}
#top label{margin-right:6px;white-space:nowrap}#top fieldset{display:inline-block;border:1px solid #ddd;
padding:1px 6px;margin:2px 4px 2px 0;vertical-align:top}#top legend{font-size:11px;color:#666}
#marks{margin:3px 0;color:#a40000}#marks a{color:#a40000;margin-right:8px;cursor:pointer;text-decoration:underline}
#main{display:flex;flex:1;min-height:0}
#view{position:relative;flex:1 1 60%%;overflow:auto;border-right:1px solid #ccc}
#hdr{position:sticky;top:0;background:#fff;z-index:5;border-bottom:1px solid #ccc;white-space:nowrap;height:18px}
#hdr div{display:inline-block;font-size:11px;text-align:center;overflow:hidden;vertical-align:top}
#space{position:relative}
.op{position:absolute;box-sizing:border-box;border:1px solid #0004;border-left-width:4px;font-size:9px;
overflow:hidden;cursor:pointer;white-space:nowrap}
.op.mark{outline:3px solid #e00000;z-index:3}.op.sel{outline:3px solid #0050ff;z-index:4}
.band{position:absolute;border-top:2px solid;font-size:10px;font-weight:600;padding-left:2px;pointer-events:none;
overflow:hidden;white-space:nowrap}
.win{position:absolute;border-top:1px dashed #0050ff;border-bottom:1px dashed #0050ff;pointer-events:none}
.blabel{position:absolute;font-size:10px;font-weight:600;pointer-events:none;background:#fffc;padding:0 2px;z-index:2}
.crash{position:absolute;border-top:3px solid #a40000;color:#a40000;font-weight:600;font-size:11px;
pointer-events:none;z-index:4}
.tick{position:absolute;left:0;font-size:10px;color:#666;border-top:1px solid #ddd;width:100%%;
pointer-events:none}
.lt{position:absolute;height:2px;cursor:pointer}
#side{flex:0 0 40%%;display:flex;flex-direction:column;min-width:0}
#detail{padding:6px;border-bottom:1px solid #ccc;font-family:monospace;font-size:12px;max-height:30%%;
overflow:auto;white-space:pre-wrap}
#logs{flex:1;overflow:auto;font-family:monospace;font-size:11px;padding:4px}
#logs div{white-space:pre;cursor:pointer}#logs div:hover{background:#eef}#logs div.ctx{opacity:.55}
.sw{display:inline-block;width:10px;height:10px;vertical-align:middle;margin-right:2px;border:1px solid #0003}
</style></head><body>
<div id="top"><b>%(title)s</b>: %(n)d ops, %(p)d processes, %(nb)d fault windows, %(nl)d node log lines.
 Time runs down (seconds since the test started). Click an op for its detail and the node logs of its window.
 <button id="zin">zoom +</button> <button id="zout">zoom &minus;</button> <button id="zfit">fit</button>
<div><span id="legend"></span></div>
<div id="filters"></div>
<div id="marks"></div><div id="crashline" style="color:#a40000;font-weight:600"></div></div>
<div id="main"><div id="view"><div id="hdr"></div><div id="space"></div></div>
<div id="side"><div id="detail">No op selected.</div><div id="logs"></div></div></div>
<script id="data" type="application/json">%(data)s</script>
<script>
(function(){
var D=JSON.parse(document.getElementById('data').textContent);
var TYPES=['ok','info','fail','never completed'], TC=['#8fd18f','#ffbf80','#f08080','#cccccc'];
var NODEC=['#1f77b4','#d62728','#2ca02c','#9467bd','#8c564b','#e377c2','#17becf','#bcbd22','#7f7f7f','#ff7f0e'];
var AX=56, COLW=D.processes.length>30?44:(D.processes.length>14?64:90), LOGW=D.nodes.length?14:0;
var view=document.getElementById('view'), space=document.getElementById('space'), hdr=document.getElementById('hdr');
var ops=D.ops, endS=Math.max(D.end_ns/1e9,0.001), pxs=Math.max(40,Math.min(2000,(view.clientHeight-30)/endS));
var show={proc:{},f:{},type:{}}, selected=null, picked={};
D.processes.forEach(function(p,i){show.proc[i]=true;}); D.fs.forEach(function(f,i){show.f[i]=true;});
TYPES.forEach(function(t,i){show.type[i]=true;});
var byInv={}; ops.forEach(function(o,i){byInv[o[5]]=i; if(o[6]>=0) byInv[o[6]]=i;});
var longOps=[], maxSpan=0;
ops.forEach(function(o,i){var s=o[2]-o[1]; if(s>5e9) longOps.push(i); else maxSpan=Math.max(maxSpan,s);});
function esc(s){return String(s).replace(/[&<>"]/g,function(c){
  return {'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c];});}
// header, legend, filters
var x0=AX; D.processes.forEach(function(p){var e=document.createElement('div');e.style.width=COLW+'px';
  e.textContent=(p==='nemesis'?'':'p')+p;hdr.appendChild(e);});
D.nodes.forEach(function(n){var e=document.createElement('div');e.style.width=LOGW+'px';e.title='log lines of '+n;
  e.textContent=n.slice(0,2);e.style.color=NODEC[D.nodes.indexOf(n)%%10];hdr.appendChild(e);});
hdr.style.paddingLeft=AX+'px';
var W=AX+D.processes.length*COLW+D.nodes.length*LOGW+4; space.style.width=W+'px'; hdr.style.width=(W-AX)+'px';
var lg=TYPES.map(function(t,i){return '<span class="sw" style="background:'+TC[i]+'"></span>'+t;}).join(' ');
lg+=' &middot; op kind (left edge): '+D.fs.map(function(f,i){return '<span class="sw" style="background:'+
  D.f_colours[i]+'"></span>'+esc(f);}).join(' ');
var fk={}; D.bands.forEach(function(b){fk[b[2].split(' ')[0]]=b[3];});
if(D.bands.length) lg+=' &middot; faults: '+Object.keys(fk).map(function(k){
  return '<span class="sw" style="background:'+fk[k]+'55;border-color:'+fk[k]+'"></span>'+esc(k);}).join(' ');
lg+=' &middot; <span class="sw" style="outline:2px solid #e00000"></span>op in an anomaly';
document.getElementById('legend').innerHTML=lg;
function boxes(name,labels,key){var h='<fieldset><legend>'+name+'</legend>';
  labels.forEach(function(l,i){
    h+='<label><input type="checkbox" data-k="'+key+'" data-i="'+i+'" checked>'+esc(l)+'</label>';});
  return h+'</fieldset>';}
var procLabels=D.processes.map(function(p){return p==='nemesis'?p:'p'+p;});
var fh=boxes('process',procLabels,'proc')+boxes('f',D.fs,'f')+boxes('type',TYPES,'type');
var filters=document.getElementById('filters'); filters.innerHTML=fh;
if(D.processes.length>16){filters.firstChild.style.maxWidth='40em';}
filters.addEventListener('change',function(ev){var t=ev.target; if(!t.dataset.k) return;
  show[t.dataset.k][t.dataset.i]=t.checked; draw();});
// marks
if(D.crash) document.getElementById('crashline').textContent=D.crash+' -- the history ends there';
var markIdx=Object.keys(D.marks).map(Number).sort(function(a,b){return a-b;});
function fromHash(){var m=/op=([0-9,]+)/.exec(location.hash||''); if(!m) return [];
  return m[1].split(',').filter(Boolean).map(Number);}
var hashOps=fromHash();
hashOps.forEach(function(i){if(byInv[i]!==undefined) picked[byInv[i]]=true;});
var mk=document.getElementById('marks');
if(markIdx.length){mk.innerHTML='ops in anomalies ('+markIdx.length+'): '+markIdx.slice(0,30).map(function(i){
  return '<a data-op="'+i+'" title="'+esc(D.marks[i].join(' | '))+'">#'+i+'</a>';}).join('')+
  (markIdx.length>30?' &hellip;':'');}
mk.addEventListener('click',function(ev){var i=ev.target.dataset&&ev.target.dataset.op;
  if(i!==undefined) select(byInv[+i],true);});
// geometry
function y(ns){return 20+ns/1e9*pxs;}
function size(){space.style.height=(y(D.end_ns)+40)+'px';}
function tickStep(){var s=[0.001,0.002,0.005,0.01,0.02,0.05,0.1,0.2,0.5,1,2,5,10,20,30,60,120,300,600];
  for(var i=0;i<s.length;i++){if(s[i]*pxs>=60) return s[i];} return 1200;}
function firstStartAtLeast(v){var lo=0,hi=ops.length;
  while(lo<hi){var m=(lo+hi)>>1;if(ops[m][1]<v)lo=m+1;else hi=m;}return lo;}
function firstLogAtLeast(v){var L=D.logs,lo=0,hi=L.length;
  while(lo<hi){var m=(lo+hi)>>1;if(L[m][0]<v)lo=m+1;else hi=m;}return lo;}
var layer=document.createElement('div');space.appendChild(layer);
function visible(){var a=(view.scrollTop-40-20)/pxs*1e9, b=(view.scrollTop+view.clientHeight-20)/pxs*1e9; return [a,b];}
function opEl(i){var o=ops[i];var e=document.createElement('div');
  e.className='op'+(D.marks[o[5]]?' mark':'')+(picked[i]?' mark':'')+(selected===i?' sel':'');
  e.dataset.i=i; e.dataset.index=o[5];
  e.style.left=(AX+o[0]*COLW+1)+'px'; e.style.width=(COLW-2)+'px'; e.style.top=y(o[1])+'px';
  e.style.height=Math.max(3,(o[2]-o[1])/1e9*pxs)+'px'; e.style.background=TC[o[3]];
  e.style.borderLeftColor=D.f_colours[o[4]]||'#999'; e.title=o[7]+(D.marks[o[5]]?'\\n'+D.marks[o[5]].join('\\n'):'');
  if((o[2]-o[1])/1e9*pxs>11) e.textContent=D.fs[o[4]]; return e;}
function draw(){
  var v=visible(), frag=document.createDocumentFragment(), st=tickStep();
  for(var t=Math.max(0,Math.floor(v[0]/1e9/st)*st);t*1e9<=v[1]&&t<=endS+st;t+=st){var e=document.createElement('div');
    e.className='tick';e.style.top=y(t*1e9)+'px';e.textContent=(+t.toFixed(3))+'s';frag.appendChild(e);}
  D.bands.forEach(function(b){if(b[1]<v[0]||b[0]>v[1]) return; var e=document.createElement('div');e.className='band';
    e.style.left=AX+'px';e.style.width=(D.processes.length*COLW)+'px';e.style.top=y(b[0])+'px';
    e.style.height=Math.max(2,(b[1]-b[0])/1e9*pxs)+'px';e.style.background=b[3]+'22';e.style.borderTopColor=b[3];
    e.style.color=b[3];e.textContent=b[2]+(b[4]?'':' (never healed)');frag.appendChild(e);
    var top=Math.max(y(b[0]),view.scrollTop+20);  // the label stays in view while the band is
    if(top>y(b[0])+2&&top<y(b[1])-12){var l=document.createElement('div');l.className='blabel';l.style.color=b[3];
      l.style.left=(AX+2)+'px';l.style.top=top+'px';l.textContent=b[2]+' (since '+(b[0]/1e9).toFixed(2)+'s)';
      frag.appendChild(l);}});
  if(D.crash&&D.end_ns>=v[0]&&D.end_ns<=v[1]){var c=document.createElement('div');c.className='crash';
    c.style.top=y(D.end_ns)+'px';c.style.left=AX+'px';c.style.width=(W-AX)+'px';c.textContent=D.crash;frag.appendChild(c);}
  if(selected!==null){var w=win(selected),e2=document.createElement('div');e2.className='win';e2.style.left=AX+'px';
    e2.style.width=(W-AX)+'px';e2.style.top=y(w[0])+'px';e2.style.height=((w[1]-w[0])/1e9*pxs)+'px';frag.appendChild(e2);}
  var n=0, drawn={};
  function maybe(i){var o=ops[i]; if(drawn[i]||o[2]<v[0]||o[1]>v[1]) return;
    if(!show.proc[o[0]]||!show.f[o[4]]||!show.type[o[3]]) return;
    drawn[i]=1; frag.appendChild(opEl(i)); n++;}
  for(var i=firstStartAtLeast(v[0]-maxSpan);i<ops.length&&ops[i][1]<=v[1]&&n<20000;i++) maybe(i);
  longOps.forEach(maybe);
  var L=D.logs, lx=AX+D.processes.length*COLW+2;
  for(var j=firstLogAtLeast(v[0]),k=0;j<L.length&&L[j][0]<=v[1]&&k<5000;j++,k++){var l=document.createElement('div');
    l.className='lt';l.style.left=(lx+L[j][1]*LOGW)+'px';l.style.width=(LOGW-3)+'px';l.style.top=y(L[j][0])+'px';
    l.style.background=NODEC[L[j][1]%%10];l.title=D.nodes[L[j][1]]+': '+L[j][2];l.dataset.log=j;frag.appendChild(l);}
  layer.replaceChildren(frag);
  if(selected===null) logs(v[0],v[1]);
}
function win(i){var o=ops[i]; return [Math.max(0,o[1]-1e9), Math.min(Math.max(o[2],o[1])+1e9, D.end_ns+1e9)];}
function logLine(j,ctx){var L=D.logs;return '<div data-t="'+L[j][0]+'" class="'+(ctx?'ctx':'')+'" style="color:'+
  NODEC[L[j][1]%%10]+'">'+(L[j][0]/1e9).toFixed(3)+'s '+esc(D.nodes[L[j][1]])+' '+esc(L[j][2])+'</div>';}
function logs(a,b){var L=D.logs,out=[],box=document.getElementById('logs'),j0=firstLogAtLeast(a),j;
  for(j=j0;j<L.length&&L[j][0]<=b&&out.length<800;j++) out.push(logLine(j,false));
  if(out.length<10){  // few lines in the window: show the nearest ones either side, dimmed
    var before=[],after=[];for(var k=Math.max(0,j0-5);k<j0;k++) before.push(logLine(k,true));
    for(var m=j;m<Math.min(L.length,j+5);m++) after.push(logLine(m,true));
    out=before.concat(out,after);}
  var n=0; for(j=j0;j<L.length&&L[j][0]<=b;j++) n++;
  var head=(selected===null?'node log lines in view':'node log lines of the selected window')+' ('+(a/1e9).toFixed(3)+
    's .. '+(b/1e9).toFixed(3)+'s): '+n+(n>800?' (first 800 shown)':'')+
    (n<10&&L.length?'; dimmed: the nearest lines outside':'');
  box.innerHTML='<div style="color:#666">'+esc(head)+'</div>'+
    (D.nodes.length?out.join(''):'<div>(no node logs)</div>');}
function select(i,scroll){if(i===undefined||i===null) return; selected=i; var o=ops[i];
  var why=D.marks[o[5]]?'\\n\\nanomalies:\\n'+D.marks[o[5]].join('\\n'):'';
  document.getElementById('detail').textContent=o[7]+why;
  var w=win(i); logs(w[0],w[1]);
  if(scroll){view.scrollTop=Math.max(0,y(o[1])-view.clientHeight/3); view.scrollLeft=Math.max(0,AX+o[0]*COLW-200);}
  draw();}
space.addEventListener('click',function(ev){var t=ev.target;
  if(t.dataset&&t.dataset.i!==undefined){select(+t.dataset.i,false);}
  else if(t.dataset&&t.dataset.log!==undefined){selected=null;var tt=D.logs[+t.dataset.log][0];logs(tt-1e9,tt+1e9);}});
document.getElementById('logs').addEventListener('click',function(ev){var t=ev.target.dataset&&ev.target.dataset.t;
  if(t!==undefined) view.scrollTop=Math.max(0,y(+t)-view.clientHeight/2);});
function zoom(k){var mid=(view.scrollTop+view.clientHeight/2-20)/pxs; pxs=Math.max(1,Math.min(1e6,pxs*k)); size();
  view.scrollTop=Math.max(0,mid*pxs+20-view.clientHeight/2); draw();}
document.getElementById('zin').onclick=function(){zoom(2);};document.getElementById('zout').onclick=function(){zoom(0.5);};
document.getElementById('zfit').onclick=function(){pxs=Math.max(1,(view.clientHeight-40)/endS);size();view.scrollTop=0;draw();};
var pending=false;
view.addEventListener('scroll',function(){if(!pending){pending=true;requestAnimationFrame(function(){pending=false;draw();});}});
window.addEventListener('resize',draw);
window.addEventListener('hashchange',function(){picked={};
  fromHash().forEach(function(i){if(byInv[i]!==undefined) picked[byInv[i]]=true;});
  var h=fromHash(); if(h.length) select(byInv[h[0]],true);});
size();
var first=hashOps.length?byInv[hashOps[0]]:(D.focus!==null?byInv[D.focus]:undefined);
if(first!==undefined){var o=ops[first]; if((o[2]-o[1])/1e9*pxs<14){pxs=Math.min(1e6,14e9/Math.max(o[2]-o[1],1));size();}
  select(first,true);} else draw();
})();
</script></body></html>
"""


def render_page(data: dict[str, Any], *, title: str = "timeline") -> str:
    """The complete HTML page for :func:`checker.timeline.timeline_data`'s output."""
    # "</" inside a script element would end it early; JSON allows the escaped form.
    embedded = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    return _PAGE % {"title": html.escape(title), "data": embedded,
                    "n": len(data["ops"]), "p": len(data["processes"]), "nb": len(data["bands"]),
                    "nl": len(data["logs"])}
