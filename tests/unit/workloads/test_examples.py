"""Every example spec loads (``harness.spec.load_spec``), its cluster options and nemesis targets validate, and
the workloads of this package that it names build from it."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import systems
from harness.spec import load_spec
from nemesis.targets import validate as validate_target
from workloads import registry

EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "examples").glob("*.yaml"))
MINE = {"queue", "controller-register", "register", "generic-queue", "counter"}


def test_the_expected_examples_exist() -> None:
    names = {p.stem for p in EXAMPLES}
    assert {"smoke", "nightly", "registration-crash", "clock", "disk"} <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_loads_and_its_workloads_build(path: Path) -> None:
    spec = load_spec(path)
    assert spec.name == path.stem or path.stem == "queue-partition"
    system = systems.get(spec.system)
    db = system.make_db(spec, system.options(spec.cluster, file=str(path)))
    topo = spec.nodes.topology
    for target in spec.nemesis.targets:
        validate_target(target, topo, random.Random(0))
    for i, w in enumerate(spec.workloads):
        if w.name in MINE:
            wl = registry.build(w.name, registry.WorkloadContext(spec, db, w.options, spec.seed, i))
            assert wl.name == w.name and wl.generator is not None


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_validates_against_its_system_in_every_mode_it_can_serve(path: Path) -> None:
    """The whole validation a run does first (`splitbrain test` exits 2 where this raises): its system's roles and
    capabilities against its selectors, kinds, schedule and workloads -- and again in guided mode, which needs nothing
    of a system but its packages (faults.GUIDED_NEEDS is empty: RabbitMQ's clients alone guide it)."""
    from harness.commands._parts import validate_spec

    spec = load_spec(path)
    validate_spec(spec)
    if spec.nemesis.packages and spec.nemesis.schedule is None:
        validate_spec(load_spec(path, {"nemesis_mode": "guided"}))


def test_smoke_is_the_one_minute_local_queue_run_with_partition_and_kill() -> None:
    spec = load_spec(next(p for p in EXAMPLES if p.stem == "smoke"))
    assert (spec.backend, spec.time_limit_s, [w.name for w in spec.workloads]) == ("local", 60.0, ["queue"])
    assert set(spec.nemesis.packages) == {"partition", "kill"}


def test_nightly_matrix_is_every_workload_by_every_package_five_minutes_on_docker() -> None:
    from harness.commands.test_all import matrix_cells
    from nemesis.packages import KINDS
    from workloads.registry import names, needs

    spec = load_spec(next(p for p in EXAMPLES if p.stem == "nightly"))
    assert (spec.backend, spec.time_limit_s) == ("docker", 300.0)
    ours = {n for n in names() if set(needs(n)) <= systems.get("splitbrain").capabilities}
    # register, generic-queue and counter need a register / queue / counter client, which our cluster lacks
    assert ours == set(names()) - {"register", "generic-queue", "counter"}
    assert {w.name for w in spec.workloads} == ours >= MINE - {"register", "generic-queue", "counter"}
    cells = matrix_cells(spec)
    packages = {c["nemesis"] for _, c in cells}
    assert packages == set(KINDS) - {"disk-corrupt"}  # brokers it hits stay down: opt-in only
    modes = {c["nemesis_mode"] for _, c in cells}
    assert modes == {"random", "guided"}  # the nightly mixes guided and random cells
    assert len(cells) == len(ours) * len(packages) * len(modes)
    assert all(label.endswith(f" x {c['nemesis_mode']}") for label, c in cells)


def test_the_spec_snippets_in_the_workloads_doc_load() -> None:
    import re

    import yaml

    from harness.spec import spec_from_dict

    doc = (Path(__file__).resolve().parents[3] / "docs" / "workloads.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(.*?)```", doc, flags=re.S)
    assert blocks
    for block in blocks:
        text = "\n".join(line[2:] if line.startswith("  ") else line for line in block.splitlines())
        spec = spec_from_dict(yaml.safe_load(text), file="docs/workloads.md")
        systems.get(spec.system).options(spec.cluster, file="docs/workloads.md")
