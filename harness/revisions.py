"""The system at another git revision: its builds, their cache, and whether the harness can speak to them.

Vocabulary:

* **revision** -- a commit of *this* repository, named as git names it (``v0.3``, ``HEAD~4``, a sha, a branch).
  :func:`resolve_revision` turns it into the full commit sha; everything below is keyed by that sha, never by
  the name (a branch moves; a build must not).
* **build** -- the system's code of one revision, ready to run as nodes: the revision's tree exported with
  ``git archive`` into the cache (``<cache>/<sha>/src``), a virtual environment of its own beside it
  (``<cache>/<sha>/venv``) whose ``site-packages`` holds one ``.pth`` line for that source tree and one for each of
  the harness interpreter's own ``site-packages`` (where msgpack, uvloop, ... already are: nothing is downloaded),
  every module byte-compiled (a syntax error is "does not build"), and the system's probe run by the venv's
  interpreter in isolated mode (``-I``: no working directory, no ``PYTHONPATH``, no user site), which also proves
  that the system's package comes from the revision's tree and not from the harness's checkout.  The nodes of a
  run then start as ``<venv>/bin/python -I -m harness.cli <node command> ...``: the *revision's* node commands,
  while clients, nemeses, generators and checkers stay the harness's.  ``build.json`` is written last (with the
  system's package, whose import location each backend's install checks again: :attr:`SutBuild.package`); a
  directory without it is a build that died half-way and is built again.  Concurrent builders of one revision
  (``test-all --jobs``, several Spark tasks on one host) take a file lock; the second reuses the first's.  The
  docker backend builds a node image tagged with the revision from the same exported tree
  (:func:`harness.images.ensure_revision_image`); the ssh backend uploads it (:mod:`harness.control.ssh`).
* **the system's part** (:class:`RevisionSystem`, which the system's adapter provides; our cluster's is
  :data:`systems.splitbrain.revision.REVISIONS`) -- which package of the tree is the system's, the probe its
  interpreter runs (JSON describing what the harness must agree with: for our cluster, its wire tables and node
  flags), and the rule that decides, from the harness's probe and the revision's, whether the harness can speak to
  the revision (:class:`WireReport`).  It is decided *before* the run, when a refusal costs nothing.

Errors are :class:`RevisionError`, one line naming the revision and the reason; the commands print it and exit 2.

Cache root: ``$SPLITBRAIN_SUT_CACHE``, else ``$XDG_CACHE_HOME/splitbrain/revisions``, else
``~/.cache/splitbrain/revisions``.  A build is about 2 MB and a few seconds; remove the directory to start over.
"""

from __future__ import annotations

import compileall
import contextlib
import fcntl
import io
import json
import os
import re
import shutil
import site
import subprocess
import sys
import tarfile
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "BUILD_VERSION", "REPO_ROOT", "BuildsRevisions", "RevisionError", "RevisionSystem", "SutBuild", "WireReport",
    "build_record", "cache_root", "commit_with_changes", "ensure_build", "harness_wire", "load_build", "node_command",
    "parse_revision_text", "resolve_revision", "revision_system_of", "source_archive",
]

REPO_ROOT = Path(__file__).resolve().parents[1]
BUILD_VERSION = 4  # bump when the layout of a build changes: older builds are then rebuilt
_GIT_TIMEOUT_S = 60.0
# A revision as a user may write it: what git accepts in practice for commit-ish names, minus shell and option
# characters.  A leading '-' would be read by git as an option.
_REVISION_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.~^@{}/+-]{0,199}$")
_SHA_RE = re.compile(r"^[0-9a-f]{40}$")
_PACKAGE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # a top-level Python package: no dots, no shell characters

class RevisionError(ValueError):
    """A revision that cannot run under this harness: it does not exist, does not build, or cannot be spoken to.
    The message is one line naming the revision and the reason."""


# -- pure ----------------------------------------------------------------------------------------------------


def parse_revision_text(text: object, *, where: str) -> str:
    """The revision name as written, checked for shape only (existence is :func:`resolve_revision`'s job).

    Raises:
        RevisionError: not a string, empty, or characters git names do not use (naming ``where``).
    """
    if not isinstance(text, str) or not _REVISION_RE.match(text):
        raise RevisionError(f"{where}: {text!r} is not a git revision name (a sha, tag, branch or an expression "
                            "such as HEAD~2: letters, digits and _ . ~ ^ @ {{ }} / + -, not starting with '-')")
    return text


@runtime_checkable
class BuildsRevisions(Protocol):
    """A system adapter whose nodes can run another git revision of this repository (``cluster.revision``,
    ``--sut-revision``): ``revisions`` is its part of the build."""

    @property
    def revisions(self) -> RevisionSystem:
        ...


