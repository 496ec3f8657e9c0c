"""--nemesis-mode is one of the spec override flags, so test, test-all and cluster up all take it."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from harness.commands._parts import add_spec_arguments, overrides_from_args, prepare


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_spec_arguments(p)
    return p.parse_args(argv)


def test_the_flag_becomes_the_nemesis_mode_override() -> None:
    assert overrides_from_args(_parse(["--nemesis-mode", "guided"]))["nemesis_mode"] == "guided"
    assert "nemesis_mode" not in overrides_from_args(_parse([]))


def test_the_override_reaches_the_spec() -> None:
    smoke = Path(__file__).resolve().parents[3] / "examples" / "smoke.yaml"
    spec = prepare(str(smoke), overrides_from_args(_parse(["--nemesis-mode", "guided"]))).spec
    assert spec.nemesis.mode == "guided"


def test_an_unknown_mode_is_refused_by_the_parser() -> None:
    with pytest.raises(SystemExit):
        _parse(["--nemesis-mode", "smart"])
