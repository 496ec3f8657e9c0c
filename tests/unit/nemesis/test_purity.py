"""The nemesis modules export what they name (the purity of the pure ones -- the fault table, selectors,
schedules, replay, ddmin, coverage, the guided policy, packet behaviours, grudges, faults in words -- is checked
by tests/unit/test_layers.py)."""

from __future__ import annotations

import importlib

import pytest

PURE = ("nemesis.faults", "nemesis.targets", "nemesis.schedule", "nemesis.replay", "nemesis.shrink",
        "nemesis.coverage", "nemesis.guided", "nemesis.packet_behavior", "nemesis.words", "nemesis.lazyfs.core")
SHELLS = ("nemesis.accounting", "nemesis.packages", "nemesis.base", "nemesis.partition", "nemesis.process",
          "nemesis.clock", "nemesis.packet", "nemesis.failpoint", "nemesis.registration",
          "systems.splitbrain.extra_brokers")


@pytest.mark.parametrize("name", (*PURE, *SHELLS))
def test_exports_exist(name: str) -> None:
    module = importlib.import_module(name)
    assert all(hasattr(module, n) for n in module.__all__) and len(set(module.__all__)) == len(module.__all__)
