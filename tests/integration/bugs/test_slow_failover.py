"""``--bug slow-failover`` (controller): a dead master is fenced at once but re-elected only after six leases
instead of one.  Nothing is lost -- the queue checker passes either way -- so only the availability verdict
(``checker.availability``) can see it: the master is killed 9 s into the main phase (the broker set has been
whole for longer than ``settle_s``, so every replica is in sync) and restarted 18 s later; the correct cluster
resumes writes within about 2 s, the broken one after about 12 s, beyond the default bound of 2 leases + 4 s
(8 s).  The run pins a 2-s lease: at the default 1-s lease the bug's six leases (5.9 s measured) are about what
a correct cluster's clients can wait out in their send timeouts, inside the 6-s bound.  The broken run must read
``unavailable`` (invalid, exit 1) in results.json, the CLI summary, JUnit, the web UI's run list and page, and
the rows the Spark ingest makes of it; the correct one valid.  Needs root and iproute2 (skipped otherwise)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from threading import Thread
from typing import Any

import pytest

from checker.availability import default_bound_s
from harness import generator as g
from harness.explain import summary_lines
from harness.testing.run_workload import NEEDS_NAMESPACES, run_workload

pytestmark = [pytest.mark.integration, NEEDS_NAMESPACES]

SEED = 7
LEASE_MS = 2000  # not the default: see the module docstring
KILL_THE_MASTER = [g.sleep(9.0), {"f": "kill", "value": "masters"}, g.sleep(18.0), {"f": "start", "value": "dead"}]


def _web(root: Path, path: str) -> str:
    from harness.web import make_server

    srv = make_server(root, "127.0.0.1", 0)
    Thread(target=srv.serve_forever, daemon=True).start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{srv.server_address[1]}{path}", timeout=30) as resp:
            return str(resp.read().decode("utf-8"))
    finally:
        srv.shutdown()
        srv.server_close()


def _warehouse_rows(run_dir: Path) -> Any:
    """The rows ingestion makes of a run directory: what each Spark executor computes for one run
    (:func:`spark_analysis.ingest.read_texts` + :func:`spark_analysis.runfiles.parse_run`) before writing them."""
    from spark_analysis.ingest import read_texts
    from spark_analysis.runfiles import parse_run

    texts, errors = read_texts(str(run_dir))
    assert not errors
    return parse_run(f"{run_dir.parent.name}/{run_dir.name}", str(run_dir.parent.parent), str(run_dir), texts)


@pytest.mark.timeout(150)
@pytest.mark.parametrize("bugs", [[], ["slow-failover"]], ids=["correct", "slow-failover"])
def test_a_slow_failover_reads_unavailable(tmp_path: Path, bugs: list[str]) -> None:
    out = run_workload(tmp_path, workload="queue", options={"queues_per_set": 2}, seed=SEED,
                       cluster={"bugs": bugs, "lease_timeout_ms": LEASE_MS},
                       broker_sets={"count": 1, "replicas": 3}, time_limit_s=32.0,
                       nemesis=["kill"], schedule=KILL_THE_MASTER, rate=40.0,
                       phases={"recovery_s": 2.0, "final_drain_s": 15.0})
    doc = out.results
    availability = doc["checkers"]["availability"]
    stats = availability["stats"]
    print(json.dumps(stats["windows"]), json.dumps(availability.get("anomaly_examples")))
    assert doc["checkers"]["queue"]["valid"] is True  # nothing is lost either way: only availability can tell
    bound = default_bound_s(LEASE_MS)
    assert stats["judged_windows"] >= 1 and stats["expectations"]["write_resume_s"] == bound
    waits = [w["longest_wait_s"] for w in stats["windows"] if w["longest_wait_s"] is not None]
    if not bugs:
        assert availability["valid"] is True and max(waits) < bound, stats["windows"]
        assert out.valid is True and out.exit_code == 0
        return
    assert availability["valid"] is False and out.valid is False and out.exit_code == 1
    (example,) = availability["anomaly_examples"]["unavailable"]
    assert example["key"] == "queue writes to broker-0"
    assert example["observed"]["waited_s"] > bound and example["observed"]["window"]["began_with"][0].startswith("kill")
    assert example["observed"]["last_errors"]
    text = example["explanation"]
    assert "resumed only after" in text and "kill" in text and "last errors:" in text
    # the CLI summary and JUnit say it in the same words
    assert any("INVALID availability: unavailable x1" in line for line in summary_lines(doc, width=200))
    junit = out.run_dir.junit_xml.read_text(encoding="utf-8")
    assert '<testcase classname="queue" name="availability"><failure message="unavailable x1: queue writes' in junit
    # the web UI: the run list filtered by the anomaly, and the run page's availability section
    root = out.run_dir.root
    rel = f"{out.run_dir.name}/{out.run_dir.path.name}"
    assert rel in _web(root, "/?anomaly=unavailable")
    page = _web(root, f"/run/{rel}/")
    assert "id='availability'" in page and "UNAVAILABLE" in page and "unavailable" in page
    # the warehouse: the run is not valid, its availability is false, and the anomalies table has the row
    parsed = _warehouse_rows(out.run_dir.path)
    assert (parsed.run["valid"], parsed.run["availability"], parsed.run["status"]) == ("false", "false", "ok")
    (row,) = [a for a in parsed.anomalies if a["type"] == "unavailable"]
    assert row["count"] == 1 and json.loads(row["example"])["observed"]["waited_s"] > 8.0
