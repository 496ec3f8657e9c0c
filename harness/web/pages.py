"""HTML of the web UI: the run index and one run's page.  Pure functions from summaries and texts to strings;
every value that reaches HTML goes through :func:`html.escape` (run names and file names come from disk)."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

from checker.timeline import AnomalyRecord, anomaly_records
from harness.explain import anomaly_lines, checker_verdicts, verdict_label
from harness.runs import VERDICTS, RunSummary

__all__ = ["COLOURS", "PAGE_SIZE", "availability_table", "page", "render_index", "render_listing", "render_run"]

COLOURS = {"valid": "#c8f0c8", "invalid": "#f6c3c3", "unknown": "#f9e2b0", "crashed": "#e2c8f0",
           "incomplete": "#e4e4e4"}
PAGE_SIZE = 200

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.2em;color:#222}
table{border-collapse:collapse;font-size:14px}td,th{padding:3px 8px;border-bottom:1px solid #ddd;text-align:left}
a{color:#1a4f9c;text-decoration:none}a:hover{text-decoration:underline}
pre{background:#f6f6f6;padding:8px;overflow:auto;max-height:40em;font-size:12px}
.v{padding:1px 6px;border-radius:3px}form *{margin-right:6px}img{max-width:100%;border:1px solid #ddd}
.bad{color:#a40000;font-weight:600}
.crash{background:#fbe3e3;border:2px solid #a40000;padding:6px 10px;font-size:15px}
table.anomalies td{vertical-align:top}ul.ops{margin:2px 0 2px 1em;padding:0;font-size:12px}
tr.diff td{background:#fff3c4}.svgwrap{overflow-x:auto;border:1px solid #ddd;background:#fff}
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _u(rel: str) -> str:
    return quote(rel, safe="/")


def page(title: str, body: str) -> str:
    """A complete HTML page with the UI's style sheet."""
    return _page(title, body)


def _page(title: str, body: str) -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{_e(title)}</title><style>{_CSS}</style>"
            f"</head><body>{body}</body></html>")


def _verdict(v: str) -> str:
    return f"<span class='v' style='background:{COLOURS.get(v, '#fff')}'>{_e(v)}</span>"


