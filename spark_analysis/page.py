"""The dashboard directory: an offline, interactive HTML page from :func:`spark_analysis.report.collect_dashboard`.

The directory is self-contained and its entry is ``index.html``; nothing is fetched over the network when it
is viewed (a browser opening the file, or ``splitbrain serve --dashboard DIR`` under ``/dashboard/``):

* ``index.html``     -- the page: the data as one JSON block, the behaviour (``dashboard.js`` in this package:
  filters, Plotly plots, sortable paginated tables) inline;
* ``plotly.min.js``  -- Plotly's JavaScript, copied from the installed ``plotly`` package (it is several MB,
  so it sits beside the page rather than inside it);
* ``dashboard.json`` -- the same data, for scripts.

Run links are root-relative (``/run/<test>/<ts>/``, :func:`spark_analysis.runfiles.run_href`), so they open the
run in ``splitbrain serve`` whichever path serves the dashboard.  Rendering needs no Spark.
"""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from spark_analysis.runfiles import run_href
from spark_analysis.wilson import Z95

__all__ = ["FILES", "render_html", "write_page"]

FILES = ("index.html", "plotly.min.js", "dashboard.json")

_TEMPLATE = jinja2.Template("""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>splitbrain nightly trends</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font-family:system-ui,sans-serif;margin:0 2em 2em;color:#222}
h1{margin:.6em 0 .2em}h2{margin-top:1.6em;border-bottom:1px solid #ddd}
.small,.note{color:#666;font-size:12px}
.filters{position:sticky;top:0;background:#fafafa;border-bottom:1px solid #ccc;padding:.5em 0;z-index:10;
  display:flex;flex-wrap:wrap;gap:.8em;align-items:end}
.filters label{display:flex;flex-direction:column;font-size:12px;color:#444}
table.dt{border-collapse:collapse;margin:.4em 0}table.dt td,table.dt th{border:1px solid #ccc;padding:3px 8px;
  font-size:13px}
table.dt th{background:#f3f3f3;text-align:left;cursor:pointer;user-select:none;white-space:nowrap}
th[aria-sort=ascending]::after{content:" \\25B2"}th[aria-sort=descending]::after{content:" \\25BC"}
.num{text-align:right}td.empty{color:#888}
tr.regressed td{background:#fdd;font-weight:600}tr.too-few-runs td{color:#777}
tr.bad td:first-child{border-left:3px solid #b00}
.pager{font-size:12px;margin-bottom:1em}.pager button{font-size:12px}
.banner{padding:.6em 1em;margin:.6em 0;border-radius:4px}.banner.bad{background:#fdd;border:1px solid #c66}
.banner.good{background:#e8f5e9;border:1px solid #9c9}
</style></head><body>
<h1>splitbrain nightly trends</h1>
<p class="small">{{ total_runs }} runs in {{ warehouse }}; generated {{ generated_at }}.  A run counts in a rate
when its results were read (status ok or crashed); intervals are Wilson 95%.</p>
<noscript><p>This dashboard needs JavaScript; its data is in dashboard.json beside this page.</p></noscript>
<div class="filters" id="filters">
<label>from day<input type="date" id="f-from"></label>
<label>to day<input type="date" id="f-to"></label>
<label>version<select id="f-version"></select></label>
<label>workload<select id="f-workload"></select></label>
<label>nemesis<select id="f-nemesis"></select></label>
<label>backend<select id="f-backend"></select></label>
<button type="button" id="f-reset">reset</button>
<span class="small" id="match-count"></span>
</div>
<div id="banner" class="banner"></div>
<h2>Status</h2><div id="status-table"></div>
<h2>Anomaly rate over time, per cell</h2>
<p class="note">One line per workload &times; nemesis cell on a time axis, shaded with its Wilson 95% band; dotted lines
mark the first run of each version.  All filters apply.</p>
<div id="trend"></div><p id="trend-empty" class="note" hidden>No checked runs match the filters.</p>
<h2>Cells</h2><p class="note">Anomaly rate per workload &times; nemesis over the filtered runs.  All filters apply.</p>
<div id="heatmap"></div><div id="cell-table"></div>
<h2>Version against baseline</h2>
<p class="note">The release gate per cell (<code>splitbrain spark gate</code>: Boschloo's exact one-sided test,
Holm's correction, alpha {{ gate.alpha }}, at least {{ gate.min_runs }} checked runs per version), with the
difference of anomaly rates and its Newcombe 95% interval.  Computed over all days: the workload, nemesis and
backend filters apply, the time and version filters do not (pick the versions here).</p>
<label>baseline <select id="cmp-baseline"></select></label>
<label>candidate <select id="cmp-candidate"></select></label>
<span class="small" id="cmp-flagged"></span>
<p class="small" id="cmp-note"></p>
<div id="cmp-table"></div>
<h2>Anomalies by type</h2><div id="type-table"></div>
<h2>Recovery per fault kind</h2>
<p class="note">As each run's results.json computes it: unavailability is fault start to the last failed op
before the next fault starts; recovery (RTO) is the heal to the first ok op after it.  Workload, nemesis,
version and backend filters apply; the time filter does not.</p>
<div id="rto-table"></div>
<h2>By nemesis mode</h2>
<p class="note">Random faults against guided ones (<code>nemesis.mode</code>; fixed schedules are listed as
<code>schedule</code>).  Time to detection is main-phase seconds per run that found an anomaly (seconds of chaos
per detection); coverage is the mean coverage points a run reached (runs that observed cluster events).
Every filter applies.</p>
<div id="mode-table"></div>
<h2>Runs</h2>
<label>show <select id="runs-kind"><option value="invalid">invalid runs</option>
<option value="damaged">damaged or crashed runs</option><option value="all">all runs</option></select></label>
<span class="note">{% if listed < total_runs %}(the newest {{ listed }} of {{ total_runs }} runs are listed){% endif %}
Links open the run in <code>splitbrain serve</code>.</span>
<div id="runs-table"></div>
<h2>Flaky configurations</h2><p class="note">Specs (same test.yaml but the seed) with valid and invalid runs.</p>
<div id="flaky-table"></div>
<h2>Latency by phase</h2><p class="note">Over all runs; the filters do not apply.</p><div id="latency-table"></div>
<h2>Slowest checks</h2><div id="checks-table"></div>
<script src="plotly.min.js"></script>
<script type="application/json" id="dashboard-data">{{ data_json }}</script>
<script>{{ script }}</script>
</body></html>
""", autoescape=True)


