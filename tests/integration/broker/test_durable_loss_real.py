"""A master whose store lost durable records must not lead again (the bench's finding, docs/bugs.md).

Written schedule on the real cluster (local backend, ``flush: sync``, all-ack): the slaves are cut off from
the controllers only (``one-way`` slaves -> controllers: they keep replicating from the master and stay in the
SyncStateSet, but their leases run out and they are fenced), then ``corrupt-file`` truncates the master's commit
log at a seeded random place -- records it had fsynced and acknowledged -- and restarts it.  Nobody else is
electable when its old lease runs out, so its registration finds it still master of epoch 1.  Before the fix it
took that mastership with the shorter log: its slaves truncated to it and the next sends reused the lost offsets
(``inconsistent-offsets``, acknowledged sends lost).  Now its store reports the durable loss, the broker stays
fenced and refuses to lead, the controller clears the master, and after the heal a slave is elected; the damaged
broker follows it, refills its log and is unfenced.  (``truncate`` rather than the tail modes: a cut of the last
record alone loses an acknowledged send only when its ack had already gone out, which a kill at a random moment
does not promise.)  Needs root (network namespaces); about 50 s."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import cli

pytestmark = [pytest.mark.integration, pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]

SCHEDULE = [
    {"at_s": 3, "f": "start-partition", "value": {"kind": "one-way", "from": "slaves", "to": "controllers"}},
    {"at_s": 7, "f": "corrupt-file", "value": {"targets": "masters", "mode": "truncate"}},
    {"at_s": 13, "f": "stop-partition"},
]


def _events(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines() if line.strip()]


@pytest.mark.timeout(170)
def test_a_master_that_lost_durable_records_does_not_lead_again(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    spec = {
        "name": "durable-loss", "backend": "local",
        "nodes": {"controllers": 3, "broker_sets": {"count": 1, "replicas": 3}},
        "cluster": {"flush": "sync"},
        "workloads": [{"name": "queue", "options": {"queues_per_set": 2}}],
        "nemesis": {"schedule": SCHEDULE},
        "concurrency": 2, "rate": 20, "time_limit_s": 20, "phases": {"recovery_s": 6, "final_drain_s": 15},
        "seed": 7,
    }
    path = tmp_path / "durable-loss.yaml"
    path.write_text(yaml.safe_dump(spec))
    results = tmp_path / "results"
    code = cli.main(["test", str(path), "--results", str(results), "--quiet"])
    out = capsys.readouterr().out
    run = sorted(p for p in (results / "durable-loss").iterdir() if p.is_dir() and not p.is_symlink())[-1]
    doc = json.loads((run / "results.json").read_text())
    assert code == 0 and doc["valid"] is True, out
    queue = doc["checkers"]["queue/queue"]
    assert queue["stats"]["acknowledged"] > 50 and queue["stats"]["drained"] is True, queue["stats"]

    # the fault happened: the master's log was cut below what it had fsynced, and the store said so
    history = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines() if line.strip()]
    (corrupt,) = [op for op in history if op["process"] == "nemesis" and op["f"] == "corrupt-file"
                  and op["type"] != "invoke"]
    assert corrupt["effective"] is True, corrupt
    ((node, cut),) = corrupt["value"]["nodes"].items()
    assert cut["size_after"] < cut["size_before"] and cut["restarted"] == "ready", cut
    log = (run / "nodes" / node / "node.log").read_text()
    assert "lost durable records" in log and "not leading (via register): the controller names us master" in log
    assert "the durable loss is made good" in log, "the damaged broker never caught up and unfenced"

    # and it did not lead again: from the corruption on it only followed; a former slave led, in a newer epoch
    struck = next(op["time"] for op in history if op["process"] == "nemesis" and op["f"] == "corrupt-file")
    after = [e for e in _events(run) if e["time"] >= struck and e["kind"] in ("become-master", "become-slave")]
    assert not [e for e in after if e["node"] == node and e["kind"] == "become-master"], after
    assert any(e["kind"] == "become-master" and e["node"] != node and e["master_epoch"] > 1 for e in after), after
    assert any(e["kind"] == "become-slave" and e["node"] == node for e in after), after
