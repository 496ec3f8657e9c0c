"""The static dashboard: one self-contained HTML page from the warehouse.

:func:`collect_dashboard` runs the metrics on Spark and returns plain JSON-able data (small aggregates);
:func:`render_html` turns that data into HTML with Jinja2 and inline PNG plots (matplotlib, Agg backend) and
needs no Spark; :func:`write_report` does both and writes ``index.html`` and ``dashboard.json`` into the
output directory.  Every run in a table links to ``/runs/<test>/<ts>/`` as served by ``splitbrain serve``.
"""

from __future__ import annotations

import base64
import datetime as _dt
import io
import json
from pathlib import Path
from typing import Any

import jinja2

from spark_analysis import metrics
from spark_analysis.ingest import read_table

__all__ = ["collect_dashboard", "render_html", "write_report"]

_LIST_LIMIT = 200


def _rows(df: Any, limit: int | None = None) -> list[dict[str, Any]]:
    if limit is not None:
        df = df.limit(limit)
    out = []
    for r in df.collect():
        d = r.asDict(recursive=True)
        out.append({k: (v.isoformat() if isinstance(v, _dt.datetime) else v) for k, v in d.items()})
    return out


def collect_dashboard(spark: Any, warehouse: str | Path, *, now: _dt.datetime | None = None) -> dict[str, Any]:
    """All the dashboard's data as plain Python values (see the module docstring)."""
    from pyspark.sql import functions as F

    runs = read_table(spark, warehouse, "runs").cache()
    ops = read_table(spark, warehouse, "ops")
    faults = read_table(spark, warehouse, "faults").cache()
    per_window = metrics.recovery_by_fault(ops, faults).cache()
    link_cols = ["run_id", "href", "workload", "nemesis", "cluster_version", "date", "valid", "status"]
    data = {
        "generated_at": (now or _dt.datetime.now(_dt.UTC)).isoformat(timespec="seconds"),
        "warehouse": str(warehouse),
        "status_counts": _rows(metrics.status_counts(runs)),
        "total_runs": runs.count(),
        "rates": _rows(metrics.anomaly_rates(runs)),
        "cells": _rows(metrics.anomaly_rates(runs, ("workload", "nemesis"))),
        "trend": _rows(metrics.anomaly_rates(runs, ("workload", "date"))),
        "anomaly_types": _rows(metrics.anomaly_counts_by_type(read_table(spark, warehouse, "anomalies"))),
        "rto": _rows(metrics.rto_summary(per_window)),
        "recovery_samples": {
            r["kind"]: r["xs"] for r in _rows(per_window.where(F.col("recovery_s").isNotNull()).groupBy("kind")
                                              .agg(F.slice(F.collect_list("recovery_s"), 1, 5000).alias("xs")))
        },
        "latency": _rows(metrics.latency_by_phase(ops)),
        "flaky": _rows(metrics.flaky_configs(runs), 50),
        "slowest_checks": _rows(metrics.slowest_checks(read_table(spark, warehouse, "checks"))
                                .join(runs.select("run_id", "href"), "run_id", "left").orderBy(F.desc("time_s"))),
        "problem_runs": _rows(runs.where(F.col("status") != "ok").select(*link_cols, "problems")
                              .orderBy("run_id"), _LIST_LIMIT),
        "invalid_runs": _rows(runs.where(F.col("valid") == "false").select(*link_cols, "anomaly_count")
                              .orderBy(F.desc("date"), "run_id"), _LIST_LIMIT),
    }
    runs.unpersist()
    faults.unpersist()
    per_window.unpersist()
    return data


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _plots(data: dict[str, Any]) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots: dict[str, str] = {}
    trend = data["trend"]
    if trend:
        fig, ax = plt.subplots(figsize=(8, 3.2))
        days = sorted({r["date"] for r in trend})  # plotted by position: day strings are categories
        for wl in sorted({r["workload"] for r in trend}):
            pts = sorted((r for r in trend if r["workload"] == wl), key=lambda r: r["date"])
            xs = [days.index(r["date"]) for r in pts]
            ax.plot(xs, [r["rate"] for r in pts], marker="o", label=wl)
            ax.fill_between(xs, [r["ci_low"] for r in pts], [r["ci_high"] for r in pts], alpha=0.15)
        ax.set_xticks(range(len(days)), days)
        ax.set_ylabel("anomalous runs / runs")
        ax.set_ylim(0, 1)
        ax.legend(fontsize=8)
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
        plots["trend"] = _png(fig)
    cells = data["cells"]
    if cells:
        wls = sorted({r["workload"] for r in cells})
        nems = sorted({r["nemesis"] for r in cells})
        grid = [[float("nan")] * len(nems) for _ in wls]
        for r in cells:
            grid[wls.index(r["workload"])][nems.index(r["nemesis"])] = r["rate"]
        fig, ax = plt.subplots(figsize=(1.4 * len(nems) + 2, 0.7 * len(wls) + 1.5))
        im = ax.imshow(grid, cmap="Reds", vmin=0, vmax=1, aspect="auto")
        ax.set_xticks(range(len(nems)), nems)
        ax.set_yticks(range(len(wls)), wls)
        for r in cells:
            ax.text(nems.index(r["nemesis"]), wls.index(r["workload"]),
                    f"{r['rate']:.2f}\n{r['anomalous']}/{r['runs']}", ha="center", va="center", fontsize=8)
        fig.colorbar(im, ax=ax, label="anomaly rate")
        plots["heatmap"] = _png(fig)
    samples = data["recovery_samples"]
    if samples:
        kinds = sorted(samples)
        fig, ax = plt.subplots(figsize=(1.5 * len(kinds) + 3, 3.2))
        ax.boxplot([samples[k] for k in kinds], tick_labels=kinds)
        ax.set_ylabel("recovery after heal (s)")
        plots["rto"] = _png(fig)
    return plots


