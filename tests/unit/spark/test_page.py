"""The dashboard directory (spark_analysis.page): self-contained, offline, its data safely embedded (no Spark)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from spark_analysis.page import FILES, render_html, write_page
from spark_analysis.wilson import Z95


def data() -> dict[str, Any]:
    keys = ["date", "workload", "nemesis", "cluster_version", "backend"]
    return {
        "generated_at": "2026-11-22T00:00:00Z", "warehouse": "w<h>", "total_runs": 3,
        "gate": {"alpha": 0.05, "min_runs": 20, "correction": "holm", "default_pair": ["0.2.0", "0.3.0"]},
        "versions": ["0.2.0", "0.3.0"], "version_first_seen": {"0.2.0": "2026-11-01T02:00:00Z"},
        "counts": {"columns": ["date", "workload", "nemesis", "version", "backend", "runs", "anomalous"],
                   "rows": [["2026-11-01", "queue", "kill", "0.2.0", "local", 3, 1]]},
        "statuses": {"columns": [*keys, "status", "valid", "runs"],
                     "rows": [["2026-11-01", "queue", "kill", "0.2.0", "local", "ok", "false", 3]]},
        "anomaly_types": {"columns": [*keys, "type", "runs", "total"], "rows": []},
        "runs": {"columns": ["run_id", "href", "problems"],
                 "rows": [["q/ts1", "/run/q/ts1/", "history.jsonl: </script><script>alert(1)</script>"]]},
        "run_limit": 50_000, "comparisons": [], "rto": [], "latency": [], "slowest_checks": [],
        "modes": {"columns": [*keys, "nemesis_mode", "runs", "anomalous", "chaos_s", "coverage_sum", "covered_runs"],
                  "rows": [["2026-11-01", "queue", "kill", "0.2.0", "local", "guided", 2, 1, 120.0, 80, 2]]},
        "flaky": [{"name": "q", "workload": "queue", "nemesis": "kill", "runs": 4, "valid_runs": 3,
                   "invalid_runs": 1, "invalid_run_ids": ["q/ts1"]}],
    }


def embedded(page: str) -> dict[str, Any]:
    m = re.search(r'<script type="application/json" id="dashboard-data">(.*?)</script>', page, re.S)
    assert m is not None
    return json.loads(m.group(1))


def test_the_data_is_embedded_intact_and_cannot_close_its_script_element() -> None:
    page = render_html(data())
    assert "</script><script>alert(1)" not in page
    got = embedded(page)
    assert got["runs"]["rows"][0][2] == "history.jsonl: </script><script>alert(1)</script>"
    assert got["z"] == Z95  # the page's Wilson interval uses the z of spark_analysis.wilson
    assert got["flaky"][0]["invalid_links"] == [["q/ts1", "/run/q/ts1/"]]  # serve's URL scheme, root-relative
    assert "w&lt;h&gt;" in page  # text outside the data block is escaped


def test_nothing_is_fetched_from_the_network() -> None:
    page = render_html(data())
    assert re.findall(r'<script[^>]* src="([^"]+)"', page) == ["plotly.min.js"]
    assert not re.search(r'(src|href)="(https?:)?//', page)
    assert "<link" not in page


def test_write_page_writes_the_directory(tmp_path: Path) -> None:
    index = write_page(data(), tmp_path / "dash")
    assert index == tmp_path / "dash" / "index.html"
    assert sorted(p.name for p in index.parent.iterdir()) == sorted(FILES)
    assert "Plotly" in (index.parent / "plotly.min.js").read_text()[:100_000]
    assert json.loads((index.parent / "dashboard.json").read_text())["total_runs"] == 3


def test_coverage_and_time_to_detection_by_mode_are_on_the_page() -> None:
    page = render_html(data())
    assert 'id="mode-table"' in page and "time to detection" in page
    assert embedded(page)["modes"] == data()["modes"]
