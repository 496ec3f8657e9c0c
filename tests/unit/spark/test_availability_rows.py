"""The availability verdict in the warehouse: the runs row's ``availability`` and ``valid``, the ``unavailable`` row
of the anomalies table, and the unavailable-run rate (real Spark for the rate)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from spark_analysis import metrics
from spark_analysis.runfiles import RunTexts, availability_field, parse_run
from spark_analysis.tables import RUNS

EXAMPLE = {"type": "unavailable", "key": "queue writes to broker-0", "ops": [686, 687, 688, 746],
           "expected": {"resume_within_s": 8.0},
           "observed": {"waited_s": 12.1, "resumed": True, "window": {"start_s": 10.9, "fault_end_s": 28.9,
                                                                       "faults": "killed b1-3"},
                        "last_errors": ["send: SendError: cannot connect"]},
           "explanation": "queue writes to broker-0 resumed only after 12.1 s (expected within 8 s) under kill b1-3"}
RESULTS = json.dumps({
    "valid": False,
    "checkers": {"availability": {"valid": False, "anomaly_counts": {"unavailable": 1}, "stats": {},
                                  "anomaly_examples": {"unavailable": [EXAMPLE]}},
                 "queue/queue": {"valid": True, "anomaly_counts": {}, "stats": {}}},
    "anomaly_counts": {"unavailable": 1}, "anomaly_examples": {"unavailable": [EXAMPLE]},
})
SPEC = "name: s\nworkloads: [queue]\nseed: 7\n"
HISTORY = json.dumps({"index": 0, "time": 0, "type": "invoke", "process": 0, "f": "send", "value": {}}) + "\n"


def test_an_unavailable_run_is_invalid_with_its_anomaly_row() -> None:
    p = parse_run("s/20261127T201506.165Z", "/r", "/r/s/20261127T201506.165Z", RunTexts(SPEC, RESULTS, HISTORY))
    assert (p.run["valid"], p.run["availability"], p.run["anomaly_count"]) == ("false", "false", 1)
    (row,) = p.anomalies
    assert (row["type"], row["count"]) == ("unavailable", 1)
    example = json.loads(row["example"])
    assert example["observed"]["window"]["faults"] == "killed b1-3"
    assert example["observed"]["waited_s"] == 12.1 and example["observed"]["last_errors"]
    assert set(p.run) == set(RUNS.fieldNames())


@pytest.mark.parametrize(("res", "want"), [
    pytest.param({"checkers": {"availability": {"valid": True}}}, "true", id="met"),
    pytest.param({"checkers": {"availability": {"valid": "unknown"}}}, "unknown", id="unknown"),
    pytest.param({"checkers": {"queue/queue": {"valid": True}}}, None, id="not-judged"),
    pytest.param({"checkers": {"availability": "garbage"}}, None, id="malformed"),
    pytest.param({}, None, id="no-checkers"),
])
def test_availability_field(res: dict[str, Any], want: str | None) -> None:
    assert availability_field(res) == want


def _run(run_id: str, availability: str | None, status: str = "ok") -> tuple[Any, ...]:
    row = dict.fromkeys(RUNS.fieldNames())
    row.update(run_id=run_id, workload="queue", nemesis="kill", cluster_version="1", date="d1", status=status,
               availability=availability, valid="false" if availability == "false" else "true")
    return tuple(row[c] for c in RUNS.fieldNames())


def test_availability_rates_count_only_judged_checked_runs(spark: Any) -> None:
    rows = [_run("a/1", "false"), _run("a/2", "true"), _run("a/3", "true"), _run("a/4", None),
            _run("a/5", "false", status="partial")]
    (r,) = metrics.availability_rates(spark.createDataFrame(rows, RUNS)).collect()
    assert (r.runs, r.unavailable, r.rate) == (3, 1, pytest.approx(1 / 3))
    assert 0 < r.ci_low < 1 / 3 < r.ci_high < 1
