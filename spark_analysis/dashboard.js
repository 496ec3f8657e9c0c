// The splitbrain dashboard's behaviour: filters, plots (Plotly, loaded from plotly.min.js beside the page) and
// sortable, paginated tables.  All statistics arrive precomputed by Spark in the JSON block #dashboard-data
// (spark_analysis/report.py); this script only sums counts at the filters' grain and draws.  The one formula it
// evaluates itself is the Wilson interval of summed counts, with the z value the data carries
// (spark_analysis/wilson.py is the reference; the browser test compares the two).
"use strict";

const D = JSON.parse(document.getElementById("dashboard-data").textContent);
const FILTERS = ["from", "to", "version", "workload", "nemesis", "backend"];
const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
  "#bcbd22", "#17becf"];
const PAGE_SIZE = 25;

function wilson(k, n) {
  if (n <= 0) return [0, 1];
  const z = D.z, z2 = z * z, p = k / n, den = 1 + z2 / n;
  const centre = (p + z2 / (2 * n)) / den;
  const half = z / den * Math.sqrt(p * (1 - p) / n + z2 / (4 * n * n));
  return [k === 0 ? 0 : Math.max(0, centre - half), k === n ? 1 : Math.min(1, centre + half)];
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined) continue;
    if (k === "class") e.className = v; else if (k === "text") e.textContent = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

const fmt = {
  rate: (v) => (v === null || v === undefined ? "-" : v.toFixed(3)),
  num: (v) => (v === null || v === undefined ? "-" : (Number.isInteger(v) ? String(v) : v.toFixed(3))),
  signed: (v) => (v === null || v === undefined ? "-" : (v >= 0 ? "+" : "") + v.toFixed(2)),
  p: (v) => (v === null || v === undefined ? "-" : v >= 1e-4 ? v.toFixed(4) : v.toExponential(1)),
  ci: (lo, hi) => `[${fmt.rate(lo)}, ${fmt.rate(hi)}]`,
  time: (v) => (v ? v.replace("T", " ").replace(/(\.\d+)?Z$/, "") : "-"),
};

function link(href, text) { return el("a", { href: href }, text); }

// -- tables ---------------------------------------------------------------------------------------------------

// A sortable, paginated table in `container`.  columns: [{key, label, num, render(row) -> Node|string,
// sort(row) -> value}]; rowClass(row) -> class name; update(rows) redraws with new rows (page 1).
function makeTable(container, columns, opts) {
  opts = opts || {};
  const state = { key: opts.sortKey || null, dir: opts.sortDir || 1, page: 0, rows: [] };
  const table = el("table", { class: "dt" });
  const thead = el("thead"), tbody = el("tbody"), pager = el("div", { class: "pager" });
  const headRow = el("tr");
  for (const c of columns) {
    const th = el("th", { "data-key": c.key, class: c.num ? "num sortable" : "sortable", title: "sort" }, c.label);
    th.addEventListener("click", () => {
      state.dir = state.key === c.key ? -state.dir : (c.num ? -1 : 1);
      state.key = c.key;
      state.page = 0;
      draw();
    });
    headRow.append(th);
  }
  thead.append(headRow);
  table.append(thead, tbody);
  container.replaceChildren(table, pager);

  function value(c, r) { return c.sort ? c.sort(r) : r[c.key]; }

  function draw() {
    const col = columns.find((c) => c.key === state.key);
    const rows = state.rows.slice();
    if (col) {
      rows.sort((a, b) => {
        const x = value(col, a), y = value(col, b);
        if (x === y) return 0;
        if (x === null || x === undefined) return 1;
        if (y === null || y === undefined) return -1;
        return (x < y ? -1 : 1) * state.dir;
      });
    }
    for (const th of headRow.children) {
      const k = th.getAttribute("data-key");
      th.setAttribute("aria-sort", k === state.key ? (state.dir > 0 ? "ascending" : "descending") : "none");
    }
    const pages = Math.max(1, Math.ceil(rows.length / PAGE_SIZE));
    state.page = Math.min(state.page, pages - 1);
    const shown = rows.slice(state.page * PAGE_SIZE, (state.page + 1) * PAGE_SIZE);
    tbody.replaceChildren(...(shown.length ? shown.map((r) => {
      const tr = el("tr", { class: opts.rowClass ? opts.rowClass(r) : null });
      if (opts.rowAttrs) for (const [k, v] of Object.entries(opts.rowAttrs(r))) tr.setAttribute(k, v);
      for (const c of columns) {
        const v = c.render ? c.render(r) : r[c.key];
        tr.append(el("td", { class: c.num ? "num" : null }, v instanceof Node ? v : (v === null || v === undefined ? "-" : String(v))));
      }
      return tr;
    }) : [el("tr", {}, el("td", { colspan: String(columns.length), class: "empty" }, opts.empty || "none"))]));
    const prev = el("button", { type: "button", class: "prev" }, "‹ prev");
    const next = el("button", { type: "button", class: "next" }, "next ›");
    prev.disabled = state.page === 0;
    next.disabled = state.page >= pages - 1;
    prev.addEventListener("click", () => { state.page -= 1; draw(); });
    next.addEventListener("click", () => { state.page += 1; draw(); });
    pager.replaceChildren(prev, el("span", { class: "pageinfo" }, ` page ${state.page + 1} of ${pages} · ${rows.length} rows `), next);
  }

  return { update(rows) { state.rows = rows; state.page = 0; draw(); } };
}