def _anoms(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{_e(k)}={v}" for k, v in sorted(counts.items())) or "&ndash;"


def render_index(runs: Sequence[RunSummary], *, total: int, counts: Mapping[str, int], query: Mapping[str, str],
                 page: int, pages: int, dashboard: bool = False) -> str:
    """The index: filter form, verdict counts, one coloured row per run of this page (tick two to compare
    them), page links; a link to the ``/dashboard/`` when the server has one."""
    opts = "".join(f"<option value='{v}'{' selected' if query.get('verdict') == v else ''}>{v}</option>"
                   for v in ("", *VERDICTS))
    form = (f"<form method='get' action='/'>name <input name='name' value='{_e(query.get('name', ''))}'> "
            f"verdict <select name='verdict'>{opts}</select> "
            f"since <input name='since' placeholder='YYYY-MM-DD' size='10' value='{_e(query.get('since', ''))}'> "
            f"until <input name='until' placeholder='YYYY-MM-DD' size='10' value='{_e(query.get('until', ''))}'> "
            f"workload <input name='workload' size='12' value='{_e(query.get('workload', ''))}'> "
            f"fault <input name='fault' size='12' value='{_e(query.get('fault', ''))}'> "
            f"anomaly <input name='anomaly' size='12' value='{_e(query.get('anomaly', ''))}'> "
            "<button>filter</button> <a href='/'>clear</a></form>")
    summary = " &middot; ".join(f"{_verdict(v)} {n}" for v, n in counts.items() if n)
    rows = []
    for s in runs:
        rel = _u(s.rel_path)
        live = f" <a href='/live/{rel}/'>live</a>" if s.verdict == "incomplete" else ""
        rows.append(
            f"<tr style='background:{COLOURS[s.verdict]}'><td><input type='checkbox' name='run' form='cmp' "
            f"value='{_e(s.rel_path)}'></td><td><a href='/run/{rel}/'>{_e(s.ts)}</a>{live}</td>"
            f"<td><a href='/?{_e(urlencode({'name': s.name}))}'>{_e(s.name)}</a></td>"
            f"<td>{_e(s.verdict)}</td><td>{_e(', '.join(s.failing)) or '&ndash;'}</td>"
            f"<td>{_anoms(s.anomaly_counts)}</td><td>{_e(', '.join(s.faults)) or '&ndash;'}</td>"
            f"<td>{'' if s.seed is None else s.seed}</td>"
            f"<td>{'' if s.duration_s is None else f'{s.duration_s:.1f}s'}</td>"
            f"<td><a href='/zip/{rel}.zip'>zip</a></td></tr>")
    nav = []
    for p in range(1, pages + 1) if pages <= 30 else sorted({1, max(1, page - 1), page, min(pages, page + 1), pages}):
        q = urlencode({**{k: v for k, v in query.items() if v}, "page": p})
        nav.append(f"<b>{p}</b>" if p == page else f"<a href='/?{_e(q)}'>{p}</a>")
    table = ("<table><tr><th></th><th>run</th><th>test</th><th>verdict</th><th>failing checkers</th><th>anomalies</th>"
             "<th>faults that took effect</th><th>seed</th><th>time</th>"
             "<th></th></tr>" + "".join(rows) + "</table>")
    dash = " <small><a href='/dashboard/'>dashboard</a></small>" if dashboard else ""
    cmp_form = ("<form id='cmp' method='get' action='/compare'><button>compare the two ticked runs</button></form>")
    body = (f"<h2>splitbrain results{dash}</h2>{form}<p>{total} runs match: {summary or 'none'}</p>{cmp_form}{table}"
            f"<p>page {' '.join(nav)}</p>")
    return _page("splitbrain results", body)


def render_run(s: RunSummary, *, results_text: str, test_yaml: str, history_tail: Sequence[str], history_ops: str,
               files: Sequence[str], images: Sequence[str], has_timeline: bool, sections: str = "",
               running: bool = False) -> str:
    """One run: the crash and the verdict per checker first, then ``sections`` (the failing window, the
    anomalies with their ops), faults, plots, results.json, test.yaml, history tail, file list."""
    rel = _u(s.rel_path)
    links = [f"<a href='/zip/{rel}.zip'>download zip</a>", f"<a href='/files/{rel}/'>browse files</a>"]
    if has_timeline:
        links.insert(0, f"<a href='/timeline/{rel}/'>timeline</a>")
    if running:
        links.insert(0, f"<a href='/live/{rel}/'>live view</a>")
    counts = dict(s.anomaly_counts) or _derived_counts(results_text)
    imgs = "".join(f"<h3>{_e(i)}</h3><img src='/files/{rel}/{_u(i)}' alt='{_e(i)}'>" for i in images)
    flist = "".join(f"<li><a href='/files/{rel}/{_u(f)}'>{_e(f)}</a></li>" for f in files)
    body = (
        f"<p><a href='/'>&larr; all runs</a></p><h2>{_e(s.name)} {_e(s.ts)} {_verdict(s.verdict)}</h2>"
        f"<p>seed {_e(s.seed)} &middot; anomalies: {_anoms(counts)} &middot; {' &middot; '.join(links)}</p>"
        f"{verdict_table(results_text)}{sections}{availability_table(results_text)}{faults_table(results_text)}{imgs}<h3>results.json</h3><pre>{_e(results_text)}</pre><h3>test.yaml</h3><pre>{_e(test_yaml)}</pre>"
        f"<h3>history.jsonl (last {len(history_tail)} lines{history_ops})</h3>"
        f"<pre>{_e(chr(10).join(history_tail))}</pre>"
        f"<h3>files</h3><ul>{flist}</ul>"
    )
    return _page(f"{s.name} {s.ts}", body)


def _derived_counts(results_text: str) -> dict[str, int]:
    """Anomaly kinds with counts from the records of ``results.json`` (a linearizability failure reported only
    as a ``first_failure`` counts as one ``nonlinearizable``)."""
    try:
        doc = json.loads(results_text)
    except ValueError:
        return {}
    out: dict[str, int] = {}
    for r in anomaly_records(doc) if isinstance(doc, dict) else []:
        out[r.type] = out.get(r.type, 0) + 1
    return out


def verdict_table(results_text: str) -> str:
    """Why the run has its verdict, before anything else on the page: the crash (exception and where) and one
    row per checker -- verdict, anomaly kinds with counts, the first explanation -- failing checkers first,
    each with its anomalies listed (:mod:`harness.explain`, the same words as the CLI and JUnit)."""
    try:
        doc = json.loads(results_text)
    except ValueError:
        return ""
    if not isinstance(doc, dict):
        return ""
    crash = ""
    if doc.get("crashed"):
        where = f" (at {_e(doc['crashed_at'])})" if doc.get("crashed_at") else ""
        crash = f"<p class='bad crash' id='crash'>crashed: {_e(doc['crashed'])}{where}</p>"
    if doc.get("ended") == "killed":
        crash += "<p class='bad'>the harness was killed during this run: the verdict is unknown</p>"
    rows = []
    # a checker that reports its failure only as a first_failure (linearizability) has no anomaly counts:
    # show the record derived from it (checker.timeline.anomaly_records) rather than a bare "invalid"
    derived: dict[str, list[AnomalyRecord]] = {}
    for r in anomaly_records(doc):
        derived.setdefault(r.checker, []).append(r)
    for v in checker_verdicts(doc):
        word = verdict_label(v.valid).lower()
        kinds = ", ".join(f"{_e(k)} &times;{n}" for k, n in v.anomalies)
        explanation = v.explanation
        if v.valid is False and not kinds and derived.get(v.name):
            recs = derived[v.name]
            kinds = ", ".join(f"{_e(k)} &times;{sum(1 for r in recs if r.type == k)}"
                              for k in dict.fromkeys(r.type for r in recs))
            explanation = explanation or recs[0].explanation
        kinds = kinds or "&ndash;"
        detail = ""
        if v.valid is not True:
            lines = anomaly_lines(doc, v.name)
            if lines:
                detail = ("<details><summary>anomalies</summary><pre>" + _e("\n".join(lines)) +
                          "</pre></details>")
        why = _e(explanation or "")
        rows.append(f"<tr class='checker {word}'><td>{_e(v.name)}</td><td>{_verdict(word)}</td>"
                    f"<td class='kinds'>{kinds}</td><td class='why'>{why}{detail}</td></tr>")
    if not rows:
        return crash
    return (crash + "<h3>verdict</h3><table class='verdicts'><tr><th>checker</th><th>verdict</th><th>anomalies</th>"
            "<th>first explanation</th></tr>" + "".join(rows) + "</table>")


def _num(x: Any, unit: str = " s") -> str:
    return "&ndash;" if not isinstance(x, int | float) or isinstance(x, bool) else f"{x:g}{unit}"


def availability_table(results_text: str) -> str:
    """The availability verdict in detail (:mod:`checker.availability`): what the run expected, every judged fault
    window with the clients' longest wait against the bound, what could not be decided and why, and the final
    heal.  Empty when the run has no availability checker."""
    try:
        doc = json.loads(results_text)
    except ValueError:
        return ""
    checkers = doc.get("checkers") if isinstance(doc, dict) else None
    entry = checkers.get("availability") if isinstance(checkers, dict) else None
    stats = entry.get("stats") if isinstance(entry, dict) else None
    if not isinstance(stats, dict):
        return ""
    raw_exp = stats.get("expectations")
    exp: dict[str, Any] = raw_exp if isinstance(raw_exp, dict) else {}
    bound = exp.get("write_resume_s")
    ctl = exp.get("controller_write_resume_s")
    bound_text = _num(bound) + (f", {_num(ctl)} to the controllers" if ctl is not None and ctl != bound else "")
    rows = []
    for w in stats.get("windows") or []:
        if not isinstance(w, dict):
            continue
        bad = bool(w.get("unavailable"))
        verdict = "<span class='bad'>UNAVAILABLE</span>" if bad else ("met" if w.get("longest_wait_s") is not None
                                                                       else "no writes tried")
        cls = " class='bad'" if bad else ""
        rows.append(f"<tr{cls}><td>{_e(w.get('path'))}</td>"
                    f"<td>{_num(w.get('start_s'))} &ndash; {_num(w.get('fault_end_s'))}</td>"
                    f"<td>{_e(', '.join(map(str, w.get('began_with') or [])) or w.get('faults'))}</td>"
                    f"<td>{_num(w.get('longest_wait_s'))}</td><td>{verdict}</td>"
                    f"<td><small>{_e(w.get('why_expected'))}</small></td></tr>")
    table = ("<table class='availability'><tr><th>writes</th><th>fault window</th><th>fault</th><th>longest wait</th>"
             f"<th>verdict (bound {bound_text})</th><th>why writes must resume</th></tr>" + "".join(rows) + "</table>"
             if rows else "<p>no fault window could be judged</p>")
    undecided = [u for u in stats.get("undecided") or [] if isinstance(u, dict)]
    more = ""
    if undecided:
        items = "".join(f"<li>{_e(u.get('path'))} {_num(u.get('start_s'))} &ndash; {_num(u.get('end_s'))} "
                        f"({_e(u.get('faults'))}): {_e(u.get('why'))}</li>" for u in undecided)
        more = (f"<details><summary>{_e(stats.get('undecided_pieces', len(undecided)))} stretches not judged "
                f"(no claim either way)</summary><ul>{items}</ul></details>")
    raw_final = stats.get("final")
    final: dict[str, Any] = raw_final if isinstance(raw_final, dict) else {}
    if final.get("judged"):
        parts = []
        for wl, f in (final.get("workloads") or {}).items():
            if isinstance(f, dict):
                word = ("<span class='bad'>UNAVAILABLE</span> " if f.get("unavailable") else "") + (
                    f"resumed in {_num(f.get('waited_s'))}" if f.get("judged") else _e(f.get("why")))
                parts.append(f"{_e(wl)}: {word}")
        final_text = f"after the final heal at {_num(final.get('heal_s'))}: " + "; ".join(parts)
    else:
        final_text = f"final heal not judged: {_e(final.get('why', 'no record'))}"
    return (f"<h3 id='availability'>availability</h3><p>{_e(exp.get('text', ''))}</p>{table}{more}"
            f"<p>{final_text} (bound {_num(exp.get('final_resume_s'))})</p>")


def faults_table(results_text: str) -> str:
    """The run's fault accounting (``faults`` in results.json): per kind requested / took effect / did not,
    with the reasons; warnings for kinds that never took effect.  Empty when the run has none."""
    try:
        doc = json.loads(results_text)
    except ValueError:
        return ""
    faults = doc.get("faults") if isinstance(doc, dict) else None
    if not isinstance(faults, dict) or not faults:
        return ""
    rows = []
    for label, k in faults.items():
        if not isinstance(k, dict):
            continue
        reasons = "; ".join(f"{_e(r)} ({_e(n)})" for r, n in (k.get("reasons") or {}).items())
        cls = " class='bad'" if k.get("requested") and not k.get("effective") else ""
        rows.append(f"<tr{cls}><td>{_e(label)}</td><td>{_e(k.get('requested'))}</td><td>{_e(k.get('effective'))}"
                    f"</td><td>{_e(k.get('not_effective'))}</td><td>{reasons}</td></tr>")
    warn = "".join(f"<p class='bad'>&#9888; {_e(w)}</p>" for w in doc.get("fault_warnings") or [])
    return ("<h3>faults</h3>" + warn + "<table><tr><th>fault</th><th>requested</th><th>took effect</th>"
            "<th>did not</th><th>why not</th></tr>" + "".join(rows) + "</table>")


def render_listing(rel: str, entries: Sequence[tuple[str, bool, int]]) -> str:
    """A directory listing: (name, is_dir, size)."""
    up = rel.rstrip("/").rsplit("/", 1)[0] if "/" in rel.rstrip("/") else ""
    rows = "".join(
        f"<tr><td><a href='/files/{_u(rel.rstrip('/') + '/' + n) if rel else _u(n)}{'/' if d else ''}'>{_e(n)}"
        f"{'/' if d else ''}</a></td><td>{'' if d else size}</td></tr>" for n, d, size in entries)
    return _page(rel or "/", f"<p><a href='/'>all runs</a> &middot; <a href='/files/{_u(up)}/'>up</a></p>"
                             f"<h2>{_e(rel or '/')}</h2><table>{rows}</table>")


def pretty_json(text: str, limit: int = 300_000) -> str:
    """``results.json`` re-indented (or as is, if it does not parse), cut at ``limit`` characters."""
    try:
        text = json.dumps(json.loads(text), indent=2, sort_keys=False)
    except ValueError:
        pass
    return text if len(text) <= limit else text[:limit] + f"\n... ({len(text) - limit} more characters)"