def revision_system_of(adapter: object) -> RevisionSystem | None:
    """The adapter's part of a revision's build, or None when its nodes cannot run another revision."""
    return adapter.revisions if isinstance(adapter, BuildsRevisions) else None


@dataclass(frozen=True, slots=True)
class WireReport:
    """What :meth:`RevisionSystem.compatibility` found: ``problems`` refuse the revision; ``missing_requests`` and
    ``missing_optional_fields`` (``REQUEST.field``) do not."""

    problems: tuple[str, ...]
    missing_requests: tuple[str, ...]
    missing_optional_fields: tuple[str, ...] = ()

    @property
    def compatible(self) -> bool:
        return not self.problems


class RevisionSystem(Protocol):
    """What the build of a revision needs from the system's adapter (module docstring; ours:
    :data:`systems.splitbrain.revision.REVISIONS`)."""

    @property
    def package(self) -> str:
        """The top-level package of the system's code: the revision's tree must hold it, it must compile, and the
        build's interpreter must import it from that tree."""
        ...

    @property
    def probe(self) -> str:
        """Python source the revision's interpreter runs (isolated; and this process, for the harness's side):
        it prints one JSON object whose ``module_file`` is the package's ``__file__``; the rest is the system's to
        compare."""
        ...

    def completed(self, probed: Mapping[str, Any], contains: Callable[[str], bool]) -> dict[str, Any]:
        """The revision's probe output with what only its history can tell (``contains(sha)``: whether the
        revision has that commit); ``build.json`` records the result."""
        ...

    def compatibility(self, harness: Mapping[str, Any], revision: Mapping[str, Any],
                      node_flags: Mapping[str, Collection[str]] | None) -> WireReport:
        """Whether the harness (its own probe output) can speak to the revision and start its nodes with
        ``node_flags`` (the options it passes each node command, when given)."""
        ...


@dataclass(frozen=True, slots=True)
class SutBuild:
    """One revision's build in the cache (see the module docstring)."""

    revision: str  # the full commit sha
    directory: Path  # <cache>/<sha>
    version: str  # the revision's pyproject version
    missing_requests: tuple[str, ...]
    missing_optional_fields: tuple[str, ...] = ()
    # The system's package (RevisionSystem.package): where its interpreter imports it from proves that a node runs
    # the revision's tree, not the harness's checkout -- every backend's install checks that, naming this package.
    package: str = field(kw_only=True)

    def __post_init__(self) -> None:
        if not _SHA_RE.match(self.revision):
            raise ValueError(f"SutBuild.revision: expected a full 40-hex-digit commit sha, got {self.revision!r}")
        if not _PACKAGE_RE.match(self.package):
            raise ValueError(f"SutBuild.package: expected a top-level Python package name, got {self.package!r}")

    @property
    def python(self) -> Path:
        return self.directory / "venv" / "bin" / "python"

    @property
    def source(self) -> Path:
        return self.directory / "src"

    @property
    def short(self) -> str:
        return self.revision[:12]


def node_command(python: str) -> list[str]:
    """How a node starts the revision's node commands: its interpreter in isolated mode (``-I``: the working
    directory and ``PYTHONPATH`` -- which the docker backend points at the harness's checkout -- are ignored)."""
    return [python, "-I", "-m", "harness.cli"]


def build_record(build: SutBuild) -> dict[str, Any]:
    """The provenance of a run's cluster build (``results.json``'s ``provenance.sut``): the revision's own
    version and commit, never dirty (it is a commit), and the requests it lacks."""
    return {"version": build.version, "revision": build.revision, "dirty": False, "revision_error": None,
            "build": "revision", "missing_requests": list(build.missing_requests),
            "missing_optional_fields": list(build.missing_optional_fields)}


# -- shell ---------------------------------------------------------------------------------------------------