// -- data access ----------------------------------------------------------------------------------------------

function records(table) {
  const cols = table.columns;
  return table.rows.map((r) => Object.fromEntries(cols.map((c, i) => [c, r[i]])));
}

const COUNTS = records(D.counts).map((r) => ({ ...r, cluster_version: r.version }));
const STATUSES = records(D.statuses);
const TYPES = records(D.anomaly_types);
const RUNS = records(D.runs);
const MODES = records(D.modes || { columns: [], rows: [] });

function current() {
  const f = {};
  for (const name of FILTERS) f[name] = document.getElementById("f-" + name).value;
  return f;
}

// Does a row with date/workload/nemesis/cluster_version/backend pass the filters?  `skip` names filters to ignore.
function passes(r, f, skip) {
  skip = skip || [];
  if (!skip.includes("time") && (f.from || f.to)) {
    if (!/^\d{4}-\d{2}-\d{2}$/.test(r.date || "")) return false;
    if (f.from && r.date < f.from) return false;
    if (f.to && r.date > f.to) return false;
  }
  if (f.version && !skip.includes("version") && r.cluster_version !== f.version) return false;
  if (f.workload && r.workload !== f.workload) return false;
  if (f.nemesis && r.nemesis !== f.nemesis) return false;
  if (f.backend && !skip.includes("backend") && r.backend !== f.backend) return false;
  return true;
}

function sumBy(rows, keyOf, fields) {
  const out = new Map();
  for (const r of rows) {
    const k = keyOf(r);
    let acc = out.get(k);
    if (!acc) { acc = { key: k, first: r }; for (const f of fields) acc[f] = 0; out.set(k, acc); }
    for (const f of fields) acc[f] += r[f] || 0;
  }
  return [...out.values()];
}

// -- sections -------------------------------------------------------------------------------------------------

function drawSummary(f) {
  const rows = STATUSES.filter((r) => passes(r, f));
  const total = rows.reduce((s, r) => s + r.runs, 0);
  document.getElementById("match-count").textContent = `${total} of ${D.total_runs} runs match the filters`;
  statusTable.update(sumBy(rows, (r) => r.status + "|" + r.valid, ["runs"]).map((a) => ({
    status: a.first.status, valid: a.first.valid, runs: a.runs })));
}

function cellName(r) { return `${r.workload} × ${r.nemesis}`; }