_TEMPLATE = jinja2.Template("""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>splitbrain nightly trends</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}
th{background:#f3f3f3;text-align:left}.bad{color:#b00}.num{text-align:right}h2{margin-top:1.6em}
.small{color:#666;font-size:12px}
</style></head><body>
<h1>splitbrain nightly trends</h1>
<p class="small">{{ d.total_runs }} runs in {{ d.warehouse }}; generated {{ d.generated_at }}.
A run counts in a rate when its results were read (status ok or crashed); intervals are Wilson 95%.</p>
<table><tr><th>status</th><th>verdict</th><th>runs</th></tr>
{% for r in d.status_counts %}<tr><td>{{ r.status }}</td><td>{{ r.valid }}</td><td class="num">{{ r.runs }}</td></tr>
{% endfor %}</table>
<h2>Anomaly rate over time</h2>
{% if plots.trend %}<img alt="anomaly rate per day and workload" src="{{ plots.trend }}">
{% else %}<p>No checked runs.</p>{% endif %}
<h2>Workload by nemesis</h2>
{% if plots.heatmap %}<img alt="anomaly rate heat map" src="{{ plots.heatmap }}">{% endif %}
<table><tr><th>workload</th><th>nemesis</th><th>runs</th><th>anomalous</th><th>rate</th><th>95% CI</th></tr>
{% for r in d.cells %}<tr><td>{{ r.workload }}</td><td>{{ r.nemesis }}</td><td class="num">{{ r.runs }}</td>
<td class="num">{{ r.anomalous }}</td><td class="num">{{ "%.3f"|format(r.rate) }}</td>
<td class="num">[{{ "%.3f"|format(r.ci_low) }}, {{ "%.3f"|format(r.ci_high) }}]</td></tr>
{% endfor %}</table>
<h2>Anomaly rate by workload, nemesis, cluster version and day</h2>
<table><tr><th>workload</th><th>nemesis</th><th>version</th><th>day</th><th>runs</th><th>anomalous</th><th>rate</th>
<th>95% CI</th></tr>
{% for r in d.rates %}<tr><td>{{ r.workload }}</td><td>{{ r.nemesis }}</td><td>{{ r.cluster_version }}</td>
<td>{{ r.date }}</td><td class="num">{{ r.runs }}</td><td class="num">{{ r.anomalous }}</td>
<td class="num">{{ "%.3f"|format(r.rate) }}</td>
<td class="num">[{{ "%.3f"|format(r.ci_low) }}, {{ "%.3f"|format(r.ci_high) }}]</td></tr>
{% endfor %}</table>
<h2>Anomalies by type</h2>
<table><tr><th>type</th><th>runs</th><th>total</th></tr>
{% for r in d.anomaly_types %}<tr><td>{{ r.type }}</td><td class="num">{{ r.runs }}</td>
<td class="num">{{ r.total }}</td></tr>{% else %}<tr><td colspan="3">none</td></tr>{% endfor %}</table>
<h2>Recovery per fault kind</h2>
<p class="small">Unavailability: fault start to the last failed op of its epoch. Recovery (RTO): fault end to the
first ok op.</p>
{% if plots.rto %}<img alt="recovery time distribution per fault kind" src="{{ plots.rto }}">{% endif %}
<table><tr><th>kind</th><th>windows</th><th>recovered</th><th>RTO p50 s</th><th>RTO p99 s</th><th>RTO max s</th>
<th>mean unavailable s</th></tr>
{% for r in d.rto %}<tr><td>{{ r.kind }}</td><td class="num">{{ r.windows }}</td><td class="num">{{ r.recovered }}</td>
<td class="num">{{ fmt(r.recovery_p50_s) }}</td><td class="num">{{ fmt(r.recovery_p99_s) }}</td>
<td class="num">{{ fmt(r.recovery_max_s) }}</td><td class="num">{{ fmt(r.unavailable_mean_s) }}</td></tr>
{% else %}<tr><td colspan="7">no fault windows</td></tr>{% endfor %}</table>
<h2>Latency by phase</h2>
<table><tr><th>phase</th><th>f</th><th>ops</th><th>p50 ms</th><th>p99 ms</th></tr>
{% for r in d.latency %}<tr><td>{{ r.phase }}</td><td>{{ r.f }}</td><td class="num">{{ r.ops }}</td>
<td class="num">{{ fmt(r.p50_ms) }}</td><td class="num">{{ fmt(r.p99_ms) }}</td></tr>{% endfor %}</table>
<h2>Flaky configurations</h2>
<table><tr><th>test</th><th>workload</th><th>nemesis</th><th>runs</th><th>valid</th><th>invalid</th>
<th>invalid runs</th></tr>
{% for r in d.flaky %}<tr><td>{{ r.name }}</td><td>{{ r.workload }}</td><td>{{ r.nemesis }}</td>
<td class="num">{{ r.runs }}</td><td class="num">{{ r.valid_runs }}</td><td class="num bad">{{ r.invalid_runs }}</td>
<td>{% for x in r.invalid_run_ids[:5] %}<a href="/runs/{{ x }}/">{{ x }}</a> {% endfor %}</td></tr>
{% else %}<tr><td colspan="7">none</td></tr>{% endfor %}</table>
<h2>Slowest checks</h2>
<table><tr><th>run</th><th>checker</th><th>verdict</th><th>time s</th></tr>
{% for r in d.slowest_checks %}<tr><td><a href="{{ r.href or '/runs/' ~ r.run_id ~ '/' }}">{{ r.run_id }}</a></td>
<td>{{ r.checker }}</td><td>{{ r.valid }}</td><td class="num">{{ fmt(r.time_s) }}</td></tr>
{% else %}<tr><td colspan="4">no checker timings recorded</td></tr>{% endfor %}</table>
<h2>Invalid runs</h2>
<table><tr><th>run</th><th>workload</th><th>nemesis</th><th>version</th><th>day</th><th>anomalies</th></tr>
{% for r in d.invalid_runs %}<tr><td><a href="{{ r.href }}">{{ r.run_id }}</a></td><td>{{ r.workload }}</td>
<td>{{ r.nemesis }}</td><td>{{ r.cluster_version }}</td><td>{{ r.date }}</td>
<td class="num bad">{{ r.anomaly_count }}</td></tr>{% else %}<tr><td colspan="6">none</td></tr>{% endfor %}</table>
<h2>Damaged or crashed runs</h2>
<table><tr><th>run</th><th>status</th><th>problems</th></tr>
{% for r in d.problem_runs %}<tr><td><a href="{{ r.href }}">{{ r.run_id }}</a></td><td class="bad">{{ r.status }}</td>
<td>{{ r.problems|join("; ") }}</td></tr>{% else %}<tr><td colspan="3">none</td></tr>{% endfor %}</table>
</body></html>
""", autoescape=True)


def _fmt(x: Any) -> str:
    return "-" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x)


def render_html(data: dict[str, Any]) -> str:
    """The dashboard page for :func:`collect_dashboard` data (no Spark needed)."""
    return _TEMPLATE.render(d=data, plots=_plots(data), fmt=_fmt)


def write_report(spark: Any, warehouse: str | Path, out_dir: str | Path, *,
                 now: _dt.datetime | None = None) -> Path:
    """Write ``index.html`` and ``dashboard.json`` into ``out_dir``; returns the HTML path."""
    data = collect_dashboard(spark, warehouse, now=now)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "dashboard.json").write_text(json.dumps(data, indent=1, default=str) + "\n", encoding="utf-8")
    page = out / "index.html"
    page.write_text(render_html(data), encoding="utf-8")
    return page
