"""docs/workloads.md says what the code does: its table names every registered workload with the fs and the
checkers it builds, and each workload's options table lists exactly its option fields, defaults and ranges."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.spec import load_spec
from systems.splitbrain.db import SplitbrainDB
from systems.splitbrain.options import cluster_options
from workloads import registry
from workloads.broker_ids import BrokerIdsOptions
from workloads.controller_register import RegisterOptions
from workloads.counter import CounterWorkloadOptions
from workloads.generic_queue import GenericQueueOptions
from workloads.membership import MembershipOptions
from workloads.queue import QueueOptions
from workloads.register import RegisterWorkloadOptions

ROOT = Path(__file__).resolve().parents[3]
DOC = (ROOT / "docs" / "workloads.md").read_text()
OPTIONS: dict[str, type] = {"queue": QueueOptions, "controller-register": RegisterOptions,
                            "broker-ids": BrokerIdsOptions, "membership": MembershipOptions,
                            "register": RegisterWorkloadOptions, "generic-queue": GenericQueueOptions,
                            "counter": CounterWorkloadOptions}


def _rows(table_header: str, text: str) -> list[list[str]]:
    """The rows of the first markdown table in ``text`` whose header line starts with ``table_header``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(table_header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def _section(name: str) -> str:
    m = re.search(rf"^## `{re.escape(name)}`\n(.*?)(?=^## )", DOC, re.S | re.M)
    assert m, f"docs/workloads.md has no section ## `{name}`"
    return m.group(1)


def _built() -> dict[str, registry.Workload]:
    """Every workload, built from the nightly spec (which names them all)."""
    path = ROOT / "examples" / "nightly.yaml"
    spec = load_spec(path)
    db = SplitbrainDB(spec, cluster_options(spec.cluster, file=str(path)))
    return {w.name: registry.build(w.name, registry.WorkloadContext(spec, db, w.options, spec.seed, i))
            for i, w in enumerate(spec.workloads)}


def test_the_table_names_every_workload_with_its_fs_and_checkers() -> None:
    rows = {r[0].strip("`"): r for r in _rows("| workload | fs | checkers |", DOC)}
    assert set(rows) == set(registry.names()) == set(OPTIONS)
    for name, wl in _built().items():
        assert {f.strip() for f in rows[name][1].split(",")} == set(wl.fs), name
        assert set(re.findall(r"`([a-z-]+)`", rows[name][2])) == set(wl.checkers), name


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_each_workloads_options_table_is_its_option_fields(name: str) -> None:
    rows = {r[0].strip("`"): r for r in _rows("| option | default | allowed | effect |", _section(name))}
    fields = {f.name: f for f in dataclasses.fields(OPTIONS[name])}
    assert set(rows) == set(fields), name
    for key, f in fields.items():
        documented: Any = yaml.safe_load(rows[key][1].strip("`"))
        assert documented == f.default, (name, key, rows[key][1], f.default)
        bounds = re.fullmatch(r"([\d.]+)\.\.([\d.]+)", rows[key][2])
        if bounds:
            assert (float(bounds[1]), float(bounds[2])) == (f.metadata["lo"], f.metadata["hi"]), (name, key)