function drawTrend(f) {
  const rows = COUNTS.filter((r) => passes(r, f) && /^\d{4}-\d{2}-\d{2}$/.test(r.date));
  const cells = [...new Set(rows.map(cellName))].sort();
  const traces = [];
  cells.forEach((cell, i) => {
    const colour = PALETTE[i % PALETTE.length];
    const days = sumBy(rows.filter((r) => cellName(r) === cell), (r) => r.date, ["runs", "anomalous"])
      .sort((a, b) => (a.key < b.key ? -1 : 1));
    const x = days.map((d) => d.key), rate = days.map((d) => d.anomalous / d.runs);
    const ci = days.map((d) => wilson(d.anomalous, d.runs));
    traces.push({ x, y: ci.map((c) => c[1]), mode: "lines", line: { width: 0, color: colour }, hoverinfo: "skip",
      showlegend: false, legendgroup: cell, type: "scatter" });
    traces.push({ x, y: ci.map((c) => c[0]), mode: "lines", line: { width: 0, color: colour }, fill: "tonexty",
      fillcolor: colour + "26", hoverinfo: "skip", showlegend: false, legendgroup: cell, type: "scatter" });
    traces.push({ x, y: rate, mode: "lines+markers", name: cell, legendgroup: cell, line: { color: colour },
      type: "scatter", customdata: days.map((d, j) => [d.anomalous, d.runs, ci[j][0], ci[j][1]]),
      hovertemplate: `${cell}<br>%{x|%Y-%m-%d}: %{y:.3f} (%{customdata[0]}/%{customdata[1]})` +
        "<br>95% CI [%{customdata[2]:.3f}, %{customdata[3]:.3f}]<extra></extra>" });
  });
  const shapes = [], annotations = [];
  for (const v of D.versions) {
    const t = D.version_first_seen[v];
    if (!t || (f.version && f.version !== v)) continue;
    const day = t.slice(0, 10);
    if ((f.from && day < f.from) || (f.to && day > f.to)) continue;
    shapes.push({ type: "line", xref: "x", yref: "paper", x0: t, x1: t, y0: 0, y1: 1,
      line: { dash: "dot", width: 1, color: "#555" } });
    annotations.push({ x: t, y: 1, xref: "x", yref: "paper", text: v, showarrow: false, yanchor: "bottom",
      font: { size: 10 } });
  }
  Plotly.react("trend", traces, {
    margin: { t: 24, r: 10, b: 40, l: 50 }, height: 360, hovermode: "closest",
    xaxis: { type: "date", title: { text: "run start (UTC day)" } },
    yaxis: { range: [0, 1], title: { text: "anomalous runs / runs" } }, shapes, annotations,
    legend: { orientation: "h", y: -0.2 },
  }, { displaylogo: false, responsive: true });
  document.getElementById("trend-empty").hidden = traces.length > 0;
}

function drawCells(f) {
  const rows = COUNTS.filter((r) => passes(r, f));
  const cells = sumBy(rows, cellName, ["runs", "anomalous"]).map((a) => {
    const ci = wilson(a.anomalous, a.runs);
    return { workload: a.first.workload, nemesis: a.first.nemesis, runs: a.runs, anomalous: a.anomalous,
      rate: a.anomalous / a.runs, ci_low: ci[0], ci_high: ci[1] };
  });
  cellTable.update(cells);
  const wls = [...new Set(cells.map((c) => c.workload))].sort();
  const nems = [...new Set(cells.map((c) => c.nemesis))].sort();
  const z = wls.map(() => nems.map(() => null)), text = wls.map(() => nems.map(() => ""));
  for (const c of cells) {
    z[wls.indexOf(c.workload)][nems.indexOf(c.nemesis)] = c.rate;
    text[wls.indexOf(c.workload)][nems.indexOf(c.nemesis)] = `${c.rate.toFixed(2)} (${c.anomalous}/${c.runs})`;
  }
  Plotly.react("heatmap", cells.length ? [{ type: "heatmap", x: nems, y: wls, z, text, texttemplate: "%{text}",
    colorscale: "Reds", zmin: 0, zmax: 1, hovertemplate: "%{y} × %{x}: %{text}<extra></extra>",
    colorbar: { title: { text: "rate" } } }] : [], {
    margin: { t: 10, r: 10, b: 60, l: 110 }, height: Math.max(180, 70 * wls.length + 90),
    xaxis: { type: "category", automargin: true }, yaxis: { type: "category", automargin: true },
  }, { displaylogo: false, responsive: true });
}

function comparisonScope(f) {
  return f.backend && D.comparisons.some((c) => c.backend === f.backend) ? f.backend : "all";
}

