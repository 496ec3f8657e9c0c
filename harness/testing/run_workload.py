"""One workload (+ optional nemesis) against real processes on the local backend (network namespaces), via
``harness.runner.run_test``: the shared runner of the bug-proof tests (tests/integration/bugs) and the browser
tests' real failing runs.  Seeds are fixed by the callers and printed.  ``NEEDS_NAMESPACES`` skips a test, naming
why, where network namespaces cannot be made (not root, or no iproute2)."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import systems
from harness import generator as g
from harness.control.local import LocalRemote
from harness.protocols import compose_nemeses
from harness.runner import RunOutcome, TestParts, run_test
from harness.spec import spec_from_dict
from nemesis import packages
from workloads import registry

NEEDS_NAMESPACES = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None, reason="needs root and iproute2")


def run_workload(tmp: Path, *, workload: str, options: dict[str, Any], seed: int, cluster: dict[str, Any],
                 broker_sets: dict[str, int], time_limit_s: float, nemesis: list[str] | None = None,
                 schedule: Any = None, interval_s: float = 3.0, targets: list[str] | None = None,
                 op_timeout_s: float = 5.0, concurrency: int = 4, rate: float = 40.0,
                 phases: dict[str, float] | None = None, extra_nemesis: Any = None) -> RunOutcome:
    print(f"{workload} seed={seed} cluster={cluster} nemesis={nemesis} options={options}")
    spec = spec_from_dict({
        "name": workload, "backend": "local", "nodes": {"controllers": 3, "broker_sets": broker_sets},
        "cluster": cluster, "workloads": [{"name": workload, "options": options}],
        "nemesis": {"packages": nemesis or [], "interval_s": interval_s, "targets": targets or ["one"]},
        "concurrency": concurrency, "rate": rate, "time_limit_s": time_limit_s,
        "phases": phases or {"recovery_s": 1.0, "final_drain_s": 10.0}, "seed": seed}, file="<test>")

    async def main() -> RunOutcome:
        remote = await LocalRemote.create(list(spec.nodes.all), state_dir=tmp / "state")
        try:
            system = systems.get(spec.system)
            db = system.make_db(spec, system.options(spec.cluster, file=spec.source))
            wl = registry.build(workload, registry.WorkloadContext(spec, db, spec.workloads[0].options, spec.seed))
            nem = packages.build(db, nemesis or [], interval_s=spec.nemesis.interval_s, targets=spec.nemesis.targets,
                                 seed=spec.seed)
            nem_gen = schedule if schedule is not None else nem.generator
            nemesis_ = nem.nemesis
            if extra_nemesis is not None:
                extra = extra_nemesis(db)
                nemesis_ = extra if nemesis_ is None else compose_nemeses([nemesis_, extra])
            parts = TestParts(client=wl.client, checkers=wl.checkers,
                              generator=g.clients(g.stagger(1.0 / spec.rate, wl.generator), nem_gen),
                              db=db, nemesis=nemesis_, heal_generator=nem.heal,
                              final_generator=wl.final_generator)
            return await run_test(spec, parts, results_root=str(tmp / "results"), remote=remote,
                                  install_signal_handlers=False, op_timeout_s=op_timeout_s, heal_limit_s=20.0)
        finally:
            await remote.close()

    return asyncio.run(main())
