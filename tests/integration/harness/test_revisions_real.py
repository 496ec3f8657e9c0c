"""Runs of the cluster at another git revision: real commits (made with git's plumbing, so the work tree, the index
and the refs are untouched), real builds into a cache of the test's own, and a real run whose nodes must be
running the revision's code -- proven by a line only that revision's controllers log.

Every test uses its own cache directory (``SPLITBRAIN_SUT_CACHE``) and its own commits, and asserts only on them.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.revisions import RevisionError, SutBuild, commit_with_changes, load_build, resolve_revision
from harness.revisions import ensure_build as _ensure_build
from systems.splitbrain.revision import REVISIONS, WIRE_HISTORY

pytestmark = [pytest.mark.integration]
REPO = Path(__file__).resolve().parents[3]
HAS_GIT_HEAD = shutil.which("git") is not None and subprocess.run(
    ["git", "-C", str(REPO), "rev-parse", "--verify", "HEAD"], capture_output=True).returncode == 0
needs_git = pytest.mark.skipif(not HAS_GIT_HEAD, reason="needs git and a checkout with a commit")
needs_root = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None, reason="needs root and iproute2")


def ensure_build(rev: str, *, cache: Path) -> SutBuild:
    """A build of our cluster at ``rev`` (its part of a build: systems/splitbrain/revision.py)."""
    return _ensure_build(rev, system=REVISIONS, cache=cache)


def _head_file(path: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), "show", f"HEAD:{path}"], capture_output=True, text=True,
                          check=True).stdout


def _status() -> str:
    return subprocess.run(["git", "-C", str(REPO), "status", "--porcelain"], capture_output=True, text=True).stdout


@needs_git
def test_a_build_imports_the_revision_and_is_made_once(tmp_path: Path) -> None:
    before = _status()
    build = ensure_build("HEAD", cache=tmp_path)
    assert build.revision == resolve_revision("HEAD") and build.python.is_file()
    probe = subprocess.run([str(build.python), "-I", "-c", "import harness.cli, system_under_test as s; "
                            "print(s.__file__)"], capture_output=True, text=True, check=True, cwd=REPO)
    assert probe.stdout.strip().startswith(str(build.source) + os.sep)  # not the checkout, even run from it
    record = build.directory / "build.json"
    stamp = record.stat().st_mtime_ns
    assert ensure_build(build.revision, cache=tmp_path) == build and record.stat().st_mtime_ns == stamp
    assert _status() == before


@needs_git
def test_a_half_made_build_is_made_again(tmp_path: Path) -> None:
    build = ensure_build("HEAD", cache=tmp_path)
    (build.directory / "build.json").unlink()  # as if the builder died before its last step
    assert load_build(build.revision, cache=tmp_path) is None
    again = ensure_build("HEAD", cache=tmp_path)
    assert again.revision == build.revision and (again.directory / "build.json").is_file()


@needs_git
def test_a_revision_that_is_no_commit_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(RevisionError, match="revision no-such-branch-x1: not a commit"):
        ensure_build("no-such-branch-x1", cache=tmp_path)
    assert not any(tmp_path.iterdir())


@needs_git
def test_a_revision_that_does_not_compile_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    path = "system_under_test/controller/scan.py"
    sha = commit_with_changes({path: (_head_file(path) + "\ndef broken(:\n").encode()}, message="test: broken")
    with pytest.raises(RevisionError, match=f"revision {sha}: does not build: system_under_test"):
        ensure_build(sha, cache=tmp_path)
    assert not (tmp_path / sha).exists()


@needs_git
def test_a_revision_whose_wire_protocol_differs_is_refused_naming_the_difference(tmp_path: Path) -> None:
    path = "system_under_test/protocol/schemas.py"
    text = _head_file(path)
    old = '"queue_offset": F("int", "first logical offset to read"),'
    assert old in text
    changed = text.replace(old, '"queue_offset": F("str", "first logical offset to read"),')
    sha = commit_with_changes({path: changed.encode()}, message="test: a wire change")
    with pytest.raises(RevisionError, match="wire protocol is not the harness's: PULL_MESSAGE: field 'queue_offset'"):
        ensure_build(sha, cache=tmp_path)


@needs_git
def test_a_revision_from_before_the_body_format_change_is_refused(tmp_path: Path) -> None:
    roots = subprocess.run(["git", "-C", str(REPO), "rev-list", "--max-parents=0", "HEAD"], capture_output=True,
                           text=True).stdout.split()
    (version, commit), = WIRE_HISTORY
    old = [r for r in roots if subprocess.run(["git", "-C", str(REPO), "merge-base", "--is-ancestor", commit, r],
                                              capture_output=True).returncode != 0]
    if not old or subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", commit]).returncode != 0:
        pytest.skip("this clone does not hold the history from before the wire version's first change")
    with pytest.raises(RevisionError, match=f"wire version 0 .*this harness's version {version}"):
        ensure_build(old[0], cache=tmp_path)


def _cli(*args: str, cache: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPLITBRAIN_SUT_CACHE": str(cache)}
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=600, stdin=subprocess.DEVNULL)


@needs_git
def test_the_commands_refuse_a_bad_revision_before_anything_starts(tmp_path: Path) -> None:
    for cmd in (["test", str(REPO / "examples/smoke.yaml")], ["cluster", "up", str(REPO / "examples/smoke.yaml")],
                ["test-all", str(REPO / "examples/smoke.yaml")]):
        res = _cli(*cmd, "--sut-revision", "no-such-rev-y2", "--results", str(tmp_path / "r"), cache=tmp_path / "c",
                   cwd=REPO)
        assert res.returncode == 2, res.stderr
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and "cluster.revision" in lines[0] and "no-such-rev-y2" in lines[0], res.stderr
        assert "not a commit" in lines[0] and "Traceback" not in res.stderr
    assert not (tmp_path / "r" / "smoke").exists()


@needs_git
@needs_root
def test_the_nodes_run_the_revision_and_the_run_says_so(tmp_path: Path) -> None:
    marker = f"REVISION-MARKER-{secrets.token_hex(4)}"
    path = "system_under_test/controller/server.py"
    text = _head_file(path)
    old = '"controller %s listening on %s (data %s)"'
    assert old in text
    sha = commit_with_changes({path: text.replace(old, f'"controller %s listening on %s (data %s) {marker}"')
                               .encode()}, message="test: a marked revision")
    res = _cli("test", str(REPO / "examples/smoke.yaml"), "--sut-revision", sha, "--time-limit", "5",
               "--nemesis", "none", "--results", str(tmp_path / "r"), "--quiet", cache=tmp_path / "c", cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert f"cluster at revision {sha[:12]}" in res.stdout
    run = next((tmp_path / "r" / "smoke").glob("2*"))
    for c in ("c1", "c2", "c3"):
        assert marker in (run / "nodes" / c / "node.log").read_text(encoding="utf-8"), c
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    sut, harness = results["provenance"]["sut"], results["provenance"]["harness"]
    assert sut["revision"] == sha and sut["build"] == "revision" and sut["dirty"] is False
    assert results["git_revision"] == sha
    assert harness["revision"] == resolve_revision("HEAD")  # the harness is this checkout
    assert f"revision: {sha}" in (run / "test.yaml").read_text(encoding="utf-8")