function drawComparison(f) {
  const base = document.getElementById("cmp-baseline").value, cand = document.getElementById("cmp-candidate").value;
  const scope = comparisonScope(f);
  const rows = D.comparisons.filter((c) => c.backend === scope && c.baseline === base && c.candidate === cand &&
    (!f.workload || c.workload === f.workload) && (!f.nemesis || c.nemesis === f.nemesis));
  const note = document.getElementById("cmp-note");
  const known = D.comparisons.some((c) => c.baseline === base && c.candidate === cand);
  note.textContent = !base || !cand ? "Fewer than two versions: nothing to compare." :
    !known ? `No comparison of ${cand} against ${base}: pick a baseline older than the candidate.` :
      `Candidate ${cand} against baseline ${base}, backend: ${scope}.`;
  cmpTable.update(rows);
  const flagged = rows.filter((r) => r.verdict === "regressed").length;
  document.getElementById("cmp-flagged").textContent = flagged ? `${flagged} cell(s) regressed` : "no cell regressed";
}

function drawBanner() {
  const pair = D.gate.default_pair, banner = document.getElementById("banner");
  if (!pair) { banner.hidden = true; return; }
  const bad = D.comparisons.filter((c) => c.backend === "all" && c.baseline === pair[0] && c.candidate === pair[1] &&
    c.verdict === "regressed");
  banner.className = bad.length ? "banner bad" : "banner good";
  banner.replaceChildren(bad.length ?
    `Regression: candidate ${pair[1]} is significantly worse than ${pair[0]} in ${bad.length} cell(s): ` +
      bad.map((c) => `${cellName(c)} (${fmt.signed(c.diff)} [${fmt.signed(c.diff_low)}, ${fmt.signed(c.diff_high)}])`)
        .join("; ") :
    `No regression flagged: candidate ${pair[1]} against baseline ${pair[0]} (release gate, alpha ${D.gate.alpha}).`);
}

function drawTypes(f) {
  const rows = TYPES.filter((r) => passes(r, f));
  typeTable.update(sumBy(rows, (r) => r.type, ["runs", "total"]).map((a) => ({ type: a.key, runs: a.runs, total: a.total })));
}

function drawRto(f) {
  const want = { workload: f.workload || null, nemesis: f.nemesis || null, cluster_version: f.version || null,
    backend: f.backend || null };
  rtoTable.update(D.rto.filter((r) => Object.entries(want).every(([k, v]) => r[k] === v)));
}

function drawModes(f) {
  const sums = sumBy(MODES.filter((r) => passes(r, f)), (r) => r.nemesis_mode,
    ["runs", "anomalous", "chaos_s", "coverage_sum", "covered_runs"]);
  modeTable.update(sums.map((a) => ({ mode: a.key, runs: a.runs, anomalous: a.anomalous, chaos_s: a.chaos_s,
    detect_s: a.anomalous ? a.chaos_s / a.anomalous : null,
    coverage: a.covered_runs ? a.coverage_sum / a.covered_runs : null })));
}

function drawRuns(f) {
  const kind = document.getElementById("runs-kind").value;
  const rows = RUNS.filter((r) => passes(r, f) && (kind === "all" || (kind === "invalid" ? r.valid === "false" :
    r.status !== "ok")));
  runTable.update(rows);
}

function drawFlaky(f) {
  flakyTable.update(D.flaky.filter((r) => (!f.workload || r.workload === f.workload) && (!f.nemesis || r.nemesis === f.nemesis)));
}

function redraw() {
  const f = current();
  try {  // the filters in the address, so a filtered view can be bookmarked and shared
    history.replaceState(null, "", "#" + new URLSearchParams(Object.entries(f).filter(([, v]) => v)).toString());
  } catch (e) { /* some browsers refuse this on file:// pages; the view still works */ }
  drawSummary(f);
  drawTrend(f);
  drawCells(f);
  drawComparison(f);
  drawTypes(f);
  drawModes(f);
  drawRto(f);
  drawRuns(f);
  drawFlaky(f);
}

// -- set-up ---------------------------------------------------------------------------------------------------

function options(id, values, allLabel) {
  const s = document.getElementById(id);
  s.replaceChildren(...(allLabel ? [el("option", { value: "" }, allLabel)] : []),
    ...values.map((v) => el("option", { value: v }, v)));
}

