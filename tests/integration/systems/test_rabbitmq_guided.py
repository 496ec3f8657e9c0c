"""``splitbrain test --nemesis-mode guided`` on RabbitMQ, a system that neither reports events nor says who leads:
guided mode is steered by the clients' outcomes alone (nemesis/guided.py, 5; harness/observe.py ``SOURCES``).

Asserts what the run created: exit 0 or 1, ``events.jsonl`` holding client outcomes and nothing else, coverage
points counted, the chosen ``schedule.yaml``, and that every step's selectors are ones RabbitMQ can serve (no role
pool).  Not which verdict RabbitMQ earned nor how fast it ran.  Skips when not root, without iproute2/iptables, or
without rabbitmq-server (Debian; scripts/setup.sh installs it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nemesis.schedule import UNDO, selectors_of
from nemesis.targets import Topology, unserved
from systems.rabbitmq.db import CTL, SERVER
from systems.rabbitmq.system import OFFERED

MEMBERS = Topology((), (), ("m1", "m2", "m3"))  # the nodes the spec below gives (its pools: the generic ones)

ROOT = Path(__file__).resolve().parents[3]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("iptables") is None,
                       reason="needs root, iproute2 and iptables"),
    pytest.mark.skipif(not (Path(SERVER).exists() and Path(CTL).exists() and shutil.which("epmd")),
                       reason="needs rabbitmq-server (Debian package; scripts/setup.sh installs it)"),
]

SPEC = {
    "name": "rabbitmq-guided", "system": "rabbitmq", "backend": "local", "nodes": {"members": 3},
    "workloads": [{"name": "generic-queue",
                   "options": {"queues": 2, "send_fraction": 0.75, "max_poll": 2, "timeout_s": 2.0}}],
    # partitions only: a broker's restart after a kill can take half a minute on a loaded machine, and kills are
    # tested in test_rabbitmq.py; this test is about what guided mode sees and chooses, and keeps CI short
    "nemesis": {"packages": ["partition"], "interval_s": 5, "targets": ["one", "minority", "members:one"],
                "mode": "guided", "options": {"partition": {"kinds": ["isolate", "random-halves"]}}},
    "concurrency": 6, "rate": 30, "time_limit_s": 20, "phases": {"recovery_s": 10, "final_drain_s": 30}, "seed": 3,
}


def test_guided_mode_runs_on_rabbitmq_from_its_clients_outcomes(tmp_path: Path) -> None:
    spec = tmp_path / "rabbitmq-guided.yaml"
    spec.write_text(yaml.safe_dump(SPEC), encoding="utf-8")
    results = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "test", str(spec), "--results", str(results),
                           "--quiet"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    runs = [p for p in (results / "rabbitmq-guided").glob("*/results.json") if not p.parent.is_symlink()]
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    assert len(runs) == 1, proc.stdout[-2000:]
    run = runs[0].parent
    events = [json.loads(line) for line in (run / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    assert events and {e["kind"] for e in events} == {"client-outcome"}  # all there is to see of RabbitMQ
    assert {e["f"] for e in events} <= {"send", "poll", "drain"}
    doc = json.loads(runs[0].read_text(encoding="utf-8"))
    assert doc["nemesis_mode"] == "guided" and doc["coverage"]["points"] > 0
    steps = yaml.safe_load((run / "schedule.yaml").read_text(encoding="utf-8"))
    faults = [s for s in steps if s["f"] in UNDO]
    assert faults and all(s["f"] in {"start-partition", "stop-partition"} for s in steps)
    for s in faults:
        for sel in selectors_of(s["f"], s.get("value")):
            assert unserved(sel, MEMBERS, ("members",), OFFERED) == (), (s, sel)  # no role pool, no role it lacks
