"""``cluster.store_fs``: plain or lazyfs; lazyfs is refused up front (exit 2, naming the key and why) wherever it
cannot run -- the docker and ssh backends, or a machine without /dev/fuse -- rather than failing mid-run."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness import cli
from harness.commands._parts import store_fs_problem, validate_spec
from harness.spec import SpecError, spec_from_dict
from systems.splitbrain.options import cluster_options


def spec(backend: str, store_fs: str = "lazyfs") -> dict[str, object]:
    return {"name": "lz", "backend": backend, "nodes": {"controllers": 3, "broker_sets": {"count": 1, "replicas": 2}},
            "cluster": {"store_fs": store_fs}, "workloads": ["queue"], "seed": 1}


def test_the_option_takes_plain_or_lazyfs() -> None:
    assert cluster_options({}).store_fs == "plain"
    assert cluster_options({"store_fs": "lazyfs"}).store_fs == "lazyfs"
    with pytest.raises(SpecError) as bad:
        cluster_options({"store_fs": "tmpfs"}, file="s.yaml")
    assert bad.value.key == "cluster.store_fs" and "plain or lazyfs" in str(bad.value)


@pytest.mark.parametrize("backend", ["docker", "ssh"])
def test_backends_that_cannot_mount_refuse_it_at_validation(backend: str) -> None:
    with pytest.raises(SpecError) as refused:
        validate_spec(spec_from_dict(spec(backend), file="s.yaml"))
    assert refused.value.key == "cluster.store_fs" and f"backend {backend}" in str(refused.value)
    validate_spec(spec_from_dict(spec(backend, "plain"), file="s.yaml"))  # plain stays fine everywhere


def test_a_machine_without_fuse_refuses_it(tmp_path: Path) -> None:
    s = spec_from_dict(spec("local"), file="s.yaml")
    with pytest.raises(SpecError, match="/nonexistent/fuse"):
        store_fs_problem(s, cluster_options({"store_fs": "lazyfs"}), fuse_device="/nonexistent/fuse")


def test_the_cli_exits_2_naming_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "lz.yaml"
    path.write_text(yaml.safe_dump(spec("docker")))
    assert cli.main(["test", str(path), "--results", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err
    assert "cluster.store_fs" in err and "local backend only" in err, err
