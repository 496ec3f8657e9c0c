"""Bad specs and flags exit 2 naming file, key and reason -- before any backend is created."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness import cli
from harness.commands import _backend, _parts


@pytest.fixture(autouse=True)
def _no_backend(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fail loudly if anything tries to create a backend: validation must come first."""
    calls: list[str] = []

    async def refuse(*args: Any, **kwargs: Any) -> Any:
        calls.append("open_remote")
        raise AssertionError("a backend was created for an invalid spec")

    monkeypatch.setattr(_backend, "open_remote", refuse)
    monkeypatch.setattr("harness.commands.test.open_remote", refuse)
    return calls


CASES = [
    ("rate-negative", {}, ["--rate", "-1"], "rate"),
    ("time-limit-zero", {}, ["--time-limit", "0"], "time_limit_s"),
    ("unknown-workload", {}, ["--workload", "no-such-workload"], "workloads[0].name"),
    ("unknown-nemesis", {}, ["--nemesis", "meteor"], "nemesis.packages"),
    ("bad-target", {"nemesis": {"packages": ["kill"], "targets": ["zz9"]}}, [], "nemesis.targets"),
    ("bad-cluster-option", {"cluster": {"flush": "never"}}, [], "cluster.flush"),
    ("unknown-cluster-option", {"cluster": {"colour": 1}}, [], "cluster.colour"),
    ("unknown-top-key", {"nemisis": {}}, [], "nemisis"),
    ("nodes-count", {}, ["--nodes", "a1,a2"], "--nodes"),
    ("bad-backend", {}, ["--backend", "kubernetes"], "backend"),
    ("ssh-without-nodes-file", {}, ["--backend", "ssh"], "backend"),
]


@pytest.mark.parametrize("fields, flags, key", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_spec_exits_2_naming_file_and_key(
    write_spec: Callable[..., Path], capsys: pytest.CaptureFixture[str], _no_backend: list[str],
    fields: dict[str, Any], flags: list[str], key: str,
) -> None:
    path = write_spec(**fields)
    code = cli.main(["test", str(path), "--results", str(path.parent / "results"), *flags])
    err = capsys.readouterr().err
    assert code == 2
    assert str(path) in err and key in err, err
    assert _no_backend == []
    assert not (path.parent / "results").exists()


def test_missing_spec_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["test", str(tmp_path / "nope.yaml")]) == 2
    assert "nope.yaml" in capsys.readouterr().err


def test_test_all_validates_every_spec_before_running_any(
    write_spec: Callable[..., Path], capsys: pytest.CaptureFixture[str], _no_backend: list[str],
) -> None:
    good = write_spec("good")
    bad = write_spec("bad", rate=0)
    assert cli.main(["test-all", str(good), str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml" in err and "rate" in err
    assert _no_backend == []


def test_validate_spec_accepts_the_probe_spec(write_spec: Callable[..., Path]) -> None:
    prepared = _parts.prepare(str(write_spec()), {"concurrency": 3})
    assert prepared.spec.concurrency == 3
    assert prepared.options.cluster_name == "splitbrain"


def test_overlapping_workload_fs_is_a_spec_error(write_spec: Callable[..., Path]) -> None:
    path = write_spec(workloads=["cli-probe", "cli-probe"])
    with pytest.raises(ValueError, match=r"workloads\[1\].name.*also handled"):
        _parts.prepare(str(path), {})