def cache_root() -> Path:
    """Where builds live (module docstring); created on first use."""
    explicit = os.environ.get("SPLITBRAIN_SUT_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "splitbrain" / "revisions"


def _git(repo: Path, *args: str, binary: bool = False) -> subprocess.CompletedProcess[Any]:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=not binary,
                              timeout=_GIT_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise RevisionError("git is not installed (not on PATH); a revision of the cluster needs it") from None
    except subprocess.TimeoutExpired:
        raise RevisionError(f"git did not answer within {_GIT_TIMEOUT_S:.0f} s in {repo}") from None


def resolve_revision(rev: str, *, repo: Path = REPO_ROOT) -> str:
    """The full sha of commit ``rev`` in ``repo``.

    Raises:
        RevisionError: a malformed name, or no such commit (one line naming ``rev``).
    """
    parse_revision_text(rev, where="revision")
    res = _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    sha = res.stdout.strip() if res.returncode == 0 else ""
    if not _SHA_RE.match(sha):
        why = (res.stderr.strip().splitlines() or ["no such commit"])[-1]
        raise RevisionError(f"revision {rev}: not a commit of the repository at {repo} ({why})")
    return sha


def source_archive(sha: str, *, repo: Path = REPO_ROOT) -> bytes:
    """``git archive`` of commit ``sha`` as an uncompressed tar (what every backend's build starts from)."""
    res = _git(repo, "archive", "--format=tar", sha, binary=True)
    if res.returncode != 0:
        why = res.stderr.decode("utf-8", "replace").strip().splitlines() or ["git archive failed"]
        raise RevisionError(f"revision {sha[:12]}: cannot export its tree ({why[-1]})")
    return bytes(res.stdout)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _pyproject_version(src: Path, rev: str) -> str:
    import tomllib

    try:
        return str(tomllib.loads((src / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"])
    except (OSError, ValueError, KeyError) as exc:
        raise RevisionError(f"revision {rev}: does not build: pyproject.toml has no project.version ({exc})") from None


def _harness_site_dirs() -> list[str]:
    """The harness interpreter's site-packages, where the revision finds its dependencies."""
    dirs = [*site.getsitepackages()]
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


def _probe(python: Path, rev: str, probe: str) -> dict[str, Any]:
    """Run the system's ``probe`` with the build's interpreter, isolated, from a neutral directory."""
    try:
        res = subprocess.run([str(python), "-I", "-c", probe], capture_output=True, text=True, timeout=120,
                             cwd=python.parent, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RevisionError(f"revision {rev}: does not build: its interpreter did not run ({exc})") from None
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or ["no output"])[-1]
        raise RevisionError(f"revision {rev}: does not build: importing its protocol failed ({last})")
    try:
        out: dict[str, Any] = json.loads(res.stdout)
    except ValueError:
        raise RevisionError(f"revision {rev}: does not build: its protocol probe printed no JSON") from None
    return out


def _build(directory: Path, sha: str, rev: str, repo: Path, system: RevisionSystem) -> dict[str, Any]:
    """Build ``sha`` into ``directory`` (emptied first); returns the facts ``build.json`` records."""
    if directory.exists():
        shutil.rmtree(directory)
    src = directory / "src"
    src.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(source_archive(sha, repo=repo)), mode="r:") as tar:
        tar.extractall(src, filter="data")
    if not (src / system.package).is_dir():
        raise RevisionError(f"revision {rev}: does not build: its tree has no {system.package} package")
    version = _pyproject_version(src, rev)
    bad: list[str] = []
    for pkg in (system.package, "harness"):
        if (src / pkg).is_dir() and not compileall.compile_dir(str(src / pkg), quiet=2, workers=1):
            bad.append(pkg)
    if bad:
        raise RevisionError(f"revision {rev}: does not build: {', '.join(bad)} has files that do not compile")
    venv = directory / "venv"
    res = subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], capture_output=True, text=True,
                         timeout=120, check=False, stdin=subprocess.DEVNULL)
    if res.returncode != 0:
        raise RevisionError(f"revision {rev}: cannot create its virtual environment: {res.stderr.strip()[-300:]}")
    purelib = subprocess.run([str(venv / "bin" / "python"), "-I", "-c",
                              "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    # Sorted first: the revision's tree, then the harness's site-packages (dependencies only: .pth files there,
    # such as the harness checkout's editable finder, are not run for directories a .pth line adds).
    Path(purelib, "_splitbrain_sut.pth").write_text(
        "\n".join([str(src), *_harness_site_dirs()]) + "\n", encoding="utf-8")
    wire = _probe(venv / "bin" / "python", rev, system.probe)
    if not str(wire.get("module_file", "")).startswith(str(src) + os.sep):
        raise RevisionError(f"revision {rev}: does not build: its interpreter imported {system.package} from "
                            f"{wire.get('module_file')}, not from the revision's tree")
    return {"build_version": BUILD_VERSION, "revision": sha, "version": version, "package": system.package,
            "wire": wire}


def commit_with_changes(changes: Mapping[str, bytes], *, message: str, base: str = "HEAD",
                        repo: Path = REPO_ROOT) -> str:
    """A new commit object whose tree is ``base``'s with the files in ``changes`` (repository-relative path ->
    new content) replaced, made with git's plumbing in a temporary index: the work tree, the real index and every
    ref are left as they are.  Returns its sha, a revision :func:`ensure_build` can build (tests make throwaway
    regressions this way; ``git gc`` may drop an unreferenced one after its grace period).

    Raises:
        RevisionError: ``base`` is not a commit, a path is not in its tree, or git failed.
    """
    import tempfile

    parent = resolve_revision(base, repo=repo)
    with tempfile.TemporaryDirectory(prefix="splitbrain-index-") as tmp:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index")}

        def git(*args: str, data: bytes | None = None) -> str:
            res = subprocess.run(["git", "-C", str(repo), *args], input=data, capture_output=True, env=env,
                                 timeout=_GIT_TIMEOUT_S, check=False)
            if res.returncode != 0:
                raise RevisionError(f"revision {base}: git {args[0]} failed while making a commit: "
                                    f"{res.stderr.decode('utf-8', 'replace').strip()[-300:]}")
            return res.stdout.decode("utf-8").strip()

        git("read-tree", parent)
        for path, content in changes.items():
            listed = git("ls-files", "-s", "--", path).split()
            if not listed:
                raise RevisionError(f"revision {base}: {path} is not a file of its tree")
            blob = git("hash-object", "-w", "--stdin", data=content)
            git("update-index", "--cacheinfo", f"{listed[0]},{blob},{path}")
        tree = git("write-tree")
        ident = {"GIT_AUTHOR_NAME": "splitbrain", "GIT_AUTHOR_EMAIL": "splitbrain@localhost",
                 "GIT_COMMITTER_NAME": "splitbrain", "GIT_COMMITTER_EMAIL": "splitbrain@localhost"}
        env.update({k: os.environ.get(k, v) for k, v in ident.items()})
        return git("commit-tree", tree, "-p", parent, data=message.encode("utf-8"))


def harness_wire(system: RevisionSystem) -> dict[str, Any]:
    """The harness's own side of ``system``'s probe (the same probe, run in this process)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(system.probe, "<wire probe>", "exec"), {"__name__": "__wire_probe__"})
    out: dict[str, Any] = json.loads(buf.getvalue())
    return out


def _contains(repo: Path, sha: str, commit: str) -> bool:
    """Whether commit ``sha`` has ``commit`` in its history (itself included)."""
    return _git(repo, "merge-base", "--is-ancestor", commit, sha).returncode == 0


def load_build(sha: str, *, cache: Path | None = None) -> SutBuild | None:
    """The finished build of ``sha`` in the cache, or None (not built, half-built, or an older layout)."""
    directory = (cache or cache_root()) / sha
    try:
        rec = json.loads((directory / "build.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    package = rec.get("package")
    if rec.get("build_version") != BUILD_VERSION or rec.get("revision") != sha or not isinstance(package, str) \
            or not _PACKAGE_RE.match(package):
        return None
    return SutBuild(sha, directory, str(rec.get("version")), tuple(rec.get("missing_requests") or ()),
                    tuple(rec.get("missing_optional_fields") or ()), package=package)


def ensure_build(rev: str, *, system: RevisionSystem, repo: Path = REPO_ROOT, cache: Path | None = None,
                 node_flags: Mapping[str, Collection[str]] | None = None) -> SutBuild:
    """The build of revision ``rev``, made once per sha and reused (module docstring).

    ``system``: the system's part of the build (ours: :data:`systems.splitbrain.revision.REVISIONS`).
    ``node_flags``: the options the harness passes to each node command (:func:`systems.splitbrain.db.node_flags_used`),
    checked against the revision's when it is first built.

    Raises:
        RevisionError: ``rev`` is not a commit, does not build, or speaks a wire protocol the harness's clients
            cannot (one line naming the revision and the reason; nothing is left half-built under the sha).
    """
    sha = resolve_revision(rev, repo=repo)
    cache = cache or cache_root()
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RevisionError(f"revision {rev}: cannot create the build cache {cache} ({exc.strerror}); "
                            "set SPLITBRAIN_SUT_CACHE to a writable directory") from None
    name = rev if rev.startswith(sha[:7]) else f"{rev} ({sha[:12]})"
    with _locked(cache / f"{sha}.lock"):
        build = load_build(sha, cache=cache)
        if build is not None and build.package == system.package:  # another system's build of the sha: redone
            return build
        directory = cache / sha
        try:
            rec = _build(directory, sha, name, repo, system)
            rec["wire"] = system.completed(rec["wire"], lambda c: _contains(repo, sha, c))
            report = system.compatibility(harness_wire(system), rec["wire"], node_flags)
            if not report.compatible:
                shown = "; ".join(report.problems[:3])
                more = f" (and {len(report.problems) - 3} more)" if len(report.problems) > 3 else ""
                raise RevisionError(f"revision {name}: its wire protocol is not the harness's: {shown}{more}")
            rec["missing_requests"] = list(report.missing_requests)
            rec["missing_optional_fields"] = list(report.missing_optional_fields)
            (directory / "build.json").write_text(json.dumps(rec, indent=1, sort_keys=True), encoding="utf-8")
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise
    built = load_build(sha, cache=cache)
    assert built is not None, f"build.json of {sha} was just written"
    return built
