"""What a run records about the build it tested (harness.provenance) and the spec's cluster.version label."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.provenance import Revision, collect_provenance, git_revision, provenance_record, sut_source_of
from harness.spec import SpecError
from systems.splitbrain.options import cluster_options
from systems.splitbrain.revision import REVISIONS


def test_record_uses_the_label_as_cluster_version_and_keeps_the_package_version() -> None:
    rec = provenance_record(sut_version="0.1.0", sut_revision=Revision("abc", False), harness_version="0.1.0",
                            harness_revision=Revision("abc", False), label="0.3.0-rc1", host="h", backend="local",
                            python="3.11")
    assert rec["cluster_version"] == "0.3.0-rc1" and rec["git_revision"] == "abc"
    assert rec["provenance"]["sut"] == {"name": "splitbrain", "version": "0.1.0", "revision": "abc", "dirty": False,
                                        "revision_error": None}
    assert rec["provenance"]["cluster_version_label"] == "0.3.0-rc1"
    unlabelled = provenance_record(sut_version="0.1.0", sut_revision=Revision("unknown", None, "no git"),
                                   harness_version="0.1.0", harness_revision=Revision("unknown", None, "no git"),
                                   label=None, host="h", backend="docker", python="3.11")
    assert unlabelled["cluster_version"] == "0.1.0" and unlabelled["git_revision"] == "unknown"
    assert unlabelled["provenance"]["sut"]["revision_error"] == "no git"


def test_a_directory_outside_any_checkout_gives_unknown_with_the_reason(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("needs the git program: the test reads a real git checkout it creates")
    rev = git_revision(str(tmp_path))
    assert rev.revision == "unknown" and rev.error and str(tmp_path) in rev.error


def test_a_checkout_gives_its_head_and_dirty_flag(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("needs the git program: the test reads a real git checkout it creates")

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                              capture_output=True, text=True, check=True).stdout.strip()

    git("init", "-q")
    (tmp_path / "f").write_text("1")
    git("add", "f")
    git("commit", "-q", "-m", "one")
    head = git("rev-parse", "HEAD")
    assert git_revision(str(tmp_path)) == Revision(head, False, None)
    (tmp_path / "f").write_text("2")
    git_revision.cache_clear()
    assert git_revision(str(tmp_path)) == Revision(head, True, None)
    git_revision.cache_clear()


def test_collect_provenance_names_host_backend_and_versions() -> None:
    rec = collect_provenance(label=None, backend="local")
    p = rec["provenance"]
    assert p["backend"] == "local" and p["host"] and p["sut"]["version"] == p["harness"]["version"]
    assert rec["cluster_version"] == p["sut"]["version"] != "unknown"
    assert (p["sut"]["revision"] == "unknown") == (p["sut"]["revision_error"] is not None)


@dataclass(frozen=True)
class _Source:
    version: str
    revision: Revision

    def sut_version(self) -> str:
        return self.version

    def sut_revision(self) -> Revision:
        return self.revision


@dataclass(frozen=True)
class _Adapter:
    sut_source: _Source


def test_the_system_part_is_what_the_adapter_says_and_the_harness_part_stays_this_checkout() -> None:
    source = _Source("9.9.9", Revision("f" * 40, False))
    assert sut_source_of(_Adapter(source)) is source and sut_source_of(object()) is None
    rec = collect_provenance(label=None, backend="local", source=source)
    p = rec["provenance"]
    assert p["sut"] == {"name": "splitbrain", "version": "9.9.9", "revision": "f" * 40, "dirty": False,
                        "revision_error": None, "build": "checkout"}
    assert rec["git_revision"] == "f" * 40 and rec["cluster_version"] == "9.9.9"
    assert p["harness"] == collect_provenance(label=None, backend="local")["provenance"]["harness"]


def test_our_cluster_source_is_this_checkout_as_before_adapters() -> None:
    """The cluster's code and the harness's are one checkout: the record is the one a run made without a source."""
    assert collect_provenance(label=None, backend="local", source=REVISIONS) == collect_provenance(
        label=None, backend="local")


def test_cluster_version_is_a_label_and_a_bad_one_names_the_field() -> None:
    assert cluster_options({"version": "0.3.0-rc1"}).version == "0.3.0-rc1"
    assert cluster_options({}).version is None
    for bad in (0.3, "", "two words", ["0.3"]):
        with pytest.raises(SpecError, match=r"cluster\.version: got") as info:
            cluster_options({"version": bad}, file="s.yaml")
        assert "version label string" in str(info.value)


def test_the_runner_records_the_spec_label_and_analyze_keeps_provenance() -> None:
    from harness.commands.analyze import _FACTS
    from harness.runner import _provenance
    from harness.spec import spec_from_dict

    spec = spec_from_dict({"name": "p", "cluster": {"version": "0.3.0-rc1"}, "seed": 1})
    rec = _provenance(spec)
    assert rec["cluster_version"] == "0.3.0-rc1" and rec["provenance"]["cluster_version_label"] == "0.3.0-rc1"
    assert rec["provenance"]["backend"] == "local"
    assert {"cluster_version", "git_revision", "provenance"} <= set(_FACTS)  # a re-check keeps what ran


def test_our_cluster_says_where_its_code_came_from() -> None:
    import systems

    assert sut_source_of(systems.get("splitbrain")) is REVISIONS