def _script() -> str:
    return resources.files("spark_analysis").joinpath("dashboard.js").read_text(encoding="utf-8")


def _page_data(data: dict[str, Any]) -> dict[str, Any]:
    """The collected data plus what the page derives from it in Python (links, the z of the Wilson interval)."""
    out = dict(data)
    out["z"] = Z95
    out["flaky"] = [{**r, "invalid_links": [[x, run_href(x)] for x in (r.get("invalid_run_ids") or [])[:5]]}
                    for r in data.get("flaky", [])]
    return out


def render_html(data: dict[str, Any]) -> str:
    """``index.html`` for :func:`spark_analysis.report.collect_dashboard` data (no Spark needed)."""
    page_data = _page_data(data)
    # "<" escaped: no string in the data can close the script element that holds it
    data_json = json.dumps(page_data, separators=(",", ":"), default=str).replace("<", "\\u003c")
    return _TEMPLATE.render(
        total_runs=data["total_runs"], warehouse=data["warehouse"], generated_at=data["generated_at"],
        gate=data["gate"], listed=len(data["runs"]["rows"]),
        data_json=Markup(data_json), script=Markup(_script()))


def write_page(data: dict[str, Any], out_dir: str | Path) -> Path:
    """Write the dashboard directory (:data:`FILES`) into ``out_dir``; returns the path of ``index.html``.

    Each file is written to a temporary name and renamed, so a reader never sees half a page.
    """
    from plotly.offline import get_plotlyjs

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    texts = {
        "plotly.min.js": get_plotlyjs(),
        "dashboard.json": json.dumps(data, indent=1, default=str) + "\n",
        "index.html": render_html(data),
    }
    for name, text in texts.items():
        tmp = out / f".{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, out / name)
    return out / "index.html"