const distinct = (rows, key) => [...new Set(rows.map((r) => r[key]))].sort();
const versionsSeen = D.versions.concat(distinct(STATUSES, "cluster_version").filter((v) => !D.versions.includes(v)));
options("f-version", versionsSeen, "all versions");
options("f-workload", distinct(STATUSES, "workload"), "all workloads");
options("f-nemesis", distinct(STATUSES, "nemesis"), "all nemeses");
options("f-backend", distinct(STATUSES, "backend"), "all backends");
options("cmp-baseline", D.versions, null);
options("cmp-candidate", D.versions, null);
if (D.gate.default_pair) {
  document.getElementById("cmp-baseline").value = D.gate.default_pair[0];
  document.getElementById("cmp-candidate").value = D.gate.default_pair[1];
}
const days = distinct(STATUSES, "date").filter((d) => /^\d{4}-\d{2}-\d{2}$/.test(d));
for (const id of ["f-from", "f-to"]) {
  if (days.length) { document.getElementById(id).min = days[0]; document.getElementById(id).max = days[days.length - 1]; }
}

const statusTable = makeTable(document.getElementById("status-table"), [
  { key: "status", label: "status" }, { key: "valid", label: "verdict" }, { key: "runs", label: "runs", num: true }],
{ sortKey: "runs", sortDir: -1 });
const cellTable = makeTable(document.getElementById("cell-table"), [
  { key: "workload", label: "workload" }, { key: "nemesis", label: "nemesis" },
  { key: "runs", label: "runs", num: true }, { key: "anomalous", label: "anomalous", num: true },
  { key: "rate", label: "rate", num: true, render: (r) => fmt.rate(r.rate) },
  { key: "ci_low", label: "95% CI", num: true, render: (r) => fmt.ci(r.ci_low, r.ci_high) }],
{ sortKey: "rate", sortDir: -1 });
const cmpTable = makeTable(document.getElementById("cmp-table"), [
  { key: "verdict", label: "verdict", render: (r) => (r.verdict === "regressed" ? "REGRESSED" : r.verdict),
    sort: (r) => ["regressed", "pass", "too-few-runs"].indexOf(r.verdict) },
  { key: "workload", label: "workload" }, { key: "nemesis", label: "nemesis" },
  { key: "base_rate", label: "baseline", num: true, sort: (r) => (r.n_b ? r.k_b / r.n_b : null),
    render: (r) => `${r.k_b}/${r.n_b} ${r.n_b ? fmt.rate(r.k_b / r.n_b) : "-"}` },
  { key: "cand_rate", label: "candidate", num: true, sort: (r) => (r.n_c ? r.k_c / r.n_c : null),
    render: (r) => `${r.k_c}/${r.n_c} ${r.n_c ? fmt.rate(r.k_c / r.n_c) : "-"}` },
  { key: "diff", label: "difference", num: true, render: (r) => fmt.signed(r.diff) },
  { key: "diff_low", label: "95% CI of difference", num: true,
    render: (r) => (r.diff === null ? "-" : `[${fmt.signed(r.diff_low)}, ${fmt.signed(r.diff_high)}]`) },
  { key: "p", label: "p", num: true, render: (r) => fmt.p(r.p) },
  { key: "adj_p", label: "adjusted p", num: true, render: (r) => fmt.p(r.adj_p) }],
{ sortKey: "verdict", sortDir: 1, rowClass: (r) => r.verdict, rowAttrs: (r) => ({ "data-cell": `${r.workload}/${r.nemesis}` }) });
const typeTable = makeTable(document.getElementById("type-table"), [
  { key: "type", label: "type" }, { key: "runs", label: "runs", num: true }, { key: "total", label: "total", num: true }],
{ sortKey: "total", sortDir: -1 });
const rtoTable = makeTable(document.getElementById("rto-table"), [
  { key: "kind", label: "fault kind" }, { key: "windows", label: "windows", num: true },
  { key: "recovered", label: "recovered", num: true },
  { key: "recovery_p50_s", label: "RTO p50 s", num: true, render: (r) => fmt.num(r.recovery_p50_s) },
  { key: "recovery_p99_s", label: "RTO p99 s", num: true, render: (r) => fmt.num(r.recovery_p99_s) },
  { key: "recovery_max_s", label: "RTO max s", num: true, render: (r) => fmt.num(r.recovery_max_s) },
  { key: "unavailable_mean_s", label: "mean unavailable s", num: true, render: (r) => fmt.num(r.unavailable_mean_s) }],
{ sortKey: "kind", empty: "no fault windows" });
const modeTable = makeTable(document.getElementById("mode-table"), [
  { key: "mode", label: "nemesis mode" }, { key: "runs", label: "runs", num: true },
  { key: "anomalous", label: "anomalous", num: true },
  { key: "chaos_s", label: "main-phase s", num: true, render: (r) => fmt.num(r.chaos_s) },
  { key: "detect_s", label: "time to detection s", num: true, render: (r) => (r.detect_s === null ? "none found" : fmt.num(r.detect_s)) },
  { key: "coverage", label: "mean coverage", num: true, render: (r) => (r.coverage === null ? "-" : fmt.num(r.coverage)) }],
{ sortKey: "mode", empty: "no checked runs" });
const runTable = makeTable(document.getElementById("runs-table"), [
  { key: "run_id", label: "run", render: (r) => link(r.href, r.run_id) },
  { key: "start_time", label: "start (UTC)", render: (r) => fmt.time(r.start_time) },
  { key: "workload", label: "workload" }, { key: "nemesis", label: "nemesis" },
  { key: "cluster_version", label: "version" }, { key: "backend", label: "backend" },
  { key: "status", label: "status" }, { key: "valid", label: "verdict" },
  { key: "anomaly_count", label: "anomalies", num: true }, { key: "fault_count", label: "faults", num: true },
  { key: "problems", label: "problems" }],
{ sortKey: "start_time", sortDir: -1, rowClass: (r) => (r.valid === "false" || r.status !== "ok" ? "bad" : null) });
const flakyTable = makeTable(document.getElementById("flaky-table"), [
  { key: "name", label: "test" }, { key: "workload", label: "workload" }, { key: "nemesis", label: "nemesis" },
  { key: "runs", label: "runs", num: true }, { key: "valid_runs", label: "valid", num: true },
  { key: "invalid_runs", label: "invalid", num: true },
  { key: "invalid_links", label: "invalid runs", render: (r) => el("span", {}, ...r.invalid_links.flatMap(([id, href]) => [link(href, id), " "])) }],
{ sortKey: "invalid_runs", sortDir: -1 });
makeTable(document.getElementById("latency-table"), [
  { key: "phase", label: "phase" }, { key: "f", label: "f" }, { key: "ops", label: "ops", num: true },
  { key: "p50_ms", label: "p50 ms", num: true, render: (r) => fmt.num(r.p50_ms) },
  { key: "p99_ms", label: "p99 ms", num: true, render: (r) => fmt.num(r.p99_ms) }]).update(D.latency);
makeTable(document.getElementById("checks-table"), [
  { key: "run_id", label: "run", render: (r) => link(r.href, r.run_id) }, { key: "checker", label: "checker" },
  { key: "valid", label: "verdict" }, { key: "time_s", label: "time s", num: true, render: (r) => fmt.num(r.time_s) }],
{ sortKey: "time_s", sortDir: -1, empty: "no checker timings recorded" }).update(D.slowest_checks);

for (const name of FILTERS) document.getElementById("f-" + name).addEventListener("change", redraw);
for (const id of ["cmp-baseline", "cmp-candidate"]) document.getElementById(id).addEventListener("change", () => drawComparison(current()));
document.getElementById("runs-kind").addEventListener("change", () => drawRuns(current()));
document.getElementById("f-reset").addEventListener("click", () => {
  for (const name of FILTERS) document.getElementById("f-" + name).value = "";
  redraw();
});
const initial = new URLSearchParams(location.hash.slice(1));
for (const name of FILTERS) if (initial.get(name)) document.getElementById("f-" + name).value = initial.get(name);
drawBanner();
redraw();
window.splitbrainDashboard = { wilson, redraw };
document.body.setAttribute("data-ready", "1");
